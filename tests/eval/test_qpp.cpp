#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "attune/eval/qpp.h"

using attune::eval::qpp;

TEST(Qpp, HandComputedValues) {
  const std::vector<double> s = {3, 2, 1, 0};  // C = 1.5
  auto q = qpp(s, 2, 4);
  EXPECT_NEAR(q.wig, ((3 - 1.5) + (2 - 1.5)) / 2 / std::sqrt(4.0), 1e-12);  // 0.5
  EXPECT_NEAR(q.nqc, 0.5 / 1.5, 1e-12);                                   // std(3, 2) / |C|
  EXPECT_NEAR(q.sigma_max, std::sqrt(1.25), 1e-12);                       // the whole list's std
  EXPECT_NEAR(q.sigma_x, 0.5, 1e-12);                                     // {3, 2} are >= 50% of 3
  EXPECT_NEAR(qpp(s, 2, 4, 10).sigma_x, std::sqrt(2.0 / 3.0), 1e-12);     // {3, 2, 1} are >= 0.3
}

TEST(Qpp, SigmaMaxIsTheLargestPrefixDeviationNotTheLast) {
  // std of {10, 0} = 5; adding many zeros pulls it down again.
  const std::vector<double> s = {10, 0, 0, 0, 0, 0, 0, 0};
  EXPECT_NEAR(qpp(s, 3, 1).sigma_max, 5.0, 1e-12);
}

TEST(Qpp, EmptyAndFlatListsGiveZeros) {
  auto e = qpp(std::vector<double>{}, 4, 3);
  EXPECT_EQ(e.wig, 0);
  EXPECT_EQ(e.nqc, 0);
  EXPECT_EQ(e.sigma_max, 0);
  EXPECT_EQ(e.sigma_x, 0);
  auto z = qpp(std::vector<double>(5, 0.0), 4, 3);  // "none"/"random": no signal, C = 0
  EXPECT_EQ(z.wig, 0);
  EXPECT_EQ(z.nqc, 0);
  // k beyond the list and no query terms are clamped, not divided by zero.
  auto one = qpp(std::vector<double>{2.0}, 10, 0);
  EXPECT_EQ(one.wig, 0);
  EXPECT_TRUE(std::isfinite(one.nqc));
}

TEST(Qpp, Names) {
  auto n = attune::eval::qpp_names(50);
  ASSERT_EQ(n.size(), 4u);
  EXPECT_EQ(n[3], "sigma_50%");
  attune::eval::Qpp q{1, 2, 3, 4};
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(attune::eval::qpp_value(q, i), static_cast<double>(i + 1));
}
