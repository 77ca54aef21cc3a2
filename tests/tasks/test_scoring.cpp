// Labels, metrics, aggregation and rewards of each task family.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "attune/core/error.h"
#include "attune/tasks/labels.h"
#include "attune/tasks/task.h"

namespace attune::tasks {
namespace {

std::vector<std::string> metric_names(const Task& t) {
  std::vector<std::string> out;
  for (const auto& m : t.metrics()) out.push_back(m.name);
  return out;
}

TEST(Labels, FixedLists) {
  EXPECT_EQ(make_task("lamp1")->labels(), (std::vector<std::string>{"[1]", "[2]"}));
  EXPECT_EQ(make_task("lamp2")->labels(),
            (std::vector<std::string>{"sci-fi", "based on a book", "comedy", "action",
                                      "twist ending", "dystopia", "dark comedy", "classic",
                                      "psychology", "fantasy", "romance", "thought-provoking",
                                      "social commentary", "violence", "true story"}));
  EXPECT_EQ(make_task("lamp3")->labels(), (std::vector<std::string>{"1", "2", "3", "4", "5"}));
  for (const char* t : {"lamp4", "lamp5", "lamp6", "lamp7", "commit_subject", "qa"})
    EXPECT_TRUE(make_task(t)->labels().empty()) << t;
  EXPECT_EQ(make_task("commit_area")->labels(),
            (std::vector<std::string>{"l10n", "git-gui", "gitweb", "Documentation", "doc", "gitk",
                                      "git-svn", "completion", "Makefile", "refs", "diff", "i18n",
                                      "config", "git-p4", "tests"}));
  EXPECT_EQ(make_task("commit_pick")->labels(), (std::vector<std::string>{"[1]", "[2]"}));
  EXPECT_EQ(make_task("factcheck")->labels(), (std::vector<std::string>{"SUPPORTS", "REFUTES"}));
  EXPECT_TRUE(make_task("slot")->labels().empty());
  EXPECT_EQ(make_task("slot", {"libs", "devel"})->labels(),
            (std::vector<std::string>{"libs", "devel"}));
}

TEST(Metrics, NamesDirectionAndTests) {
  using V = std::vector<std::string>;
  EXPECT_EQ(metric_names(*make_task("lamp1")), (V{"accuracy", "f1"}));
  EXPECT_EQ(metric_names(*make_task("lamp2")), (V{"accuracy", "f1"}));
  EXPECT_EQ(metric_names(*make_task("lamp3")), (V{"mae", "rmse"}));
  for (const char* t : {"lamp4", "lamp5", "lamp6", "lamp7", "commit_subject"})
    EXPECT_EQ(metric_names(*make_task(t)), (V{"rouge-1", "rouge-L"})) << t;
  EXPECT_EQ(metric_names(*make_task("commit_area")), (V{"accuracy", "f1"}));
  EXPECT_EQ(metric_names(*make_task("commit_pick")), (V{"accuracy"}));
  EXPECT_EQ(metric_names(*make_task("qa")), (V{"exact_match"}));
  EXPECT_EQ(metric_names(*make_task("factcheck")), (V{"accuracy"}));
  EXPECT_EQ(metric_names(*make_task("slot")), (V{"accuracy"}));

  for (const auto& name : task_names()) {
    const auto task = make_task(name);  // keep it alive: metrics() is a reference into it
    for (const auto& m : task->metrics()) {
      const bool lower = m.name == "mae" || m.name == "rmse";
      EXPECT_EQ(m.higher_is_better, !lower) << name << " " << m.name;
      const bool zero_one = m.name == "accuracy" || m.name == "f1" || m.name == "exact_match";
      EXPECT_EQ(m.significance_test, zero_one ? "mcnemar" : "paired-t") << name << " " << m.name;
    }
  }
}

TEST(Classification, StrippedExactLabels) {
  auto t = make_task("lamp1");
  EXPECT_EQ(t->score(" [1]\n", "[1] ").at("accuracy"), 1.0);
  EXPECT_EQ(t->score("[2]", "[1]").at("accuracy"), 0.0);
  EXPECT_EQ(t->score("1", "[1]").at("accuracy"), 0.0);
  EXPECT_EQ(t->score("[1]", "[1]").at("f1"), 1.0);  // per example: correctness
  EXPECT_EQ(t->reward("[1]", "[1]"), 1.0);
  EXPECT_EQ(t->reward("[2]", "[1]"), 0.0);
}

TEST(Classification, Lamp1AccuracyAndMacroF1) {
  // pred idx [0, 1, -1, 0], gold [0, 1, 1, 1]: accuracy 2/4.
  // [1]: TP 1, FP 1, FN 0 -> F1 2/3. [2]: TP 1, FP 0, FN 2 -> F1 1/2. Macro = 7/12.
  auto v = make_task("lamp1")->aggregate({"[1]", " [2] ", "[3]", "[1]"}, {"[1]", "[2]", "[2]", "[2]"});
  EXPECT_DOUBLE_EQ(v.at("accuracy"), 0.5);
  EXPECT_NEAR(v.at("f1"), 7.0 / 12.0, 1e-12);
}

TEST(Classification, Lamp2MacroF1CountsUnseenLabels) {
  // comedy: TP 1, FP 1 -> 2/3; action: FN 1 -> 0; the 13 others 0: macro = (2/3) / 15.
  auto v = make_task("lamp2")->aggregate({"comedy", "comedy"}, {"comedy", "action"});
  EXPECT_DOUBLE_EQ(v.at("accuracy"), 0.5);
  EXPECT_NEAR(v.at("f1"), 2.0 / 45.0, 1e-12);
}

TEST(Classification, CommitAreaUsesTheCallersLabels) {
  auto t = make_task("commit_area", {"refs", "gitk", "other"});
  EXPECT_EQ(t->score("other", "other").at("accuracy"), 1.0);
  // f1 over 3 labels: refs 1, gitk 0 (FN), other 0 (FP): 1/3.
  auto v = t->aggregate({"refs", "other"}, {"refs", "gitk"});
  EXPECT_DOUBLE_EQ(v.at("accuracy"), 0.5);
  EXPECT_NEAR(v.at("f1"), 1.0 / 3.0, 1e-12);
  // A gold outside the list would make a right answer wrong: refused, naming it.
  try {
    make_task("commit_area")->score("other", "other");
    ADD_FAILURE() << "expected attune::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gold output \"other\" is not one of its 15 labels"), std::string::npos)
        << e.what();
  }
}

