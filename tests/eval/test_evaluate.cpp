#include <gtest/gtest.h>

#include <atomic>
#include <nlohmann/json.hpp>

#include "attune/core/error.h"
#include "attune/eval/evaluate.h"
#include "attune/llm/reference.h"

using namespace attune;

namespace {

data::Dataset dataset(int users) {
  data::Dataset ds;
  ds.task = "commit_subject";
  ds.split = "dev";
  ds.has_outputs = true;
  const char* topics[] = {"parser cache", "pager color", "merge base", "reflog expiry", "pack bitmap", "index lock"};
  for (int u = 0; u < users; ++u) {
    Example ex;
    ex.id = "q" + std::to_string(u);
    ex.user = ex.id;
    ex.input = std::string("Generate a subject line for the following commit description: the ") + topics[u % 6] +
               " code broke again";
    ex.output = std::string("area: fix ") + topics[u % 6];
    for (int p = 0; p < 6; ++p) {
      Document d;
      d.id = "d" + std::to_string(p);
      d.owner = ex.user;
      d.fields = {{"title", std::string("area: fix ") + topics[p]}, {"text", std::string("the ") + topics[p] + " code was wrong"}};
      d.date = "2020-01-0" + std::to_string(p + 1);
      ex.profile.push_back(d);
    }
    ds.examples.push_back(ex);
  }
  return ds;
}

}  // namespace

TEST(Evaluate, RetrievalOfTheUsersOwnHistoryHelpsTheReader) {
  auto ds = dataset(12);
  auto task = tasks::make_task("commit_subject");
  retrieval::ProfileCandidates source(*task);
  // The training subjects (the reader's background) are in the same style.
  llm::ReferenceReader reader({"area: fix parser cache", "area: fix pager color", "area: fix merge base",
                               "area: fix reflog expiry", "area: fix pack bitmap", "area: fix index lock"},
                              {});
  text::WhitespaceTokenizer tok;
  eval::EvalOptions o;
  o.retrievers = {"none", "bm25"};
  o.progress = false;
  auto rep = eval::evaluate(ds, *task, source, reader, tok, o);
  ASSERT_EQ(rep.results.size(), 2u);
  EXPECT_EQ(rep.examples, 12u);
  // BM25 finds the profile commit about the same topic, whose title is the gold subject.
  EXPECT_DOUBLE_EQ(rep.results[1].metrics.at("rouge-1"), 1.0);
  EXPECT_LT(rep.results[0].metrics.at("rouge-1"), 1.0);
  for (const auto& e : rep.results[1].examples) EXPECT_EQ(e.retrieved.size(), 4u);
  for (const auto& e : rep.results[0].examples) EXPECT_TRUE(e.retrieved.empty());
  // bm25 beats none significantly; the table marks it with none's letter "a".
  bool found = false;
  for (const auto& c : rep.comparisons)
    if (c.a == "bm25" && c.b == "none" && c.metric == "rouge-1") {
      found = true;
      EXPECT_TRUE(c.a_better);
      EXPECT_LT(c.p_value, 0.05);
    }
  EXPECT_TRUE(found);
  auto table = eval::format_table(rep);
  EXPECT_NE(table.find("1.0000 a"), std::string::npos) << table;
  auto j = nlohmann::json::parse(eval::to_json(rep));
  EXPECT_EQ(j["task"], "commit_subject");
  EXPECT_EQ(j["k"], 4);
  EXPECT_EQ(j["per_example"]["bm25"].size(), 12u);
  EXPECT_TRUE(j["results"]["none"].contains("rouge-L"));
}

TEST(Evaluate, AnotherUsersDocumentNeverReachesThePrompt) {
  auto ds = dataset(3);
  ds.examples[1].profile[2].owner = "q0";  // a document of user q0 slipped into q1's profile
  auto task = tasks::make_task("commit_subject");
  retrieval::ProfileCandidates source(*task);
  llm::ReferenceReader reader({"x"}, {});
  text::WhitespaceTokenizer tok;
  eval::EvalOptions o;
  o.retrievers = {"bm25"};
  o.progress = false;
  EXPECT_THROW(eval::evaluate(ds, *task, source, reader, tok, o), PrivacyError);
}

namespace {

// A source that hands out fixed documents of the example's user and counts its calls.
class FixedSource final : public retrieval::CandidateSource {
 public:
  std::vector<Document> candidates(const Example& ex) const override {
    ++calls;
    Document d;
    d.id = "fixed-" + ex.id;
    d.owner = ex.user;
    d.fields = {{"title", std::string("area: fixed")}, {"text", std::string("fixed")}};
    d.text = "fixed";
    return {d};
  }
  void prefetch(std::span<const Example> examples) const override {
    ++prefetches;
    prefetched = examples.size();
  }
  mutable std::atomic<int> calls{0}, prefetches{0};
  mutable std::size_t prefetched = 0;
};

}  // namespace

TEST(Evaluate, SourceForGivesEachRetrieverItsOwnCandidatesAskedOncePerExample) {
  auto ds = dataset(5);
  auto task = tasks::make_task("commit_subject");
  retrieval::ProfileCandidates profile(*task);
  FixedSource fixed;
  llm::ReferenceReader reader({"area: fix parser cache", "area: fix pager color"}, {});
  text::WhitespaceTokenizer tok;
  eval::EvalOptions o;
  o.retrievers = {"bm25", "recency", "rrf(bm25,recency)"};
  o.progress = false;
  o.limit = 4;
  o.source_for = [&](const std::string& spec) -> const retrieval::CandidateSource* {
    return spec == "bm25" ? nullptr : &fixed;  // null: the source given to evaluate()
  };
  auto rep = eval::evaluate(ds, *task, profile, reader, tok, o);
  ASSERT_EQ(rep.results.size(), 3u);
  for (const auto& e : rep.results[0].examples) EXPECT_EQ(e.retrieved.size(), 4u);  // the profile
  for (std::size_t r : {1u, 2u})
    for (const auto& e : rep.results[r].examples) EXPECT_EQ(e.retrieved, std::vector<DocId>{"fixed-" + e.id});
  // Two retrievers share the fixed source: one prefetch of the 4 examples, one call each.
  EXPECT_EQ(fixed.prefetches.load(), 1);
  EXPECT_EQ(fixed.prefetched, 4u);
  EXPECT_EQ(fixed.calls.load(), 4);
}
