// LaMP reader and writer: what valid files give, one test per class of bad input, round trip.
#include <gtest/gtest.h>

#include "attune/data/dataset.h"
#include "test_util.h"

namespace attune::data {
namespace {

using test::expect_input_error;
using test::TempDir;

// Two questions; the second has a numeric item id, a numeric field and no date.
const char* kQuestions = R"([
 {"id": "q1", "input": "Generate a title for: cats", "profile": [
   {"id": "a1", "title": "Cats", "text": "about cats", "date": "2011-04-21"},
   {"id": "a2", "title": "Dogs", "text": "about dogs", "date": "2012-01-02"}]},
 {"id": "q2", "input": "Rate: \u00e9t\u00e9 ☀", "profile": [
   {"id": 17, "text": "fine", "score": 5},
   {"id": "b2", "text": "meh", "score": 2.5},
   {"id": "b3", "text": "ok", "score": 4.0}]}
])";
const char* kOutputs = R"({"task": "LaMP_4", "golds": [{"id": "q2", "output": "4"}, {"id": "q1", "output": "On cats"}]})";

TEST(LampRead, ReadsQuestionsAndOutputs) {
  TempDir dir;
  auto q = dir.write("dev_questions.json", kQuestions);
  auto o = dir.write("dev_outputs.json", kOutputs);
  Dataset ds = read_lamp(q, o, "lamp4", "dev");
  EXPECT_EQ(ds.task, "lamp4");
  EXPECT_EQ(ds.split, "dev");
  EXPECT_TRUE(ds.has_outputs);
  ASSERT_EQ(ds.sources.size(), 2u);
  EXPECT_EQ(ds.content_hash.size(), 32u);
  ASSERT_EQ(ds.examples.size(), 2u);

  const Example& a = ds.examples[0];
  EXPECT_EQ(a.id, "q1");
  EXPECT_EQ(a.user, "q1");
  EXPECT_EQ(a.output, "On cats");
  ASSERT_EQ(a.profile.size(), 2u);
  EXPECT_EQ(a.profile[0].id, "a1");
  EXPECT_EQ(a.profile[0].owner, "q1");
  EXPECT_EQ(a.profile[0].text, "");
  EXPECT_EQ(a.profile[0].date, "2011-04-21");
  EXPECT_EQ(a.profile[0].fields, (Fields{{"title", "Cats"}, {"text", "about cats"}}));

  const Example& b = ds.examples[1];
  EXPECT_EQ(b.input, "Rate: \xC3\xA9t\xC3\xA9 \xE2\x98\x80");
  EXPECT_EQ(b.output, "4");
  ASSERT_EQ(b.profile.size(), 3u);
  EXPECT_EQ(b.profile[0].id, "17");  // integer id -> its text
  EXPECT_EQ(b.profile[0].owner, "q2");
  EXPECT_FALSE(b.profile[0].date.has_value());
  EXPECT_EQ(*b.profile[0].field("score"), "5");
  EXPECT_EQ(*b.profile[1].field("score"), "2.5");
  EXPECT_EQ(*b.profile[2].field("score"), "4");  // integral number: no ".0"
}

TEST(LampRead, WithoutOutputs) {
  TempDir dir;
  auto q = dir.write("test_questions.json", kQuestions);
  Dataset ds = read_lamp(q, std::nullopt, "lamp4", "test");
  EXPECT_FALSE(ds.has_outputs);
  EXPECT_EQ(ds.sources.size(), 1u);
  EXPECT_EQ(ds.examples[0].output, "");
}

