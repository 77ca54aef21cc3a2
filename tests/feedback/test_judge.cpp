// LLM-judged labels (LUF): the reply parser accepts exactly the documented format and names
// what is wrong otherwise; multi-level judging stops at the first relevant group and reads
// fewer words than judging every document, with the same first relevant rank; malformed
// replies are asked again, then counted as failures and never labelled.
#include <gtest/gtest.h>

#include "attune/core/error.h"
#include "attune/feedback/judge.h"

namespace attune::feedback {
namespace {

TEST(JudgeParser, ReadsTheDocumentedFormatInAnyOrderAndCase) {
  const auto p = parse_judgements("  [2] relevant 0.25\n\n[1] ANSWER \n[3] Irrelevant\n", 3);
  ASSERT_TRUE(p.judgements) << p.error;
  const auto& j = *p.judgements;
  EXPECT_EQ(j[0].label, JudgeLabel::Answer);
  EXPECT_EQ(j[0].score, 1.0);
  EXPECT_EQ(j[1].label, JudgeLabel::Relevant);
  EXPECT_EQ(j[1].score, 0.25);
  EXPECT_EQ(j[2].label, JudgeLabel::Irrelevant);
  EXPECT_EQ(j[2].score, 0.0);
}

TEST(JudgeParser, RefusesEveryMalformedReplyAndSaysWhy) {
  struct Case {
    const char* reply;
    std::size_t n;
    const char* why;
  };
  for (const Case& c : std::initializer_list<Case>{
           {"[1] ANSWER", 2, "document 2 is not judged"},
           {"[1] ANSWER\n[1] IRRELEVANT", 1, "judged twice"},
           {"[3] ANSWER", 2, "must be 1 to 2"},
           {"[0] ANSWER", 1, "must be 1 to 1"},
           {"[x] ANSWER", 1, "must be 1 to 1"},
           {"1. ANSWER", 1, "does not start with [N]"},
           {"[1 ANSWER", 1, "no closing ]"},
           {"[1]", 1, "no label"},
           {"[1] RELEVANT", 1, "expected ANSWER, RELEVANT SCORE or IRRELEVANT"},
           {"[1] RELEVANT 1.5", 1, "from 0 to 1"},
           {"[1] RELEVANT nan", 1, "from 0 to 1"},
           {"[1] RELEVANT 0.5x", 1, "from 0 to 1"},
           {"[1] ANSWER because it says so", 1, "expected ANSWER"},
           {"[1] maybe", 1, "expected ANSWER"},
           {"The first document is useful.", 1, "does not start with [N]"},
           {"", 1, "document 1 is not judged"},
       }) {
    const auto p = parse_judgements(c.reply, c.n);
    EXPECT_FALSE(p.judgements) << c.reply;
    EXPECT_NE(p.error.find(c.why), std::string::npos) << c.reply << " -> " << p.error;
  }
}

TEST(PlantedJudge, LabelsByItsPlantedRuleAndSpecsAreChecked) {
  PlantedJudge judge(parse_planted_judge_spec("planted:judge?word=fix"));
  const std::vector<std::string> docs{"a fix for the parser", "the parser crashes on empty keys", "release notes",
                                      "two\nlines about parser keys"};
  const auto reply = judge.reply(judge_prompt("why does the parser crash on empty keys?", docs));
  // Question words of 4+ letters: why? no (3); does, parser, crash, empty, keys.
  const auto p = parse_judgements(reply, docs.size());
  ASSERT_TRUE(p.judgements) << reply;
  EXPECT_EQ((*p.judgements)[0].label, JudgeLabel::Answer);
  EXPECT_EQ((*p.judgements)[1].label, JudgeLabel::Relevant);
  EXPECT_DOUBLE_EQ((*p.judgements)[1].score, 0.6);  // parser, empty, keys of does, parser, crash, empty, keys
  EXPECT_EQ((*p.judgements)[2].label, JudgeLabel::Irrelevant);
  EXPECT_EQ((*p.judgements)[3].label, JudgeLabel::Relevant);  // a newline in a document stays on its line
  EXPECT_DOUBLE_EQ((*p.judgements)[3].score, 0.4);
  EXPECT_THROW(parse_planted_judge_spec("planted:judge?word=Fix"), UsageError);
  EXPECT_THROW(parse_planted_judge_spec("planted:judge?malformed=sometimes"), UsageError);
  EXPECT_THROW(parse_planted_judge_spec("planted:judge?color=red"), UsageError);
  EXPECT_THROW(parse_planted_judge_spec("planted:judgement"), UsageError);
  for (const char* bad : {"planted:judge?answer_at=0", "planted:judge?answer_at=1.5", "planted:judge?answer_at=x",
                          "planted:judge?answer_at="})
    EXPECT_THROW(parse_planted_judge_spec(bad), UsageError) << bad;

  // answer_at: ANSWER from the share of the question's words a document holds; the word rule
  // is off unless word= is given too, and the model id names the rule (the cache keys on it).
  PlantedJudge reader(parse_planted_judge_spec("planted:judge?answer_at=0.6"));
  const std::vector<std::string> docs2{"a test for the parser", "the parser crashes on empty keys", "parser keys"};
  const auto p2 = parse_judgements(reader.reply(judge_prompt("why does the parser crash on empty keys?", docs2)), 3);
  ASSERT_TRUE(p2.judgements);
  EXPECT_EQ((*p2.judgements)[0].label, JudgeLabel::Relevant);  // "test" is no longer the answer
  EXPECT_EQ((*p2.judgements)[1].label, JudgeLabel::Answer);    // 3 of 5: 0.6
  EXPECT_EQ((*p2.judgements)[2].label, JudgeLabel::Relevant);  // 2 of 5
  EXPECT_NE(reader.info().id, judge.info().id);
  PlantedJudge both(parse_planted_judge_spec("planted:judge?answer_at=0.6&word=test"));
  const auto p3 = parse_judgements(both.reply(judge_prompt("why does the parser crash on empty keys?", docs2)), 3);
  ASSERT_TRUE(p3.judgements);
  EXPECT_EQ((*p3.judgements)[0].label, JudgeLabel::Answer);
}

// Ten ranked documents, the only "answer" at rank 5 (index 4), two relevant ones later.
std::vector<std::string> ranking() {
  return {"release notes", "bump the version", "update the changelog", "rename a variable", "add a test for keys",
          "style fixes",   "keys of the parser", "more docs",          "the parser again",  "empty keys crash"};
}

TEST(Judge, MultiLevelStopsAtTheFirstRelevantGroupAndReadsLessThanJudgingEveryDocument) {
  const std::string q = "the parser rejects empty keys";  // words: parser, rejects, empty, keys
  const std::vector<std::string> questions{q};
  const std::vector<std::vector<std::string>> docs{ranking()};
  PlantedJudge model(parse_planted_judge_spec("planted:judge?word=test"));

  Judge multi(model);
  const auto m = multi.judge(questions, docs);
  // Groups 1, 1, 2, 4: ranks 0 | 1 | 2-3 | 4-7; rank 4 holds "test", so the search stops there.
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].first_relevant, std::optional<std::size_t>(4));
  EXPECT_EQ(m[0].judged, 8u);
  EXPECT_EQ(multi.counters().calls, 4u);
  for (std::size_t i = 0; i < 8; ++i) EXPECT_TRUE(m[0].docs[i].has_value()) << i;
  for (std::size_t i = 8; i < 10; ++i) EXPECT_FALSE(m[0].docs[i].has_value()) << i;
  EXPECT_EQ(m[0].docs[4]->label, JudgeLabel::Answer);
  EXPECT_EQ(m[0].docs[6]->label, JudgeLabel::Relevant);

