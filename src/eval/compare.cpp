#include "compare.h"

#include <algorithm>

#include "attune/core/error.h"
#include "attune/metrics/significance.h"

namespace attune::eval {
namespace {

// Per-example values a significance test compares for `metric`.
std::vector<double> per_example(const RetrieverResult& r, const std::string& metric, const std::string& primary) {
  std::vector<double> v;
  v.reserve(r.examples.size());
  for (const auto& e : r.examples) {
    auto it = e.metrics.find(metric);
    if (it == e.metrics.end()) it = e.metrics.find(primary);
    v.push_back(it == e.metrics.end() ? 0.0 : it->second);
  }
  return v;
}

// A row's aggregate value of `metric`; 0 when it has none (SpecTask::aggregate gives every
// metric of the task, and evaluate() gives every row r@5 on corpus tasks).
double aggregate(const RetrieverResult& r, const std::string& metric) {
  auto it = r.metrics.find(metric);
  return it == r.metrics.end() ? 0.0 : it->second;
}

metrics::TestResult test(const tasks::MetricInfo& m, const std::vector<double>& va, const std::vector<double>& vb) {
  if (m.significance_test != "mcnemar") return metrics::paired_t_test(va, vb);
  std::vector<bool> ca, cb;
  for (std::size_t i = 0; i < va.size(); ++i) {
    ca.push_back(va[i] >= 0.5);
    cb.push_back(vb[i] >= 0.5);
  }
  return metrics::mcnemar(ca, cb);
}

}  // namespace

std::vector<Comparison> compare_pairs(const EvalReport& r) {
  std::vector<Comparison> out;
  if (r.examples < 2) return out;
  const std::string& primary = r.metrics.front().name;
  for (const auto& a : r.results)
    for (const auto& b : r.results) {
      if (&a == &b) continue;
      for (const auto& m : r.metrics) {
        const auto t = test(m, per_example(a, m.name, primary), per_example(b, m.name, primary));
        Comparison c{a.spec, b.spec, m.name, t.test, t.statistic, t.p_value};
        const double ma = aggregate(a, m.name), mb = aggregate(b, m.name);
        c.a_better = m.higher_is_better ? ma > mb : ma < mb;
        out.push_back(std::move(c));
      }
    }
  return out;
}

MacroReport macro_average(const std::vector<AgentReport>& agents, const std::vector<std::string>& rows, double alpha) {
  if (agents.empty()) throw UsageError("a macro average needs at least one agent");
  MacroReport m;
  m.alpha = alpha;
  bool all_binary = true;
  for (std::size_t a = 0; a < agents.size(); ++a) {
    const auto& r = agents[a].report;
    if (r.metrics.empty()) throw UsageError("agent " + agents[a].agent + ": its evaluation has no metric");
    if (agents[a].rows.size() != rows.size())
      throw UsageError("agent " + agents[a].agent + ": " + std::to_string(agents[a].rows.size()) + " rows for " +
                       std::to_string(rows.size()));
    const auto& p = r.metrics.front();
    if (a > 0 && p.higher_is_better != m.higher_is_better)
      throw UsageError("agents " + agents[0].agent + " (" + m.metrics[0] + ") and " + agents[a].agent + " (" + p.name +
                       "): one primary metric is better higher, the other lower; their macro average would mean nothing");
    m.higher_is_better = p.higher_is_better;
    m.agents.push_back(agents[a].agent);
    m.metrics.push_back(p.name);
    all_binary = all_binary && p.significance_test == "mcnemar";
    m.examples += r.examples;
  }
  m.test = all_binary ? "mcnemar" : "paired-t";
  const tasks::MetricInfo pooled{"macro", m.higher_is_better, m.test};
  std::vector<std::vector<double>> values(rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    MacroRow row{rows[i], {}, 0};
    for (const auto& ag : agents) {
      const auto& r = ag.report;
      const auto it = std::find_if(r.results.begin(), r.results.end(), [&](const RetrieverResult& x) { return x.spec == ag.rows[i]; });
      if (it == r.results.end()) throw UsageError("agent " + ag.agent + ": no row " + ag.rows[i] + " in its evaluation");
      const auto& primary = r.metrics.front().name;
      row.per_agent.push_back(aggregate(*it, primary));
      const auto v = per_example(*it, primary, primary);
      values[i].insert(values[i].end(), v.begin(), v.end());
    }
    for (double v : row.per_agent) row.macro += v / static_cast<double>(row.per_agent.size());
    m.rows.push_back(std::move(row));
  }
  if (m.examples >= 2)
    for (std::size_t a = 0; a < rows.size(); ++a)
      for (std::size_t b = 0; b < rows.size(); ++b) {
        if (a == b) continue;
        const auto t = test(pooled, values[a], values[b]);
        Comparison c{rows[a], rows[b], "macro", t.test, t.statistic, t.p_value};
        c.a_better = m.higher_is_better ? m.rows[a].macro > m.rows[b].macro : m.rows[a].macro < m.rows[b].macro;
        m.comparisons.push_back(std::move(c));
      }
  return m;
}

}  // namespace attune::eval
