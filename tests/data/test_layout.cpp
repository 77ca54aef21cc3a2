// load_split and find_corpus: the --data directory layouts of CLI.md.
#include <gtest/gtest.h>

#include "attune/data/dataset.h"
#include "test_util.h"

namespace attune::data {
namespace {

using test::expect_input_error;
using test::TempDir;

const char* kQ = R"([{"id": "q1", "input": "x", "profile": [{"id": "a", "text": "t"}]}])";
const char* kO = R"({"task": "t", "golds": [{"id": "q1", "output": "y"}]})";

TEST(LoadSplit, LampLayoutWithAndWithoutOutputs) {
  TempDir dir;
  dir.write("lamp4/dev_questions.json", kQ);
  dir.write("lamp4/dev_outputs.json", kO);
  dir.write("lamp4/test_questions.json", kQ);
  Dataset dev = load_split(dir.path(), "lamp4", "dev");
  EXPECT_TRUE(dev.has_outputs);
  EXPECT_EQ(dev.examples.at(0).output, "y");
  EXPECT_EQ(dev.task, "lamp4");
  EXPECT_EQ(dev.split, "dev");
  Dataset test = load_split(dir.path(), "lamp4", "test");
  EXPECT_FALSE(test.has_outputs);
  EXPECT_EQ(test.examples.size(), 1u);
}

TEST(LoadSplit, CorpusLayout) {
  TempDir dir;
  dir.write("qa_dev.jsonl", "{\"id\": \"1\", \"input\": \"x\", \"output\": \"y\", \"gold_doc\": \"d\"}\n");
  Dataset ds = load_split(dir.path(), "qa", "dev");
  EXPECT_EQ(ds.examples.size(), 1u);
  EXPECT_EQ(ds.task, "qa");
}

TEST(LoadSplit, NeitherLayoutNamesWhatWasLookedFor) {
  TempDir dir;
  expect_input_error([&] { load_split(dir.path(), "qa", "test"); },
                     {dir.path().string(), "qa/test_questions.json", "qa_test.jsonl"});
  expect_input_error([&] { load_split(dir / "nowhere", "qa", "test"); }, {"nowhere", "no such data directory"});
}

TEST(FindCorpus, FindsTheSingleCorpus) {
  TempDir dir;
  expect_input_error([&] { find_corpus(dir.path()); }, {dir.path().string(), "no *_corpus.jsonl"});
  dir.write("debian_corpus.jsonl", "");
  dir.write("qa_dev.jsonl", "");
  EXPECT_EQ(find_corpus(dir.path()), dir / "debian_corpus.jsonl");
  dir.write("other_corpus.jsonl", "");
  expect_input_error([&] { find_corpus(dir.path()); },
                     {"more than one", "debian_corpus.jsonl", "other_corpus.jsonl"});
}

}  // namespace
}  // namespace attune::data