  Judge every(model, exhaustive_judging());
  const auto e = every.judge(questions, docs);
  EXPECT_EQ(e[0].judged, 10u);
  EXPECT_EQ(every.counters().calls, 10u);
  EXPECT_EQ(e[0].first_relevant, m[0].first_relevant);  // the same first relevant rank
  for (std::size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(e[0].docs[i]->label, m[0].docs[i]->label) << i;  // a document's label does not depend on its group
    EXPECT_EQ(e[0].docs[i]->score, m[0].docs[i]->score) << i;
  }
  EXPECT_LT(multi.counters().prompt_words + multi.counters().reply_words,
            every.counters().prompt_words + every.counters().reply_words);
}

TEST(Judge, ManyQuestionsGoToTheModelTogetherLevelByLevel) {
  struct Counting final : llm::LanguageModel {
    PlantedJudge inner{parse_planted_judge_spec("planted:judge?word=test")};
    std::size_t generate_calls = 0;
    std::vector<llm::Generation> generate(std::span<const llm::Prompt> p, const llm::GenerateOptions& o) override {
      ++generate_calls;
      return inner.generate(p, o);
    }
    std::vector<double> score(std::span<const llm::ScoreRequest> r) override { return inner.score(r); }
    llm::ModelInfo info() const override { return inner.info(); }
  } model;
  std::vector<std::string> questions(5, "the parser rejects empty keys");
  std::vector<std::vector<std::string>> docs(5, ranking());
  docs[1] = {"add a test"};  // stops at the first level
  docs[2] = {};              // nothing to judge
  Judge judge(model);
  const auto r = judge.judge(questions, docs);
  EXPECT_EQ(model.generate_calls, 4u);  // one call a level, not one a question
  EXPECT_EQ(r[1].first_relevant, std::optional<std::size_t>(0));
  EXPECT_EQ(r[2].judged, 0u);
  EXPECT_FALSE(r[2].first_relevant);
  EXPECT_EQ(judge.counters().calls, 3u * 4u + 1u);
}

