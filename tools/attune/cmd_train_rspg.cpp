// attune train --method rspg-pre|rspg-post: a selector that picks, per input, the
// retriever of a pool whose prompt helps the LLM most (000 §5).
#include <cstdio>
#include <nlohmann/json.hpp>

#include "attune/core/error.h"
#include "attune/llm/openai.h"
#include "attune/neural/dense.h"
#include "attune/retrieval/retriever.h"
#include "attune/train/ropg.h"
#include "attune/train/rspg.h"
#include "cmd_neural.h"

namespace fs = std::filesystem;

namespace attune::cli {

namespace {

struct RspgCli {
  std::string pool = "none,recency,bm25";
  std::size_t k = 4;
  std::size_t prompt_max_length = 256;
  std::size_t max_length = 0;  // selector input (0 = 512)
  std::string input = "query-first";
};

}  // namespace

TrainRunner add_rspg_options(CLI::App* cmd) {
  auto c = std::make_shared<RspgCli>();
  cmd->add_option("--pool", c->pool, "RSPG: the retrievers to choose from (000: none, recency, bm25, dense, ROPG-RL, ROPG-KD)")
      ->capture_default_str();
  cmd->add_option("--k", c->k, "RSPG: documents per prompt")->capture_default_str();
  cmd->add_option("--prompt-max-length", c->prompt_max_length, "RSPG: prompt budget of each retriever's prompt")
      ->capture_default_str();
  cmd->add_option("--selector-max-length", c->max_length, "RSPG: selector input tokens (0 = 512)")->capture_default_str();
  cmd->add_option("--selector-input", c->input,
                  "RSPG: what the selector reads: query-first = the input x, then the prompt (cut at its tail); "
                  "prompt = the prompt alone, 000's (LaMP prompts end with x, so a long prompt loses it)")
      ->check(CLI::IsMember({"query-first", "prompt"}))
      ->capture_default_str();
  return [c](const DataOptions& d, const RunOptions& r, const TrainArgs& a) {
    if (a.init.empty())
      throw UsageError("--method " + a.method + " needs --init MODEL_DIR: the encoder the selector starts from");
    if (!fs::is_directory(a.init)) throw UsageError("--init " + a.init + ": no such model folder");
    const auto pool = retrieval::split_specs(c->pool);
    if (pool.size() < 2) throw UsageError("--pool needs at least 2 retrievers");
    train::RspgWorkflow wf;
    auto& o = wf.options;
    o.variant = train::parse_rspg_variant(a.method);
    o.init = a.init;
    o.pool = pool;
    o.k = c->k;
    o.prompt_max_length = c->prompt_max_length;
    if (c->max_length) o.max_length = c->max_length;
    o.input = models::parse_selector_input(c->input);
    o.temperature = a.target_temperature.value_or(o.temperature);
    if (a.target_normalization) o.target_normalization = train::parse_target_normalization(*a.target_normalization);
    o.pool_prior = a.initial_prior && train::parse_initial_prior(*a.initial_prior) == train::InitialPrior::Learned;
    apply_fit_options(a, r, o.fit);
    wf.data_label = d.data + " " + d.task + " " + d.split;
    o.validate();  // option errors before any work
    auto task = load_task(d);
    auto tok = engine::budget_tokenizer(r.tokenizer, a.llm);
    auto st = store::open_store(r.store_file());
    neural::register_retrievers(r.device);
    for (const auto& s : pool)
      retrieval::make_retriever(s, r.seed, task->uses_corpus());  // validates the pool early
    auto model = engine::make_llm(a.llm, d, task.get(), r.models());
    nlohmann::json args = {{"method", a.method}, {"data", d.data}, {"task", d.task}, {"split", d.split},
                           {"dev_split", a.dev_split}, {"llm", llm::redact_url_passwords(a.llm)}, {"out", a.out}, {"init", a.init}, {"pool", pool},
                           {"k", c->k}, {"selector_input", c->input}, {"limit", a.limit}, {"resume", a.resume}, {"pool_prior", o.pool_prior}};
    const auto tr = load_workflow_split(d, *task, *st, r, pool, a.limit);
    const auto dev = load_dev_split(d, a, *task, *st, r, pool);
    store::RunScope run(*st, "train", args.dump(), r.seed);
    const auto out = train::run_rspg(make_bench(*task, *model, *st, *tok, r, a), tr.view(), dev ? dev->view() : train::SplitSource{}, wf);
    const auto& res = out.result;
    nlohmann::json summary = {{"method", a.method}, {"out", a.out}, {"train_examples", out.train_examples},
                              {"dev_examples", out.dev_examples}, {"steps", res.steps_done}, {"total_steps", res.total_steps},
                              {"best_epoch", res.best_epoch}, {"init_dev_success", res.init_dev_success},
                              {"init_dev_utility", res.init_dev_utility}, {"dev_oracle", res.dev_oracle},
                              {"seconds", res.seconds}, {"seed", r.seed}};
    const bool finished = res.steps_done == res.total_steps;
    if (finished && res.best_epoch) {
      summary["dev_success"] = res.epochs[res.best_epoch - 1].dev_success;
      summary["dev_utility"] = res.epochs[res.best_epoch - 1].dev_utility;
    } else if (finished && out.dev_examples) {  // no epoch beat the start, which the folder holds
      summary["dev_success"] = res.init_dev_success;
      summary["dev_utility"] = res.init_dev_utility;
    }
    run.end(finished ? "ok" : "stopped", summary.dump());
    if (finished)
      std::printf("trained %s over %zu retrievers on %zu %s %s examples (%zu steps, %.1fs): kept epoch %zu%s -> %s\n",
                  a.method.c_str(), pool.size(), out.train_examples, d.task.c_str(), d.split.c_str(), res.steps_done, res.seconds,
                  res.best_epoch,
                  out.dev_examples == 0 ? "" : (", dev success " + std::to_string(summary.value("dev_success", 0.0)) + " (untrained " +
                                      std::to_string(res.init_dev_success) + "), dev utility " +
                                      std::to_string(summary.value("dev_utility", 0.0)) + " (untrained " +
                                      std::to_string(res.init_dev_utility) + ", oracle " + std::to_string(res.dev_oracle) + ")").c_str(),
                  a.out.c_str());
  };
}

}  // namespace attune::cli
