// The command-line contract (CLI.md): exit codes, one-line errors, output formats.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

namespace fs = std::filesystem;

namespace {

struct Result {
  int rc = -1;
  std::string out, err;
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("attune_cli_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  Result run(const std::string& args) {
    const std::string bin = std::string(ATTUNE_BINARY_DIR) + "/tools/attune/attune";
    const std::string cmd = "cd '" + dir_.string() + "' && '" + bin + "' " + args + " >out.txt 2>err.txt";
    int status = std::system(cmd.c_str());
    Result r;
    r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = slurp(dir_ / "out.txt");
    r.err = slurp(dir_ / "err.txt");
    return r;
  }
  void write(const std::string& name, const std::string& text) {
    fs::create_directories((dir_ / name).parent_path());
    std::ofstream(dir_ / name, std::ios::binary) << text;
  }
  fs::path dir_;
};

const std::string kSample = std::string(ATTUNE_SOURCE_DIR) + "/data/sample";

}  // namespace

TEST_F(Cli, HelpForEveryVerb) {
  for (std::string verb : {"", "rank", "eval", "metrics", "feedback", "import", "demo", "sample", "generate", "score"}) {
    auto r = run(verb + " --help");
    EXPECT_EQ(r.rc, 0) << verb;
    EXPECT_NE(r.out.find("Usage"), std::string::npos) << verb;
  }
  EXPECT_NE(run("eval --help").out.find("--retrievers"), std::string::npos);
}

TEST_F(Cli, UsageErrorsExitTwo) {
  EXPECT_EQ(run("").rc, 2);
  EXPECT_EQ(run("eval --bogus").rc, 2);
  auto r = run("eval --data " + kSample + " --task lamp99 --quiet");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("lamp99"), std::string::npos) << r.err;
  r = run("eval --data " + kSample + " --task commit_subject --retrievers bm25,nonsense --quiet --store s.db");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("nonsense"), std::string::npos) << r.err;
}

TEST_F(Cli, BadInputExitsOneWithOneLineNamingTheFile) {
  write("q.json", "[{\"id\": \"q1\", \"input\": \"x\", \"profile\": [{\"id\": \"p1\", \"date\": 5}]}]");
  auto r = run("rank --task lamp7 --questions q.json --out r.jsonl --store s.db");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("q.json"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("date"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "r.jsonl"));
}

TEST_F(Cli, ReferenceReaderNeedsABackground) {
  const std::string g = std::string(ATTUNE_SOURCE_DIR) + "/data/sample/commit_subject/";
  const std::string files = "--task lamp4 --questions " + g + "dev_questions.json --outputs " + g + "dev_outputs.json";
  auto r = run("eval " + files + " --quiet --store s.db");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("--background"), std::string::npos) << r.err;
  r = run("eval " + files + " --background missing.json --quiet --store s.db");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("missing.json: cannot open"), std::string::npos) << r.err;
  r = run("eval " + files + " --background " + g + "train_outputs.json --retrievers none,bm25 --limit 5 --quiet --store s.db");
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("task lamp4"), std::string::npos) << r.out;
}

TEST_F(Cli, MetricsOnLiteralFiles) {
  write("g.json", R"({"task": "LaMP_3", "golds": [{"id": "a", "output": "5"}, {"id": "b", "output": "1"}]})");
  write("p.jsonl", "{\"id\": \"a\", \"output\": \"4\"}\n{\"id\": \"b\", \"output\": \"oops\"}\n");
  auto r = run("metrics --task lamp3 --predictions p.jsonl --golds g.json");
  ASSERT_EQ(r.rc, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  // |5-4| = 1; "oops" for gold 1 counts as 5 (the farther of 1 and 5): |1-5| = 4.
  EXPECT_DOUBLE_EQ(j["mae"].get<double>(), 2.5);
  EXPECT_DOUBLE_EQ(j["rmse"].get<double>(), std::sqrt(8.5));
  write("short.jsonl", "{\"id\": \"a\", \"output\": \"4\"}\n");
  r = run("metrics --task lamp3 --predictions short.jsonl --golds g.json");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("\"b\""), std::string::npos) << r.err;
}

