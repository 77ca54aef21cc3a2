#include "attune/train/workflows.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <type_traits>

#include "attune/core/error.h"
#include "attune/core/parallel.h"
#include "attune/retrieval/spec.h"
#include "attune/feedback/collect.h"
#include "attune/feedback/judge.h"
#include "attune/llm/cached.h"
#include "attune/models/config.h"
#include "attune/models/encoder.h"

namespace attune::train {

namespace fs = std::filesystem;

namespace {

const retrieval::CandidateSource& source_of(const SplitSource& s, const std::string& spec) {
  const retrieval::CandidateSource* src = s.source_for ? s.source_for(spec) : nullptr;
  return src ? *src : *s.base;
}

// LUF: the initial retriever's top-l of each query, every document judged by the model
// (feedback/judge.h, one a prompt: dev's top-1 needs every label, and training sees every
// negative); the replies are cached in the store. A document whose replies were all
// malformed is left out (judgement -1), never guessed.
std::vector<RopgExample> luf_split(const Bench& b, const SplitSource& s, const RopgWorkflow& wf) {
  const auto& ds = *s.dataset;
  const auto& source = source_of(s, wf.initial);
  const auto initial =
      retrieval::make_retriever(retrieval::parse_retriever_spec(wf.initial), wf.options.fit.seed, b.task.uses_corpus());
  const std::size_t n = s.limit ? std::min(s.limit, ds.examples.size()) : ds.examples.size();
  std::vector<RopgExample> ex(n);
  std::vector<std::string> questions(n);
  std::vector<std::vector<std::string>> docs(n);
  parallel_for(n, b.threads, [&](std::size_t e) {
    const Example& x = ds.examples[e];
    const auto cands = source.candidates(x);
    const retrieval::Query q{x.id, x.user, b.task.query(x)};
    const auto ranking = initial->rank(q, cands, wf.top_l);
    ex[e].id = x.id;
    ex[e].query = q.text;
    questions[e] = q.text;
    for (std::size_t j = 0; j < ranking.size(); ++j) {
      const auto& d = cands[ranking.indices[j]];
      ex[e].docs.push_back(wf.options.document_fields.empty() ? d.text : retrieval::fielded_text(d, d.text, wf.options.document_fields));
      ex[e].initial_score.push_back(ranking.scores[j]);
      docs[e].push_back(d.text);
    }
  });
  llm::CachedModel cached(b.model, b.store);
  feedback::JudgeOptions jo = feedback::exhaustive_judging();
  jo.generate = b.generate;
  feedback::Judge judge(cached, jo);
  const auto res = judge.judge(questions, docs);
  std::size_t labelled = 0, answer = 0, relevant = 0;
  for (std::size_t e = 0; e < n; ++e) {
    for (std::size_t j = 0; j < ex[e].docs.size(); ++j) {
      const auto& l = res[e].docs[j];
      ex[e].judgement.push_back(!l ? -1 : l->label == feedback::JudgeLabel::Answer ? 2 : l->label == feedback::JudgeLabel::Relevant ? 1 : 0);
      ex[e].utility.push_back(l ? l->score : 0.0);
      labelled += l.has_value();
      answer += l && l->label == feedback::JudgeLabel::Answer;
      relevant += l && l->label == feedback::JudgeLabel::Relevant;
    }
  }
  if (b.progress) {
    const auto& c = judge.counters();
    std::fprintf(stderr, "train: luf labels on %s %s: %zu documents of %zu queries judged (%zu answer, %zu relevant), %zu "
                         "model calls (%zu cached), %zu failed\n",
                 ds.task.c_str(), ds.split.c_str(), labelled, n, answer, relevant, c.calls, cached.hits(), c.failed_documents);
  }
  return ex;
}

// Training queries take the KD target's feedback; dev always the task metric's utility.
std::vector<RopgExample> ropg_split(const Bench& b, const SplitSource& s, const RopgWorkflow& wf, bool training) {
  if (wf.options.objective == RopgObjective::LUF) return luf_split(b, s, wf);
  const KdTarget values = training ? wf.options.kd_target : KdTarget::Utility;
  feedback::CollectOptions co;
  co.kind = values == KdTarget::Likelihood ? feedback::Kind::Likelihood : feedback::Kind::Doc;
  co.initial_retriever = wf.initial;
  co.top_l = wf.top_l;
  co.max_length = wf.feedback_max_length;
  co.run.seed = wf.options.fit.seed;
  collect_feedback(b, s, co);
  return ropg_examples(*s.dataset, b.task, source_of(s, wf.initial), b.store, feedback::feedback_model(b.model.info().id, co.kind, b.generate),
                       wf.initial, wf.top_l,
                       wf.options.fit.seed, s.limit, wf.options.document_fields, values);
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
  return rspg_examples(*s.dataset, b.task, *s.base, b.store, feedback::feedback_model(b.model.info().id, co.kind, b.generate), b.tok,
                       d);
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
  // Likelihoods score the gold answer: how the model would decode plays no part in them.
  if (co.kind == feedback::Kind::Likelihood) co.generate.decode = "free";
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
  wf.options.fit.data_description = wf.data_label + " (" + std::to_string(tr.size()) + " examples), feedback of " + b.model.info().id +
                                     (b.generate.decode == "free" ? "" : ", decode " + b.generate.decode);
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

namespace {

// One split's PURPLE examples and what their prompts need: the dataset example and its
// candidate documents, in the first stage's order.
struct PurpleSplit {
  std::vector<PurpleExample> examples;
  std::vector<const Example*> source;
  std::vector<std::vector<Document>> docs;
};

PurpleSplit purple_split(const Bench& b, const SplitSource& s, const PurpleWorkflow& wf, std::size_t min_records) {
  const auto& ds = *s.dataset;
  const auto& source = source_of(s, wf.initial);
  const auto initial = retrieval::make_retriever(retrieval::parse_retriever_spec(wf.initial), wf.options.fit.seed, b.task.uses_corpus());
  const std::size_t n = s.limit ? std::min(s.limit, ds.examples.size()) : ds.examples.size();
  std::vector<PurpleExample> ex(n);
  std::vector<std::vector<Document>> docs(n);
  parallel_for(n, b.threads, [&](std::size_t e) {
    const Example& x = ds.examples[e];
    const auto cands = source.candidates(x);
    retrieval::Query q{x.id, x.user, b.task.query(x)};
    const auto ranking = initial->rank(q, cands, wf.top_l);
    ex[e].id = x.id;
    ex[e].query = q.text;
    for (std::size_t pos = 0; pos < ranking.size(); ++pos) {
      const auto i = ranking.indices[pos];
      ex[e].records.push_back(cands[i].text);
      ex[e].initial_scores.push_back(ranking.scores[pos]);
      docs[e].push_back(cands[i]);
    }
  });
  PurpleSplit out;
  for (std::size_t e = 0; e < n; ++e) {
    if (ex[e].records.size() < min_records) continue;
    out.examples.push_back(std::move(ex[e]));
    out.source.push_back(&ds.examples[e]);
    out.docs.push_back(std::move(docs[e]));
  }
  return out;
}

}  // namespace

PurpleRun run_purple(const Bench& b, const SplitSource& train, const SplitSource& dev, PurpleWorkflow wf) {
  auto& o = wf.options;
  o.initial_retriever = wf.initial;
  o.top_l = wf.top_l;
  o.validate();
  if (wf.batch == 0) throw FieldError<UsageError>("batch", "batch = 0: score requests per model call must be positive");
  // The initial retriever's spec fails here, before any candidate is ranked.
  (void)retrieval::parse_retriever_spec(wf.initial);
  const auto tr = purple_split(b, train, wf, 2);
  const auto dv = dev.dataset ? purple_split(b, dev, wf, 1) : PurpleSplit{};
  PurpleRun run;
  run.train_examples = tr.examples.size();
  run.dev_examples = dv.examples.size();
  if (b.progress)
    std::fprintf(stderr, "train: purple on %s %s: %zu examples with >= 2 of the top %zu of %s; dev %zu\n", train.dataset->task.c_str(),
                 train.dataset->split.c_str(), tr.examples.size(), wf.top_l, wf.initial.c_str(), dv.examples.size());
  llm::CachedModel cached(b.model, b.store);
  tasks::PromptOptions po;
  po.max_length = wf.prompt_max_length;
  const auto reward_of = [&](const PurpleSplit& sp) {
    return ProfileReward([&, sp = &sp](std::span<const ProfileRequest> reqs) {
      std::vector<llm::ScoreRequest> sr(reqs.size());
      parallel_for(reqs.size(), b.threads, [&](std::size_t i) {
        const auto e = reqs[i].example;
        std::vector<const Document*> d;
        for (auto j : reqs[i].records) d.push_back(&sp->docs[e][j]);
        sr[i] = {b.task.prompt(*sp->source[e], d, b.tok, po), sp->source[e]->output};
      });
      std::vector<double> out(reqs.size());
      const std::size_t nb = (sr.size() + wf.batch - 1) / wf.batch;
      parallel_for(nb, b.threads, [&](std::size_t c) {
        const std::size_t lo = c * wf.batch, hi = std::min(sr.size(), lo + wf.batch);
        const auto s = cached.score(std::span<const llm::ScoreRequest>(sr).subspan(lo, hi - lo));
        std::copy(s.begin(), s.end(), out.begin() + static_cast<std::ptrdiff_t>(lo));
      });
      return out;
    });
  };
  const auto train_reward = reward_of(tr), dev_reward = reward_of(dv);
  o.fit.data_description = wf.data_label + " (" + std::to_string(tr.examples.size()) + " examples), rewards log p(y | x, P) of " +
                           b.model.info().id;
  run.result = train_purple(tr.examples, dv.examples, train_reward, dev_reward, o);
  run.model_calls = cached.misses();
  run.cache_hits = cached.hits();
  return run;
}

}  // namespace attune::train