TEST(LampRead, ContentHashDependsOnBytesTaskAndSplit) {
  TempDir dir;
  auto q = dir.write("q.json", kQuestions);
  auto o = dir.write("o.json", kOutputs);
  std::string h = read_lamp(q, o, "lamp4", "dev").content_hash;
  EXPECT_EQ(read_lamp(q, o, "lamp4", "dev").content_hash, h);
  EXPECT_NE(read_lamp(q, o, "lamp4", "test").content_hash, h);
  EXPECT_NE(read_lamp(q, o, "lamp5", "dev").content_hash, h);
  EXPECT_NE(read_lamp(q, std::nullopt, "lamp4", "dev").content_hash, h);
  auto q2 = dir.write("q2.json", std::string(kQuestions) + "\n");
  EXPECT_NE(read_lamp(q2, o, "lamp4", "dev").content_hash, h);
}

TEST(LampRead, AcceptsByteOrderMark) {
  TempDir dir;
  auto q = dir.write("q.json", std::string("\xEF\xBB\xBF") + kQuestions);
  EXPECT_EQ(read_lamp(q, std::nullopt, "lamp4", "dev").examples.size(), 2u);
}

// ---- one test per class of bad input --------------------------------------------------

TEST(LampErrors, MissingFile) {
  TempDir dir;
  expect_input_error([&] { read_lamp(dir / "nope.json", std::nullopt, "t", "dev"); },
                     {"nope.json", "cannot open"});
}

TEST(LampErrors, NotJson) {
  TempDir dir;
  auto q = dir.write("notjson_questions.json", "id,input\nq1,hello\n");
  expect_input_error([&] { read_lamp(q, std::nullopt, "t", "dev"); },
                     {"notjson_questions.json", "not JSON", "line 1, column 1"});
}

TEST(LampErrors, EmptyFile) {
  TempDir dir;
  auto q = dir.write("empty_questions.json", "  \n");
  expect_input_error([&] { read_lamp(q, std::nullopt, "t", "dev"); }, {"empty_questions.json", "empty"});
}

TEST(LampErrors, SyntaxErrorNamesRecordFieldAndLine) {
  TempDir dir;
  // Record 1's profile[1].title is missing its closing quote's comma; line 4.
  auto q = dir.write("syntax_questions.json",
                     "[\n"
                     "{\"id\": \"q1\", \"input\": \"x\", \"profile\": []},\n"
                     "{\"id\": \"q7\", \"input\": \"y\", \"profile\": [{\"id\": \"a\", \"title\": \"t\"},\n"
                     "  {\"id\": \"b\", \"title\": \"t\" \"text\": \"u\"}]}\n"
                     "]\n");
  expect_input_error([&] { read_lamp(q, std::nullopt, "t", "dev"); },
                     {"syntax_questions.json", "record 1 (id \"q7\")", "profile[1].title", "JSON syntax error",
                      "line 4"});
}

TEST(LampErrors, TruncatedFile) {
  TempDir dir;
  auto q = dir.write("trunc_questions.json", "[{\"id\": \"q1\", \"input\": \"x\", \"profile\": [{\"id\": \"a\", \"te");
  expect_input_error([&] { read_lamp(q, std::nullopt, "t", "dev"); },
                     {"trunc_questions.json", "record 0 (id \"q1\")", "profile[0]", "JSON syntax error"});
}

TEST(LampErrors, InvalidUtf8) {
  TempDir dir;
  auto q = dir.write("utf8_questions.json",
                     "[{\"id\": \"q1\", \"input\": \"x\", \"profile\": [{\"id\": \"a\", \"title\": \"ok\"},\n"
                     "{\"id\": \"b\", \"title\": \"caf\xE9\"}]}]");
  expect_input_error([&] { read_lamp(q, std::nullopt, "t", "dev"); },
                     {"utf8_questions.json", "record 0 (id \"q1\")", "profile[1].title", "invalid UTF-8", "line 2"});
}

