#include "attune/metrics/significance.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "attune/core/error.h"

namespace attune::metrics {
namespace {

constexpr double kNotANumber = std::numeric_limits<double>::quiet_NaN();

// Continued fraction for I_x(a, b) (Abramowitz & Stegun 26.5.8), evaluated with the
// modified Lentz method:
//   I_x(a,b) = x^a y^b / (a B(a,b)) * 1/(1 + d1/(1 + d2/(1 + ...)))
//   d_{2m+1} = -(a+m)(a+b+m) x / ((a+2m)(a+2m+1)),  d_{2m} = m(b-m) x / ((a+2m-1)(a+2m)).
// It converges fast for x < (a+1)/(a+b+2); the caller uses the symmetry otherwise.
// y = 1 - x is passed separately so callers that know it exactly lose no digits.
double beta_continued_fraction(double a, double b, double x, double y) {
  constexpr double kTiny = 1e-300;
  constexpr double kEps = 1e-16;
  constexpr int kMaxTerms = 100000;
  // Lentz: f_j = f_{j-1} C_j D_j for the fraction 1 + 1/(1 + d1/(1 + ...)); the value
  // wanted is f - 1.
  double f = 1, c = 1, d = 0;
  for (int i = 0; i <= kMaxTerms; ++i) {
    double num;
    if (i == 0) {
      num = 1;
    } else {
      const double m = static_cast<double>(i / 2);  // i = 2m or 2m + 1
      if (i % 2 == 0)
        num = m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m));
      else
        num = -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1));
    }
    d = 1 + num * d;
    if (std::abs(d) < kTiny) d = kTiny;
    d = 1 / d;
    c = 1 + num / c;
    if (std::abs(c) < kTiny) c = kTiny;
    const double cd = c * d;
    f *= cd;
    if (std::abs(1 - cd) < kEps) break;
  }
  const double log_front =
      a * std::log(x) + b * std::log(y) - (std::lgamma(a) + std::lgamma(b) - std::lgamma(a + b)) - std::log(a);
  return std::exp(log_front) * (f - 1);
}

// I_x(a, b) with y = 1 - x given exactly.
double incomplete_beta(double a, double b, double x, double y) {
  if (std::isnan(a) || std::isnan(b) || std::isnan(x) || a <= 0 || b <= 0 || x < 0 || x > 1) return kNotANumber;
  if (x == 0) return 0;
  if (y == 0) return 1;
  if (x < (a + 1) / (a + b + 2)) return beta_continued_fraction(a, b, x, y);
  return 1 - beta_continued_fraction(b, a, y, x);
}

// P[X <= k] for X ~ Bin(n, 1/2).
double binomial_half_cdf(long n, long k) {
  if (k >= n) return 1;
  if (n <= 1000) {
    // Exact recurrence C(n,i+1) = C(n,i) (n-i)/(i+1), scaled by 2^-n (no underflow here).
    double term = std::ldexp(1.0, static_cast<int>(-n)), sum = 0;
    for (long i = 0; i <= k; ++i) {
      sum += term;
      term = term * static_cast<double>(n - i) / static_cast<double>(i + 1);
    }
    return std::min(1.0, sum);
  }
  // P[X <= k] = I_{1/2}(n - k, k + 1).
  return incomplete_beta(static_cast<double>(n - k), static_cast<double>(k + 1), 0.5, 0.5);
}

}  // namespace

double regularized_incomplete_beta(double a, double b, double x) { return incomplete_beta(a, b, x, 1 - x); }

double student_t_two_tailed_p(double t, double dof) {
  if (std::isnan(t) || std::isnan(dof) || dof <= 0) return kNotANumber;
  if (std::isinf(t)) return 0;
  // P(|T| > |t|) = I_{dof/(dof+t^2)}(dof/2, 1/2); 1 - x = t^2/(dof+t^2) computed directly.
  const double t2 = t * t;
  if (std::isinf(t2)) return 0;
  return incomplete_beta(dof / 2, 0.5, dof / (dof + t2), t2 / (dof + t2));
}

double chi2_sf_1dof(double x) {
  if (std::isnan(x)) return kNotANumber;
  if (x <= 0) return 1;
  // A chi-square with 1 dof is Z^2: P(Z^2 > x) = P(|Z| > sqrt x) = erfc(sqrt(x/2)).
  return std::erfc(std::sqrt(x / 2));
}

TestResult paired_t_test(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size())
    throw Error("paired_t_test: samples differ in length (" + std::to_string(a.size()) + " vs " +
                std::to_string(b.size()) + ")");
  const std::size_t n = a.size();
  if (n < 2) throw Error("paired_t_test: needs at least 2 pairs, got " + std::to_string(n));
  double mean = 0;
  for (std::size_t i = 0; i < n; ++i) mean += a[i] - b[i];
  mean /= static_cast<double>(n);
  double ss = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double dev = (a[i] - b[i]) - mean;
    ss += dev * dev;
  }
  const double var = ss / static_cast<double>(n - 1);
  TestResult r;
  r.test = "paired-t";
  if (var == 0) {
    // All differences equal: no evidence when they are all 0, certainty otherwise.
    if (mean == 0) {
      r.statistic = 0;
      r.p_value = 1;
    } else {
      r.statistic = mean > 0 ? std::numeric_limits<double>::infinity() : -std::numeric_limits<double>::infinity();
      r.p_value = 0;
    }
    return r;
  }
  // scipy.stats.ttest_rel: t = mean(d) / sqrt(var(d, ddof=1) / n), dof = n - 1.
  r.statistic = mean / std::sqrt(var / static_cast<double>(n));
  r.p_value = student_t_two_tailed_p(r.statistic, static_cast<double>(n - 1));
  return r;
}

TestResult mcnemar(const std::vector<bool>& a, const std::vector<bool>& b, int exact_below) {
  if (a.size() != b.size())
    throw Error("mcnemar: samples differ in length (" + std::to_string(a.size()) + " vs " +
                std::to_string(b.size()) + ")");
  long only_a = 0, only_b = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i] && !b[i]) ++only_a;
    if (!a[i] && b[i]) ++only_b;
  }
  const long n = only_a + only_b;
  TestResult r;
  if (n < exact_below) {
    r.test = "mcnemar-exact";
    r.statistic = static_cast<double>(only_a);
    r.p_value = std::min(1.0, 2 * binomial_half_cdf(n, std::min(only_a, only_b)));
    return r;
  }
  r.test = "mcnemar-chi2";
  if (n == 0) {  // Only reachable with exact_below <= 0: no discordant pairs, no evidence.
    r.statistic = 0;
    r.p_value = 1;
    return r;
  }
  // Edwards' continuity correction, as statsmodels' mcnemar(exact=False, correction=True).
  const double diff = std::abs(static_cast<double>(only_a - only_b)) - 1;
  r.statistic = diff * diff / static_cast<double>(n);
  r.p_value = chi2_sf_1dof(r.statistic);
  return r;
}

}  // namespace attune::metrics