TEST_F(Cli, RankWritesOneLinePerQuery) {
  auto r = run("rank --data " + kSample + " --task commit_subject --split dev --retriever bm25 --k 3 --out r.jsonl --store s.db");
  ASSERT_EQ(r.rc, 0) << r.err;
  std::ifstream in(dir_ / "r.jsonl");
  std::string line;
  std::size_t n = 0;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    EXPECT_EQ(j["ranking"].size(), 3u);
    EXPECT_EQ(j["scores"].size(), 3u);
    ++n;
  }
  EXPECT_EQ(n, 72u);  // 36 users x 2 dev queries
}

TEST_F(Cli, DemoRunsTheWholeLoopAndIsCachedTheSecondTime) {
  auto r = run("demo --store demo.db --quiet");
  ASSERT_EQ(r.rc, 0) << r.err;
  for (const char* s : {"import", "feedback", "rrf(bm25,recency)", "rouge-1"}) EXPECT_NE(r.out.find(s), std::string::npos) << s;
  auto again = run("demo --store demo.db --quiet");
  ASSERT_EQ(again.rc, 0) << again.err;
  EXPECT_NE(again.out.find("already imported"), std::string::npos);
  EXPECT_NE(again.out.find("(0 model calls"), std::string::npos) << again.out;
}

TEST_F(Cli, EvalWritesTheJsonReport) {
  auto r = run("eval --data " + kSample + " --task commit_subject --split dev --retrievers none,bm25 --out e.json --quiet --store s.db");
  ASSERT_EQ(r.rc, 0) << r.err;
  auto j = nlohmann::json::parse(slurp(dir_ / "e.json"));
  for (const char* key : {"task", "split", "llm", "k", "results", "per_example", "significance"}) EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j["per_example"]["bm25"].size(), 72u);
}