TEST(LampErrors, TopLevelOfWrongType) {
  TempDir dir;
  auto q = dir.write("obj_questions.json", R"({"questions": []})");
  expect_input_error([&] { read_lamp(q, std::nullopt, "t", "dev"); },
                     {"obj_questions.json", "expected a JSON array of questions", "got an object"});
  auto o = dir.write("arr_outputs.json", R"([{"id": "q1", "output": "x"}])");
  auto q2 = dir.write("ok_questions.json", R"([{"id": "q1", "input": "x", "profile": []}])");
  expect_input_error([&] { read_lamp(q2, o, "t", "dev"); }, {"arr_outputs.json", "got an array"});
}

TEST(LampErrors, RecordNotAnObject) {
  TempDir dir;
  auto q = dir.write("rec_questions.json", R"([{"id": "q1", "input": "x", "profile": []}, "q2"])");
  expect_input_error([&] { read_lamp(q, std::nullopt, "t", "dev"); }, {"rec_questions.json", "record 1", "a string"});
}

TEST(LampErrors, MissingField) {
  TempDir dir;
  auto q = dir.write("missing_questions.json",
                     R"([{"id": "q1", "input": "x", "profile": []}, {"id": "q2", "profile": []}])");
  expect_input_error([&] { read_lamp(q, std::nullopt, "t", "dev"); },
                     {"missing_questions.json", "record 1 (id \"q2\")", "field \"input\"", "missing"});
  auto q2 = dir.write("noid_questions.json", R"([{"id": "q1", "input": "x", "profile": [{"title": "t"}]}])");
  expect_input_error([&] { read_lamp(q2, std::nullopt, "t", "dev"); },
                     {"noid_questions.json", "record 0 (id \"q1\")", "field \"profile[0].id\"", "missing"});
  auto q3 = dir.write("noqid_questions.json", R"([{"input": "x", "profile": []}])");
  expect_input_error([&] { read_lamp(q3, std::nullopt, "t", "dev"); },
                     {"noqid_questions.json", "record 0", "field \"id\"", "missing"});
  auto q4 = dir.write("noprof_questions.json", R"([{"id": "q1", "input": "x"}])");
  expect_input_error([&] { read_lamp(q4, std::nullopt, "t", "dev"); },
                     {"noprof_questions.json", "record 0 (id \"q1\")", "field \"profile\"", "missing"});
}

TEST(LampErrors, MistypedField) {
  TempDir dir;
  auto q = dir.write("type_questions.json", R"([{"id": "q1", "input": 3, "profile": []}])");
  expect_input_error([&] { read_lamp(q, std::nullopt, "t", "dev"); },
                     {"type_questions.json", "record 0 (id \"q1\")", "field \"input\"", "expected a string",
                      "an integer"});
  auto q2 = dir.write("prof_questions.json", R"([{"id": "q1", "input": "x", "profile": {"id": "a"}}])");
  expect_input_error([&] { read_lamp(q2, std::nullopt, "t", "dev"); },
                     {"prof_questions.json", "field \"profile\"", "an object"});
  auto q3 = dir.write("qid_questions.json", R"([{"id": 1.5, "input": "x", "profile": []}])");
  expect_input_error([&] { read_lamp(q3, std::nullopt, "t", "dev"); }, {"qid_questions.json", "record 0", "\"id\""});
}

TEST(LampErrors, ProfileFieldNullObjectArrayOrBoolean) {
  TempDir dir;
  for (const std::string bad : {"null", "{\"a\": 1}", "[1]", "true"}) {
    auto q = dir.write("field_questions.json",
                       R"([{"id": "q1", "input": "x", "profile": [{"id": "a", "title": "t"}, {"id": "b", "title": )" +
                           bad + "}]}]");
    expect_input_error([&] { read_lamp(q, std::nullopt, "t", "dev"); },
                       {"field_questions.json", "record 0 (id \"q1\")", "field \"profile[1].title\"",
                        "expected a string or a number"});
  }
}

