#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "attune/core/error.h"
#include "attune/eval/evaluate.h"
#include "attune/llm/planted.h"
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

// A reader whose background (the training subjects) is in the same style as the gold.
llm::ReferenceReader topic_reader() {
  return llm::ReferenceReader({"area: fix parser cache", "area: fix pager color", "area: fix merge base",
                               "area: fix reflog expiry", "area: fix pack bitmap", "area: fix index lock"},
                              {});
}

}  // namespace

TEST(Evaluate, RetrievalOfTheUsersOwnHistoryHelpsTheReader) {
  auto ds = dataset(12);
  auto task = tasks::make_task("commit_subject");
  retrieval::ProfileCandidates source(*task);
  auto reader = topic_reader();
  text::WhitespaceTokenizer tok;
  eval::EvalOptions o;
  o.retrievers = {"none", "bm25"};
  o.run.progress = false;
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
  // Rows keep the table's order (none before bm25), not the alphabet's.
  const auto oj = nlohmann::ordered_json::parse(eval::to_json(rep));
  std::vector<std::string> keys;
  for (const auto& [k, v] : oj["results"].items()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"none", "bm25"}));
}

TEST(ListOverlap, JaccardAndKendallTauBOfTwoTopKLists) {
  using V = std::vector<DocId>;
  const V abcd = {"a", "b", "c", "d"}, dcba = {"d", "c", "b", "a"}, abxy = {"a", "b", "x", "y"}, none;
  EXPECT_DOUBLE_EQ(eval::jaccard(abcd, dcba), 1.0);
  EXPECT_DOUBLE_EQ(eval::jaccard(abcd, abxy), 2.0 / 6.0);
  EXPECT_DOUBLE_EQ(eval::jaccard(none, none), 1.0);
  EXPECT_DOUBLE_EQ(eval::jaccard(abcd, none), 0.0);
  EXPECT_DOUBLE_EQ(*eval::kendall_tau_b(abcd, abcd), 1.0);
  EXPECT_DOUBLE_EQ(*eval::kendall_tau_b(abcd, dcba), -1.0);
  // One swap of four: 5 concordant pairs, 1 discordant, no ties: (5 - 1) / 6.
  EXPECT_DOUBLE_EQ(*eval::kendall_tau_b(abcd, V{"b", "a", "c", "d"}), 4.0 / 6.0);
  // {a,b} in order in both, {c,d} only in the first, {x,y} only in the second: over the
  // union of six, missing documents tie below each list's last. By hand: n0 = 15 pairs,
  // tied in the first list {x,y} (1), in the second {c,d} (1); of the 13 untied pairs,
  // concordant: (a,b) and a,b above each of c,d,x,y in both (8): 9; discordant: c,d against
  // x,y (4). tau-b = (9 - 4) / sqrt(14 * 14) = 5 / 14.
  EXPECT_NEAR(*eval::kendall_tau_b(abcd, abxy), 5.0 / 14.0, 1e-12);
  EXPECT_FALSE(eval::kendall_tau_b(V{"a"}, V{"a"}).has_value());  // fewer than two documents
  EXPECT_FALSE(eval::kendall_tau_b(none, none).has_value());
}

