// attune train --method pearl: Pearl's generation-calibrated cross-encoder (001 §3;
// METHODS.md §4). Labels from the --llm's likelihoods (cached in the store), training, then
// on the dev split: calibration (Pearson r of s1 and the metric) and selective revision.
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>

#include "attune/core/error.h"
#include "attune/models/config.h"
#include "attune/models/encoder.h"
#include "attune/neural/dense.h"
#include "attune/train/pearl.h"
#include "cmd_neural.h"
#include "common.h"

namespace fs = std::filesystem;

namespace attune::cli {

namespace {

// Pearl's own options; the shared hyper-parameters (TrainArgs) default to Pearl's here.
struct PearlArgs {
  double keep = 2.0 / 3.0;
  std::size_t positives = 2, negatives = 3, few_shot = 1, k = 4, max_length = 256;
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
    auto po = pearl_options(a, *p, r);  // option errors before any work
    auto task = load_task(d);
    auto ds = load_dataset(d);
    auto tok = engine::budget_tokenizer(r.tokenizer, a.llm);
    auto st = store::open_sqlite(r.store);
    neural::register_retrievers(r.device);
    auto model = engine::make_llm(a.llm, d, task.get(), r.models());
    nlohmann::json args = {{"method", "pearl"}, {"data", d.data}, {"task", d.task}, {"split", d.split},
                           {"dev_split", a.dev_split}, {"llm", a.llm}, {"out", a.out}, {"init", a.init},
                           {"initial", a.initial}, {"top_l", a.top_l}, {"limit", a.limit}, {"epochs", po.fit.epochs},
                           {"batch_size", po.fit.batch_size}, {"lr", po.fit.lr}, {"resume", a.resume}};
    const auto run = st->run_begin("train", args.dump(), r.seed);

    auto sources = engine::make_sources(d, *task, *st, r.models(), r.quiet, {a.initial});
    train::PearlLabelOptions lo;
    lo.initial_retriever = a.initial;
    lo.top_l = a.top_l;
    lo.few_shot = p->few_shot;
    lo.max_length = a.feedback_max_length;
    lo.seed = r.seed;
    lo.threads = r.threads;
    lo.progress = !r.quiet;
    lo.limit = a.limit;
    lo.source_for = sources.lookup();
    train::PearlLabelSummary ls;
    auto reqs = train::pearl_requests(ds, *task, *sources.base, *model, *st, *tok, lo, &ls);
    if (!r.quiet)
      std::fprintf(stderr, "train: pearl labels on %s %s: %zu requests, %zu labels (%zu new model calls, %zu cached)\n",
                   ds.task.c_str(), ds.split.c_str(), ls.requests, ls.labels, ls.model_calls, ls.cache_hits);
    po.fit.data_description = d.data + " " + d.task + " " + d.split + " (" + std::to_string(reqs.size()) +
                          " requests), likelihoods of " + model->info().id;
    po.initial_retriever = a.initial;
    po.top_l = a.top_l;
    const auto res = train::train_pearl(reqs, {}, po);
    nlohmann::json summary = {{"method", "pearl"}, {"out", a.out}, {"requests", res.requests},
                              {"kept_requests", res.kept_requests}, {"lists", res.lists}, {"y0", res.y0},
                              {"steps", res.steps_done}, {"total_steps", res.total_steps}, {"seconds", res.seconds},
                              {"seed", r.seed}};
    if (!res.epoch_loss.empty()) summary["last_loss"] = res.epoch_loss.back();
    const bool finished = res.steps_done == res.total_steps;

    // Dev: calibration and selective revision with the trained folder.
    std::string dev_line;
    if (finished && !a.dev_split.empty() && d.questions.empty()) {
      DataOptions dd = d;
      dd.split = a.dev_split;
      std::optional<data::Dataset> dev_ds;
      try {
        dev_ds = load_dataset(dd);
      } catch (const Error& e) {
        if (!r.quiet) std::fprintf(stderr, "train: no dev evaluation (%s)\n", e.what());
      }
      if (dev_ds) {
        auto dev_sources = engine::make_sources(dd, *task, *st, r.models(), r.quiet, {a.initial});
        models::EncoderOptions eo;
        eo.device = r.device;
        const auto ce = models::CrossEncoder::load(a.out, eo);
        train::PearlDevOptions dvo;
        dvo.initial_retriever = a.initial;
        dvo.top_l = a.top_l;
        dvo.k = p->k;
        dvo.seed = r.seed;
        dvo.threads = r.threads;
        dvo.limit = a.dev_limit;
        dvo.source_for = dev_sources.lookup();
        const auto dv = train::pearl_dev(*dev_ds, *task, *dev_sources.base,
                                         [&](const std::string& q, std::span<const std::string> docs) { return ce->score(q, docs); },
                                         *model, *st, *tok, dvo);
        const bool never = std::isinf(dv.revision.theta) && dv.revision.theta < 0;
        nlohmann::json dj = {{"split", a.dev_split}, {"examples", dv.examples}, {"metric", dv.metric}, {"k", p->k},
                             {"calibration_r", dv.r}, {"theta", never ? nlohmann::json("-inf") : nlohmann::json(dv.revision.theta)},
                             {"metric_without_revision", dv.revision.without}, {"metric_with_revision", dv.revision.with},
                             {"metric_with_revision_cross_fitted", dv.revision_cross_fitted},
                             {"revised", dv.revision.revised}, {"metric_initial_retriever", dv.initial_metric},
                             {"revision", "phi_p(x, top-k of the initial retriever " + a.initial + ")"}};
        if (std::isinf(dv.revision.theta) && dv.revision.theta > 0) dj["theta"] = "inf";
        auto meta = models::read_json_file(fs::path(a.out) / "attune_train.json");
        meta["dev"] = dj;
        models::write_json_file(fs::path(a.out) / "attune_train.json", meta);
        summary["dev"] = dj;
        char buf[512];
        std::snprintf(buf, sizeof buf, ", dev %s %.4f (calibration r %.3f; selective revision %.4f at theta %s, %zu of %zu revised; "
                      "%.4f cross-fitted)",
                      dv.metric.c_str(), dv.revision.without, dv.r, dv.revision.with, dj["theta"].dump().c_str(),
                      dv.revision.revised, dv.examples, dv.revision_cross_fitted);
        dev_line = buf;
        if (!r.quiet) std::fprintf(stderr, "train: pearl dev%s\n", buf + 5);
      }
    }
    st->run_end(run, finished ? "ok" : "stopped", summary.dump());
    if (finished)
      std::printf("trained pearl on %zu %s %s requests (%zu kept, %zu lists, %zu steps, %.1fs), y0 %.4f%s -> %s\n",
                  res.requests, d.task.c_str(), d.split.c_str(), res.kept_requests, res.lists, res.steps_done, res.seconds,
                  res.y0, dev_line.c_str(), a.out.c_str());
  };
}

}  // namespace attune::cli
