// Corpus JSONL and QA JSONL readers.
#include <gtest/gtest.h>

#include "attune/data/dataset.h"
#include "test_util.h"

namespace attune::data {
namespace {

using test::expect_input_error;
using test::TempDir;

TEST(CorpusJsonl, ReadsPassages) {
  TempDir dir;
  auto f = dir.write("x_corpus.jsonl",
                     "{\"id\": \"0ad\", \"title\": \"0ad\", \"text\": \"Section: games. A game.\", \"extra\": [1]}\n"
                     "\n"
                     "   \r\n"
                     "{\"id\": \"vim\", \"title\": \"vim\", \"text\": \"Section: editors. \\u00e9\"}\r\n"
                     "{\"id\": 42, \"title\": \"t\", \"text\": \"\"}");  // no final newline
  auto docs = read_corpus_jsonl(f);
  ASSERT_EQ(docs.size(), 3u);
  EXPECT_EQ(docs[0].id, "0ad");
  EXPECT_EQ(docs[0].owner, "");
  EXPECT_EQ(docs[0].text, "");
  EXPECT_EQ(docs[0].fields, (Fields{{"title", "0ad"}, {"text", "Section: games. A game."}}));
  EXPECT_FALSE(docs[0].date.has_value());
  EXPECT_EQ(*docs[1].field("text"), "Section: editors. \xC3\xA9");
  EXPECT_EQ(docs[2].id, "42");
}

TEST(CorpusJsonl, EmptyFileIsAnEmptyCorpus) {
  TempDir dir;
  EXPECT_TRUE(read_corpus_jsonl(dir.write("e_corpus.jsonl", "")).empty());
}

TEST(CorpusJsonlErrors, MissingFile) {
  TempDir dir;
  expect_input_error([&] { read_corpus_jsonl(dir / "none_corpus.jsonl"); }, {"none_corpus.jsonl", "cannot open"});
}

TEST(CorpusJsonlErrors, SyntaxError) {
  TempDir dir;
  auto f = dir.write("syn_corpus.jsonl",
                     "{\"id\": \"a\", \"title\": \"a\", \"text\": \"x\"}\n"
                     "\n"
                     "{\"id\": \"b\", \"title\": \"b\" \"text\": \"x\"}\n");
  expect_input_error([&] { read_corpus_jsonl(f); },
                     {"syn_corpus.jsonl", "line 3", "field \"title\"", "JSON syntax error", "line 3, column"});
}

TEST(CorpusJsonlErrors, NotJson) {
  TempDir dir;
  auto f = dir.write("nj_corpus.jsonl", "id\ttitle\ttext\n");
  expect_input_error([&] { read_corpus_jsonl(f); }, {"nj_corpus.jsonl", "line 1", "not JSON"});
}

TEST(CorpusJsonlErrors, InvalidUtf8) {
  TempDir dir;
  auto f = dir.write("u_corpus.jsonl",
                     "{\"id\": \"a\", \"title\": \"a\", \"text\": \"x\"}\n"
                     "{\"id\": \"b\", \"title\": \"b\", \"text\": \"bad \xC3\x28 byte\"}\n");
  expect_input_error([&] { read_corpus_jsonl(f); },
                     {"u_corpus.jsonl", "line 2 (id \"b\")", "field \"text\"", "invalid UTF-8", "line 2, column 40"});
}

TEST(CorpusJsonlErrors, LineNotAnObject) {
  TempDir dir;
  auto f = dir.write("arr_corpus.jsonl", "[\"a\", \"b\"]\n");
  expect_input_error([&] { read_corpus_jsonl(f); }, {"arr_corpus.jsonl", "line 1", "expected a JSON object"});
}

TEST(CorpusJsonlErrors, MissingField) {
  TempDir dir;
  auto f = dir.write("m_corpus.jsonl",
                     "{\"id\": \"a\", \"title\": \"a\", \"text\": \"x\"}\n"
                     "{\"id\": \"b\", \"text\": \"x\"}\n");
  expect_input_error([&] { read_corpus_jsonl(f); }, {"m_corpus.jsonl", "line 2 (id \"b\")", "field \"title\"", "missing"});
  auto g = dir.write("n_corpus.jsonl", "{\"title\": \"a\", \"text\": \"x\"}\n");
  expect_input_error([&] { read_corpus_jsonl(g); }, {"n_corpus.jsonl", "line 1", "field \"id\"", "missing"});
}

TEST(CorpusJsonlErrors, MistypedField) {
  TempDir dir;
  auto f = dir.write("t_corpus.jsonl", "{\"id\": \"a\", \"title\": \"a\", \"text\": [\"x\"]}\n");
  expect_input_error([&] { read_corpus_jsonl(f); },
                     {"t_corpus.jsonl", "line 1 (id \"a\")", "field \"text\"", "expected a string, got an array"});
}

TEST(CorpusJsonlErrors, DuplicateId) {
  TempDir dir;
  auto f = dir.write("d_corpus.jsonl",
                     "{\"id\": \"a\", \"title\": \"a\", \"text\": \"x\"}\n"
                     "{\"id\": \"b\", \"title\": \"b\", \"text\": \"x\"}\n"
                     "{\"id\": \"a\", \"title\": \"c\", \"text\": \"x\"}\n");
  expect_input_error([&] { read_corpus_jsonl(f); },
                     {"d_corpus.jsonl", "line 3 (id \"a\")", "field \"id\"", "duplicate id", "first on line 1"});
}

TEST(QaJsonl, ReadsExamples) {
  TempDir dir;
  auto f = dir.write("qa_dev.jsonl",
                     "{\"id\": \"qa-1\", \"input\": \"Which?\", \"output\": \"vim\", \"gold_doc\": \"vim\"}\n"
                     "{\"id\": \"qa-2\", \"input\": \"Which 2?\", \"output\": \"a\", \"gold_doc\": [\"a\", \"b\"]}\n"
                     "{\"id\": \"qa-3\", \"input\": \"Which 3?\", \"output\": \"c\"}\n");
  Dataset ds = read_qa_jsonl(f, "qa", "dev");
  EXPECT_EQ(ds.task, "qa");
  EXPECT_EQ(ds.split, "dev");
  EXPECT_TRUE(ds.has_outputs);
  EXPECT_EQ(ds.content_hash.size(), 32u);
  ASSERT_EQ(ds.sources.size(), 1u);
  ASSERT_EQ(ds.examples.size(), 3u);
  EXPECT_EQ(ds.examples[0].id, "qa-1");
  EXPECT_EQ(ds.examples[0].user, "qa-1");
  EXPECT_EQ(ds.examples[0].input, "Which?");
  EXPECT_EQ(ds.examples[0].output, "vim");
  EXPECT_EQ(ds.examples[0].gold_docs, (std::vector<DocId>{"vim"}));
  EXPECT_TRUE(ds.examples[0].profile.empty());
  EXPECT_EQ(ds.examples[1].gold_docs, (std::vector<DocId>{"a", "b"}));
  EXPECT_TRUE(ds.examples[2].gold_docs.empty());
}

TEST(QaJsonlErrors, SyntaxError) {
  TempDir dir;
  auto f = dir.write("s_dev.jsonl", "{\"id\": \"qa-1\", \"input\": \"x\", \"output\": \"y\"\n");
  expect_input_error([&] { read_qa_jsonl(f, "qa", "dev"); }, {"s_dev.jsonl", "line 1", "output", "JSON syntax error"});
}

TEST(QaJsonlErrors, InvalidUtf8) {
  TempDir dir;
  auto f = dir.write("u_dev.jsonl", "{\"id\": \"qa-1\", \"input\": \"\xFF\", \"output\": \"y\"}\n");
  expect_input_error([&] { read_qa_jsonl(f, "qa", "dev"); },
                     {"u_dev.jsonl", "line 1 (id \"qa-1\")", "field \"input\"", "invalid UTF-8"});
}

TEST(QaJsonlErrors, MissingField) {
  TempDir dir;
  auto f = dir.write("m_dev.jsonl",
                     "{\"id\": \"qa-1\", \"input\": \"x\", \"output\": \"y\"}\n"
                     "{\"id\": \"qa-2\", \"input\": \"x\"}\n");
  expect_input_error([&] { read_qa_jsonl(f, "qa", "dev"); },
                     {"m_dev.jsonl", "line 2 (id \"qa-2\")", "field \"output\"", "missing"});
}

TEST(QaJsonlErrors, MistypedField) {
  TempDir dir;
  auto f = dir.write("t_dev.jsonl", "{\"id\": \"qa-1\", \"input\": \"x\", \"output\": \"y\", \"gold_doc\": 3}\n");
  expect_input_error([&] { read_qa_jsonl(f, "qa", "dev"); },
                     {"t_dev.jsonl", "line 1 (id \"qa-1\")", "field \"gold_doc\"", "an integer"});
  auto g = dir.write("t2_dev.jsonl", "{\"id\": \"qa-1\", \"input\": \"x\", \"output\": \"y\", \"gold_doc\": [\"a\", 1]}\n");
  expect_input_error([&] { read_qa_jsonl(g, "qa", "dev"); },
                     {"t2_dev.jsonl", "line 1 (id \"qa-1\")", "field \"gold_doc[1]\"", "an integer"});
}

TEST(QaJsonlErrors, DuplicateId) {
  TempDir dir;
  auto f = dir.write("d_dev.jsonl",
                     "{\"id\": \"qa-1\", \"input\": \"x\", \"output\": \"y\"}\n"
                     "{\"id\": \"qa-1\", \"input\": \"z\", \"output\": \"y\"}\n");
  expect_input_error([&] { read_qa_jsonl(f, "qa", "dev"); },
                     {"d_dev.jsonl", "line 2 (id \"qa-1\")", "field \"id\"", "duplicate id", "first on line 1"});
}

}  // namespace
}  // namespace attune::data