TEST_F(Cli, GenerateAndScoreWithTheLocalStories260K) {
  const std::string model = std::string(ATTUNE_SHARED_DIR) + "/models/stories260K";
  if (!fs::exists(model + "/model.safetensors")) GTEST_SKIP() << "needs ../shared/models/stories260K (absent in this checkout)";
  auto g = run("generate --llm local:" + model + " --prompt '' --max-new-tokens 20 --device cpu");
  ASSERT_EQ(g.rc, 0) << g.err;
  EXPECT_EQ(g.out.rfind("Once upon a time, there was a little girl named Lily.", 0), 0u) << g.out;
  auto s = run("score --llm local:" + model + " --prompt 'Once upon a' --target time --device cpu");
  ASSERT_EQ(s.rc, 0) << s.err;
  const double lp = std::stod(s.out);
  EXPECT_LT(lp, 0.0);
  EXPECT_GT(lp, -0.1);  // "time" after "Once upon a" is near-certain for this model
  auto unlikely = run("score --llm local:" + model + " --prompt 'Once upon a' --target 'purple elephant' --device cpu");
  ASSERT_EQ(unlikely.rc, 0) << unlikely.err;
  EXPECT_LT(std::stod(unlikely.out), lp - 5);
  auto a = run("generate --llm local:" + model + " --prompt Lily --temperature 0.9 --seed 5 --max-new-tokens 15 --device cpu");
  auto b = run("generate --llm local:" + model + " --prompt Lily --temperature 0.9 --seed 5 --max-new-tokens 15 --device cpu");
  ASSERT_EQ(a.rc, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  auto beam = run("generate --llm local:" + model + " --prompt Lily --beams 4 --max-new-tokens 15 --device cpu");
  EXPECT_EQ(beam.rc, 0) << beam.err;
}

TEST_F(Cli, GenerateAndScoreErrors) {
  auto missing = run("generate --llm local:/nowhere/model --prompt x");
  EXPECT_EQ(missing.rc, 2);
  EXPECT_NE(missing.err.find("no such folder \"/nowhere/model\""), std::string::npos) << missing.err;
  auto no_prompt = run("generate --llm reference");
  EXPECT_EQ(no_prompt.rc, 2);
  EXPECT_NE(no_prompt.err.find("--prompt"), std::string::npos) << no_prompt.err;
  auto both = run("generate --llm reference --beams 2 --temperature 1 --prompt x");
  EXPECT_EQ(both.rc, 2);
  auto no_file = run("generate --llm reference --prompt-file absent.txt");
  EXPECT_EQ(no_file.rc, 1);
  EXPECT_EQ(no_file.err, "attune: absent.txt: cannot open\n");
  write("p.txt", "x");
  auto two = run("score --llm reference --prompt x --prompt-file p.txt --target y");
  EXPECT_EQ(two.rc, 2);
  EXPECT_NE(two.err.find("not both"), std::string::npos) << two.err;
  auto top_p = run("generate --llm reference --prompt x --temperature 1 --top-p 0");
  EXPECT_EQ(top_p.rc, 2);
  EXPECT_NE(top_p.err.find("--top-p must be in (0, 1]"), std::string::npos) << top_p.err;
  write("empty/config.json", "{\"model_type\": \"gpt2\", \"architectures\": [\"GPT2LMHeadModel\"]}");
  write("empty/tokenizer.json", "{}");
  auto unsupported = run("score --llm local:empty --prompt a --target b --device cpu");
  EXPECT_EQ(unsupported.rc, 1);
  EXPECT_EQ(std::count(unsupported.err.begin(), unsupported.err.end(), '\n'), 1) << unsupported.err;
  auto reference = run("score --llm reference --prompt a --target b");
  EXPECT_EQ(reference.rc, 1);
  EXPECT_NE(reference.err.find("--background"), std::string::npos) << reference.err;
  auto bad_device = run("generate --llm local:empty --prompt a --device tpu");
  EXPECT_EQ(bad_device.rc, 2) << bad_device.err;
}

TEST_F(Cli, PretrainEncoderThenRankAndEvalWithDense) {
  const std::string vocab = std::string(ATTUNE_SHARED_DIR) + "/models/bert-base-uncased-vocab";
  if (!fs::exists(vocab + "/vocab.txt")) GTEST_SKIP() << "needs ../shared/models/bert-base-uncased-vocab (absent in this checkout)";
  const std::string common = "--data " + kSample + " --task commit_subject --tokenizer " + vocab +
                             " --hidden 32 --layers 1 --heads 2 --max-length 32 --batch-size 8 --quiet --seed 3";
  auto p = run("pretrain-encoder " + common + " --steps 4 --checkpoint-every 2 --out enc");
  ASSERT_EQ(p.rc, 0) << p.err;
  for (auto f : {"config.json", "model.safetensors", "vocab.txt", "modules.json", "1_Pooling/config.json", "attune_train.json"})
    EXPECT_TRUE(fs::exists(dir_ / "enc" / f)) << f;
  // The same out folder again without --resume is refused rather than overwritten.
  auto again = run("pretrain-encoder " + common + " --steps 4 --out enc");
  EXPECT_EQ(again.rc, 2) << again.err;
  auto r = run("rank --data " + kSample + " --task commit_subject --split dev --retriever dense:enc --k 3 --out ranks.jsonl --quiet");
  ASSERT_EQ(r.rc, 0) << r.err;
  std::ifstream in(dir_ / "ranks.jsonl");
  std::string line;
  std::size_t n = 0;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    EXPECT_LE(j["ranking"].size(), 3u);
    ++n;
  }
  EXPECT_GT(n, 0u);
  auto e = run("eval --data " + kSample + " --task commit_subject --split dev --retrievers bm25,dense:enc,'rrf(bm25,dense:enc)' --llm reference --quiet --out e.json");
  ASSERT_EQ(e.rc, 0) << e.err;
  auto rep = nlohmann::json::parse(slurp(dir_ / "e.json"));
  EXPECT_TRUE(rep["results"].contains("dense:enc")) << rep["results"].dump();
  auto missing = run("rank --data " + kSample + " --task commit_subject --split dev --retriever dense:nowhere --out x.jsonl");
  EXPECT_NE(missing.rc, 0);
  EXPECT_EQ(std::count(missing.err.begin(), missing.err.end(), '\n'), 1) << missing.err;
}