TEST(LampErrors, BadDate) {
  TempDir dir;
  for (const std::string bad : {"\"2011/04/21\"", "\"2011-13-01\"", "\"2011-4-21\"", "20110421"}) {
    auto q = dir.write("date_questions.json",
                       R"([{"id": "q1", "input": "x", "profile": [{"id": "a", "date": )" + bad + "}]}]");
    expect_input_error([&] { read_lamp(q, std::nullopt, "t", "dev"); },
                       {"date_questions.json", "record 0 (id \"q1\")", "field \"profile[0].date\"", "YYYY-MM-DD"});
  }
}

TEST(LampErrors, DuplicateQuestionId) {
  TempDir dir;
  auto q = dir.write("dup_questions.json",
                     R"([{"id": "q1", "input": "x", "profile": []}, {"id": "q2", "input": "x", "profile": []},
                         {"id": "q1", "input": "y", "profile": []}])");
  expect_input_error([&] { read_lamp(q, std::nullopt, "t", "dev"); },
                     {"dup_questions.json", "record 2 (id \"q1\")", "field \"id\"", "duplicate question id",
                      "record 0"});
}

TEST(LampErrors, DuplicateProfileItemId) {
  TempDir dir;
  auto q = dir.write("dupitem_questions.json",
                     R"([{"id": "q1", "input": "x", "profile": [{"id": "a"}, {"id": "b"}, {"id": "a"}]}])");
  expect_input_error([&] { read_lamp(q, std::nullopt, "t", "dev"); },
                     {"dupitem_questions.json", "record 0 (id \"q1\")", "field \"profile[2].id\"",
                      "duplicate profile item id", "profile[0]"});
  // The same item id in two different profiles is fine.
  auto ok = dir.write("ok_questions.json",
                      R"([{"id": "q1", "input": "x", "profile": [{"id": "a"}]},
                          {"id": "q2", "input": "x", "profile": [{"id": "a"}]}])");
  EXPECT_EQ(read_lamp(ok, std::nullopt, "t", "dev").examples.size(), 2u);
}

TEST(LampErrors, DuplicateGoldId) {
  TempDir dir;
  auto q = dir.write("q.json", kQuestions);
  auto o = dir.write("dupgold_outputs.json",
                     R"({"task": "x", "golds": [{"id": "q1", "output": "a"}, {"id": "q2", "output": "b"},
                                                {"id": "q1", "output": "c"}]})");
  expect_input_error([&] { read_lamp(q, o, "t", "dev"); },
                     {"dupgold_outputs.json", "golds[2] (id \"q1\")", "field \"id\"", "duplicate gold id", "golds[0]"});
}

TEST(LampErrors, GoldNotAQuestion) {
  TempDir dir;
  auto q = dir.write("q.json", kQuestions);
  auto o = dir.write("stray_outputs.json",
                     R"({"task": "x", "golds": [{"id": "q1", "output": "a"}, {"id": "q9", "output": "b"}]})");
  expect_input_error([&] { read_lamp(q, o, "t", "dev"); },
                     {"stray_outputs.json", "golds[1] (id \"q9\")", "field \"id\"", "no question with this id",
                      "q.json"});
}

TEST(LampErrors, QuestionWithoutGold) {
  TempDir dir;
  auto q = dir.write("nogold_questions.json", kQuestions);
  auto o = dir.write("nogold_outputs.json", R"({"task": "x", "golds": [{"id": "q1", "output": "a"}]})");
  expect_input_error([&] { read_lamp(q, o, "t", "dev"); },
                     {"nogold_questions.json", "record 1 (id \"q2\")", "field \"id\"", "no gold output",
                      "nogold_outputs.json"});
}