TEST(Classification, GoldOutsideTheLabelsIsRefusedEverywhere) {
  auto t = make_task("commit_area", {"refs", "gitk"});
  EXPECT_THROW(t->score("x", "x"), Error);
  EXPECT_THROW(t->reward("x", "x"), Error);
  // One extra label in the data used to give accuracy 2/3 but F1 1.0 for perfect answers.
  EXPECT_THROW(t->aggregate({"refs", "gitk", "x"}, {"refs", "gitk", "x"}), Error);
  for (const char* name : {"lamp1", "lamp2", "commit_area", "commit_pick", "factcheck", "slot"})
    EXPECT_TRUE(takes_labels(name)) << name;
  for (const char* name : {"lamp3", "lamp4", "lamp7", "commit_subject", "qa"}) EXPECT_FALSE(takes_labels(name)) << name;
  EXPECT_THROW(takes_labels("lamp99"), UsageError);
}

TEST(Classification, PredictionOutsideTheLabelsIsWrongAndNobodysPositive) {
  // gold [refs, gitk]; predictions [refs, "nonsense"]: accuracy 1/2; refs F1 1, gitk: FN 1
  // (no FP anywhere for the out-of-set answer): F1 0. Macro over 2 labels = 1/2.
  auto v = make_task("commit_area", {"refs", "gitk"})->aggregate({"refs", "nonsense"}, {"refs", "gitk"});
  EXPECT_DOUBLE_EQ(v.at("accuracy"), 0.5);
  EXPECT_DOUBLE_EQ(v.at("f1"), 0.5);
}

TEST(Classification, FactcheckIsCaseSensitive) {
  auto t = make_task("factcheck");
  EXPECT_EQ(t->score(" SUPPORTS\n", "SUPPORTS").at("accuracy"), 1.0);
  EXPECT_EQ(t->score("supports", "SUPPORTS").at("accuracy"), 0.0);
  EXPECT_DOUBLE_EQ(t->aggregate({"REFUTES", "REFUTES", "x"}, {"REFUTES", "SUPPORTS", "REFUTES"})
                       .at("accuracy"),
                   1.0 / 3.0);
}

TEST(Classification, SlotWithoutLabelsComparesStrings) {
  auto t = make_task("slot");
  EXPECT_EQ(t->score(" libdevel ", "libdevel").at("accuracy"), 1.0);
  EXPECT_EQ(t->score("libs", "libdevel").at("accuracy"), 0.0);
  // With labels, an answer outside the list is wrong, and a gold outside it is refused.
  auto labelled = make_task("slot", {"libs", "devel"});
  EXPECT_THROW(labelled->score("libdevel", "libdevel"), Error);  // a gold outside the list
  EXPECT_EQ(labelled->score("libdevel", "libs").at("accuracy"), 0.0);
  EXPECT_EQ(labelled->score("libs", "libs").at("accuracy"), 1.0);
}

