// The real datasets in shared/data (data/README.md): counts and shape. Skipped when the
// shared folder is absent.
#include <gtest/gtest.h>

#include <chrono>
#include <iostream>
#include <unordered_set>

#include "attune/data/dataset.h"
#include "test_util.h"

namespace attune::data {
namespace {

namespace fs = std::filesystem;

fs::path shared_data() { return fs::path(ATTUNE_SHARED_DIR) / "data"; }

#define REQUIRE_SHARED(sub)                                                              \
  if (!fs::exists(shared_data() / (sub))) GTEST_SKIP() << "no " << (shared_data() / (sub)) \
                                                       << " (shared data absent)"

TEST(RealData, GitDevSplits) {
  REQUIRE_SHARED("git");
  struct Case {
    const char* task;
    std::size_t questions;
    const char* fields[2];
  };
  for (const Case& c : {Case{"commit_subject", 500, {"title", "text"}}, Case{"commit_area", 150, {"description", "tag"}},
                        Case{"commit_pick", 500, {"title", "text"}}}) {
    SCOPED_TRACE(c.task);
    Dataset ds = load_split(shared_data() / "git", c.task, "dev");
    EXPECT_TRUE(ds.has_outputs);
    ASSERT_EQ(ds.examples.size(), c.questions);
    for (const Example& ex : ds.examples) {
      EXPECT_EQ(ex.user, ex.id);
      EXPECT_FALSE(ex.output.empty());
      EXPECT_FALSE(ex.profile.empty());
      EXPECT_LE(ex.profile.size(), 64u);
      for (const Document& d : ex.profile) {
        ASSERT_TRUE(d.date.has_value()) << ex.id << " " << d.id;
        EXPECT_EQ(d.owner, ex.user);
        EXPECT_NE(d.field(c.fields[0]), nullptr);
        EXPECT_NE(d.field(c.fields[1]), nullptr);
      }
      // Dates are oldest first (data/README.md).
      for (std::size_t i = 1; i < ex.profile.size(); ++i) EXPECT_LE(*ex.profile[i - 1].date, *ex.profile[i].date);
    }
  }
}

TEST(RealData, DebianCorpusIsReadFast) {
  REQUIRE_SHARED("debian/debian_corpus.jsonl");
  auto t0 = std::chrono::steady_clock::now();
  fs::path corpus = find_corpus(shared_data() / "debian");
  auto docs = read_corpus_jsonl(corpus);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(corpus.filename(), "debian_corpus.jsonl");
  ASSERT_EQ(docs.size(), 49626u);
  EXPECT_EQ(docs[0].id, "0ad");
  EXPECT_EQ(*docs[0].field("title"), "0ad");
  EXPECT_TRUE(docs[0].field("text")->starts_with("Section: games. "));
  RecordProperty("read_seconds", std::to_string(s));
  std::cout << "read 49,626 corpus passages in " << s << " s\n";
#ifdef NDEBUG  // timings mean something only in an optimised build
  EXPECT_LT(s, 5.0);  // generous: a second or two on a 2-core machine
#endif
}

TEST(RealData, DebianQaDev) {
  REQUIRE_SHARED("debian/qa_dev.jsonl");
  Dataset ds = load_split(shared_data() / "debian", "qa", "dev");
  ASSERT_EQ(ds.examples.size(), 4704u);
  EXPECT_TRUE(ds.has_outputs);
  for (const Example& ex : ds.examples) {
    ASSERT_EQ(ex.gold_docs.size(), 1u) << ex.id;
    EXPECT_TRUE(ex.input.starts_with("Which Debian package is described as: "));
    EXPECT_TRUE(ex.profile.empty());
  }
  EXPECT_EQ(ds.examples[0].id, "qa-389-ds-base-dev");
  EXPECT_EQ(ds.examples[0].output, "389-ds-base-dev");
}

}  // namespace
}  // namespace attune::data
