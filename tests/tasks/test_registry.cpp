// make_task / task_names.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "attune/core/error.h"
#include "attune/tasks/task.h"

namespace attune::tasks {
namespace {

TEST(Registry, ThirteenTasksByCanonicalName) {
  const std::vector<std::string> expected = {
      "lamp1", "lamp2", "lamp3", "lamp4", "lamp5", "lamp6", "lamp7",
      "commit_subject", "commit_area", "commit_pick", "qa", "factcheck", "slot"};
  EXPECT_EQ(task_names(), expected);
  for (const auto& name : expected) EXPECT_EQ(make_task(name)->name(), name);
}

TEST(Registry, LampAliases) {
  EXPECT_EQ(make_task("LaMP-4")->name(), "lamp4");
  EXPECT_EQ(make_task("LaMP_2")->name(), "lamp2");
  EXPECT_EQ(make_task("lamp_7")->name(), "lamp7");
  EXPECT_THROW(make_task("lamp8"), UsageError);
  EXPECT_THROW(make_task("lamp"), UsageError);
}

TEST(Registry, UnknownTaskIsAUsageError) {
  EXPECT_THROW(make_task("nope"), UsageError);
  EXPECT_THROW(make_task(""), UsageError);
}

TEST(Registry, UsesCorpusOnlyForTheDebianTasks) {
  for (const auto& name : task_names()) {
    const bool corpus = name == "qa" || name == "factcheck" || name == "slot";
    EXPECT_EQ(make_task(name)->uses_corpus(), corpus) << name;
  }
}

TEST(Registry, LabelOverrides) {
  EXPECT_EQ(make_task("commit_area", {"a", "b"})->labels(), (std::vector<std::string>{"a", "b"}));
  EXPECT_THROW(make_task("lamp4", {"a"}), UsageError);  // generation takes no labels
  EXPECT_THROW(make_task("qa", {"a"}), UsageError);
  EXPECT_THROW(make_task("lamp3", {"1"}), UsageError);  // the ordinal scale is fixed
  EXPECT_THROW(make_task("slot", {"libs", "libs"}), UsageError);
}

TEST(Registry, PromptOptionDefaults) {
  const PromptOptions opts;
  EXPECT_EQ(opts.max_length, 256u);
  EXPECT_TRUE(opts.reference_quirks);
}

}  // namespace
}  // namespace attune::tasks
