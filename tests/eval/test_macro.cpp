// Several agents' evaluations side by side (paper 002's Table 1): the macro average of each
// row's primary metric, significance on the pooled examples, and what it refuses.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "attune/core/error.h"
#include "attune/eval/evaluate.h"

namespace attune::eval {
namespace {

// A report of one row per (spec, per-example values) on `metric`.
EvalReport report(const std::string& metric, bool higher, const std::string& test,
                  const std::vector<std::pair<std::string, std::vector<double>>>& rows) {
  EvalReport r;
  r.metrics = {{metric, higher, test}};
  for (const auto& [spec, values] : rows) {
    RetrieverResult res;
    res.spec = spec;
    double sum = 0;
    for (std::size_t i = 0; i < values.size(); ++i) {
      res.examples.push_back({"q" + std::to_string(i), "", {{metric, values[i]}}, {}, ""});
      sum += values[i];
    }
    res.metrics[metric] = sum / static_cast<double>(values.size());
    r.results.push_back(std::move(res));
    r.examples = values.size();
  }
  return r;
}

TEST(Macro, AveragesEachRowOverAgentsAndTestsOnThePooledExamples) {
  // Agent 1 (EM): the reranker is right on 14 of 20 where BM25 is on 6; agent 2 (accuracy):
  // 16 against 12. Each agent's rows are named with its own fields.
  std::vector<double> bm1(20, 0), ium1(20, 0), bm2(20, 0), ium2(20, 0);
  for (int i = 0; i < 6; ++i) bm1[i] = 1;
  for (int i = 0; i < 14; ++i) ium1[i] = 1;
  for (int i = 0; i < 12; ++i) bm2[i] = 1;
  for (int i = 0; i < 16; ++i) ium2[i] = 1;
  std::vector<AgentReport> agents = {
      {"qa-a", report("exact_match", true, "mcnemar", {{"bm25", bm1}, {"ium:D?task=qa&model=a", ium1}}), {"bm25", "ium:D?task=qa&model=a"}},
      {"slot-b", report("accuracy", true, "mcnemar", {{"bm25", bm2}, {"ium:D?task=slot&model=b", ium2}}), {"bm25", "ium:D?task=slot&model=b"}}};
  const auto m = macro_average(agents, {"bm25", "ium:D?task={task}&model={llm}"});
  EXPECT_EQ(m.agents, (std::vector<std::string>{"qa-a", "slot-b"}));
  EXPECT_EQ(m.metrics, (std::vector<std::string>{"exact_match", "accuracy"}));
  EXPECT_EQ(m.test, "mcnemar");
  EXPECT_EQ(m.examples, 40u);
  ASSERT_EQ(m.rows.size(), 2u);
  EXPECT_DOUBLE_EQ(m.rows[0].macro, (0.3 + 0.6) / 2);
  EXPECT_DOUBLE_EQ(m.rows[1].macro, (0.7 + 0.8) / 2);
  EXPECT_EQ(m.rows[1].per_agent, (std::vector<double>{0.7, 0.8}));
  // Pooled: 12 discordant pairs, all for the reranker: exact McNemar p = 2 / 2^12.
  const auto it = std::find_if(m.comparisons.begin(), m.comparisons.end(), [](const Comparison& c) { return c.a == "ium:D?task={task}&model={llm}"; });
  ASSERT_NE(it, m.comparisons.end());
  EXPECT_TRUE(it->a_better);
  EXPECT_NEAR(it->p_value, 2.0 / 4096, 1e-12);
  const auto table = format_macro_table(m);
  EXPECT_NE(table.find("0.7500 a"), std::string::npos) << table;
  EXPECT_NE(table.find("40 examples pooled"), std::string::npos) << table;
  const auto j = nlohmann::json::parse(macro_to_json(m, agents));
  EXPECT_DOUBLE_EQ(j["macro"]["rows"]["bm25"]["macro"].get<double>(), 0.45);
  EXPECT_DOUBLE_EQ(j["macro"]["rows"]["bm25"]["agents"]["slot-b"].get<double>(), 0.6);
  EXPECT_EQ(j["agents"][1]["agent"], "slot-b");
  EXPECT_TRUE(j["macro"]["significance"]["ium:D?task={task}&model={llm}"]["bm25"]["better"].get<bool>());

  // A continuous primary metric among them: the paired t-test.
  agents[1].report = report("rouge-1", true, "paired-t", {{"bm25", bm2}, {"ium:D?task=slot&model=b", ium2}});
  EXPECT_EQ(macro_average(agents, {"bm25", "x"}).test, "paired-t");
}

TEST(Macro, RefusesWhatItCannotAverage) {
  const std::vector<double> v = {0, 1, 1};
  const AgentReport em{"a", report("exact_match", true, "mcnemar", {{"bm25", v}}), {"bm25"}};
  const AgentReport mae{"b", report("mae", false, "paired-t", {{"bm25", v}}), {"bm25"}};
  EXPECT_THROW(macro_average({}, {"bm25"}), UsageError);
  try {
    macro_average({em, mae}, {"bm25"});
    FAIL() << "averaged a metric better higher with one better lower";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("mean nothing"), std::string::npos) << e.what();
  }
  const AgentReport missing{"c", report("exact_match", true, "mcnemar", {{"bm25", v}}), {"dense:X"}};
  EXPECT_THROW(macro_average({em, missing}, {"bm25"}), UsageError);
}

}  // namespace
}  // namespace attune::eval
