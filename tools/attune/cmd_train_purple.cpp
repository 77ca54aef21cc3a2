// attune train --method purple: PURPLE's list-aware profile selector (003 §3; METHODS.md
// §6). The --llm is asked inside the training loop for log p(y | x, P) of every sampled
// profile (cached in the store: a resumed run asks it only for what it has not answered).
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "attune/core/error.h"
#include "attune/llm/openai.h"
#include "attune/neural/dense.h"
#include "attune/train/purple.h"
#include "cmd_neural.h"
#include "common.h"

namespace fs = std::filesystem;

namespace attune::cli {

namespace {

struct PurpleArgs {
  std::size_t k = 5, samples = 32, heads = 4, layers = 2, max_length = 128, prompt_max_length = 256, state_cache_mb = 2048;
  bool no_cross_attention = false, pointwise = false;
  double prior_weight = 0.25;
};

// PURPLE's --initial-prior when none is given: learned, chosen on dev (docs/RESULTS.md, "PURPLE with the
// first stage as a prior"): never below the first stage, where 003's selector (none) was.
constexpr const char* kPurpleDefaultPrior = "learned";

}  // namespace

TrainRunner add_purple_options(CLI::App* train) {
  auto p = std::make_shared<PurpleArgs>();
  train->add_option("--purple-k", p->k, "PURPLE: records in the selected profile, K (003: 5); eval's --k should match")
      ->capture_default_str();
  train->add_option("--purple-samples", p->samples, "PURPLE: profiles sampled per example, M (003: 32)")->capture_default_str();
  train->add_option("--purple-heads", p->heads, "PURPLE: attention heads of the cross-attention and the record Transformer")
      ->capture_default_str();
  train->add_option("--purple-layers", p->layers, "PURPLE: record Transformer layers (003: 12; sized to a CPU)")
      ->capture_default_str();
  train->add_option("--purple-max-length", p->max_length, "PURPLE: tokens per query or record text the frozen encoder reads")
      ->capture_default_str();
  train->add_option("--purple-prompt-max-length", p->prompt_max_length,
                    "PURPLE: the prompt budget of the reward prompts (use eval's --max-length)")
      ->capture_default_str();
  train->add_option("--purple-state-cache-mb", p->state_cache_mb,
                    "PURPLE: MiB of the frozen encoder's token states kept across epochs (half precision; 0 = recompute "
                    "each epoch); results are the same either way")
      ->capture_default_str();
  train->add_flag("--no-cross-attention", p->no_cross_attention,
                  "PURPLE ablation: records do not attend to the query's tokens; the query is one extra member of the "
                  "record Transformer");
  train->add_flag("--pointwise", p->pointwise, "PURPLE ablation: no record Transformer (each record scored alone)");
  CLI::Option* prior_weight = train->add_option("--purple-prior-weight", p->prior_weight,
                    "PURPLE with --initial-prior learned: the prior's starting weight w0 on the first stage's z-scored "
                    "score (the policy's log-weights are log f + w z, w = w0 + a learned offset)")
      ->capture_default_str();
  CLI::Option* top_l = train->get_option("--top-l");
  CLI::Option* initial = train->get_option("--initial");
  return [p, top_l, initial, prior_weight](const DataOptions& d, const RunOptions& r, const TrainArgs& a) {
    if (a.init.empty())
      throw UsageError("--method purple needs --init MODEL_DIR: the frozen encoder that reads the query and the records "
                       "(make one with `attune pretrain-encoder`)");
    if (!fs::is_directory(a.init)) throw UsageError("--init " + a.init + ": no such model folder");
    // 003's first stage: the top 20 of a dense retriever (here: the --init encoder) unless given.
    const std::string first = initial->count() ? a.initial : "dense:" + a.init;
    const std::size_t l = top_l->count() ? a.top_l : 20;
    if (l < 2) throw UsageError("--top-l must be at least 2");
    train::PurpleOptions o;
    o.init = a.init;
    o.k = p->k;
    o.samples = p->samples;
    o.heads = p->heads;
    o.layers = p->layers;
    o.cross_attention = !p->no_cross_attention;
    o.record_transformer = !p->pointwise;
    o.max_length = p->max_length;
    o.state_cache_mb = p->state_cache_mb;
    const auto prior = train::parse_initial_prior(a.initial_prior.value_or(kPurpleDefaultPrior));
    o.initial_prior = prior == train::InitialPrior::Learned;
    if (!o.initial_prior && prior_weight->count())
      throw UsageError("--purple-prior-weight applies with --initial-prior learned (the default), not with --initial-prior none");
    o.prior_weight = p->prior_weight;
    apply_fit_options(a, r, o.fit);
    o.initial_retriever = first;
    o.top_l = l;
    o.validate();  // option errors before any work
    auto task = load_task(d);
    auto tok = engine::budget_tokenizer(r.tokenizer, a.llm);
    auto st = store::open_store(r.store_file());
    neural::register_retrievers(r.device);
    auto model = engine::make_llm(a.llm, d, task.get(), r.models());
    nlohmann::json args = {{"method", "purple"}, {"data", d.data}, {"task", d.task}, {"split", d.split},
                           {"dev_split", a.dev_split}, {"llm", llm::redact_url_passwords(a.llm)}, {"out", a.out},
                           {"init", a.init}, {"initial", first}, {"top_l", l}, {"limit", a.limit}, {"k", o.k},
                           {"samples", o.samples}, {"cross_attention", o.cross_attention},
                           {"record_transformer", o.record_transformer}, {"epochs", o.fit.epochs},
                           {"batch_size", o.fit.batch_size}, {"lr", o.fit.lr}, {"resume", a.resume},
                           {"initial_prior", train::to_string(prior)}};
    if (o.initial_prior) args["prior_weight"] = o.prior_weight;
    const auto tr = load_workflow_split(d, *task, *st, r, {first}, a.limit);
    const auto dev = d.questions.empty() ? load_dev_split(d, a, *task, *st, r, {first}) : nullptr;
    store::RunScope run(*st, "train", args.dump(), r.seed);

    train::PurpleWorkflow wf;
    wf.initial = first;
    wf.top_l = l;
    wf.prompt_max_length = p->prompt_max_length;
    wf.data_label = d.data + " " + d.task + " " + d.split;
    wf.options = o;
    const auto out = train::run_purple(make_bench(*task, *model, *st, *tok, r, a), tr.view(), dev ? dev->view() : train::SplitSource{}, wf);
    const auto& res = out.result;
    const double kept = res.best_epoch ? res.epochs[res.best_epoch - 1].dev_reward : res.init_dev_reward;
    nlohmann::json summary = {{"method", "purple"}, {"out", a.out}, {"train_examples", out.train_examples},
                              {"dev_examples", out.dev_examples}, {"steps", res.steps_done}, {"total_steps", res.total_steps},
                              {"best_epoch", res.best_epoch}, {"init_dev_reward", res.init_dev_reward},
                              {"first_stage_dev_reward", res.first_stage_dev_reward}, {"dev_reward", kept},
                              {"model_calls", out.model_calls}, {"cache_hits", out.cache_hits}, {"seconds", res.seconds},
                              {"seed", r.seed}};
    if (!res.epochs.empty()) summary["last_loss"] = res.epochs.back().loss;
    if (o.initial_prior) summary["initial_prior"] = {{"weight_start", res.prior_weight_start}, {"weight", res.prior_weight}};
    const bool finished = res.steps_done == res.total_steps;
    run.end(finished ? "ok" : "stopped", summary.dump());
    if (finished)
      std::printf("trained purple on %zu %s %s examples (%zu steps, %.1fs; %zu score requests to the model, %zu cached): kept "
                  "epoch %zu%s -> %s\n",
                  out.train_examples, d.task.c_str(), d.split.c_str(), res.steps_done, res.seconds, out.model_calls,
                  out.cache_hits, res.best_epoch,
                  out.dev_examples == 0 ? ""
                                        : (", dev log p(y | x, top " + std::to_string(o.k) + ") " + std::to_string(kept) +
                                           " (untrained " + std::to_string(res.init_dev_reward) + ", first stage " + first + " " +
                                           std::to_string(res.first_stage_dev_reward) + ")")
                                              .c_str(),
                  a.out.c_str());
    if (finished && o.initial_prior)
      std::printf("initial-prior weight %.4f -> %.4f (the folder ranks rerank(%s,%zu,purple:%s), which adds it)\n",
                  res.prior_weight_start, res.prior_weight, first.c_str(), l, a.out.c_str());
    if (finished && res.below_first_stage)
      std::fprintf(stderr,
                   "train: warning: the kept selector's dev log p(y | x, top %zu) %.6f is below the first stage's own top %zu "
                   "(%s: %.6f): on dev, %s alone serves this reader better than %s\n",
                   o.k, kept, o.k, first.c_str(), res.first_stage_dev_reward, first.c_str(), a.out.c_str());
  };
}

}  // namespace attune::cli
