#include "selection.h"

#include <algorithm>
#include <cmath>
#include <span>

#include "attune/core/error.h"
#include "attune/core/progress.h"
#include "attune/metrics/significance.h"

namespace attune::eval {
namespace {

using Pool = std::span<const std::size_t>;  // a selector's pool: indices into the retrievers

// Each pool member's value of the primary metric per example, and the pool's best.
struct PoolValues {
  std::size_t n = 0;
  bool higher = true;        // the primary metric is better higher
  std::vector<double> v;     // member p on example e at p * n + e
  std::vector<double> best;  // per example

  double value(std::size_t p, std::size_t e) const { return v[p * n + e]; }
  bool better(double a, double b) const { return higher ? a > b : a < b; }
  // Member p is among the pool's best for example e (ties: any of the best).
  bool success(std::size_t p, std::size_t e) const { return !better(best[e], value(p, e)); }
};

PoolValues pool_values(const EvalReport& rep, Pool pool, std::size_t n) {
  PoolValues pv;
  pv.n = n;
  pv.higher = rep.metrics.front().higher_is_better;
  const std::string& primary = rep.metrics.front().name;
  for (std::size_t r : pool)
    for (std::size_t e = 0; e < n; ++e) {
      const auto& m = rep.results[r].examples[e].metrics;
      auto it = m.find(primary);
      pv.v.push_back(it == m.end() ? 0.0 : it->second);
    }
  pv.best.resize(n);
  for (std::size_t e = 0; e < n; ++e) {
    pv.best[e] = pv.value(0, e);
    for (std::size_t p = 1; p < pool.size(); ++p)
      if (pv.better(pv.value(p, e), pv.best[e])) pv.best[e] = pv.value(p, e);
  }
  return pv;
}

// The selector's choice per example: the argmax of its scores of the members' prompts and
// outputs (ties: the first).
std::vector<std::size_t> selector_choices(const SelectorSpec& sel, Pool pool, const Grid& g, bool progress) {
  std::vector<std::size_t> chosen(g.n, 0);
  Progress sp("select " + sel.spec, g.n, progress);
  for (std::size_t e = 0; e < g.n; ++e) {
    std::vector<std::string> ps, os;
    for (std::size_t r : pool) {
      ps.push_back(g.prompts[g.at(r, e)]);
      os.push_back(g.outputs[g.at(r, e)]);
    }
    const auto sc = sel.score(g.queries[e], ps, os);
    if (sc.size() != pool.size())
      throw Error("selector " + sel.spec + " gave " + std::to_string(sc.size()) + " scores for a pool of " +
                  std::to_string(pool.size()));
    chosen[e] = static_cast<std::size_t>(std::max_element(sc.begin(), sc.end()) - sc.begin());
    sp.add(1);
  }
  sp.finish();
  return chosen;
}

// Per example, the member with the highest value of QPP predictor qi (ties: the first).
// normalize: each member's values are z-scored over the examples first (mean 0, sd 1 per
// retriever; a member whose values are all equal gets 0), as QPP values of retrievers with
// different score scales are compared in the QPP literature; else the raw values.
std::vector<std::size_t> qpp_choices(Pool pool, const Grid& g, std::size_t qi, bool normalize) {
  std::vector<double> v(pool.size() * g.n);
  for (std::size_t p = 0; p < pool.size(); ++p)
    for (std::size_t e = 0; e < g.n; ++e) v[p * g.n + e] = qpp_value(g.qpps[g.at(pool[p], e)], qi);
  if (normalize && g.n > 0)
    for (std::size_t p = 0; p < pool.size(); ++p) {
      double mean = 0, var = 0;
      for (std::size_t e = 0; e < g.n; ++e) mean += v[p * g.n + e];
      mean /= static_cast<double>(g.n);
      for (std::size_t e = 0; e < g.n; ++e) var += (v[p * g.n + e] - mean) * (v[p * g.n + e] - mean);
      const double sd = std::sqrt(var / static_cast<double>(g.n));
      for (std::size_t e = 0; e < g.n; ++e) v[p * g.n + e] = sd > 1e-12 ? (v[p * g.n + e] - mean) / sd : 0.0;
    }
  std::vector<std::size_t> ch(g.n, 0);
  for (std::size_t e = 0; e < g.n; ++e)
    for (std::size_t p = 1; p < pool.size(); ++p)
      if (v[p * g.n + e] > v[ch[e] * g.n + e]) ch[e] = p;
  return ch;
}

// Per example, the pool's best member by the primary metric (upper) or its worst (lower);
// ties: the first.
std::vector<std::size_t> oracle_choices(const PoolValues& pv, std::size_t members, bool upper) {
  std::vector<std::size_t> ch(pv.n, 0);
  for (std::size_t e = 0; e < pv.n; ++e)
    for (std::size_t p = 1; p < members; ++p) {
      const bool b = pv.better(pv.value(p, e), pv.value(ch[e], e));
      if (upper ? b : pv.better(pv.value(ch[e], e), pv.value(p, e))) ch[e] = p;
    }
  return ch;
}

// A way of choosing, end to end: each example answered by its chosen member.
SelectionMethod method(std::string name, std::vector<std::size_t> ch, Pool pool, const PoolValues& pv,
                       const tasks::Task& task, const Grid& g) {
  const std::size_t n = g.n;
  SelectionMethod m;
  m.name = std::move(name);
  std::vector<std::string> outs(n);
  std::size_t ok = 0;
  for (std::size_t e = 0; e < n; ++e) {
    outs[e] = g.outputs[g.at(pool[ch[e]], e)];
    if (pv.success(ch[e], e)) ++ok;
  }
  m.metrics = task.aggregate(outs, g.golds);
  if (task.uses_corpus()) {
    double sum = 0;
    for (std::size_t e = 0; e < n; ++e) sum += g.r5[g.at(pool[ch[e]], e)];
    m.metrics["r@5"] = n ? sum / n : 0;
  }
  m.success = n ? static_cast<double>(ok) / n : 0;
  m.chosen = std::move(ch);
  return m;
}

// The selector, then each QPP predictor, then oracle_lower and oracle_upper; each with
// McNemar on per-example success against the selector (with 2 examples or more).
SelectionReport selection_report(const SelectorSpec& sel, Pool pool, const tasks::Task& task, const EvalOptions& opts,
                                 const Grid& g, const EvalReport& rep) {
  auto chosen = selector_choices(sel, pool, g, opts.run.progress);
  const PoolValues pv = pool_values(rep, pool, g.n);
  SelectionReport sr;
  sr.selector = sel.spec;
  sr.pool = sel.pool;
  sr.qpp_normalized = opts.qpp_normalize;
  sr.methods.push_back(method(sel.spec, std::move(chosen), pool, pv, task, g));
  const auto names = qpp_names(opts.qpp_sigma_percent);
  for (std::size_t qi = 0; qi < names.size(); ++qi)
    sr.methods.push_back(method(names[qi], qpp_choices(pool, g, qi, opts.qpp_normalize), pool, pv, task, g));
  for (bool upper : {false, true})
    sr.methods.push_back(
        method(upper ? "oracle_upper" : "oracle_lower", oracle_choices(pv, pool.size(), upper), pool, pv, task, g));
  auto successes = [&](const SelectionMethod& m) {
    std::vector<bool> v(g.n);
    for (std::size_t e = 0; e < g.n; ++e) v[e] = pv.success(m.chosen[e], e);
    return v;
  };
  const auto s0 = successes(sr.methods.front());
  for (std::size_t i = 1; i < sr.methods.size(); ++i)
    if (g.n >= 2) sr.methods[i].p_vs_selector = metrics::mcnemar(s0, successes(sr.methods[i])).p_value;
  return sr;
}

// The selector's own row: each example answered by its chosen retriever, named in `chosen`.
RetrieverResult selector_row(const SelectionReport& sr, Pool pool, const EvalOptions& opts, const EvalReport& rep) {
  const auto& selector = sr.methods.front();
  RetrieverResult res;
  res.spec = sr.selector;
  res.metrics = selector.metrics;
  for (std::size_t e = 0; e < selector.chosen.size(); ++e) {
    const std::size_t r = pool[selector.chosen[e]];
    ExampleResult ex = rep.results[r].examples[e];
    ex.chosen = opts.retrievers[r];
    res.examples.push_back(std::move(ex));
  }
  return res;
}

}  // namespace

void add_selections(const tasks::Task& task, const EvalOptions& opts, const std::vector<std::vector<std::size_t>>& pools,
                    const Grid& grid, EvalReport& rep) {
  for (std::size_t si = 0; si < opts.selectors.size(); ++si) {
    auto sr = selection_report(opts.selectors[si], pools[si], task, opts, grid, rep);
    rep.results.push_back(selector_row(sr, pools[si], opts, rep));
    rep.selections.push_back(std::move(sr));
  }
}

}  // namespace attune::eval
