// LUF's three losses (004 §2) against their closed forms, and their gradients' directions:
// the strict loss raises the positives against every real candidate, the flaccid one fits the
// retriever's distribution over D^r to the graded scores, and the hard-negative margin pushes
// apart only the pairs inside the margin, weighted by rank. Rows a loss does not apply to
// and padding get nothing.
#include <gtest/gtest.h>

#include <cmath>

#include "attune/train/objectives.h"

namespace attune::train {
namespace {

torch::Tensor t(std::vector<std::vector<double>> rows) {
  std::vector<torch::Tensor> r;
  for (auto& v : rows) r.push_back(torch::tensor(v, torch::kFloat64));
  return torch::stack(r);
}
torch::Tensor b(std::vector<std::vector<int>> rows) {
  std::vector<torch::Tensor> r;
  for (auto& v : rows) r.push_back(torch::tensor(std::vector<std::int64_t>(v.begin(), v.end())));
  return torch::stack(r).to(torch::kBool);
}

TEST(LufLosses, StrictIsMultiPositiveInfoNceOverTheRealCandidates) {
  auto s = t({{1.0, 2.0, 0.5, 9.0}, {0.3, 0.1, 0.2, 0.0}}).requires_grad_(true);
  const auto mask = b({{1, 1, 1, 0}, {1, 1, 1, 1}});  // row 0's last candidate is padding
  const auto pos = b({{1, 0, 1, 0}, {0, 0, 0, 0}});   // row 1 has no positive: not counted
  auto loss = luf_strict_loss(s, pos, mask);
  const double want = -std::log((std::exp(1.0) + std::exp(0.5)) / (std::exp(1.0) + std::exp(2.0) + std::exp(0.5)));
  EXPECT_NEAR(loss.item<double>(), want, 1e-12);
  loss.backward();
  auto g = s.grad();
  EXPECT_LT(g[0][0].item<double>(), 0);  // positives go up
  EXPECT_LT(g[0][2].item<double>(), 0);
  EXPECT_GT(g[0][1].item<double>(), 0);  // the negative goes down
  EXPECT_EQ(g[0][3].item<double>(), 0);  // padding: nothing
  EXPECT_EQ(g[1].abs().sum().item<double>(), 0);  // a row without a positive: nothing
  // No row applies: 0, and still differentiable.
  auto s2 = t({{1.0, 2.0}}).requires_grad_(true);
  auto none = luf_strict_loss(s2, b({{0, 0}}), b({{1, 1}}));
  EXPECT_EQ(none.item<double>(), 0);
  none.backward();
  EXPECT_EQ(s2.grad().abs().sum().item<double>(), 0);
}

TEST(LufLosses, FlaccidIsTheKlFromTheGradedScoresOverTheRelevantOnes) {
  auto s = t({{0.0, 1.0, 5.0, 2.0}, {1.0, 1.0, 1.0, 1.0}, {0.0, 3.0, 0.0, 0.0}}).requires_grad_(true);
  const auto grades = t({{0.6, 0.2, 0.9, 0.0}, {0.5, 0.5, 0.0, 0.0}, {0.0, 0.7, 0.0, 0.0}});
  const auto rel = b({{1, 1, 0, 0}, {1, 1, 0, 0}, {0, 1, 0, 0}});  // row 2: one D^r, no distribution to fit
  auto loss = luf_flaccid_loss(s, grades, rel);
  // Row 0: P = (0.75, 0.25); Q = softmax(0, 1). Row 1: P = Q = (0.5, 0.5): KL 0.
  const double q0 = 1 / (1 + std::exp(1.0)), q1 = 1 - q0;
  const double kl0 = 0.75 * std::log(0.75 / q0) + 0.25 * std::log(0.25 / q1);
  EXPECT_NEAR(loss.item<double>(), kl0 / 2, 1e-12);
  loss.backward();
  auto g = s.grad();
  EXPECT_LT(g[0][0].item<double>(), 0);  // under-weighted by the retriever: goes up
  EXPECT_GT(g[0][1].item<double>(), 0);
  EXPECT_EQ(g[0][2].item<double>(), 0);  // not in D^r (its grade is ignored)
  EXPECT_EQ(g[2].abs().sum().item<double>(), 0);
}

TEST(LufLosses, HardNegativeMarginIsRankWeightedAndZeroOutsideTheMargin) {
  auto s = t({{2.0, 1.5, 0.0, 1.9}}).requires_grad_(true);
  const auto pos = b({{1, 0, 0, 0}});
  const auto neg = b({{0, 1, 1, 1}});
  const auto w = t({{1.0, 0.5, 1.0 / 3, 0.25}});  // 1 / (1 + rank)
  auto loss = luf_hard_negative_loss(s, pos, neg, w, /*gamma=*/1.0);
  // Pairs: (0,1) margin 1 - 2 + 1.5 = 0.5; (0,2) 1 - 2 + 0 < 0 -> 0; (0,3) 1 - 2 + 1.9 = 0.9.
  EXPECT_NEAR(loss.item<double>(), 0.5 * 0.5 + 0.25 * 0.9, 1e-12);
  loss.backward();
  auto g = s.grad();
  EXPECT_NEAR(g[0][0].item<double>(), -(0.5 + 0.25), 1e-12);  // the positive goes up
  EXPECT_NEAR(g[0][1].item<double>(), 0.5, 1e-12);
  EXPECT_EQ(g[0][2].item<double>(), 0);  // already beyond the margin
  EXPECT_NEAR(g[0][3].item<double>(), 0.25, 1e-12);
  // Two positives: the mean over them; a row without negatives does not count.
  auto s2 = t({{2.0, 1.0, 1.5}, {1.0, 0.0, 0.0}});
  const auto l2 = luf_hard_negative_loss(s2, b({{1, 1, 0}, {1, 0, 0}}), b({{0, 0, 1}, {0, 0, 0}}), t({{1, 1, 1}, {1, 1, 1}}), 1.0);
  EXPECT_NEAR(l2.item<double>(), (0.5 + 1.5) / 2, 1e-12);
}

}  // namespace
}  // namespace attune::train
