// Pearl's labels (Eq. 1), request selection, list sampling, calibration and selective
// revision (001 §3-4). Torch-free.
#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <numeric>

#include "attune/core/error.h"
#include "attune/metrics/metrics.h"
#include "attune/core/parallel.h"
#include "attune/core/rng.h"
#include "attune/feedback/collect.h"
#include "attune/llm/cached.h"
#include "attune/retrieval/retriever.h"
#include "attune/train/pearl.h"

namespace attune::train {

namespace {

// `k` distinct values of `pool`, drawn without replacement (partial Fisher-Yates).
std::vector<std::size_t> draw(std::vector<std::size_t> pool, std::size_t k, Rng& rng) {
  k = std::min(k, pool.size());
  for (std::size_t i = 0; i < k; ++i) std::swap(pool[i], pool[i + rng.below(pool.size() - i)]);
  pool.resize(k);
  return pool;
}

std::unique_ptr<retrieval::Retriever> initial_retriever(const tasks::Task& task, const std::string& spec, std::uint64_t seed) {
  return retrieval::make_retriever(spec, seed, task.uses_corpus());
}

}  // namespace

std::vector<std::size_t> select_requests(const std::vector<PearlRequest>& reqs, double keep_fraction) {
  if (!(keep_fraction > 0 && keep_fraction <= 1)) throw UsageError("Pearl's keep fraction must be in (0, 1]");
  std::vector<std::size_t> have;
  std::vector<double> best(reqs.size(), 0);
  for (std::size_t i = 0; i < reqs.size(); ++i)
    if (!reqs[i].label.empty()) {
      have.push_back(i);
      best[i] = *std::max_element(reqs[i].label.begin(), reqs[i].label.end());
    }
  std::stable_sort(have.begin(), have.end(), [&](std::size_t a, std::size_t b) { return best[a] > best[b]; });
  const auto keep = static_cast<std::size_t>(std::ceil(keep_fraction * static_cast<double>(have.size()) - 1e-9));
  have.resize(std::min(keep, have.size()));
  std::sort(have.begin(), have.end());
  return have;
}

std::vector<PearlList> pearl_lists(const std::vector<PearlRequest>& reqs, const PearlSampling& s) {
  if (s.positives == 0) throw UsageError("Pearl needs at least one positive per request");
  std::vector<PearlList> out;
  for (auto r : select_requests(reqs, s.keep_fraction)) {
    const auto& q = reqs[r];
    if (q.docs.size() != q.label.size())
      throw Error("Pearl request " + q.id + ": " + std::to_string(q.docs.size()) + " documents but " +
                  std::to_string(q.label.size()) + " labels");
    if (q.docs.size() < 2) continue;
    std::vector<std::size_t> order(q.docs.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return q.label[a] > q.label[b]; });
    const std::size_t p = std::min(s.positives, q.docs.size() - 1);  // leave at least one negative
    const std::vector<std::size_t> rest(order.begin() + static_cast<std::ptrdiff_t>(p), order.end());
    for (std::size_t i = 0; i < p; ++i) {
      Rng rng(derive_seed(s.seed, "pearl-neg-" + q.id + "-" + std::to_string(i)));
      PearlList l{r, {order[i]}};
      auto neg = draw(rest, s.negatives, rng);
      l.docs.insert(l.docs.end(), neg.begin(), neg.end());
      out.push_back(std::move(l));
    }
  }
  return out;
}

std::vector<std::size_t> few_shot_indices(std::size_t profile_size, const std::vector<std::size_t>& top, std::size_t n,
                                          std::uint64_t seed, std::string_view key) {
  std::vector<std::size_t> outside, all(profile_size);
  std::iota(all.begin(), all.end(), 0);
  for (auto i : all)
    if (std::find(top.begin(), top.end(), i) == top.end()) outside.push_back(i);
  Rng rng(derive_seed(seed, "pearl-fewshot-" + std::string(key)));
  auto f = draw(outside.size() >= n ? outside : all, n, rng);
  std::sort(f.begin(), f.end());
  return f;
}

