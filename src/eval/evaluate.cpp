#include "attune/eval/evaluate.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <unordered_set>

#include "attune/core/error.h"
#include "attune/core/parallel.h"
#include "attune/core/progress.h"
#include "attune/eval/qpp.h"
#include "attune/metrics/metrics.h"
#include "attune/metrics/significance.h"
#include "attune/text/lexical.h"
#include "compare.h"

namespace attune::eval {
namespace {

std::unique_ptr<retrieval::Retriever> make(const tasks::Task& task, const std::string& spec, std::uint64_t seed) {
  // On a corpus task the first stage already ranked by corpus BM25: "bm25" keeps that order.
  return retrieval::make_retriever(spec, seed, task.uses_corpus());
}

}  // namespace

EvalReport evaluate(const data::Dataset& ds, const tasks::Task& task, const retrieval::CandidateSource& source,
                    llm::LanguageModel& model, const text::Tokenizer& tok, const EvalOptions& opts) {
  const auto start = std::chrono::steady_clock::now();
  if (!ds.has_outputs) throw Error("eval needs gold outputs, and " + ds.task + " " + ds.split + " has none");
  if (opts.retrievers.empty()) throw UsageError("eval needs at least one retriever");
  const std::size_t n = opts.limit ? std::min(opts.limit, ds.examples.size()) : ds.examples.size();
  std::vector<std::unique_ptr<retrieval::Retriever>> rets;
  for (const auto& spec : opts.retrievers) rets.push_back(make(task, spec, opts.seed));
  tasks::PromptOptions popts;
  popts.max_length = opts.max_length;
  popts.reference_quirks = opts.reference_quirks;
  const bool recall = task.uses_corpus();
  const std::size_t rank_k = std::max<std::size_t>(opts.k, recall ? 5 : 0);

  // Prompts for every (retriever, example).
  const std::size_t R = rets.size();
  // Each retriever's candidate source; distinct sources are asked once per example.
  std::vector<const retrieval::CandidateSource*> sources;
  std::vector<std::size_t> source_of(R);
  for (std::size_t r = 0; r < R; ++r) {
    const retrieval::CandidateSource* s = opts.source_for ? opts.source_for(opts.retrievers[r]) : nullptr;
    if (!s) s = &source;
    auto it = std::find(sources.begin(), sources.end(), s);
    source_of[r] = static_cast<std::size_t>(it - sources.begin());
    if (it == sources.end()) sources.push_back(s);
  }
  for (const auto* s : sources) s->prefetch(std::span<const Example>(ds.examples.data(), n));

  // Selectors: their pools as indices into the retrievers; pool members get QPP values.
  std::vector<std::vector<std::size_t>> pools;
  std::vector<bool> in_pool(R, false);
  for (const auto& sel : opts.selectors) {
    if (sel.pool.size() < 2) throw UsageError("selector " + sel.spec + " needs a pool of at least 2 retrievers");
    if (!sel.score) throw UsageError("selector " + sel.spec + " has no scoring function");
    std::vector<std::size_t> idx;
    for (const auto& p : sel.pool) {
      auto it = std::find(opts.retrievers.begin(), opts.retrievers.end(), p);
      if (it == opts.retrievers.end())
        throw UsageError("selector " + sel.spec + ": its pool member " + p + " is not among the retrievers evaluated");
      idx.push_back(static_cast<std::size_t>(it - opts.retrievers.begin()));
      in_pool[idx.back()] = true;
    }
    pools.push_back(std::move(idx));
  }
  const std::size_t qpp_k = opts.qpp_k ? opts.qpp_k : std::max<std::size_t>(1, opts.k);
  std::vector<Qpp> qpps(R * n);

  std::vector<std::string> prompts(R * n);
  std::vector<std::vector<DocId>> retrieved(R * n);
  std::vector<double> r5(R * n, 0.0);
  parallel_for(n, opts.threads, [&](std::size_t e) {
    const Example& ex = ds.examples[e];
    std::vector<std::vector<Document>> cand_sets(sources.size());
    for (std::size_t s = 0; s < sources.size(); ++s) cand_sets[s] = sources[s]->candidates(ex);
    retrieval::Query q{ex.id, ex.user, task.query(ex)};
    std::unordered_set<std::string> gold(ex.gold_docs.begin(), ex.gold_docs.end());
    for (std::size_t r = 0; r < R; ++r) {
      const auto& cands = cand_sets[source_of[r]];
      // A pool member is ranked in full for its QPP values; every retriever's full ranking
      // begins with its top-k one (stable sorts; random's draws come in the same order).
      auto ranking = rets[r]->rank(q, cands, in_pool[r] ? 0 : rank_k);
      if (in_pool[r]) {
        std::vector<double> sc(ranking.scores.begin(), ranking.scores.end());
        // Scores of rank-only lists: reciprocal ranks (000 Table 4 does so for recency).
        if (rets[r]->scores_are_ranks())
          for (std::size_t j = 0; j < sc.size(); ++j) sc[j] = 1.0 / static_cast<double>(j + 1);
        qpps[r * n + e] = qpp(sc, qpp_k, text::bm25_tokens(q.text).size(), opts.qpp_sigma_percent);
        if (ranking.size() > rank_k) {
          ranking.indices.resize(rank_k);
          ranking.ids.resize(rank_k);
          ranking.scores.resize(rank_k);
        }
      }
      std::vector<const Document*> docs;
      for (std::size_t j = 0; j < ranking.size() && j < opts.k; ++j) docs.push_back(&cands[ranking.indices[j]]);
      for (auto* d : docs) retrieved[r * n + e].push_back(d->id);
      if (recall) r5[r * n + e] = metrics::recall_at_k(ranking.ids, gold, 5);
      prompts[r * n + e] = task.prompt(ex, docs, tok, popts);
    }
  });

  // Generate in batches over all prompts.
  std::vector<std::string> outputs(R * n);
  const std::size_t batch = std::max<std::size_t>(1, opts.batch);
  const std::size_t n_batches = (R * n + batch - 1) / batch;
  Progress progress("eval", R * n, opts.progress);
  parallel_for(n_batches, opts.threads, [&](std::size_t b) {
    const std::size_t lo = b * batch, hi = std::min(R * n, lo + batch);
    std::vector<llm::Prompt> ps;
    for (std::size_t i = lo; i < hi; ++i) ps.push_back({prompts[i]});
    auto gens = model.generate(ps, opts.generate);
    for (std::size_t i = lo; i < hi; ++i) outputs[i] = gens[i - lo].text;
    progress.add(hi - lo);
  });
  progress.finish();

  EvalReport rep;
  rep.task = task.name();
  rep.split = ds.split;
  rep.llm = model.info().id;
  rep.k = opts.k;
  rep.seed = opts.seed;
  rep.examples = n;
  rep.metrics = task.metrics();
  rep.alpha = opts.alpha;
  std::vector<std::string> golds;
  for (std::size_t e = 0; e < n; ++e) golds.push_back(ds.examples[e].output);
  for (std::size_t r = 0; r < R; ++r) {
    RetrieverResult res;
    res.spec = opts.retrievers[r];
    std::vector<std::string> outs(outputs.begin() + r * n, outputs.begin() + (r + 1) * n);
    res.metrics = task.aggregate(outs, golds);
    double r5_sum = 0;
    for (std::size_t e = 0; e < n; ++e) {
      ExampleResult ex{ds.examples[e].id, outs[e], task.score(outs[e], golds[e]), retrieved[r * n + e], {}};
      if (recall) {
        ex.metrics["r@5"] = r5[r * n + e];
        r5_sum += r5[r * n + e];
      }
      res.examples.push_back(std::move(ex));
    }
    if (recall) res.metrics["r@5"] = n ? r5_sum / n : 0;
    rep.results.push_back(std::move(res));
  }
  if (recall) rep.metrics.push_back({"r@5", true, "mcnemar"});
  const std::string primary = rep.metrics.front().name;
  const bool higher = rep.metrics.front().higher_is_better;

  // Selectors: score each example's pool, take the argmax; then the same choice by each
  // QPP predictor and by the oracles, for the selection report.
  for (std::size_t si = 0; si < opts.selectors.size(); ++si) {
    const auto& sel = opts.selectors[si];
    const auto& pool = pools[si];
    const std::size_t P = pool.size();
    std::vector<std::size_t> chosen(n, 0);
    Progress sp("select " + sel.spec, n, opts.progress);
    for (std::size_t e = 0; e < n; ++e) {
      std::vector<std::string> ps, os;
      for (std::size_t r : pool) {
        ps.push_back(prompts[r * n + e]);
        os.push_back(outputs[r * n + e]);
      }
      const auto sc = sel.score(ps, os);
      if (sc.size() != P)
        throw Error("selector " + sel.spec + " gave " + std::to_string(sc.size()) + " scores for a pool of " +
                    std::to_string(P));
      chosen[e] = static_cast<std::size_t>(std::max_element(sc.begin(), sc.end()) - sc.begin());
      sp.add(1);
    }
    sp.finish();
    // Per example, each pool member's primary value.
    auto value = [&](std::size_t p, std::size_t e) {
      const auto& m = rep.results[pool[p]].examples[e].metrics;
      auto it = m.find(primary);
      return it == m.end() ? 0.0 : it->second;
    };
    auto better = [&](double a, double b) { return higher ? a > b : a < b; };
    std::vector<double> best(n);
    for (std::size_t e = 0; e < n; ++e) {
      best[e] = value(0, e);
      for (std::size_t p = 1; p < P; ++p)
        if (better(value(p, e), best[e])) best[e] = value(p, e);
    }
    auto method = [&](std::string name, std::vector<std::size_t> ch) {
      SelectionMethod m;
      m.name = std::move(name);
      std::vector<std::string> outs(n);
      std::size_t ok = 0;
      for (std::size_t e = 0; e < n; ++e) {
        outs[e] = outputs[pool[ch[e]] * n + e];
        if (!better(best[e], value(ch[e], e))) ++ok;
      }
      m.metrics = task.aggregate(outs, golds);
      if (recall) {
        double sum = 0;
        for (std::size_t e = 0; e < n; ++e) sum += r5[pool[ch[e]] * n + e];
        m.metrics["r@5"] = n ? sum / n : 0;
      }
      m.success = n ? static_cast<double>(ok) / n : 0;
      m.chosen = std::move(ch);
      return m;
    };
    SelectionReport sr;
    sr.selector = sel.spec;
    sr.pool = sel.pool;
    sr.methods.push_back(method(sel.spec, chosen));
    const auto names = qpp_names(opts.qpp_sigma_percent);
    for (std::size_t qi = 0; qi < names.size(); ++qi) {
      std::vector<std::size_t> ch(n, 0);
      for (std::size_t e = 0; e < n; ++e)
        for (std::size_t p = 1; p < P; ++p)
          if (qpp_value(qpps[pool[p] * n + e], qi) > qpp_value(qpps[pool[ch[e]] * n + e], qi)) ch[e] = p;
      sr.methods.push_back(method(names[qi], std::move(ch)));
    }
    for (bool upper : {false, true}) {
      std::vector<std::size_t> ch(n, 0);
      for (std::size_t e = 0; e < n; ++e)
        for (std::size_t p = 1; p < P; ++p) {
          const bool b = better(value(p, e), value(ch[e], e));
          if (upper ? b : better(value(ch[e], e), value(p, e))) ch[e] = p;
        }
      sr.methods.push_back(method(upper ? "oracle_upper" : "oracle_lower", std::move(ch)));
    }
    auto successes = [&](const SelectionMethod& m) {
      std::vector<bool> v(n);
      for (std::size_t e = 0; e < n; ++e) v[e] = !better(best[e], value(m.chosen[e], e));
      return v;
    };
    const auto s0 = successes(sr.methods.front());
    for (std::size_t i = 1; i < sr.methods.size(); ++i)
      if (n >= 2) sr.methods[i].p_vs_selector = metrics::mcnemar(s0, successes(sr.methods[i])).p_value;

    // The selector's own row: each example answered by its chosen retriever.
    RetrieverResult res;
    res.spec = sel.spec;
    res.metrics = sr.methods.front().metrics;
    for (std::size_t e = 0; e < n; ++e) {
      const std::size_t r = pool[chosen[e]];
      ExampleResult ex = rep.results[r].examples[e];
      ex.chosen = opts.retrievers[r];
      res.examples.push_back(std::move(ex));
    }
    rep.results.push_back(std::move(res));
    rep.selections.push_back(std::move(sr));
  }

  rep.comparisons = compare_pairs(rep);
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return rep;
}

}  // namespace attune::eval