TEST(Ordinal, PythonFloatParsingAndFallback) {
  auto t = make_task("lamp3");
  auto mae = [&](const char* out, const char* gold) { return t->score(out, gold).at("mae"); };
  EXPECT_EQ(mae("4", "5"), 1.0);
  EXPECT_EQ(mae(" 3.5 \n", "5"), 1.5);
  EXPECT_EQ(mae("+2.", "5"), 3.0);
  EXPECT_EQ(mae(".5", "5"), 4.5);
  EXPECT_EQ(mae("1e0", "5"), 4.0);
  EXPECT_EQ(mae("1_0", "5"), 5.0);     // Python accepts single underscores between digits
  EXPECT_DOUBLE_EQ(mae("-.5e-1", "2"), 2.05);
  EXPECT_TRUE(std::isinf(mae("inf", "5")));
  EXPECT_TRUE(std::isinf(mae("-Infinity", "5")));
  EXPECT_TRUE(std::isnan(mae("nan", "5")));
  // Unparsable -> the end of the scale farther from the gold: 1 for 5 (mae 4), 5 for 2
  // (mae 3), 5 on the tie at 3 (mae 2).
  for (const char* bad : {"five", "4 stars", "", "1__0", "_1", "1_", "1e", "e5", "0x1", ".", "in"})
    EXPECT_EQ(mae(bad, "5"), 4.0) << "'" << bad << "'";
  EXPECT_EQ(mae("abc", "2"), 3.0);
  EXPECT_EQ(mae("abc", "3"), 2.0);
  EXPECT_EQ(mae("abc", "4"), 3.0);
  EXPECT_EQ(t->score("abc", "4").at("rmse"), 3.0);
  EXPECT_THROW(t->score("4", "not a number"), Error);
}

TEST(Ordinal, MaeAndRmse) {
  // errors 1 and 3: MAE 2, RMSE sqrt((1 + 9) / 2).
  auto v = make_task("lamp3")->aggregate({"4", "abc"}, {"5", "2"});
  EXPECT_DOUBLE_EQ(v.at("mae"), 2.0);
  EXPECT_DOUBLE_EQ(v.at("rmse"), std::sqrt(5.0));
}

TEST(Ordinal, RewardIsEquation8) {
  auto t = make_task("lamp3");
  EXPECT_DOUBLE_EQ(t->reward("4", "5"), 0.75);   // (4 - 1) / 4
  EXPECT_DOUBLE_EQ(t->reward("1", "3"), 0.0);    // (2 - 2) / 2
  EXPECT_DOUBLE_EQ(t->reward("2", "2"), 1.0);
  EXPECT_DOUBLE_EQ(t->reward("3.5", "2"), 0.5);  // (3 - 1.5) / 3
  EXPECT_DOUBLE_EQ(t->reward("x", "5"), 0.0);    // fallback 1, the worst
  EXPECT_DOUBLE_EQ(t->reward("x", "4"), 0.0);    // fallback 1, the worst
  EXPECT_DOUBLE_EQ(t->reward("10", "5"), 0.0);   // off the scale: clamped
  EXPECT_DOUBLE_EQ(t->reward("nan", "5"), 0.0);
}

TEST(Generation, RougeOnStrippedText) {
  for (const char* name : {"lamp4", "lamp5", "lamp6", "lamp7", "commit_subject"}) {
    auto t = make_task(name);
    // [the cat sat] vs [the cat sat on the mat]: P 1, R 1/2 -> 2/3 for both.
    auto v = t->score("  the cat sat ", "The cat sat on the mat.");
    EXPECT_NEAR(v.at("rouge-1"), 2.0 / 3.0, 1e-12) << name;
    EXPECT_NEAR(v.at("rouge-L"), 2.0 / 3.0, 1e-12) << name;
    // Reversed order: unigrams all match, the LCS is one token -> 1/3.
    v = t->score("sat cat the", "the cat sat");
    EXPECT_NEAR(v.at("rouge-1"), 1.0, 1e-12) << name;
    EXPECT_NEAR(v.at("rouge-L"), 1.0 / 3.0, 1e-12) << name;
    EXPECT_NEAR(t->reward("sat cat the", "the cat sat"), 1.0, 1e-12) << name;
    EXPECT_NEAR(t->reward("the cat sat", "the cat sat on the mat"), 2.0 / 3.0, 1e-12) << name;
  }
}

TEST(Generation, AggregateIsThePlainMean) {
  auto v = make_task("lamp4")->aggregate({"the cat sat", "dog"}, {"the cat sat on the mat", "cat"});
  EXPECT_NEAR(v.at("rouge-1"), (2.0 / 3.0 + 0.0) / 2.0, 1e-12);
  EXPECT_NEAR(v.at("rouge-L"), (2.0 / 3.0 + 0.0) / 2.0, 1e-12);
}

TEST(ExactMatch, SquadNormalised) {
  auto t = make_task("qa");
  EXPECT_EQ(t->score("The nano.", "nano").at("exact_match"), 1.0);
  EXPECT_EQ(t->score("vim", "nano").at("exact_match"), 0.0);
  EXPECT_EQ(t->reward(" NANO ", "nano"), 1.0);
  EXPECT_DOUBLE_EQ(t->aggregate({"nano", "vim"}, {"nano", "emacs"}).at("exact_match"), 0.5);
}

TEST(Aggregate, SizesMustMatchAndEmptyIsZero) {
  EXPECT_THROW(make_task("lamp1")->aggregate({"[1]"}, {}), UsageError);
  for (const auto& name : task_names()) {
    const auto task = make_task(name);
    const auto v = task->aggregate({}, {});
    for (const auto& m : task->metrics()) EXPECT_EQ(v.at(m.name), 0.0) << name;
  }
}

}  // namespace
}  // namespace attune::tasks