TEST(LampErrors, OutputsMissingOrMistypedField) {
  TempDir dir;
  auto q = dir.write("q.json", kQuestions);
  auto o = dir.write("notask_outputs.json", R"({"golds": []})");
  expect_input_error([&] { read_lamp(q, o, "t", "dev"); }, {"notask_outputs.json", "field \"task\"", "missing"});
  auto o2 = dir.write("badout_outputs.json",
                      R"({"task": "x", "golds": [{"id": "q1", "output": "a"}, {"id": "q2", "output": null}]})");
  expect_input_error([&] { read_lamp(q, o2, "t", "dev"); },
                     {"badout_outputs.json", "golds[1] (id \"q2\")", "field \"output\"", "null"});
  auto o3 = dir.write("syntax_outputs.json", R"({"task": "x", "golds": [{"id": "q1", "output": "a"}, {"id": "q2" "output": "b"}]})");
  expect_input_error([&] { read_lamp(q, o3, "t", "dev"); },
                     {"syntax_outputs.json", "golds[1] (id \"q2\")", "JSON syntax error"});
}

// ---- writer ------------------------------------------------------------------------------

TEST(LampWrite, RoundTrip) {
  TempDir dir;
  Dataset ds = read_lamp(dir.write("q.json", kQuestions), dir.write("o.json", kOutputs), "lamp4", "dev");
  write_lamp(ds, dir / "out_questions.json", dir / "out_outputs.json");
  Dataset back = read_lamp(dir / "out_questions.json", dir / "out_outputs.json", "lamp4", "dev");
  EXPECT_TRUE(back.has_outputs);
  ASSERT_EQ(back.examples.size(), ds.examples.size());
  for (std::size_t i = 0; i < ds.examples.size(); ++i) test::expect_same_example(ds.examples[i], back.examples[i]);
  // Writing what was read gives the same bytes again (stable output).
  write_lamp(back, dir / "again_questions.json", dir / "again_outputs.json");
  EXPECT_EQ(read_lamp(dir / "again_questions.json", dir / "again_outputs.json", "lamp4", "dev").content_hash,
            back.content_hash);
}

TEST(LampWrite, RoundTripOfBuiltDataset) {
  Dataset ds;
  ds.task = "commit_subject";
  ds.split = "train";
  ds.has_outputs = true;
  for (int i = 0; i < 3; ++i) {
    Example ex;
    ex.id = "q" + std::to_string(i);
    ex.user = ex.id;
    ex.input = "line one\nline \"two\"\t\xE2\x80\x94 " + std::to_string(i);
    ex.output = "out " + std::to_string(i);
    for (int j = 0; j < i + 1; ++j) {
      Document d;
      d.id = "d" + std::to_string(j);
      d.owner = ex.user;
      d.fields = {{"title", "T\xC3\xBC" + std::to_string(j)}, {"text", "x\\y"}};
      if (j % 2 == 0) d.date = "2020-01-0" + std::to_string(j + 1);
      ex.profile.push_back(d);
    }
    ds.examples.push_back(ex);
  }
  TempDir dir;
  write_lamp(ds, dir / "q.json", dir / "o.json");
  Dataset back = read_lamp(dir / "q.json", dir / "o.json", "commit_subject", "train");
  ASSERT_EQ(back.examples.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) test::expect_same_example(ds.examples[i], back.examples[i]);
}

TEST(LampWrite, WithoutOutputsWritesOnlyQuestions) {
  TempDir dir;
  Dataset ds = read_lamp(dir.write("q.json", kQuestions), std::nullopt, "lamp4", "test");
  write_lamp(ds, dir / "w_questions.json", dir / "w_outputs.json");
  EXPECT_TRUE(std::filesystem::exists(dir / "w_questions.json"));
  EXPECT_FALSE(std::filesystem::exists(dir / "w_outputs.json"));
}

TEST(LampWrite, ReservedFieldNameIsAnError) {
  Dataset ds;
  Example ex;
  ex.id = "q";
  Document d;
  d.id = "a";
  d.fields = {{"date", "x"}};
  ex.profile.push_back(d);
  ds.examples.push_back(ex);
  TempDir dir;
  EXPECT_THROW(write_lamp(ds, dir / "q.json", dir / "o.json"), Error);
}

}  // namespace
}  // namespace attune::data
