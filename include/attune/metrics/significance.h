#pragma once
// Significance tests the papers use: paired t-test for continuous per-example metrics
// (ROUGE, MAE), McNemar for 0/1 outcomes (accuracy, EM).
#include <string>
#include <vector>

namespace attune::metrics {

struct TestResult {
  std::string test;      // "paired-t", "mcnemar-exact", "mcnemar-chi2"
  double statistic = 0;  // t, the number of discordant pairs b (exact), or chi^2
  double p_value = 1;    // two-tailed
};

// Two-tailed paired t-test (scipy.stats.ttest_rel); p = 1 when all differences are 0;
// needs n >= 2.
TestResult paired_t_test(const std::vector<double>& a, const std::vector<double>& b);

// McNemar on paired 0/1 outcomes: b = a right & b wrong, c = a wrong & b right.
// Exact two-sided binomial (p = min(1, 2 * P[X <= min(b,c)]), X ~ Bin(b+c, 1/2)) when
// b + c < exact_below; otherwise chi-square with continuity correction, 1 dof.
TestResult mcnemar(const std::vector<bool>& a, const std::vector<bool>& b, int exact_below = 25);

// Distribution helpers (exposed for tests).
double student_t_two_tailed_p(double t, double dof);
double chi2_sf_1dof(double x);
double regularized_incomplete_beta(double a, double b, double x);

}  // namespace attune::metrics
