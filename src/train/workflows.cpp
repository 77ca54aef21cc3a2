#include "attune/train/workflows.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <type_traits>

#include "attune/feedback/collect.h"
#include "attune/models/config.h"
#include "attune/models/encoder.h"

namespace attune::train {

namespace fs = std::filesystem;

namespace {

const retrieval::CandidateSource& source_of(const SplitSource& s, const std::string& spec) {
  const retrieval::CandidateSource* src = s.source_for ? s.source_for(spec) : nullptr;
  return src ? *src : *s.base;
}

// Training queries take the KD target's feedback; dev always the task metric's utility.
std::vector<RopgExample> ropg_split(const Bench& b, const SplitSource& s, const RopgWorkflow& wf, bool training) {
  const KdTarget values = training ? wf.options.kd_target : KdTarget::Utility;
  feedback::CollectOptions co;
  co.kind = values == KdTarget::Likelihood ? feedback::Kind::Likelihood : feedback::Kind::Doc;
  co.initial_retriever = wf.initial;
  co.top_l = wf.top_l;
  co.max_length = wf.feedback_max_length;
  co.run.seed = wf.options.fit.seed;
  collect_feedback(b, s, co);
  return ropg_examples(*s.dataset, b.task, source_of(s, wf.initial), b.store, b.model.info().id, wf.initial, wf.top_l,
                       wf.options.fit.seed, s.limit, wf.options.document_dates, values);
}

std::vector<RspgExample> rspg_split(const Bench& b, const SplitSource& s, const RspgWorkflow& wf, bool /*training*/) {
  const auto& o = wf.options;
  feedback::CollectOptions co;
  co.kind = feedback::Kind::Retriever;
  co.retrievers = o.pool;
  co.k = o.k;
  co.max_length = o.prompt_max_length;
  co.run.seed = o.fit.seed;
  collect_feedback(b, s, co);
  RspgDataOptions d;
  d.pool = o.pool;
  d.k = o.k;
  d.max_length = o.prompt_max_length;
  d.seed = o.fit.seed;
  d.limit = s.limit;
  d.source_for = s.source_for;
  return rspg_examples(*s.dataset, b.task, *s.base, b.store, b.model.info().id, b.tok, d);
}

// The dev record Pearl's attune_train.json keeps: calibration and selective revision.
nlohmann::json pearl_dev_json(const PearlDevResult& dv, const std::string& split, std::size_t k, const std::string& initial) {
  const bool never = std::isinf(dv.revision.theta) && dv.revision.theta < 0;
  nlohmann::json dj = {{"split", split}, {"examples", dv.examples}, {"metric", dv.metric}, {"k", k},
                       {"calibration_r", dv.r}, {"theta", never ? nlohmann::json("-inf") : nlohmann::json(dv.revision.theta)},
                       {"metric_without_revision", dv.revision.without}, {"metric_with_revision", dv.revision.with},
                       {"metric_with_revision_cross_fitted", dv.revision_cross_fitted},
                       {"revised", dv.revision.revised}, {"metric_initial_retriever", dv.initial_metric},
                       {"revision", "phi_p(x, top-k of the initial retriever " + initial + ")"}};
  if (std::isinf(dv.revision.theta) && dv.revision.theta > 0) dj["theta"] = "inf";
  return dj;
}

}  // namespace

feedback::Summary collect_feedback(const Bench& b, const SplitSource& s, feedback::CollectOptions co) {
  co.run.threads = b.threads;
  co.run.progress = b.progress;
  co.generate = b.generate;
  co.run.limit = s.limit;
  co.source_for = s.source_for;
  const auto& ds = *s.dataset;
  auto r = feedback::collect(ds, b.task, *s.base, b.model, b.store, b.tok, co);
  if (b.progress)
    std::fprintf(stderr, "train: %s feedback on %s %s: %zu records (%zu new model calls, %zu cached), mean utility %.4f\n",
                 feedback::kind_name(co.kind).c_str(), ds.task.c_str(), ds.split.c_str(), r.records, r.model_calls,
                 r.cache_hits, r.mean_value);
  return r;
}

namespace {

// Examples of train and dev from `examples(bench, split, wf)`, then `trainer(train, dev,
// options)`: the shape of every method whose epochs compete on dev (ROPG, RSPG).
template <class Run, class Workflow, class Examples, class Trainer>
Run run_dev_selected(const Bench& b, const SplitSource& train, const SplitSource& dev, Workflow wf, Examples examples,
                     Trainer trainer) {
  const auto tr = examples(b, train, wf, true);
  std::remove_const_t<decltype(tr)> dv;
  if (dev.dataset) dv = examples(b, dev, wf, false);
  wf.options.fit.data_description = wf.data_label + " (" + std::to_string(tr.size()) + " examples), feedback of " + b.model.info().id;
  Run run;
  run.train_examples = tr.size();
  run.dev_examples = dv.size();
  run.result = trainer(tr, dv, wf.options);
  return run;
}

}  // namespace

RopgRun run_ropg(const Bench& b, const SplitSource& train, const SplitSource& dev, RopgWorkflow wf) {
  return run_dev_selected<RopgRun>(b, train, dev, std::move(wf), ropg_split, train_ropg);
}

RspgRun run_rspg(const Bench& b, const SplitSource& train, const SplitSource& dev, RspgWorkflow wf) {
  return run_dev_selected<RspgRun>(b, train, dev, std::move(wf), rspg_split, train_rspg);
}

PearlRun run_pearl(const Bench& b, const SplitSource& train, const SplitSource& dev, PearlWorkflow wf) {
  auto& lo = wf.labels;
  auto& o = wf.options;
  lo.run.seed = o.fit.seed;
  lo.run.threads = b.threads;
  lo.run.progress = b.progress;
  lo.run.limit = train.limit;
  lo.source_for = train.source_for;
  PearlRun run;
  const auto reqs = pearl_requests(*train.dataset, b.task, *train.base, b.model, b.store, b.tok, lo, &run.labels);
  if (b.progress)
    std::fprintf(stderr, "train: pearl labels on %s %s: %zu requests, %zu labels (%zu new model calls, %zu cached)\n",
                 train.dataset->task.c_str(), train.dataset->split.c_str(), run.labels.requests, run.labels.labels,
                 run.labels.model_calls, run.labels.cache_hits);
  o.fit.data_description = wf.data_label + " (" + std::to_string(reqs.size()) + " requests), likelihoods of " + b.model.info().id;
  o.initial_retriever = lo.initial_retriever;
  o.top_l = lo.top_l;
  run.result = train_pearl(reqs, {}, o);
  if (run.result.steps_done != run.result.total_steps || !dev.dataset) return run;

  // Dev: calibration and selective revision with the trained folder.
  models::EncoderOptions eo;
  eo.device = o.fit.device;
  const auto ce = models::CrossEncoder::load(o.fit.out, eo);
  PearlDevOptions dvo;
  dvo.initial_retriever = lo.initial_retriever;
  dvo.top_l = lo.top_l;
  dvo.k = wf.k;
  dvo.run.seed = o.fit.seed;
  dvo.run.threads = b.threads;
  dvo.generate = b.generate;
  dvo.run.limit = dev.limit;
  dvo.source_for = dev.source_for;
  run.dev = pearl_dev(*dev.dataset, b.task, *dev.base,
                      [&](const std::string& q, std::span<const std::string> docs) { return ce->score(q, docs); }, b.model,
                      b.store, b.tok, dvo);
  run.dev_json = pearl_dev_json(*run.dev, dev.dataset->split, wf.k, lo.initial_retriever);
  auto meta = models::read_json_file(o.fit.out / "attune_train.json");
  meta["dev"] = run.dev_json;
  models::write_json_file(o.fit.out / "attune_train.json", meta);
  return run;
}

}  // namespace attune::train
