#include "attune/eval/qpp.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace attune::eval {
namespace {

// Population standard deviation of v[0..n).
double stdev(std::span<const double> v) {
  if (v.size() < 2) return 0;
  double mean = 0;
  for (double x : v) mean += x;
  mean /= static_cast<double>(v.size());
  double ss = 0;
  for (double x : v) ss += (x - mean) * (x - mean);
  return std::sqrt(ss / static_cast<double>(v.size()));
}

}  // namespace

Qpp qpp(std::span<const double> s, std::size_t k, std::size_t query_terms, double x_percent) {
  Qpp q;
  const std::size_t n = s.size();
  if (n == 0) return q;
  k = std::clamp<std::size_t>(k, 1, n);
  double c = 0;
  for (double x : s) c += x;
  c /= static_cast<double>(n);
  double wig = 0;
  for (std::size_t i = 0; i < k; ++i) wig += s[i] - c;
  q.wig = wig / static_cast<double>(k) / std::sqrt(static_cast<double>(std::max<std::size_t>(1, query_terms)));
  const double sd_k = stdev(s.subspan(0, k));
  q.nqc = std::abs(c) < 1e-12 ? 0.0 : sd_k / std::abs(c);
  // Running mean and sum of squares: std of every prefix in one pass (Welford).
  double mean = 0, m2 = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double d = s[i] - mean;
    mean += d / static_cast<double>(i + 1);
    m2 += d * (s[i] - mean);
    q.sigma_max = std::max(q.sigma_max, std::sqrt(std::max(0.0, m2) / static_cast<double>(i + 1)));
  }
  const double cut = x_percent / 100.0 * s[0];
  std::vector<double> top;
  for (double x : s)
    if (x >= cut) top.push_back(x);
  q.sigma_x = stdev(top);
  return q;
}

std::vector<std::string> qpp_names(double x_percent) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "sigma_%g%%", x_percent);
  return {"wig", "nqc", "sigma_max", buf};
}

}  // namespace attune::eval
