// attune train --method pearl: Pearl's generation-calibrated cross-encoder (001 §3;
// METHODS.md §4). Labels from the --llm's likelihoods (cached in the store), training, then
// on the dev split: calibration (Pearson r of s1 and the metric) and selective revision.
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "attune/core/error.h"
#include "attune/neural/dense.h"
#include "attune/train/pearl.h"
#include "cmd_neural.h"
#include "attune/llm/openai.h"
#include "common.h"

namespace fs = std::filesystem;

namespace attune::cli {

namespace {

// Pearl's own options; the shared hyper-parameters (TrainArgs) default to Pearl's here.
struct PearlArgs {
  double keep = 2.0 / 3.0;
  std::size_t positives = 2, negatives = 3, few_shot = 1, k = 4, max_length = 256;
  bool few_shot_per_request = false;
  double tau = 5;
  std::string y0;  // "" = the median of the positives' labels
  bool no_anchor = false;
};

// Pearl's defaults for the shared hyper-parameters (CPU-sized: 3 epochs).
train::PearlOptions pearl_options(const TrainArgs& a, const PearlArgs& p, const RunOptions& r) {
  train::PearlOptions o;
  o.init = a.init;
  o.sampling.keep_fraction = p.keep;
  o.sampling.positives = p.positives;
  o.sampling.negatives = p.negatives;
  o.sampling.seed = r.seed;
  apply_fit_options(a, r, o.fit);
  o.max_length = p.max_length;
  o.tau = p.tau;
  o.anchor = !p.no_anchor;
  if (p.y0.size() > 1 && p.y0[0] == 'p') {  // pNN: that percentile of the positives' labels
    try {
      std::size_t used = 0;
      o.y0_percentile = std::stod(p.y0.substr(1), &used);
      if (used != p.y0.size() - 1 || !(o.y0_percentile >= 0 && o.y0_percentile <= 100)) throw std::invalid_argument("");
    } catch (const std::exception&) {
      throw UsageError("--pearl-y0 " + p.y0 + ": expected a number or pNN, a percentile from p0 to p100");
    }
  } else if (!p.y0.empty()) {
    try {
      std::size_t used = 0;
      o.y0 = std::stod(p.y0, &used);
      if (used != p.y0.size() || !std::isfinite(o.y0)) throw std::invalid_argument("");
    } catch (const std::exception&) {
      throw UsageError("--pearl-y0 " + p.y0 + ": expected a number or pNN, a percentile from p0 to p100");
    }
  }
  return o;
}

}  // namespace

TrainRunner add_pearl_options(CLI::App* train) {
  auto p = std::make_shared<PearlArgs>();
  train->add_option("--pearl-keep", p->keep, "Pearl: fraction of requests kept, by their best label (001: 2/3)")
      ->capture_default_str();
  train->add_option("--pearl-positives", p->positives, "Pearl: positives per request (p)")->capture_default_str();
  train->add_option("--pearl-negatives", p->negatives, "Pearl: random negatives per positive (n)")->capture_default_str();
  train->add_flag("--pearl-few-shot-per-request", p->few_shot_per_request,
                  "Pearl: draw the few-shot set F afresh for each request (default: one F fixed across each user's "
                  "requests, as 001 fixes one set; never shared across users)");
  train->add_option("--pearl-few-shot", p->few_shot, "Pearl: random profile documents in the no-document term of Eq. 1")
      ->capture_default_str();
  train->add_option("--pearl-tau", p->tau, "Pearl: temperature of the label softmax (Eq. 2)")->capture_default_str();
  train->add_option("--pearl-y0", p->y0, "Pearl: the anchor's label: a number, or pNN, that percentile of the positives' labels (default p50, the median; 001 tunes p25..p75 on dev)");
  train->add_flag("--no-anchor", p->no_anchor, "Pearl: plain listwise KL without the calibration anchor (the ablation)");
  train->add_option("--pearl-k", p->k, "Pearl: documents in the writing prompt on dev (top-k by the cross-encoder)")
      ->capture_default_str();
  train->add_option("--pearl-max-length", p->max_length, "Pearl: tokens of a [CLS] query [SEP] doc [SEP] pair")
      ->capture_default_str();
  return [p](const DataOptions& d, const RunOptions& r, const TrainArgs& a) {
    if (a.init.empty())
      throw UsageError("--method pearl needs --init MODEL_DIR: the encoder to start from (make one with `attune pretrain-encoder`)");
    if (!fs::is_directory(a.init)) throw UsageError("--init " + a.init + ": no such model folder");
    if (a.top_l < 2) throw UsageError("--top-l must be at least 2");
    auto po = pearl_options(a, *p, r);
    po.validate();  // option errors before any work
    auto task = load_task(d);
    auto tok = engine::budget_tokenizer(r.tokenizer, a.llm);
    auto st = store::open_store(r.store_file());
    neural::register_retrievers(r.device);
    auto model = engine::make_llm(a.llm, d, task.get(), r.models());
    nlohmann::json args = {{"method", "pearl"}, {"data", d.data}, {"task", d.task}, {"split", d.split},
                           {"dev_split", a.dev_split}, {"llm", llm::redact_url_passwords(a.llm)}, {"out", a.out}, {"init", a.init},
                           {"initial", a.initial}, {"top_l", a.top_l}, {"limit", a.limit}, {"epochs", po.fit.epochs},
                           {"batch_size", po.fit.batch_size}, {"lr", po.fit.lr}, {"resume", a.resume},
                           {"few_shot", p->few_shot}, {"few_shot_per_user", !p->few_shot_per_request}};
    const auto tr = load_workflow_split(d, *task, *st, r, {a.initial}, a.limit);
    // Dev (calibration and selective revision after training): not with --questions files.
    std::unique_ptr<WorkflowSplit> dev;
    if (d.questions.empty()) try {
        dev = load_dev_split(d, a, *task, *st, r, {a.initial});
      } catch (const Error& e) {
        if (!r.quiet) std::fprintf(stderr, "train: no dev evaluation (%s)\n", e.what());
      }
    store::RunScope run(*st, "train", args.dump(), r.seed);

    train::PearlWorkflow wf;
    wf.labels.initial_retriever = a.initial;
    wf.labels.top_l = a.top_l;
    wf.labels.few_shot = p->few_shot;
    wf.labels.few_shot_per_user = !p->few_shot_per_request;
    wf.labels.max_length = a.feedback_max_length;
    wf.k = p->k;
    wf.data_label = d.data + " " + d.task + " " + d.split;
    wf.options = po;
    const auto out = train::run_pearl(make_bench(*task, *model, *st, *tok, r, a), tr.view(), dev ? dev->view() : train::SplitSource{}, wf);
    const auto& res = out.result;
    nlohmann::json summary = {{"method", "pearl"}, {"out", a.out}, {"requests", res.requests},
                              {"kept_requests", res.kept_requests}, {"lists", res.lists}, {"y0", res.y0},
                              {"steps", res.steps_done}, {"total_steps", res.total_steps}, {"seconds", res.seconds},
                              {"seed", r.seed}};
    if (!res.epoch_loss.empty()) summary["last_loss"] = res.epoch_loss.back();
    const bool finished = res.steps_done == res.total_steps;
    std::string dev_line;
    if (out.dev) {
      const auto& dv = *out.dev;
      summary["dev"] = out.dev_json;
      char buf[512];
      std::snprintf(buf, sizeof buf, ", dev %s %.4f (calibration r %.3f; selective revision %.4f at theta %s, %zu of %zu revised; "
                    "%.4f cross-fitted)",
                    dv.metric.c_str(), dv.revision.without, dv.r, dv.revision.with, out.dev_json["theta"].dump().c_str(),
                    dv.revision.revised, dv.examples, dv.revision_cross_fitted);
      dev_line = buf;
      if (!r.quiet) std::fprintf(stderr, "train: pearl dev%s\n", buf + 5);
    }
    run.end(finished ? "ok" : "stopped", summary.dump());
    if (finished)
      std::printf("trained pearl on %zu %s %s requests (%zu kept, %zu lists, %zu steps, %.1fs), y0 %.4f%s -> %s\n",
                  res.requests, d.task.c_str(), d.split.c_str(), res.kept_requests, res.lists, res.steps_done, res.seconds,
                  res.y0, dev_line.c_str(), a.out.c_str());
  };
}

}  // namespace attune::cli