TEST(Judge, AMalformedReplyIsAskedAgainAndAfterTheRetriesCountedNeverGuessed) {
  const std::vector<std::string> questions{"the parser rejects empty keys"};
  const std::vector<std::vector<std::string>> docs{ranking()};
  PlantedJudge clean(parse_planted_judge_spec("planted:judge"));
  PlantedJudge first(parse_planted_judge_spec("planted:judge?malformed=first"));
  PlantedJudge always(parse_planted_judge_spec("planted:judge?malformed=always"));

  Judge a(clean), b(first);
  const auto ra = a.judge(questions, docs), rb = b.judge(questions, docs);
  EXPECT_EQ(rb[0].judged, ra[0].judged);
  EXPECT_EQ(rb[0].first_relevant, ra[0].first_relevant);
  EXPECT_EQ(b.counters().calls, 2 * a.counters().calls);  // each group asked twice
  EXPECT_EQ(b.counters().retries, a.counters().calls);
  EXPECT_EQ(b.counters().failed_groups, 0u);

  JudgeOptions o;
  o.retries = 2;
  Judge c(always, o);
  const auto rc = c.judge(questions, docs);
  EXPECT_EQ(rc[0].judged, 0u);
  EXPECT_FALSE(rc[0].first_relevant);
  for (std::size_t i = 0; i < docs[0].size(); ++i) {
    EXPECT_FALSE(rc[0].docs[i].has_value()) << i;  // never guessed
    EXPECT_TRUE(rc[0].failed[i]) << i;              // every level was tried, none could be read
  }
  EXPECT_EQ(c.counters().failed_documents, docs[0].size());
  EXPECT_EQ(c.counters().failed_groups, 5u);  // groups 1, 1, 2, 4, then the last 2 documents
  EXPECT_EQ(c.counters().calls, 5u * 3u);     // each asked once and retried twice
}

TEST(Judge, BadOptionsAndMismatchedInputsAreRefused) {
  PlantedJudge model;
  JudgeOptions o;
  o.groups = {};
  EXPECT_THROW(Judge(model, o), UsageError);
  o.groups = {1, 0};
  EXPECT_THROW(Judge(model, o), UsageError);
  Judge j(model);
  const std::vector<std::string> qs{"a", "b"};
  const std::vector<std::vector<std::string>> ds{{"x"}};
  EXPECT_THROW(j.judge(qs, ds), UsageError);
}

}  // namespace
}  // namespace attune::feedback
