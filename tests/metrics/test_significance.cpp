// Significance tests and the distribution functions under them. Reference values are
// closed forms evaluated with Python's math module: Student-t tail probabilities from
// Abramowitz & Stegun 26.7.3/26.7.4 (finite series in theta = atan(t/sqrt(dof))),
// incomplete beta from x^a, 1-(1-x)^b, arcsin and exact binomial sums, chi-square from
// erfc. None of them uses a continued fraction.
#include "attune/metrics/significance.h"

#include <gtest/gtest.h>

#include <cmath>

#include "attune/core/error.h"

namespace attune::metrics {
namespace {

TEST(IncompleteBeta, ClosedForms) {
  EXPECT_NEAR(regularized_incomplete_beta(2.5, 1, 0.3), 0.049295030175464945, 1e-15);    // x^a
  EXPECT_NEAR(regularized_incomplete_beta(1, 3.5, 0.3), 0.7130256108988122, 1e-15);      // 1-(1-x)^b
  EXPECT_NEAR(regularized_incomplete_beta(0.5, 0.5, 0.2), 0.2951672353008665, 1e-14);    // 2/pi asin(sqrt x)
  EXPECT_NEAR(regularized_incomplete_beta(2, 2, 0.4), 0.352, 1e-15);                     // 3x^2 - 2x^3
  EXPECT_NEAR(regularized_incomplete_beta(7, 7, 0.5), 0.5, 4e-15);                       // symmetry
  EXPECT_NEAR(regularized_incomplete_beta(50, 50, 0.5), 0.5, 1e-13);
  EXPECT_EQ(regularized_incomplete_beta(2, 3, 0), 0.0);
  EXPECT_EQ(regularized_incomplete_beta(2, 3, 1), 1.0);
  EXPECT_TRUE(std::isnan(regularized_incomplete_beta(-1, 3, 0.5)));
  EXPECT_TRUE(std::isnan(regularized_incomplete_beta(2, 3, 1.5)));
}

TEST(IncompleteBeta, BinomialTails) {
  // I_p(a, n - a + 1) = P[Bin(n, p) >= a], summed exactly with fractions.
  EXPECT_NEAR(regularized_incomplete_beta(3, 8, 0.3), 0.6172172136, 1e-14);
  EXPECT_NEAR(regularized_incomplete_beta(25, 16, 0.5), 0.07692997208141605, 1e-14);
  EXPECT_NEAR(regularized_incomplete_beta(90, 111, 0.4), 0.08572367611519159, 1e-13);
  // I_x(a, b) = 1 - I_{1-x}(b, a).
  EXPECT_NEAR(regularized_incomplete_beta(3, 8, 0.3) + regularized_incomplete_beta(8, 3, 0.7), 1.0, 1e-15);
}

struct TCase {
  double t, dof, p;
};

TEST(StudentT, TwoTailedP) {
  const std::vector<TCase> cases = {
      {2.0, 4, 0.11611652351681567},
      {-2.449489742783178, 4, 0.07048399691021989},
      {2.6457513110645907, 2, 0.11808289631180313},
      {1.0, 1, 0.5},  // Cauchy: 1 - 2/pi atan(1)
      {0.5, 3, 0.6514479648481509},
      {2.0, 5, 0.10193947882985832},
      {2.0422724563012373, 30, 0.05000000000000038},
      {1.3, 31, 0.2031843631365876},
      {3.5, 100, 0.0006964277173554523},
      {0.1, 7, 0.9231480596047924},
      {6.0, 9, 0.00020249932206750643},
      {0.0, 12, 1.0},
  };
  for (const auto& c : cases) {
    EXPECT_NEAR(student_t_two_tailed_p(c.t, c.dof), c.p, 1e-13 + 1e-11 * c.p) << "t=" << c.t << " dof=" << c.dof;
    EXPECT_DOUBLE_EQ(student_t_two_tailed_p(-c.t, c.dof), student_t_two_tailed_p(c.t, c.dof));
  }
  EXPECT_EQ(student_t_two_tailed_p(INFINITY, 3), 0.0);
  EXPECT_EQ(student_t_two_tailed_p(1e300, 3), 0.0);
  EXPECT_TRUE(std::isnan(student_t_two_tailed_p(1, 0)));
}

TEST(ChiSquare, OneDof) {
  EXPECT_NEAR(chi2_sf_1dof(3.841458820694124), 0.05, 1e-15);  // the 95% critical value
  EXPECT_NEAR(chi2_sf_1dof(2.7), 0.10034824646229074, 1e-15);
  EXPECT_EQ(chi2_sf_1dof(0), 1.0);
}

TEST(PairedT, MatchesTtestRel) {
  // d = -1, 0, -1, 0, -1: mean -0.6, var 0.3, t = -0.6 / sqrt(0.06) = -sqrt(6), dof 4.
  TestResult r = paired_t_test({1, 2, 3, 4, 5}, {2, 2, 4, 4, 6});
  EXPECT_EQ(r.test, "paired-t");
  EXPECT_NEAR(r.statistic, -std::sqrt(6.0), 1e-14);
  EXPECT_NEAR(r.p_value, 0.07048399691021989, 1e-13);
  // d = 1, 2, 4: mean 7/3, var 7/3, t = sqrt(7), dof 2: p = 1 - sqrt(7)/3.
  r = paired_t_test({2, 4, 8}, {1, 2, 4});
  EXPECT_NEAR(r.statistic, std::sqrt(7.0), 1e-14);
  EXPECT_NEAR(r.p_value, 1 - std::sqrt(7.0) / 3, 1e-14);
}

TEST(PairedT, DegenerateDifferences) {
  TestResult r = paired_t_test({0.1, 0.2, 0.3}, {0.1, 0.2, 0.3});
  EXPECT_EQ(r.statistic, 0.0);
  EXPECT_EQ(r.p_value, 1.0);
  r = paired_t_test({2, 3, 4}, {1, 2, 3});
  EXPECT_TRUE(std::isinf(r.statistic) && r.statistic > 0);
  EXPECT_EQ(r.p_value, 0.0);
  EXPECT_THROW(paired_t_test({1}, {2}), Error);
  EXPECT_THROW(paired_t_test({1, 2}, {2}), Error);
}

// Paired outcomes with `only_a` pairs where only a is right, `only_b` where only b is,
// plus `both` concordant pairs (half right, half wrong).
void make_pairs(int only_a, int only_b, int both, std::vector<bool>& a, std::vector<bool>& b) {
  a.clear();
  b.clear();
  auto add = [&](bool x, bool y) {
    a.push_back(x);
    b.push_back(y);
  };
  for (int i = 0; i < only_a; ++i) add(true, false);
  for (int i = 0; i < only_b; ++i) add(false, true);
  for (int i = 0; i < both; ++i) add(i % 2 == 0, i % 2 == 0);
}

struct McNemarCase {
  int only_a, only_b, exact_below;
  const char* test;
  double statistic, p;
};

TEST(McNemar, ExactAndChiSquare) {
  const std::vector<McNemarCase> cases = {
      // Exact: p = 2 * sum_{i <= min} C(n, i) / 2^n.
      {1, 9, 25, "mcnemar-exact", 1, 22.0 / 1024},          // 2 (1 + 10) / 2^10
      {3, 7, 25, "mcnemar-exact", 3, 352.0 / 1024},         // 2 (1 + 10 + 45 + 120) / 2^10
      {5, 5, 25, "mcnemar-exact", 5, 1.0},                  // capped at 1
      {0, 0, 25, "mcnemar-exact", 0, 1.0},
      {10, 20, 31, "mcnemar-exact", 10, 0.09873714670538902},
      {580, 620, 1201, "mcnemar-exact", 580, 0.26022738029672315},  // beyond the recurrence: via I_{1/2}
      // Chi-square with continuity correction: (|b - c| - 1)^2 / (b + c).
      {10, 20, 25, "mcnemar-chi2", 2.7, 0.10034824646229074},
      {20, 5, 25, "mcnemar-chi2", 7.84, 0.005110260660855864},
      {1, 9, 0, "mcnemar-chi2", 4.9, 0.026856695507524425},
  };
  for (const auto& c : cases) {
    std::vector<bool> a, b;
    make_pairs(c.only_a, c.only_b, 7, a, b);
    const TestResult r = mcnemar(a, b, c.exact_below);
    SCOPED_TRACE(std::to_string(c.only_a) + " vs " + std::to_string(c.only_b));
    EXPECT_EQ(r.test, c.test);
    EXPECT_NEAR(r.statistic, c.statistic, 1e-12);
    EXPECT_NEAR(r.p_value, c.p, 1e-12);
  }
  EXPECT_THROW(mcnemar({true}, {}), Error);
}

}  // namespace
}  // namespace attune::metrics
