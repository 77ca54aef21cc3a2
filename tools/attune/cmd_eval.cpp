// attune eval: retrieve, prompt, generate, score end to end; a table on stdout.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "attune/eval/evaluate.h"
#include "attune/llm/cached.h"
#include "attune/neural/dense.h"
#include "attune/retrieval/retriever.h"
#include "attune/neural/selector.h"
#include "attune/core/file.h"
#include "attune/llm/openai.h"
#include "common.h"

namespace attune::cli {

void add_eval(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand("eval", "evaluate retrievers end to end with a language model");
  auto d = std::make_shared<DataOptions>();
  auto r = std::make_shared<RunOptions>();
  auto o = std::make_shared<eval::EvalOptions>();
  auto specs = std::make_shared<std::string>("none,random,recency,bm25,rrf(bm25,recency)");
  auto llm_spec = std::make_shared<std::string>("reference");
  auto out = std::make_shared<std::string>();
  auto no_cache = std::make_shared<bool>(false);
  auto no_quirks = std::make_shared<bool>(false);
  auto agents_file = std::make_shared<std::string>();
  d->add(*cmd, true, /*need_task=*/false);
  r->add(*cmd);
  cmd->add_option("--retrievers", *specs, "comma-separated retriever specs")->capture_default_str();
  auto* llm_opt = cmd->add_option("--llm", *llm_spec, "language model: reference, local:DIR, openai:URL#MODEL")->capture_default_str();
  auto* k_opt = cmd->add_option("--k", o->k, "documents per prompt")->capture_default_str();
  auto* agents_opt = cmd->add_option(
      "--agents", *agents_file,
      "evaluate for each agent of this file (train --method ium's: {\"agents\": [{\"name\", \"task\", \"llm\", \"k\"}]}) "
      "with its task, language model and k, where {task}, {llm} and {name} in --retrievers become the agent's; then each row's "
      "primary metric per agent, their macro average and significance on the pooled examples (paper 002's Table 1)");
  agents_opt->excludes(llm_opt)->excludes(k_opt);
  cmd->add_option("--max-length", o->max_length, "prompt budget in tokens")->capture_default_str();
  cmd->add_option("--limit", o->run.limit, "only the first N examples (0 = all)")->capture_default_str();
  cmd->add_option("--max-new-tokens", o->generate.max_new_tokens, "generation length cap (a local: causal model: below its context length)")->capture_default_str();
  cmd->add_option("--beams", o->generate.beams, "beam width (1 = greedy; at most 64)")->capture_default_str();
  cmd->add_option("--no-repeat-ngram", o->generate.no_repeat_ngram,
                  kNoRepeatNgramHelp)
      ->capture_default_str();
  cmd->add_option("--decode", o->generate.decode,
                  "free, or copy: extractive answers, each a span of its prompt (greedy; local: models only)")
      ->capture_default_str();
  cmd->add_option("--cad", o->generate.cad,
                  "context-aware decoding's weight a (Shi et al. 2024; 0 = off): each token by (1 + a) log p(y | prompt) - "
                  "a log p(y | the prompt without its documents); greedy, free or copy; local: models only")
      ->capture_default_str();
  cmd->add_flag("--no-reference-quirks", *no_quirks, "build prompts as the paper states, not as the LaMP code does");
  cmd->add_flag("--no-cache", *no_cache, "do not read or write the store's generation cache");
  cmd->add_option("--out", *out, "write the full JSON report here (\"-\": standard output, after the table)");
  cmd->add_option("--oracle", o->oracle_depth,
                  "oracle bounds beside every row: the best and the worst single document among its top N, each alone "
                  "in a prompt (N more generations per example and row; 0 = none)")
      ->capture_default_str();
  cmd->add_flag("--oracle-orders", o->oracle_orders,
                "the best-ordering oracle beside every row: every order of its top k documents answered and scored, "
                "the mean of the best and the worst order (k! more generations per example and row; k from 2 to 5)");
  cmd->add_flag("--list-overlap", o->list_overlap,
                "how alike every pair of rows' lists are: per example the Jaccard of their top-k sets and the Kendall "
                "tau-b of their rankings, then the mean (e.g. IUM's rows for different agents)");
  cmd->add_flag("--qpp-raw", [o](std::int64_t) { o->qpp_normalize = false; },
                "selectors: the QPP baselines compare raw predictor values across retrievers (default: z-scored per "
                "retriever over the examples)");
  cmd->add_option("--qpp-k", o->qpp_k, "selectors: top documents the QPP baselines read (0 = --k)")->capture_default_str();
  cmd->add_option("--qpp-sigma-percent", o->qpp_sigma_percent, "selectors: x of the sigma_x% baseline")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 100.0));
  cmd->callback([=, &rc] {
    o->retrievers = retrieval::split_specs(*specs);
    o->reference_quirks = !*no_quirks;
    r->apply(o->run);
    o->validate();  // option errors before any work
    o->generate.seed = r->seed;
    if (agents_file->empty() && d->task.empty()) throw UsageError("--task is required (or --agents FILE)");
    if (!agents_file->empty() && !d->task.empty())
      throw UsageError("--task and --agents: each agent names its own task; give one or the other");
    // One evaluation: prints its table, records the run in the store; its report.
    const auto run_one = [&](const DataOptions& dd, const std::string& llm_name, eval::EvalOptions oo) {
      const auto* d = &dd;
      const auto* llm_spec = &llm_name;
      auto* o = &oo;
      auto task = load_task(*d);
      auto ds = load_dataset(*d);
      auto tok = engine::budget_tokenizer(r->tokenizer, *llm_spec);
      auto st = store::open_store(r->store_file());
      neural::register_retrievers(r->device);  // dense:/cross: models run on --device
      // Selector folders (attune train --method rspg-*): their pool joins the retrievers.
      std::vector<std::string> plain;
      std::vector<std::string> selector_specs;
      for (const auto& s : o->retrievers)
        (retrieval::trained_model_kind(s) == "selector" ? selector_specs : plain).push_back(s);
      std::vector<std::shared_ptr<const neural::Selector>> loaded;
      std::erase_if(selector_specs, [&](const std::string& s) {
        auto sel = neural::Selector::load(s, r->device);
        // One trained on documents (attune serve's) is a retriever of its own: a row like any other.
        if (sel->texts() == "documents") return plain.push_back(s), true;
        loaded.push_back(std::move(sel));
        return false;
      });
      for (std::size_t i = 0; i < selector_specs.size(); ++i) {
        const auto& s = selector_specs[i];
        auto sel = loaded[i];
        for (const auto& p : sel->pool())
          if (std::find(plain.begin(), plain.end(), p) == plain.end()) plain.push_back(p);
        if (!r->quiet && (sel->k() != o->k || sel->prompt_max_length() != o->max_length))
          std::fprintf(stderr,
                       "eval: warning: selector %s was trained on prompts of k=%zu, budget %zu; this run builds k=%zu, "
                       "budget %zu\n",
                       s.c_str(), sel->k(), sel->prompt_max_length(), o->k, o->max_length);
        o->selectors.push_back({s, sel->pool(),
                                [sel](std::string_view q, std::span<const std::string> p, std::span<const std::string> out) {
                                  return sel->score(q, p, out);
                                }});
      }
      o->retrievers = plain;
      for (const auto& s : o->retrievers) {
        retrieval::make_retriever(s, r->seed, task->uses_corpus());  // validates the spec
      }
      auto model = engine::make_llm(*llm_spec, *d, task.get(), r->models());
      check_generate_options(*model, o->generate);  // e.g. --max-new-tokens past a local model's context
      // Corpus tasks: dense:DIR searches the whole corpus itself (see make_sources).
      auto sources = engine::make_sources(*d, *task, *st, r->models(), r->quiet, o->retrievers);
      engine::check_gold_docs(*d, ds, *sources.base);  // R@5 against ids the corpus has
      o->source_for = sources.lookup();
      nlohmann::json args = {{"data", d->data}, {"task", d->task}, {"split", d->split}, {"retrievers", o->retrievers},
                             {"selectors", selector_specs}, {"llm", llm::redact_url_passwords(*llm_spec)}, {"k", o->k}, {"max_length", o->max_length}, {"limit", o->run.limit}, {"oracle", o->oracle_depth},
                             {"oracle_orders", o->oracle_orders}, {"list_overlap", o->list_overlap}};
      store::RunScope run(*st, "eval", args.dump(), r->seed);
      llm::CachedModel cached(*model, *st);
      llm::LanguageModel& m = *no_cache ? static_cast<llm::LanguageModel&>(*model) : cached;
      auto report = eval::evaluate(ds, *task, *sources.base, m, *tok, *o);
      std::fputs(eval::format_table(report).c_str(), stdout);
      std::fflush(stdout);
      nlohmann::json summary = nlohmann::json::parse(eval::to_json(report));
      summary.erase("per_example");
      summary["llm_counters"] = llm_counters_json(m);  // the model's requests, retries, ... and cache hits
      run.end("ok", summary.dump());
      if (!r->quiet)
        std::fprintf(stderr, "eval: %zu examples x %zu retrievers in %.1fs (%zu generations cached, %zu new)\n",
                     report.examples, report.results.size(), report.seconds, cached.hits(), cached.misses());
      print_llm_counters(*model, r->quiet);
      return report;
    };
    if (agents_file->empty()) {
      const auto report = run_one(*d, *llm_spec, *o);
      if (!out->empty()) write_output(*out, eval::to_json(report));
      rc = 0;
      return;
    }
    const auto agents = read_agents(*agents_file);
    const auto fill = [](std::string spec, const Agent& a) {
      for (const auto& [key, value] :
           {std::pair<std::string, std::string>{"{task}", a.task}, {"{llm}", a.llm}, {"{name}", a.name}})
        for (std::size_t at = 0; (at = spec.find(key, at)) != std::string::npos; at += value.size())
          spec.replace(at, key.size(), value);
      return spec;
    };
    std::vector<eval::AgentReport> reports;
    for (std::size_t i = 0; i < agents.size(); ++i) {
      const auto& a = agents[i];
      DataOptions dd = *d;
      dd.task = a.task;
      eval::EvalOptions oo = *o;
      oo.k = a.k;
      std::vector<std::string> rows;
      for (auto& spec : oo.retrievers) rows.push_back(spec = fill(spec, a));
      std::printf("%sagent %s: task %s, llm %s, k %zu\n", i ? "\n" : "", a.name.c_str(), a.task.c_str(),
                  llm::redact_url_passwords(a.llm).c_str(), a.k);
      reports.push_back({a.name, run_one(dd, a.llm, oo), rows});
    }
    const auto macro = eval::macro_average(reports, o->retrievers, o->alpha);
    std::printf("\n%s", eval::format_macro_table(macro).c_str());
    std::fflush(stdout);
    if (!out->empty()) write_output(*out, eval::macro_to_json(macro, reports));
    rc = 0;
  });
}

}  // namespace attune::cli
