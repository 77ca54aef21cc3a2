#include "compare.h"

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

}  // namespace attune::eval
