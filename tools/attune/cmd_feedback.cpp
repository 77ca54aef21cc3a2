// attune feedback: collects utility feedback into the store (cached, resumable).
#include <cstdio>
#include <nlohmann/json.hpp>

#include "attune/feedback/collect.h"
#include "attune/neural/dense.h"
#include "attune/retrieval/retriever.h"
#include "attune/llm/openai.h"
#include "common.h"

namespace attune::cli {

void add_feedback(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand("feedback", "collect utility feedback from a language model into the store");
  auto d = std::make_shared<DataOptions>();
  auto r = std::make_shared<RunOptions>();
  auto o = std::make_shared<feedback::CollectOptions>();
  auto kind = std::make_shared<std::string>("doc");
  auto llm_spec = std::make_shared<std::string>("reference");
  auto pool = std::make_shared<std::string>("none,recency,bm25");
  d->add(*cmd);
  r->add(*cmd);
  cmd->add_option("--kind", *kind, "doc (per-document utility), retriever (per-retriever utility), likelihood (log p of the gold)")
      ->capture_default_str();
  cmd->add_option("--llm", *llm_spec, "language model")->capture_default_str();
  cmd->add_option("--initial", o->initial_retriever, "retriever that picks the top-l candidates")->capture_default_str();
  cmd->add_option("--top-l", o->top_l, "candidates per query (doc, likelihood)")->capture_default_str();
  cmd->add_option("--retrievers", *pool, "retriever pool (retriever kind)")->capture_default_str();
  cmd->add_option("--k", o->k, "documents per prompt (retriever kind)")->capture_default_str();
  cmd->add_option("--max-length", o->max_length, "prompt budget (0 = 512 for doc/likelihood, 256 for retriever)")
      ->capture_default_str();
  cmd->add_option("--limit", o->run.limit, "only the first N examples (0 = all)")->capture_default_str();
  cmd->add_option("--batch", o->run.batch, "LLM calls per batch and per transaction")->capture_default_str();
  cmd->add_option("--max-new-tokens", o->generate.max_new_tokens,
                  "generation length cap of the doc and retriever kinds (use eval's --max-new-tokens)")
      ->capture_default_str();
  cmd->add_option("--decode", o->generate.decode,
                  "doc and retriever kinds: free, or copy (each answer a span of its prompt; local: models only). Use eval's "
                  "--decode; the records of copy decoding are filed apart from free decoding's (model \"ID;decode=copy\")")
      ->capture_default_str();
  cmd->callback([=, &rc] {
    o->kind = feedback::parse_kind(*kind);
    o->retrievers = retrieval::split_specs(*pool);
    r->apply(o->run);
    o->validate();  // option errors before any work
    auto task = load_task(*d);
    auto ds = load_dataset(*d);
    auto tok = engine::budget_tokenizer(r->tokenizer, *llm_spec);
    auto st = store::open_store(r->store_file());
    neural::register_retrievers(r->device);  // dense:/cross: models run on --device
    // Corpus tasks: dense:DIR searches the whole corpus itself (see make_sources).
    std::vector<std::string> specs = o->retrievers;
    if (o->kind != feedback::Kind::Retriever) specs = {o->initial_retriever};
    auto sources = engine::make_sources(*d, *task, *st, r->models(), r->quiet, specs);
    o->source_for = sources.lookup();
    auto model = engine::make_llm(*llm_spec, *d, task.get(), r->models());
    if (o->kind != feedback::Kind::Likelihood) check_generate_options(*model, o->generate);  // copy with a free-only reader
    nlohmann::json args = {{"data", d->data}, {"task", d->task}, {"split", d->split}, {"kind", *kind},
                           {"llm", llm::redact_url_passwords(*llm_spec)}, {"top_l", o->top_l}, {"initial", o->initial_retriever},
                           {"retrievers", o->retrievers}, {"k", o->k}, {"limit", o->run.limit},
                           {"max_new_tokens", o->generate.max_new_tokens}, {"decode", o->generate.decode}};
    store::RunScope run(*st, "feedback", args.dump(), r->seed);
    auto s = feedback::collect(ds, *task, *sources.base, *model, *st, *tok, *o);
    nlohmann::json summary = {{"task", d->task},          {"split", d->split},      {"kind", *kind},
                              {"llm", model->info().id},  {"records_model", feedback::feedback_model(model->info().id, o->kind, o->generate)},
                              {"dataset", feedback::dataset_key(ds)}, {"examples", s.examples}, {"records", s.records},
                              {"model_calls", s.model_calls}, {"cache_hits", s.cache_hits},
                              {"mean_value", s.mean_value},   {"seconds", s.seconds}, {"store", r->store},
                              {"seed", r->seed}};
    summary["llm_counters"] = llm_counters_json(*model);
    run.end("ok", summary.dump());
    std::printf("feedback %s on %s %s: %zu examples, %zu records (%zu model calls, %zu from cache), mean value %.4f, %.1fs -> %s\n",
                kind->c_str(), d->task.c_str(), d->split.c_str(), s.examples, s.records, s.model_calls, s.cache_hits,
                s.mean_value, s.seconds, r->store.c_str());
    print_llm_counters(*model, r->quiet);
    rc = 0;
  });
}

}  // namespace attune::cli
