// What `attune metrics` and the label and gold_doc checks read: a LaMP outputs file alone,
// predictions JSONL, a label list, and gold_doc ids against a corpus; where each gold was read.
#include <gtest/gtest.h>

#include "attune/data/golds.h"
#include "test_util.h"

namespace attune::data {
namespace {

using test::expect_input_error;
using test::TempDir;

TEST(Golds, IntegerIdsAndNumericOutputsAreRead) {
  TempDir dir;
  auto f = dir.write("dev_outputs.json",
                     R"({"task": "LaMP_3", "golds": [{"id": 7, "output": 4}, {"id": "q8", "output": 2.5}]})");
  auto ds = read_golds(f, "lamp3", "dev");
  ASSERT_EQ(ds.examples.size(), 2u);
  EXPECT_EQ(ds.examples[0].id, "7");
  EXPECT_EQ(ds.examples[0].output, "4");
  EXPECT_EQ(ds.examples[1].output, "2.5");
  EXPECT_EQ(gold_place(ds, 1).file, f.string());
  EXPECT_EQ(gold_place(ds, 1).record, "golds[1] (id \"q8\")");
}

TEST(Golds, DuplicateIdIsAnError) {
  TempDir dir;
  auto f = dir.write("dev_outputs.json",
                     R"({"task": "t", "golds": [{"id": "a", "output": "x"}, {"id": "b", "output": "y"}, {"id": "a", "output": "x"}]})");
  expect_input_error([&] { read_golds(f, "t", "dev"); },
                     {"dev_outputs.json", "golds[2] (id \"a\")", "field \"id\"", "duplicate gold id (first at golds[0])"});
}

TEST(Golds, LampReaderRecordsWhereEachGoldWasRead) {
  TempDir dir;
  auto q = dir.write("q.json", R"([{"id": "a", "input": "x", "profile": []}, {"id": "b", "input": "y", "profile": []}])");
  auto o = dir.write("o.json", R"({"task": "t", "golds": [{"id": "b", "output": "1"}, {"id": "a", "output": "2"}]})");
  auto ds = read_lamp(q, o, "t", "dev");
  EXPECT_EQ(gold_place(ds, 0).file, o.string());
  EXPECT_EQ(gold_place(ds, 0).record, "golds[1] (id \"a\")");
  EXPECT_EQ(gold_place(ds, 1).record, "golds[0] (id \"b\")");
  ds.sources.clear();  // not from a file: the example by its id
  EXPECT_EQ(gold_place(ds, 1).file, "t dev");
  EXPECT_EQ(gold_place(ds, 1).record, "example \"b\"");
}

TEST(Predictions, IntegerIdsNumericOutputsAndDuplicates) {
  TempDir dir;
  auto f = dir.write("p.jsonl", "{\"id\": 7, \"output\": 4}\n\n{\"id\": \"q8\", \"output\": \"x\"}\n");
  auto p = read_predictions(f);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].id, "7");
  EXPECT_EQ(p[0].output, "4");
  EXPECT_EQ(p[1].record, "line 3 (id \"q8\")");
  auto dup = dir.write("d.jsonl", "{\"id\": \"a\", \"output\": \"x\"}\n{\"id\": \"a\", \"output\": \"y\"}\n");
  expect_input_error([&] { read_predictions(dup); }, {"d.jsonl", "line 2 (id \"a\")", "duplicate id (first on line 1)"});
  auto bad = dir.write("b.jsonl", "{\"id\": \"a\", \"output\": null}\n");
  expect_input_error([&] { read_predictions(bad); }, {"b.jsonl", "line 1 (id \"a\")", "field \"output\""});
}

TEST(LabelList, ReadsStrippedDistinctLabels) {
  TempDir dir;
  EXPECT_EQ(read_label_list(dir.write("l.json", R"([" refs ", "gitk", 5])")),
            (std::vector<std::string>{"refs", "gitk", "5"}));
  expect_input_error([&] { read_label_list(dir.write("e.json", "[]")); }, {"e.json", "no labels"});
  expect_input_error([&] { read_label_list(dir.write("o.json", "{}")); }, {"o.json", "expected a JSON array of labels"});
  expect_input_error([&] { read_label_list(dir.write("d.json", R"(["a", "b", "a "])")); },
                     {"d.json", "record 2", "duplicate label \"a\" (first at record 0)"});
  expect_input_error([&] { read_label_list(dir.write("n.json", R"(["a", null])")); }, {"n.json", "record 1", "got null"});
  expect_input_error([&] { read_label_list(dir.write("s.json", R"(["a", "  "])")); }, {"s.json", "record 1", "empty label"});
}

TEST(GoldDocs, AGoldDocNotInTheCorpusNamesTheExampleAndTheId) {
  TempDir dir;
  auto corpus_file = dir.write("c_corpus.jsonl", "{\"id\": \"p1\", \"title\": \"t\", \"text\": \"x\"}\n");
  auto qa = dir.write("qa_dev.jsonl",
                      "{\"id\": \"q1\", \"input\": \"i\", \"output\": \"o\", \"gold_doc\": \"p1\"}\n"
                      "\n"
                      "{\"id\": \"q2\", \"input\": \"i\", \"output\": \"o\", \"gold_doc\": [\"p1\", \"p9\"]}\n");
  auto corpus = read_corpus_jsonl(corpus_file);
  auto ds = read_qa_jsonl(qa, "qa", "dev");
  expect_input_error([&] { check_gold_docs(ds, corpus, corpus_file); },
                     {"qa_dev.jsonl", "line 3 (id \"q2\")", "field \"gold_doc[1]\"", "no passage with id \"p9\"",
                      "c_corpus.jsonl"});
  ds.examples[1].gold_docs = {"p1"};
  EXPECT_NO_THROW(check_gold_docs(ds, corpus, corpus_file));
}

}  // namespace
}  // namespace attune::data
