// Hand-worked tables for the task, retrieval and agreement metrics. Where a value is not
// obvious the comment shows the arithmetic; scipy's documented examples are quoted as such.
#include "attune/metrics/metrics.h"

#include <gtest/gtest.h>

#include <cmath>

#include "attune/core/error.h"

namespace attune::metrics {
namespace {

TEST(Accuracy, FractionOfEqualPairs) {
  EXPECT_DOUBLE_EQ(accuracy({0, 1, 2, -1}, {0, 1, 1, 2}), 0.5);
  EXPECT_DOUBLE_EQ(accuracy({}, {}), 0.0);
  EXPECT_THROW(accuracy({0}, {0, 1}), Error);
}

TEST(MacroF1, FixedLabelListWithUnseenLabelAndMinusOne) {
  // 4 labels; label 3 never occurs; the prediction -1 is wrong for everyone.
  //   label 0: tp 1, fp 1, fn 1 -> 2/4;  label 1: tp 1, fp 1, fn 1 (the -1) -> 2/4
  //   label 2: tp 1, fp 0, fn 1 -> 2/3;  label 3: 0.  Mean = (1/2 + 1/2 + 2/3 + 0) / 4 = 5/12.
  const std::vector<int> gold = {0, 0, 1, 1, 2, 2};
  const std::vector<int> pred = {0, 1, 1, -1, 2, 0};
  EXPECT_NEAR(macro_f1(pred, gold, 4), 5.0 / 12.0, 1e-15);
  EXPECT_DOUBLE_EQ(accuracy(pred, gold), 0.5);
  // The same data over 3 labels: (1/2 + 1/2 + 2/3) / 3 = 5/9.
  EXPECT_NEAR(macro_f1(pred, gold, 3), 5.0 / 9.0, 1e-15);
  EXPECT_DOUBLE_EQ(macro_f1({1, 0}, {1, 0}, 2), 1.0);
  EXPECT_DOUBLE_EQ(macro_f1({-1, -1}, {0, 1}, 2), 0.0);
  EXPECT_DOUBLE_EQ(macro_f1({}, {}, 2), 0.0);
  EXPECT_THROW(macro_f1({0}, {0}, 0), Error);
}

TEST(Regression, MaeAndRmse) {
  // |diffs| = 1, 0, 2: MAE = 1, RMSE = sqrt(5/3).
  EXPECT_DOUBLE_EQ(mae({1, 2, 5}, {2, 2, 3}), 1.0);
  EXPECT_NEAR(rmse({1, 2, 5}, {2, 2, 3}), 1.2909944487358056, 1e-15);
  EXPECT_DOUBLE_EQ(mae({3.5}, {3.5}), 0.0);
  EXPECT_DOUBLE_EQ(rmse({4}, {1}), 3.0);
  EXPECT_THROW(mae({1}, {}), Error);
}

struct RougeCase {
  const char* prediction;
  const char* target;
  Prf r1, rl;
};

TEST(Rouge, OneAndLOnSmallStrings) {
  const std::vector<RougeCase> cases = {
      // 5 of 6 unigrams shared; LCS "the cat on the mat" = 5.
      {"the cat sat on the mat", "the cat is on the mat", {5 / 6., 5 / 6., 5 / 6.}, {5 / 6., 5 / 6., 5 / 6.}},
      {"police killed the gunman", "police kill the gunman", {0.75, 0.75, 0.75}, {0.75, 0.75, 0.75}},
      // Clipped counts: "the" appears once in the target. P = 1/3, R = 1/2, F = 0.4.
      {"the the the", "the cat", {1 / 3., 0.5, 0.4}, {1 / 3., 0.5, 0.4}},
      // Same bag, different order: LCS("b d a c", "a b c d") = 2.
      {"A B C D", "B D A C", {1, 1, 1}, {0.5, 0.5, 0.5}},
      // Case and punctuation are not part of tokens.
      {"Hello, WORLD!", "hello world", {1, 1, 1}, {1, 1, 1}},
      {"x y", "z", {0, 0, 0}, {0, 0, 0}},
      {"", "x", {0, 0, 0}, {0, 0, 0}},
      {"!!!", "x", {0, 0, 0}, {0, 0, 0}},
      {"x", "", {0, 0, 0}, {0, 0, 0}},
  };
  for (const auto& c : cases) {
    const Prf r1 = rouge1(c.prediction, c.target);
    const Prf rl = rougeL(c.prediction, c.target);
    SCOPED_TRACE(std::string(c.prediction) + " | " + c.target);
    EXPECT_NEAR(r1.precision, c.r1.precision, 1e-15);
    EXPECT_NEAR(r1.recall, c.r1.recall, 1e-15);
    EXPECT_NEAR(r1.fmeasure, c.r1.fmeasure, 1e-15);
    EXPECT_NEAR(rl.precision, c.rl.precision, 1e-15);
    EXPECT_NEAR(rl.recall, c.rl.recall, 1e-15);
    EXPECT_NEAR(rl.fmeasure, c.rl.fmeasure, 1e-15);
  }
}

TEST(ExactMatch, AfterSquadNormalisation) {
  EXPECT_EQ(exact_match("The Eiffel Tower.", "eiffel tower"), 1.0);
  EXPECT_EQ(exact_match("an  apple", "Apple!"), 1.0);
  EXPECT_EQ(exact_match("a", ""), 1.0);  // both normalise to ""
  EXPECT_EQ(exact_match("Eiffel Towers", "eiffel tower"), 0.0);
  EXPECT_EQ(exact_match("theatre", "atre"), 0.0);
}

TEST(Retrieval, RecallAtK) {
  const std::vector<std::string> ranked = {"d3", "d1", "d2"};
  EXPECT_EQ(recall_at_k(ranked, {"d2"}, 1), 0.0);
  EXPECT_EQ(recall_at_k(ranked, {"d2"}, 2), 0.0);
  EXPECT_EQ(recall_at_k(ranked, {"d2"}, 3), 1.0);
  EXPECT_EQ(recall_at_k(ranked, {"d2"}, 10), 1.0);
  EXPECT_EQ(recall_at_k(ranked, {"d9", "d3"}, 1), 1.0);
  EXPECT_EQ(recall_at_k(ranked, {}, 3), 0.0);
  EXPECT_EQ(recall_at_k({}, {"d1"}, 3), 0.0);
  EXPECT_EQ(recall_at_k(ranked, {"d3"}, 0), 0.0);
}

TEST(Retrieval, NdcgAtK) {
  const std::vector<std::string> ranked = {"a", "b", "c", "d"};
  // Relevant at ranks 2 and 4: (1/log2 3 + 1/log2 5) / (1 + 1/log2 3).
  EXPECT_NEAR(ndcg_at_k(ranked, {"b", "d"}, 4), 0.6509209298071326, 1e-15);
  EXPECT_NEAR(ndcg_at_k(ranked, {"b", "d"}, 2), 0.38685280723454163, 1e-15);
  EXPECT_EQ(ndcg_at_k(ranked, {"b", "d"}, 1), 0.0);
  EXPECT_EQ(ndcg_at_k(ranked, {"a"}, 1), 1.0);
  EXPECT_EQ(ndcg_at_k(ranked, {"a"}, 10), 1.0);
  EXPECT_EQ(ndcg_at_k(ranked, {"z"}, 4), 0.0);
  EXPECT_EQ(ndcg_at_k(ranked, {}, 4), 0.0);
  // Three relevant, only one ranked: ideal DCG@3 = 1 + 1/log2 3 + 1/2.
  EXPECT_NEAR(ndcg_at_k({"a"}, {"a", "x", "y"}, 3), 0.46927872602275644, 1e-15);
  // A repeated relevant id gains once.
  EXPECT_EQ(ndcg_at_k({"a", "a"}, {"a"}, 2), 1.0);
}

TEST(Agreement, Pearson) {
  // scipy.stats.pearsonr documentation example.
  EXPECT_NEAR(pearson({1, 2, 3, 4, 5}, {10, 9, 2.5, 6, 4}), -0.7426106572325057, 1e-14);
  EXPECT_NEAR(pearson({1, 2, 3}, {2, 4, 6}), 1.0, 1e-15);
  EXPECT_NEAR(pearson({1, 2, 3}, {3, 2, 1}), -1.0, 1e-15);
  // dx = dy permuted: sxy = 3, sxx = syy = 5 -> r = 0.6.
  EXPECT_NEAR(pearson({1, 2, 3, 4}, {2, 1, 4, 3}), 0.6, 1e-12);
  EXPECT_NEAR(pearson({1, 2, 3}, {-2, -4, -6}), -1.0, 1e-12);
  EXPECT_TRUE(std::isnan(pearson({1, 1, 1}, {1, 2, 3})));
  EXPECT_TRUE(std::isnan(pearson({1}, {2})));
}

TEST(Agreement, KendallTauB) {
  // scipy.stats.kendalltau documentation example (ties in both lists): tau-b = -0.4714...
  // By hand: C = 2, D = 6, ties only in x = 1, only in y = 0, in both = 1;
  // (2 - 6) / sqrt(9 * 8) = -4 / sqrt(72) = -sqrt(2)/3.
  EXPECT_NEAR(kendall_tau({12, 2, 1, 12, 2}, {1, 4, 7, 1, 0}), -0.47140452079103173, 1e-15);
  EXPECT_NEAR(kendall_tau({1, 2, 3, 4}, {10, 20, 30, 40}), 1.0, 1e-15);
  EXPECT_NEAR(kendall_tau({1, 2, 3, 4}, {4, 3, 2, 1}), -1.0, 1e-15);
  // x = 1,2,2,3 / y = 1,3,2,2: C = 3, D = 1, tie only in x 1, only in y 1: 2 / sqrt(5 * 5) = 0.4.
  EXPECT_NEAR(kendall_tau({1, 2, 2, 3}, {1, 3, 2, 2}), 0.4, 1e-15);
  EXPECT_TRUE(std::isnan(kendall_tau({5, 5, 5}, {1, 2, 3})));
  EXPECT_TRUE(std::isnan(kendall_tau({1}, {1})));
}

TEST(Agreement, Jaccard) {
  EXPECT_DOUBLE_EQ(jaccard({"a", "b", "c"}, {"b", "c", "d"}), 0.5);
  EXPECT_DOUBLE_EQ(jaccard({}, {}), 1.0);
  EXPECT_DOUBLE_EQ(jaccard({"a"}, {}), 0.0);
  EXPECT_DOUBLE_EQ(jaccard({"a", "a"}, {"a"}), 1.0);
  EXPECT_DOUBLE_EQ(jaccard({"a", "b"}, {"c"}), 0.0);
}

}  // namespace
}  // namespace attune::metrics