std::vector<std::size_t> user_few_shot_indices(std::span<const Document> profile, const std::vector<std::size_t>& top,
                                               std::size_t n, std::uint64_t seed, std::string_view user) {
  std::vector<std::pair<std::uint64_t, std::size_t>> keyed, outside;
  const std::string prefix = "pearl-fewshot-user-" + std::string(user) + '\0';
  for (std::size_t i = 0; i < profile.size(); ++i) {
    keyed.emplace_back(derive_seed(seed, prefix + profile[i].id), i);
    if (std::find(top.begin(), top.end(), i) == top.end()) outside.push_back(keyed.back());
  }
  auto& from = outside.size() >= n ? outside : keyed;
  std::sort(from.begin(), from.end());
  std::vector<std::size_t> f;
  for (std::size_t j = 0; j < from.size() && j < n; ++j) f.push_back(from[j].second);
  std::sort(f.begin(), f.end());
  return f;
}

double median(std::vector<double> v) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(v.begin(), v.end());
  const double pos = std::clamp(q, 0.0, 100.0) / 100.0 * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const std::size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (pos - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

double cross_fitted_revision(const std::vector<double>& s1, const std::vector<double>& first,
                             const std::vector<double>& revised, bool higher_is_better) {
  if (s1.size() != first.size() || s1.size() != revised.size())
    throw Error("cross_fitted_revision: s1, first and revised differ in length");
  if (s1.size() < 2) return std::numeric_limits<double>::quiet_NaN();
  std::vector<double> fold[2][3];  // [parity][s1, first, revised]
  for (std::size_t i = 0; i < s1.size(); ++i) {
    fold[i % 2][0].push_back(s1[i]);
    fold[i % 2][1].push_back(first[i]);
    fold[i % 2][2].push_back(revised[i]);
  }
  double sum = 0;
  for (int f = 0; f < 2; ++f) {
    const double theta = choose_revision_threshold(fold[1 - f][0], fold[1 - f][1], fold[1 - f][2], higher_is_better).theta;
    for (std::size_t i = 0; i < fold[f][0].size(); ++i) sum += fold[f][0][i] < theta ? fold[f][2][i] : fold[f][1][i];
  }
  return sum / static_cast<double>(s1.size());
}

RevisionChoice choose_revision_threshold(const std::vector<double>& s1, const std::vector<double>& first,
                                         const std::vector<double>& revised, bool higher_is_better) {
  if (s1.size() != first.size() || s1.size() != revised.size())
    throw Error("choose_revision_threshold: s1, first and revised differ in length");
  RevisionChoice best;
  const double n = static_cast<double>(std::max<std::size_t>(1, s1.size()));
  best.without = std::accumulate(first.begin(), first.end(), 0.0) / n;
  best.with = best.without;
  std::vector<double> cands = s1;
  std::sort(cands.begin(), cands.end());
  cands.erase(std::unique(cands.begin(), cands.end()), cands.end());
  // theta = each observed value (revise everything strictly below it) and +inf (revise all).
  cands.push_back(std::numeric_limits<double>::infinity());
  for (const double theta : cands) {
    double sum = 0;
    std::size_t rev = 0;
    for (std::size_t i = 0; i < s1.size(); ++i) {
      const bool r = s1[i] < theta;
      rev += r;
      sum += r ? revised[i] : first[i];
    }
    const double m = sum / n;
    if (higher_is_better ? m > best.with + 1e-12 : m < best.with - 1e-12) {
      best.theta = theta;
      best.with = m;
      best.revised = rev;
    }
  }
  return best;
}

std::vector<PearlRequest> pearl_requests(const data::Dataset& ds, const tasks::Task& task,
                                         const retrieval::CandidateSource& source_in, llm::LanguageModel& aux,
                                         store::Store& store, const text::Tokenizer& tok, const PearlLabelOptions& opts,
                                         PearlLabelSummary* summary) {
  if (opts.top_l < 2)
    throw FieldError<UsageError>("top_l", "top_l = " + std::to_string(opts.top_l) + ": Pearl needs at least 2 candidates");
  if (opts.few_shot == 0)
    throw FieldError<UsageError>("pearl_few_shot", "few_shot = 0: Pearl needs at least one few-shot document");
  // The per-document terms: feedback::collect (kind likelihood) stores log p(y | phi_p(x, [d])).
  feedback::CollectOptions co;
  co.kind = feedback::Kind::Likelihood;
  co.initial_retriever = opts.initial_retriever;
  co.top_l = opts.top_l;
  co.max_length = opts.max_length ? opts.max_length : 512;
  co.reference_quirks = opts.reference_quirks;
  co.run = opts.run;
  co.source_for = opts.source_for;
  const auto fs = feedback::collect(ds, task, source_in, aux, store, tok, co);
  const std::string key = feedback::dataset_key(ds), model_id = aux.info().id;
  std::map<std::pair<std::string, std::string>, double> ll;
  for (const auto& r : store.feedback_get(key, "likelihood", model_id)) ll[{r.example, r.item}] = r.value;

  const retrieval::CandidateSource* src = opts.source_for ? opts.source_for(opts.initial_retriever) : nullptr;
  const retrieval::CandidateSource& source = src ? *src : source_in;
  auto initial = initial_retriever(task, opts.initial_retriever, opts.run.seed);
  tasks::PromptOptions po;
  po.max_length = co.max_length;
  po.reference_quirks = opts.reference_quirks;
  const std::size_t n = opts.run.limit ? std::min(opts.run.limit, ds.examples.size()) : ds.examples.size();
  std::vector<PearlRequest> out(n);
  std::vector<std::string> few_prompt(n), missing(n);
  parallel_for(n, opts.run.threads, [&](std::size_t e) {
    const Example& ex = ds.examples[e];
    const auto cands = source.candidates(ex);
    retrieval::Query q{ex.id, ex.user, task.query(ex)};
    const auto ranking = initial->rank(q, cands, opts.top_l);
    PearlRequest& r = out[e];
    r.id = ex.id;
    r.query = q.text;
    for (auto i : ranking.indices) {
      auto it = ll.find({ex.id, cands[i].id});
      if (it == ll.end()) {
        missing[e] = cands[i].id;
        return;
      }
      r.docs.push_back(task.document_text(cands[i]));
      r.label.push_back(it->second);
    }
    const auto f = opts.few_shot_per_user
                       ? user_few_shot_indices(cands, ranking.indices, opts.few_shot, opts.run.seed, ex.user)
                       : few_shot_indices(cands.size(), ranking.indices, opts.few_shot, opts.run.seed, ex.id);
    std::vector<const Document*> docs;
    for (auto i : f) docs.push_back(&cands[i]);
    few_prompt[e] = task.prompt(ex, docs, tok, po);
  });
  for (std::size_t e = 0; e < n; ++e)
    if (!missing[e].empty())
      throw Error("Pearl: no likelihood feedback for example " + ds.examples[e].id + ", document " + missing[e]);
  // The few-shot term log p(y | phi_p(x, F)), one per example, through the cache.
  llm::CachedModel cached(aux, store);
  const std::size_t batch = std::max<std::size_t>(1, opts.run.batch), nb = (n + batch - 1) / batch;
  std::vector<double> base(n, 0);
  parallel_for(nb, opts.run.threads, [&](std::size_t b) {
    std::vector<llm::ScoreRequest> reqs;
    for (std::size_t e = b * batch; e < std::min(n, (b + 1) * batch); ++e) reqs.push_back({few_prompt[e], ds.examples[e].output});
    const auto s = cached.score(reqs);
    for (std::size_t i = 0; i < s.size(); ++i) base[b * batch + i] = s[i];
  });
  for (std::size_t e = 0; e < n; ++e) {
    // A label of -inf or NaN would poison y0, the request selection and the loss: refuse it.
    if (!std::isfinite(base[e]))
      throw Error("Pearl: " + model_id + " gave log p(y | x, F) = " + std::to_string(base[e]) + " for example " +
                  ds.examples[e].id + " (its few-shot prompt): Pearl's labels need finite log-probabilities");
    for (std::size_t j = 0; j < out[e].label.size(); ++j) {
      if (!std::isfinite(out[e].label[j]))
        throw Error("Pearl: " + model_id + " gave log p(y | x, d) = " + std::to_string(out[e].label[j]) +
                    " for example " + ds.examples[e].id + ", candidate " + std::to_string(j + 1) +
                    ": Pearl's labels need finite log-probabilities");
      out[e].label[j] -= base[e];
    }
  }
  std::erase_if(out, [](const PearlRequest& r) { return r.docs.size() < 2; });
  if (summary) {
    summary->requests = out.size();
    summary->labels = 0;
    for (const auto& r : out) summary->labels += r.label.size();
    summary->model_calls = fs.model_calls + cached.misses();
    summary->cache_hits = fs.cache_hits + cached.hits();
  }
  return out;
}

PearlDevResult pearl_dev(const data::Dataset& ds, const tasks::Task& task, const retrieval::CandidateSource& source_in,
                         const PairScorer& scorer, llm::LanguageModel& model, store::Store& store,
                         const text::Tokenizer& tok, const PearlDevOptions& opts) {
  if (!ds.has_outputs) throw Error("Pearl's dev evaluation needs gold outputs, and " + ds.task + " " + ds.split + " has none");
  if (opts.k == 0) throw UsageError("Pearl's prompt needs k >= 1 documents");
  const retrieval::CandidateSource* src = opts.source_for ? opts.source_for(opts.initial_retriever) : nullptr;
  const retrieval::CandidateSource& source = src ? *src : source_in;
  auto initial = initial_retriever(task, opts.initial_retriever, opts.run.seed);
  tasks::PromptOptions po;
  po.max_length = opts.max_length;
  po.reference_quirks = opts.reference_quirks;
  const std::size_t n = opts.run.limit ? std::min(opts.run.limit, ds.examples.size()) : ds.examples.size();
  std::vector<double> s1(n, 0);
  std::vector<std::string> first_prompt(n), revision_prompt(n);
  std::vector<bool> has(n, false);
  // The scorer runs one example at a time (it may use every core itself).
  for (std::size_t e = 0; e < n; ++e) {
    const Example& ex = ds.examples[e];
    const auto cands = source.candidates(ex);
    retrieval::Query q{ex.id, ex.user, task.query(ex)};
    const auto ranking = initial->rank(q, cands, opts.top_l);
    std::vector<const Document*> init_top;
    for (std::size_t j = 0; j < std::min(opts.k, ranking.indices.size()); ++j) init_top.push_back(&cands[ranking.indices[j]]);
    revision_prompt[e] = task.prompt(ex, init_top, tok, po);
    if (ranking.indices.empty()) {
      first_prompt[e] = revision_prompt[e];
      s1[e] = -std::numeric_limits<double>::infinity();
      continue;
    }
    std::vector<std::string> texts;
    for (auto i : ranking.indices) texts.push_back(task.document_text(cands[i]));
    const auto sc = scorer(q.text, texts);
    std::vector<std::size_t> order(texts.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return sc[a] > sc[b]; });
    s1[e] = sc[order[0]];
    has[e] = true;
    std::vector<const Document*> top;
    for (std::size_t j = 0; j < std::min(opts.k, order.size()); ++j) top.push_back(&cands[ranking.indices[order[j]]]);
    first_prompt[e] = task.prompt(ex, top, tok, po);
  }
  llm::CachedModel cached(model, store);
  auto generate_all = [&](const std::vector<std::string>& prompts) {
    std::vector<std::string> outs(prompts.size());
    const std::size_t batch = std::max<std::size_t>(1, opts.run.batch), nb = (prompts.size() + batch - 1) / batch;
    parallel_for(nb, opts.run.threads, [&](std::size_t b) {
      std::vector<llm::Prompt> ps;
      for (std::size_t i = b * batch; i < std::min(prompts.size(), (b + 1) * batch); ++i) ps.push_back({prompts[i]});
      const auto g = cached.generate(ps, opts.generate);
      for (std::size_t i = 0; i < g.size(); ++i) outs[b * batch + i] = g[i].text;
    });
    return outs;
  };
  const auto first = generate_all(first_prompt), revised = generate_all(revision_prompt);
  const auto& mi = task.metrics().front();
  PearlDevResult res;
  res.examples = n;
  res.metric = mi.name;
  std::vector<double> m1(n), m2(n);
  for (std::size_t e = 0; e < n; ++e) {
    m1[e] = task.score(first[e], ds.examples[e].output).at(mi.name);
    m2[e] = task.score(revised[e], ds.examples[e].output).at(mi.name);
  }
  // Examples without candidates cannot be calibrated: r over the scored ones.
  std::vector<double> xs, ys;
  for (std::size_t e = 0; e < n; ++e)
    if (has[e]) {
      xs.push_back(s1[e]);
      ys.push_back(m1[e]);
    }
  res.r = metrics::pearson(xs, ys);  // NaN when a side is constant
  res.revision = choose_revision_threshold(s1, m1, m2, mi.higher_is_better);
  res.revision_cross_fitted = cross_fitted_revision(s1, m1, m2, mi.higher_is_better);
  res.initial_metric = n ? std::accumulate(m2.begin(), m2.end(), 0.0) / static_cast<double>(n) : 0;
  return res;
}

}  // namespace attune::train