TEST(Evaluate, ListOverlapComparesEveryPairOfRows) {
  auto ds = dataset(6);
  auto task = tasks::make_task("commit_subject");
  retrieval::ProfileCandidates source(*task);
  auto reader = topic_reader();
  text::WhitespaceTokenizer tok;
  eval::EvalOptions o;
  o.retrievers = {"none", "bm25", "rerank(bm25,4,bm25)"};
  o.run.progress = false;
  o.list_overlap = true;
  auto rep = eval::evaluate(ds, *task, source, reader, tok, o);
  ASSERT_EQ(rep.overlaps.size(), 3u);  // (a,b), (a,c), (b,c)
  // none's empty lists share nothing with bm25's four, and rank nothing: no tau.
  EXPECT_EQ(rep.overlaps[0].a, "none");
  EXPECT_EQ(rep.overlaps[0].b, "bm25");
  EXPECT_DOUBLE_EQ(rep.overlaps[0].jaccard, 0.0);
  EXPECT_EQ(rep.overlaps[0].tau_examples, 0u);
  // BM25's top 4 reordered (by BM25 over those 4 alone) is the same set.
  EXPECT_EQ(rep.overlaps[2].b, "rerank(bm25,4,bm25)");
  EXPECT_DOUBLE_EQ(rep.overlaps[2].jaccard, 1.0);
  EXPECT_EQ(rep.overlaps[2].examples, 6u);
  EXPECT_EQ(rep.overlaps[2].tau_examples, 6u);
  EXPECT_GE(rep.overlaps[2].kendall_tau, -1.0);
  EXPECT_LE(rep.overlaps[2].kendall_tau, 1.0);
  const auto table = eval::format_table(rep);
  EXPECT_NE(table.find("(a) ~ (b)  0.0000 / -"), std::string::npos) << table;
  EXPECT_NE(table.find("(b) ~ (c)  1.0000 / "), std::string::npos) << table;
  const auto j = nlohmann::json::parse(eval::to_json(rep));
  ASSERT_EQ(j["list_overlap"].size(), 3u);
  EXPECT_TRUE(j["list_overlap"][0]["kendall_tau"].is_null());
  EXPECT_EQ(j["list_overlap"][2]["jaccard"], 1.0);
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
  o.run.progress = false;
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
  o.run.progress = false;
  o.run.limit = 4;
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

// Selectors (RSPG in eval): the row is each example answered by the chosen pool member; the
// selection report has the success rate of the selector, the QPP predictors and the oracles.
TEST(Evaluate, SelectorsChooseAPoolMemberPerExampleAndAreComparedWithQppAndOracles) {
  auto ds = dataset(12);
  auto task = tasks::make_task("commit_subject");
  retrieval::ProfileCandidates source(*task);
  auto reader = topic_reader();
  text::WhitespaceTokenizer tok;
  eval::EvalOptions o;
  o.retrievers = {"none", "recency", "bm25"};
  o.run.progress = false;
  o.run.threads = 1;
  o.qpp_normalize = false;  // raw QPP values here; the z-scored default is checked below
  std::vector<std::vector<std::string>> seen_prompts, seen_outputs;
  // "first": always none; "post": picks the member whose output is longest (reads outputs).
  std::vector<std::string> seen_queries;
  o.selectors.push_back({"first", {"none", "bm25"}, [](std::string_view, std::span<const std::string>, std::span<const std::string>) {
                           return std::vector<float>{1.0f, 0.0f};
                         }});
  o.selectors.push_back({"post", {"none", "recency", "bm25"},
                         [&](std::string_view q, std::span<const std::string> p, std::span<const std::string> out) {
                           seen_queries.emplace_back(q);
                           seen_prompts.emplace_back(p.begin(), p.end());
                           seen_outputs.emplace_back(out.begin(), out.end());
                           std::vector<float> s;
                           for (const auto& x : out) s.push_back(static_cast<float>(x.size()));
                           return s;
                         }});
  auto rep = eval::evaluate(ds, *task, source, reader, tok, o);
  ASSERT_EQ(rep.results.size(), 5u);
  ASSERT_EQ(rep.selections.size(), 2u);
  const auto& none = rep.results[0];
  const auto& bm25 = rep.results[2];
  // "first" always took none: its row is none's.
  EXPECT_EQ(rep.results[3].spec, "first");
  EXPECT_EQ(rep.results[3].metrics.at("rouge-1"), none.metrics.at("rouge-1"));
  for (std::size_t e = 0; e < 12; ++e) {
    EXPECT_EQ(rep.results[3].examples[e].chosen, "none");
    EXPECT_EQ(rep.results[3].examples[e].output, none.examples[e].output);
  }
  // The selector saw each member's own prompt and output.
  ASSERT_EQ(seen_outputs.size(), 12u);
  for (std::size_t e = 0; e < 12; ++e) {
    EXPECT_EQ(seen_outputs[e][0], none.examples[e].output);
    EXPECT_EQ(seen_outputs[e][2], bm25.examples[e].output);
    EXPECT_NE(seen_prompts[e][2].find("area: fix"), std::string::npos);  // bm25's prompt holds documents
    EXPECT_EQ(seen_queries.at(e), task->query(ds.examples[e]));         // and the example's input x
  }
  const auto& sel = rep.selections[0];
  ASSERT_EQ(sel.methods.size(), 7u);
  EXPECT_EQ(sel.methods[0].name, "first");
  EXPECT_EQ(sel.methods[1].name, "wig");
  EXPECT_EQ(sel.methods[4].name, "sigma_50%");
  EXPECT_EQ(sel.methods[5].name, "oracle_lower");
  EXPECT_EQ(sel.methods[6].name, "oracle_upper");
  // bm25 reaches rouge-1 1.0 on every example, none never does: choosing none always fails.
  EXPECT_DOUBLE_EQ(sel.methods[0].success, 0.0);
  EXPECT_DOUBLE_EQ(sel.methods[6].success, 1.0);
  EXPECT_DOUBLE_EQ(sel.methods[6].metrics.at("rouge-1"), 1.0);
  EXPECT_DOUBLE_EQ(sel.methods[5].metrics.at("rouge-1"), none.metrics.at("rouge-1"));
  // WIG: none's scores are all zero, bm25's top is above its mean, so WIG picks bm25.
  EXPECT_DOUBLE_EQ(sel.methods[1].success, 1.0);
  EXPECT_LT(sel.methods[1].p_vs_selector, 0.05);  // 12 discordant pairs, all one way
  auto table = eval::format_table(rep);
  EXPECT_NE(table.find("selection by first over 2 retrievers"), std::string::npos) << table;
  EXPECT_NE(table.find("oracle_upper"), std::string::npos) << table;
  EXPECT_NE(table.find("none 100.0%, bm25 0.0%"), std::string::npos) << table;
  auto j = nlohmann::json::parse(eval::to_json(rep));
  EXPECT_DOUBLE_EQ(j["selection"]["first"]["methods"]["oracle_upper"]["success"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(j["selection"]["first"]["methods"]["first"]["chosen_share"]["none"].get<double>(), 1.0);
  EXPECT_EQ(j["per_example"]["post"][0]["chosen"].get<std::string>().empty(), false);
  EXPECT_FALSE(j["per_example"]["bm25"][0].contains("chosen"));
  EXPECT_FALSE(j["selection"]["first"]["qpp_normalized"].get<bool>());
  EXPECT_NE(table.find("raw predictor values"), std::string::npos) << table;

  // The default: each retriever's QPP values z-scored over the examples. Here every
  // example's bm25 WIG is the same (the examples are alike up to their topic), as is none's
  // (0): per retriever, nothing tells one example from another, so z is 0 for both and the
  // tie goes to the first member. Raw values picked bm25 everywhere only for its scale.
  o.qpp_normalize = true;
  const auto z = eval::evaluate(ds, *task, source, reader, tok, o);
  const auto& zwig = z.selections[0].methods[1];
  ASSERT_EQ(zwig.name, "wig");
  EXPECT_EQ(std::count(zwig.chosen.begin(), zwig.chosen.end(), std::size_t{1}), 0);
  EXPECT_NE(eval::format_table(z).find("z-scored over the examples"), std::string::npos);

  // A pool member that is not evaluated is refused, naming it.
  o.selectors = {{"bad", {"none", "dense:x"}, o.selectors[0].score}};
  try {
    eval::evaluate(ds, *task, source, reader, tok, o);
    FAIL() << "expected a UsageError";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("dense:x"), std::string::npos) << e.what();
  }
}

namespace attune::eval {
namespace {

TEST(EvalOptionsValidate, NamesTheFieldAndItsValue) {
  EvalOptions ok;
  EXPECT_NO_THROW(ok.validate());
  auto expect = [](EvalOptions o, const std::string& field, const std::string& text) {
    try {
      o.validate();
      FAIL() << field;
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
      EXPECT_EQ(dynamic_cast<const NamesField&>(e).field(), field);
    }
  };
  EvalOptions none = ok;
  none.retrievers.clear();
  expect(none, "retrievers", "at least one retriever");
  EvalOptions alpha = ok;
  alpha.alpha = 1.5;
  expect(alpha, "alpha", "alpha = 1.5");
  EvalOptions sigma = ok;
  sigma.qpp_sigma_percent = -1;
  expect(sigma, "qpp_sigma_percent", "qpp_sigma_percent = -1");
  // A retriever listed twice (by canonical text) would be one row under two names.
  EvalOptions twice = ok;
  twice.retrievers = {"none", "rrf(bm25,recency)", "bm25", "rrf(bm25, recency)"};
  expect(twice, "retrievers", "retrievers lists \"rrf(bm25, recency)\" twice");
  // The generation options: beams 1..64, a finite temperature >= 0, top_p in (0, 1].
  EvalOptions beams = ok;
  beams.generate.beams = 100000;
  expect(beams, "beams", "beams = 100000: must be between 1 and 64");
  beams.generate.beams = 0;
  expect(beams, "beams", "beams = 0: must be between 1 and 64");
  beams.generate.beams = 64;
  EXPECT_NO_THROW(beams.validate());
  EvalOptions temp = ok;
  temp.generate.temperature = std::nan("");
  expect(temp, "temperature", "temperature = nan: must be a finite number >= 0");
  temp.generate.temperature = std::numeric_limits<double>::infinity();
  expect(temp, "temperature", "temperature = inf: must be a finite number >= 0");
  EvalOptions top = ok;
  top.generate.top_p = 0;
  expect(top, "top_p", "top_p = 0: must be in (0, 1]");
}

}  // namespace
}  // namespace attune::eval

// --oracle: beside each row, the best and the worst single document of its top N. Here
// the profile commit on the example's topic has the gold as its title, so the best single
// document is a perfect answer wherever a row retrieved it, and a random row's value lies
// between its bounds.
TEST(Evaluate, OracleBoundsAreTheBestAndWorstSingleDocumentOfEachRow) {
  auto ds = dataset(12);
  auto task = tasks::make_task("commit_subject");
  retrieval::ProfileCandidates source(*task);
  auto reader = topic_reader();
  text::WhitespaceTokenizer tok;
  eval::EvalOptions o;
  o.retrievers = {"none", "random", "bm25"};
  o.k = 1;
  o.oracle_depth = 6;  // the whole profile
  o.run.progress = false;
  auto rep = eval::evaluate(ds, *task, source, reader, tok, o);
  ASSERT_EQ(rep.results.size(), 3u);
  for (const auto& res : rep.results) {
    ASSERT_TRUE(res.oracle.has_value()) << res.spec;
    EXPECT_EQ(res.oracle->depth, 6u);
    EXPECT_EQ(res.oracle->metric, "rouge-1");
    EXPECT_LE(res.oracle->worst, res.metrics.at("rouge-1")) << res.spec;
    EXPECT_GE(res.oracle->best, res.metrics.at("rouge-1")) << res.spec;
  }
  // none retrieves nothing: its bounds are its own value.
  EXPECT_DOUBLE_EQ(rep.results[0].oracle->best, rep.results[0].metrics.at("rouge-1"));
  EXPECT_DOUBLE_EQ(rep.results[0].oracle->worst, rep.results[0].metrics.at("rouge-1"));
  // bm25's top 6 is the whole profile: its best single document is the perfect answer.
  // random draws 6 with replacement (LaMP's random.choices), a subset: its bounds lie
  // within bm25's.
  EXPECT_DOUBLE_EQ(rep.results[2].oracle->best, 1.0);
  EXPECT_LT(rep.results[2].oracle->worst, 1.0);
  EXPECT_LE(rep.results[1].oracle->best, rep.results[2].oracle->best);
  EXPECT_GE(rep.results[1].oracle->worst, rep.results[2].oracle->worst);
  const auto table = eval::format_table(rep);
  EXPECT_NE(table.find("best1@6"), std::string::npos) << table;
  const auto j = nlohmann::json::parse(eval::to_json(rep));
  EXPECT_DOUBLE_EQ(j["oracle"]["bm25"]["best_single"].get<double>(), 1.0);
  EXPECT_FALSE(j["results"]["bm25"].contains("oracle"));  // results keep only the metrics
  // Without --oracle there are no bounds and no column.
  o.oracle_depth = 0;
  const auto plain = eval::evaluate(ds, *task, source, reader, tok, o);
  EXPECT_FALSE(plain.results[1].oracle.has_value());
  EXPECT_EQ(eval::format_table(plain).find("best1@"), std::string::npos);
  o.oracle_depth = 5000;
  EXPECT_THROW(o.validate(), UsageError);
}

// --oracle-orders: beside each row, the best and the worst order of its top k. With a reader
// that answers the first document's title (planted:first), an order's answer is the title
// of the document it puts first, so the best and the worst order are exactly the best and
// the worst single document of the top k (--oracle k), and every row lies between them.
TEST(Evaluate, TheBestOrderingOracleTriesEveryOrderOfTheTopK) {
  auto ds = dataset(12);
  auto task = tasks::make_task("commit_subject");
  retrieval::ProfileCandidates source(*task);
  llm::PlantedReader reader(llm::parse_planted_spec("planted:first"));
  text::WhitespaceTokenizer tok;
  eval::EvalOptions o;
  o.retrievers = {"none", "recency", "bm25"};
  o.k = 3;
  o.oracle_depth = 3;
  o.oracle_orders = true;
  o.run.progress = false;
  auto rep = eval::evaluate(ds, *task, source, reader, tok, o);
  ASSERT_EQ(rep.results.size(), 3u);
  for (const auto& res : rep.results) {
    ASSERT_TRUE(res.orders.has_value()) << res.spec;
    EXPECT_EQ(res.orders->k, 3u);
    EXPECT_LE(res.orders->worst, res.metrics.at("rouge-1") + 1e-12) << res.spec;
    EXPECT_GE(res.orders->best, res.metrics.at("rouge-1") - 1e-12) << res.spec;
    if (res.spec == "none") {
      EXPECT_EQ(res.orders->prompts, 0u);  // nothing to order: its own value
      EXPECT_DOUBLE_EQ(res.orders->best, res.metrics.at("rouge-1"));
      continue;
    }
    EXPECT_EQ(res.orders->prompts, 12u * 6u) << res.spec;  // 3! orders of each example's top 3
    EXPECT_NEAR(res.orders->best, res.oracle->best, 1e-12) << res.spec;
    EXPECT_NEAR(res.orders->worst, res.oracle->worst, 1e-12) << res.spec;
  }
  // recency's top 3 (the newest) never holds the topic's commit for the first three topics:
  // reordering cannot reach what bm25's top 3 holds.
  EXPECT_DOUBLE_EQ(rep.results[2].orders->best, 1.0);
  EXPECT_LT(rep.results[1].orders->best, 1.0);
  EXPECT_NE(eval::format_table(rep).find("best-order@3"), std::string::npos);
  const auto j = nlohmann::json::parse(eval::to_json(rep));
  EXPECT_DOUBLE_EQ(j["oracle_orders"]["bm25"]["best_order"].get<double>(), 1.0);
  EXPECT_EQ(j["oracle_orders"]["bm25"]["prompts"], 72);
  o.k = 1;
  EXPECT_THROW(o.validate(), UsageError);
  o.k = 6;
  EXPECT_THROW(o.validate(), UsageError);
}
