#include <gtest/gtest.h>

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
