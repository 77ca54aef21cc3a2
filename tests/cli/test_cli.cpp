// The command-line contract (CLI.md): exit codes, one-line errors, output formats.
#include <gtest/gtest.h>
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <mutex>
#include <set>
#include <nlohmann/json.hpp>
#include <sstream>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include "attune/core/machine.h"
#include "attune/store/store.h"
#include "cli_run.h"
#include "fixtures/postgres.h"

namespace fs = std::filesystem;

namespace {

using Result = attune::testing::CliResult;
using attune::testing::slurp;

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("attune_cli_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // env: a prefix for the command, e.g. "env -u VAR NAME=VALUE".
  Result run(const std::string& args, const std::string& env = "") { return attune::testing::run_attune(dir_, args, env); }
  void write(const std::string& name, const std::string& text) {
    fs::create_directories((dir_ / name).parent_path());
    std::ofstream(dir_ / name, std::ios::binary) << text;
  }
  // A tiny encoder in enc (pretrain-encoder on `data`, 2 steps); false when the shared
  // vocabulary is absent. A failed run is a test failure.
  bool tiny_encoder(const std::string& data) {
    const std::string vocab = std::string(ATTUNE_SHARED_DIR) + "/models/bert-base-uncased-vocab";
    if (!fs::exists(vocab + "/vocab.txt")) return false;
    auto p = run("pretrain-encoder " + data + " --tokenizer " + vocab +
                 " --hidden 32 --layers 1 --heads 2 --max-length 32 --batch-size 8 --quiet --seed 3 --steps 2 --out enc");
    EXPECT_EQ(p.rc, 0) << p.err;
    return true;
  }
  // Starts `attune serve-llm --llm SPEC --port 0` in the background (its output in
  // serve.out/serve.err); returns {port, pid}, or empty strings when it did not start.
  std::pair<std::string, std::string> start_serve_llm(const std::string& spec) {
    const std::string bin = std::string(ATTUNE_BINARY_DIR) + "/tools/attune/attune";
    const std::string start = "cd '" + dir_.string() + "' && ('" + bin + "' serve-llm --llm '" + spec +
                              "' --port 0 --port-file port.txt >serve.out 2>serve.err & echo $! >pid.txt)";
    if (std::system(start.c_str()) != 0) return {};
    for (int i = 0; i < 200 && !fs::exists(dir_ / "port.txt"); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (!fs::exists(dir_ / "port.txt")) return {};
    const auto first_line = [&](const char* f) { const auto t = slurp(dir_ / f); return t.substr(0, t.find('\n')); };
    return {first_line("port.txt"), first_line("pid.txt")};
  }
  fs::path dir_;
};

const std::string kSample = std::string(ATTUNE_SOURCE_DIR) + "/data/sample";

}  // namespace

TEST_F(Cli, HelpForEveryVerb) {
  for (std::string verb : {"", "rank", "eval", "metrics", "feedback", "import", "demo", "sample", "generate", "score", "pretrain-encoder", "train", "train-tokenizer", "train-lm", "judge"}) {
    auto r = run(verb + " --help");
    EXPECT_EQ(r.rc, 0) << verb;
    EXPECT_NE(r.out.find("Usage"), std::string::npos) << verb;
  }
  EXPECT_NE(run("eval --help").out.find("--retrievers"), std::string::npos);
}

// libgomp reads OMP_WAIT_POLICY and GOMP_SPINCOUNT when it loads; attune sets a short spin
// (GOMP_SPINCOUNT=1000) before that (main.cpp's .preinit_array) unless the user chose a
// policy or a spin count.
TEST_F(Cli, OpenMpSpinsBrieflyUnlessTheUserChose) {
  auto r = run("--version", "env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT OMP_DISPLAY_ENV=VERBOSE");
  EXPECT_EQ(r.rc, 0);
  EXPECT_NE(r.err.find("GOMP_SPINCOUNT = '1000'"), std::string::npos) << r.err;
  r = run("--version", "env -u GOMP_SPINCOUNT OMP_WAIT_POLICY=ACTIVE OMP_DISPLAY_ENV=VERBOSE");
  EXPECT_NE(r.err.find("OMP_WAIT_POLICY = 'ACTIVE'"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("GOMP_SPINCOUNT = '1000'"), std::string::npos) << r.err;
  r = run("--version", "env -u OMP_WAIT_POLICY GOMP_SPINCOUNT=5 OMP_DISPLAY_ENV=VERBOSE");
  EXPECT_NE(r.err.find("GOMP_SPINCOUNT = '5'"), std::string::npos) << r.err;
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
  for (std::string bad : {"-1", "many", "100000", "4096", "257", "0x10"}) {
    r = run("eval --data " + kSample + " --task commit_subject --quiet --store s.db --threads " + bad);
    EXPECT_EQ(r.rc, 2) << bad;
    EXPECT_NE(r.err.find("--threads"), std::string::npos) << r.err;
  }
}

// Whole-number options take plain decimal digits only (no wrap of "-1" into 2^64-1, no hex,
// no octal); real-number options take finite decimal numbers; unbounded work is capped.
TEST_F(Cli, NumbersAreDecimalFiniteAndBounded) {
  const std::string rank = "rank --data " + kSample + " --task commit_subject --split dev --retriever bm25 --out r.jsonl --store s.db";
  const auto refused = [&](const std::string& args, const std::vector<std::string>& says) {
    auto r = run(args);
    EXPECT_EQ(r.rc, 2) << args << "\n" << r.err;
    for (const auto& s : says) EXPECT_NE(r.err.find(s), std::string::npos) << args << ": " << r.err;
    EXPECT_EQ(r.err.rfind("attune: ", 0), 0u) << r.err;  // one line, CLI11's errors included
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    return r;
  };
  refused(rank + " --k -1", {"--k", "expected a whole number >= 0 in decimal digits, got \"-1\""});
  refused(rank + " --k 0x10", {"--k", "\"0x10\""});
  refused(rank + " --k 1e3", {"--k", "\"1e3\""});
  refused(rank + " --k ' 5'", {"--k"});
  refused(rank + " --seed -1", {"--seed", "\"-1\""});
  refused(rank + " --seed 99999999999999999999999", {"--seed", "out of range"});  // past 2^64: not saturated either
  refused(rank + " --seed 18446744073709551616", {"--seed", "out of range"});
  // Issue 14's options: each refused where it would mean nothing, before any work.
  const std::string train = "train --data " + kSample + " --task commit_subject --llm reference --out t --store s.db ";
  refused(train + "--method pearl --target-normalization zscore", {"--target-normalization", "ropg-kd, rspg-pre and rspg-post"});
  refused(train + "--method ropg-rl --init x --target-normalization zscore", {"--target-normalization", "not ropg-rl"});
  refused(train + "--method ropg-kd --init x --target-normalization minmax", {"minmax", "zscore or none"});
  refused(train + "--method pearl --protocol dense", {"--protocol", "pearl"});
  refused(train + "--method ropg-kd --init x --protocol sideways", {"--protocol"});
  refused(train + "--method pearl --initial-prior none", {"--initial-prior", "pearl"});
  refused(train + "--method ropg-kd --init x --initial-prior fixed", {"fixed", "learned or none"});
  refused(train + "--method ropg-rl --init x --protocol dense --initial-prior learned", {"--initial-prior learned", "--protocol rerank"});
  refused(train + "--method rspg-pre --init x --selector-input sideways", {"--selector-input", "sideways"});
  refused(train + "--method ropg-kd --init x --purple-k 3", {"--purple-k applies to --method purple, not ropg-kd"});
  refused(train + "--method purple --init x --pearl-tau 2", {"--pearl-tau applies to --method pearl, not purple"});
  refused(train + "--method pearl --init x --pointwise", {"--pointwise applies to --method purple"});
  refused(train + "--method purple --init no-such-encoder", {"--init no-such-encoder: no such model folder"});
  refused(train + "--method purple --init x --initial-prior sometimes", {"sometimes", "learned or none"});
  fs::create_directories(dir_ / "enc_dir");
  refused(train + "--method purple --init enc_dir --initial-prior none --purple-prior-weight 2",
          {"--purple-prior-weight applies with --initial-prior learned"});
  refused(train + "--method ropg-kd --init x --purple-prior-weight 2", {"--purple-prior-weight applies to --method purple, not ropg-kd"});
  refused(train + "--method ropg-rl --init x --policy-scale fitted", {"--policy-scale applies to ropg-kd, not ropg-rl"});
  refused(train + "--method ropg-kd --init x --policy-scale sharp", {"--policy-scale", "sharp"});
  refused(train + "--method pearl --freeze-embeddings", {"--freeze-embeddings applies to ropg-kd, ropg-rl and luf, not pearl"});
  // IUM's agents file: checked before anything else is read.
  refused(train + "--method ropg-kd --init x --agents a.json", {"--agents applies to --method ium, not ropg-kd"});
  refused(train + "--method ium --init x", {"--method ium needs --agents FILE"});
  refused(train + "--method ium --init x --agents none.json", {"--agents none.json: no such file"});
  write("a0.json", "{\"agents\": []}");
  refused(train + "--method ium --init x --agents a0.json", {"--agents a0.json", "at least one agent"});
  write("a1.json", "{\"agents\": [{\"name\": \"q\", \"task\": \"qa\"}]}");
  refused(train + "--method ium --init x --agents a1.json", {"agent 1 needs a non-empty string \"llm\""});
  write("a2.json", "{\"agents\": [{\"name\": \"q\", \"task\": \"qa\", \"llm\": \"reference\", \"k\": 0}]}");
  refused(train + "--method ium --init x --agents a2.json", {"agent q: \"k\" must be a whole number >= 1"});
  write("a3.json", "{\"agents\": [{\"name\": \"q\", \"task\": \"qa\", \"llm\": \"reference\"},"
                   " {\"name\": \"q\", \"task\": \"slot\", \"llm\": \"reference\"}]}");
  refused(train + "--method ium --init x --agents a3.json", {"two agents are named \"q\""});
  write("a4.json", "{not json");
  refused(train + "--method ium --init x --agents a4.json", {"--agents a4.json: not JSON"});
  write("a5.json", "{\"agents\": [{\"name\": \"q\", \"task\": \"qa\", \"llm\": \"reference\"}]}");
  refused(train + "--method ium --init no-such-encoder --agents a5.json", {"--init no-such-encoder: no such model folder"});
  refused(train + "--method ium --init " + kSample + " --agents a5.json --ium-positive-at 0", {"--ium-positive-at", "above 0"});
  refused(train + "--method ium --init " + kSample + " --agents a5.json --ium-positive-weight -1", {"positive_weight", "-1"});
  refused(train + "--method ium --init " + kSample + " --agents a5.json --ium-balance agent --ium-positive-weight 1",
          {"--ium-balance agent applies to --ium-positive-weight 0"});
  refused(train + "--method ium --init " + kSample + " --agents a5.json --ium-balance each", {"--ium-balance", "each"});
  refused(train + "--method ium --init " + kSample + " --agents a5.json --ium-online --ium-online-batch 0", {"--ium-online-batch", "at least 1"});
  refused(train + "--method ium --init " + kSample + " --agents a5.json --ium-online-batch 10", {"--ium-online-batch", "--ium-online"});
  refused(train + "--method ium-online --init " + kSample + " --agents a5.json --ium-online-batch 0", {"--ium-online-batch", "at least 1"});
  refused(train + "--method ium --init " + kSample + " --agents a5.json --ium-online-promote", {"--ium-online-promote", "--ium-online"});
  refused(train + "--method ium-online --init " + kSample + " --agents a5.json --ium-online-promote --dev-split ''",
          {"--ium-online-promote", "--dev-split"});
  refused(train + "--method ium-online --init x", {"--method ium needs --agents FILE"});
  // The relevance start: its options, refused before any work.
  refused(train + "--method ium --init " + kSample + " --agents a5.json --ium-iterations 0",
          {"--ium-iterations must be at least 1", "--ium-relevance-start"});
  refused(train + "--method ium-online --init " + kSample + " --agents a5.json --ium-relevance-start",
          {"--ium-relevance-start applies to offline IUM"});
  refused(train + "--method ropg-kd --init x --document-fields 'a b'", {"--document-fields a b", "is not a field name"});
  refused("eval --data " + kSample + " --task commit_subject --split dev --retrievers bm25 --llm reference --oracle 5000",
          {"oracle_depth", "5000"});
  // train-lm's reader stage checks its options before it reads --init or writes --out.
  write("commits.jsonl", R"({"id":"c1","repo":"r","author":"a","date":"2020-01-01","subject":"s","text":"t"})" "\n");
  const std::string reader = "train-lm --stage reader --input commits.jsonl --init no-such-lm --out lm ";
  refused(reader + "--max-texts qa=x", {"--max-texts qa=x", "\"qa\" is not one of --tasks"});
  refused(reader + "--max-texts commit_subject=-1", {"--max-texts commit_subject", "\"-1\""});
  refused(reader + "--max-texts x", {"--max-texts", "\"x\""});
  refused(reader + "--reader-modes sideways", {"--reader-modes sideways", "\"sideways\" is not a document mode"});
  refused(reader + "--reader-modes bm25+gold", {"--reader-modes bm25+gold", "commit_subject"});
  // Per task: TASK=MODE/MODE/...; a task not in --tasks, a task named twice, a mode the task lacks.
  refused(reader + "--reader-modes qa=bm25", {"--reader-modes qa=bm25", "\"qa\" is not one of --tasks"});
  refused(reader + "--reader-modes commit_subject=none,commit_subject=bm25", {"commit_subject is given twice"});
  refused(reader + "--reader-modes commit_area=none/sideways", {"\"sideways\" is not a document mode"});
  refused(reader + "--tasks commit_subject --reader-modes commit_subject=bm25+gold", {"none of bm25+gold", "commit_subject"});
  refused(reader + "--reader-modes commit_area=none/bm25+gold", {"bm25+gold is not a document mode of commit_area"});
  // bm25+best can be named, alone or per task: the options pass and --init is read next.
  refused(reader + "--reader-modes none,bm25+best", {"--init no-such-lm: no such folder"});
  refused(reader + "--reader-modes commit_subject=none/bm25+best,bm25", {"--init no-such-lm: no such folder"});
  refused(reader + "--reader-k 0", {"--reader-k 0"});
  refused(reader + "--tasks qa", {"--claims"});
  refused(reader, {"--init no-such-lm: no such folder"});  // the options pass, so --init is read next
  EXPECT_FALSE(fs::exists(dir_ / "lm"));
  refused("serve-llm --llm 'openai:http://127.0.0.1:1/v1#m'", {"proxy"});
  EXPECT_FALSE(fs::exists(dir_ / "r.jsonl"));
  // Leading zeros are decimal: 010 is ten, not octal eight.
  auto ten = run(rank + " --k 010");
  ASSERT_EQ(ten.rc, 0) << ten.err;
  std::ifstream in(dir_ / "r.jsonl");
  std::string line;
  ASSERT_TRUE(std::getline(in, line));
  EXPECT_EQ(nlohmann::json::parse(line)["ranking"].size(), 10u);
  // Reals: nan, inf, out-of-range and hex are refused, even where a range check would let nan by.
  const std::string eval = "eval --data " + kSample + " --task commit_subject --split dev --quiet --store s.db";
  refused(eval + " --qpp-sigma-percent nan", {"--qpp-sigma-percent", "expected a finite number", "\"nan\""});
  refused(eval + " --qpp-sigma-percent 1e999", {"--qpp-sigma-percent", "\"1e999\""});
  refused("generate --llm reference --prompt x --temperature nan", {"--temperature", "\"nan\""});
  refused("generate --llm reference --prompt x --temperature inf", {"--temperature", "\"inf\""});
  refused("generate --llm reference --prompt x --temperature 0x1p1", {"--temperature"});
  refused("generate --llm reference --prompt x --temperature -1",
          {"temperature = -1: must be a finite number >= 0 (0 = greedy) (option --temperature)"});
  // Beams: 1..64, checked before the model loads (the reference reader would need a background).
  refused("generate --llm reference --prompt x --beams 100000", {"beams = 100000: must be between 1 and 64 (option --beams)"});
  refused("generate --llm reference --prompt x --beams 0", {"beams = 0: must be between 1 and 64 (option --beams)"});
  refused("generate --llm reference --prompt x --beams -3", {"beams = -3: must be between 1 and 64 (option --beams)"});
  refused(eval + " --beams 65", {"beams = 65: must be between 1 and 64 (option --beams)"});
  // --decode: free or copy; copy is greedy and needs a model that implements it.
  refused("generate --llm reference --prompt x --decode extract",
          {"decode = 'extract': expected free (any text) or copy (the answer is a span of the prompt) (option --decode)"});
  refused("generate --llm reference --prompt x --decode copy --beams 2", {"decode = copy: is greedy", "(option --decode)"});
  refused("generate --llm reference --data " + kSample + " --task commit_subject --prompt x --decode copy",
          {"decode = copy is implemented for local: models only; the reference reader generates freely"});
  refused(eval + " --retrievers none --llm reference --decode copy", {"the reference reader generates freely"});
  refused("generate --llm reference --prompt x --decode copy --temperature 0.5",
          {"decode = copy: is greedy: it cannot be combined with sampling (temperature = 0.5) (option --decode)"});
  refused(eval + " --retrievers none --llm planted:first --decode copy", {"a planted reader generates freely"});
  // --no-repeat-ngram: 0 to 64, local: models only.
  refused(eval + " --retrievers none --llm reference --no-repeat-ngram 3",
          {"no_repeat_ngram is implemented for local: models only; the reference reader"});
  refused(eval + " --retrievers none --llm reference --no-repeat-ngram -1",
          {"no_repeat_ngram = -1: must be between 0 (off) and 64", "(option --no-repeat-ngram)"});
  // --cad (context-aware decoding): 0 to 100, greedy, local: models only.
  refused(eval + " --retrievers none --llm reference --cad 1", {"cad (context-aware decoding) is implemented for local: models only; the reference reader"});
  refused(eval + " --retrievers none --llm reference --cad -0.5",
          {"cad = -0.5: must be a number from 0 (off) to 100", "(option --cad)"});
  refused(eval + " --retrievers none --llm reference --cad 1 --beams 2", {"context-aware decoding is greedy", "(option --cad)"});
  // feedback and train take --decode for the answers they generate, and refuse it where nothing is generated.
  const std::string fb = "feedback --data " + kSample + " --task commit_subject --split dev --quiet --store s.db --limit 2 ";
  refused(fb + "--llm reference --decode copy", {"the reference reader generates freely"});
  refused(fb + "--llm reference --decode sideways", {"decode = 'sideways': expected free (any text) or copy"});
  refused(fb + "--kind likelihood --llm reference --decode copy",
          {"likelihood feedback scores the gold answer and generates nothing"});
  refused(train + "--method ropg-kd --init " + kSample + " --decode copy", {"the reference reader generates freely"});
  refused(train + "--method luf --init x --decode copy", {"--decode copy applies to methods that learn from generated answers",
                                                           "not luf (its labels are the judge's replies)"});
  refused(train + "--method purple --init x --decode copy", {"not purple (its rewards are log-likelihoods)"});
  // The same checks reach options read from a --config file.
  write("c.toml", "k = 0x10\n");
  refused(rank + " --config c.toml", {"--k", "\"0x10\""});
  // sample --users: 1 to the documented cap, before anything is written.
  auto many = refused("sample --out big --users 1000000", {"--users 1000000: must be between 1 and"});
  EXPECT_EQ(std::count(many.err.begin(), many.err.end(), '\n'), 1) << many.err;
  refused("sample --out none --users 0", {"--users 0: must be between 1 and"});
  EXPECT_FALSE(fs::exists(dir_ / "big"));
  EXPECT_FALSE(fs::exists(dir_ / "none"));
  auto few = run("sample --out two --users 2");
  ASSERT_EQ(few.rc, 0) << few.err;
  EXPECT_TRUE(fs::exists(dir_ / "two" / "commit_subject" / "dev_questions.json"));
}

// Options that contradict each other, or name one thing twice, are refused naming them.
TEST_F(Cli, ConflictsAndRepeatsAreRefused) {
  const std::string data = "--data " + kSample + " --task commit_subject";
  fs::create_directories(dir_ / "enc");  // an --init folder: every refusal below comes before it is read
  // Training on the split that picks the kept epoch.
  auto same = run("train --method ropg-kd " + data + " --init enc --out o --split dev --dev-split dev --quiet --store s.db");
  EXPECT_EQ(same.rc, 2);
  EXPECT_NE(same.err.find("--split dev and --dev-split dev name the same split"), std::string::npos) << same.err;
  auto same_train = run("train --method pearl " + data + " --init enc --out o --dev-split train --quiet --store s.db");
  EXPECT_EQ(same_train.rc, 2);
  EXPECT_NE(same_train.err.find("--split train and --dev-split train"), std::string::npos) << same_train.err;
  // Retriever lists with a repeated entry: RSPG's pool, eval's retrievers, feedback's pool.
  auto pool = run("train --method rspg-pre " + data + " --init enc --out o --pool none,none --quiet --store s.db");
  EXPECT_EQ(pool.rc, 2);
  EXPECT_NE(pool.err.find("pool lists \"none\" twice"), std::string::npos) << pool.err;
  EXPECT_NE(pool.err.find("(option --pool)"), std::string::npos) << pool.err;
  auto pool3 = run("train --method rspg-post " + data + " --init enc --out o --pool 'bm25,rrf(bm25,recency),rrf(bm25, recency)' --quiet --store s.db");
  EXPECT_EQ(pool3.rc, 2);
  EXPECT_NE(pool3.err.find("pool lists \"rrf(bm25, recency)\" twice"), std::string::npos) << pool3.err;
  EXPECT_NE(pool3.err.find("(option --pool)"), std::string::npos) << pool3.err;
  auto ev = run("eval " + data + " --split dev --retrievers none,bm25,none --quiet --store s.db");
  EXPECT_EQ(ev.rc, 2);
  EXPECT_NE(ev.err.find("retrievers lists \"none\" twice: name each retriever once (option --retrievers)"), std::string::npos) << ev.err;
  auto fb = run("feedback " + data + " --split dev --kind retriever --retrievers bm25,recency,bm25 --quiet --store s.db");
  EXPECT_EQ(fb.rc, 2);
  EXPECT_NE(fb.err.find("\"bm25\" twice"), std::string::npos) << fb.err;
  EXPECT_NE(fb.err.find("(option --retrievers)"), std::string::npos) << fb.err;
  // Training numbers: lr >= 0, clip finite (0 = off), a given micro-batch within the batch.
  auto lr = run("train --method ropg-kd " + data + " --init enc --out o --lr -1 --quiet --store s.db");
  EXPECT_EQ(lr.rc, 2);
  EXPECT_NE(lr.err.find("fit.lr = -1: must be a number >= 0 (0 = learning switched off, a control run) (option --lr)"), std::string::npos) << lr.err;
  // lr 0 is the control run of a learning check: accepted (this one then fails on the
  // empty --init folder, not on the option).
  auto lr0 = run("train --method ropg-kd " + data + " --init enc --out o --lr 0 --quiet --store lr0.db");
  EXPECT_EQ(lr0.rc, 1);
  EXPECT_EQ(lr0.err.find("(option --lr)"), std::string::npos) << lr0.err;
  auto clip = run("train --method ropg-kd " + data + " --init enc --out o --clip nan --quiet --store s.db");
  EXPECT_EQ(clip.rc, 2);
  EXPECT_NE(clip.err.find("--clip"), std::string::npos) << clip.err;
  auto clip_neg = run("train --method ropg-kd " + data + " --init enc --out o --clip -1 --quiet --store s.db");
  EXPECT_EQ(clip_neg.rc, 2);
  EXPECT_NE(clip_neg.err.find("fit.clip = -1: must be a number >= 0 (0 = no clipping) (option --clip)"), std::string::npos)
      << clip_neg.err;
  auto micro = run("train --method ropg-kd " + data + " --init enc --out o --batch-size 8 --micro-batch 16 --quiet --store s.db");
  EXPECT_EQ(micro.rc, 2);
  EXPECT_NE(micro.err.find("fit.micro_batch = 16: must not exceed batch_size = 8"), std::string::npos) << micro.err;
  EXPECT_NE(micro.err.find("(option --micro-batch)"), std::string::npos) << micro.err;
  EXPECT_FALSE(fs::exists(dir_ / "s.db"));  // every refusal came before any work
  // A --batch-size below the method's default micro-batch (ROPG: 8) is not refused: the
  // default shrinks to it. (The run then fails on the empty --init folder, not on the options.)
  auto small = run("train --method ropg-kd " + data + " --init enc --out o --batch-size 4 --limit 2 --dev-split '' --quiet --store s.db");
  EXPECT_EQ(small.err.find("micro"), std::string::npos) << small.err;
  EXPECT_EQ(small.err.find("batch"), std::string::npos) << small.err;
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

TEST_F(Cli, TheLexicalVerbsRunWithoutLibtorchAndTheOthersAreHandedOver) {
  // `attune` links no libtorch; it runs metrics, import and sample itself.
  const std::string bin = std::string(ATTUNE_BINARY_DIR) + "/tools/attune/attune";
  const std::string ldd = "ldd '" + bin + "' > '" + (dir_ / "ldd.txt").string() + "'";
  ASSERT_EQ(std::system(ldd.c_str()), 0);
  const auto libs = slurp(dir_ / "ldd.txt");
  EXPECT_EQ(libs.find("libtorch"), std::string::npos) << libs;
  EXPECT_EQ(libs.find("libc10"), std::string::npos) << libs;
  // Every other verb runs in attune-torch, with the same arguments and exit codes.
  auto v = run("score --llm reference --prompt a --target b");
  EXPECT_EQ(v.rc, 1);
  EXPECT_NE(v.err.find("(option --background)"), std::string::npos) << v.err;
  EXPECT_EQ(run("--version").out, "attune 0.1.0\n");
  // A failed write of the result is an error, not a silent success.
  write("g.json", R"({"task": "LaMP_3", "golds": [{"id": "a", "output": "5"}]})");
  write("p.jsonl", "{\"id\": \"a\", \"output\": \"4\"}\n");
  const std::string full = "cd '" + dir_.string() + "' && '" + bin + "' metrics --task lamp3 --predictions p.jsonl --golds g.json > /dev/full 2>err.txt";
  const int status = std::system(full.c_str());
  EXPECT_EQ(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 1);
  EXPECT_NE(slurp(dir_ / "err.txt").find("standard output"), std::string::npos) << slurp(dir_ / "err.txt");
}

// attune train-tokenizer (issue 15): a tokenizer folder every attune command loads, and
// one-line refusals for bad input before any work.
TEST_F(Cli, TrainTokenizerWritesAFolderAndRefusesBadInput) {
  std::string jsonl, text;
  for (int i = 0; i < 50; ++i) {
    jsonl += R"({"id": ")" + std::to_string(i) + R"(", "subject": "fix the parser for café ñ", "text": "the parser read )" +
             std::to_string(i) + R"( bytes"})" + "\n";
    text += "a plain line of text " + std::to_string(i) + "\n";
  }
  write("c.jsonl", jsonl);
  write("t.txt", text);
  auto r = run("train-tokenizer --input c.jsonl --input t.txt --vocab-size 300 --out tok --quiet");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("300 tokens"), std::string::npos) << r.out;
  EXPECT_EQ(r.err, "");
  const auto rec = nlohmann::json::parse(slurp(dir_ / "tok/attune_tokenizer.json"));
  EXPECT_EQ(rec.at("texts"), 150);  // 50 lines x (subject, text), 50 lines
  EXPECT_EQ(rec.at("sources").at(0).at("texts"), 100);
  EXPECT_EQ(rec.at("merges"), 300 - 3 - 256);
  for (const char* f : {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"}) EXPECT_TRUE(fs::exists(dir_ / "tok" / f)) << f;
  // The same input gives the same file.
  ASSERT_EQ(run("train-tokenizer --input c.jsonl --input t.txt --vocab-size 300 --out tok2 --quiet").rc, 0);
  EXPECT_EQ(slurp(dir_ / "tok/tokenizer.json"), slurp(dir_ / "tok2/tokenizer.json"));
  // Refusals: one line, nothing written.
  const auto refused = [&](const std::string& args, int rc, const std::vector<std::string>& says) {
    auto e = run(args);
    EXPECT_EQ(e.rc, rc) << args << "\n" << e.err;
    for (const auto& s : says) EXPECT_NE(e.err.find(s), std::string::npos) << args << ": " << e.err;
    EXPECT_EQ(std::count(e.err.begin(), e.err.end(), '\n'), 1) << e.err;
  };
  refused("train-tokenizer --input c.jsonl --out tok", 2, {"already holds a tokenizer.json"});
  refused("train-tokenizer --input missing.jsonl --out x", 2, {"missing.jsonl", "no such file"});
  refused("train-tokenizer --input c.jsonl --out x --vocab-size 100", 2, {"vocab_size", "256 byte symbols"});
  refused("train-tokenizer --input c.jsonl --out x --bos '<bos>'", 2, {"bos", "<bos>"});
  refused("train-tokenizer --input c.jsonl --out x --special-tokens '<s>,<s>,</s>'", 2, {"twice"});
  write("bad.jsonl", "{\"subject\": \"ok\"}\nnot json\n");
  refused("train-tokenizer --input bad.jsonl --out x --quiet", 1, {"bad.jsonl", "line 2", "not a JSON object"});
  refused("train-tokenizer --input c.jsonl --out x --fields title --quiet", 1, {"c.jsonl", "no text", "--fields title"});
  EXPECT_FALSE(fs::exists(dir_ / "x"));
  // train-lm's stages and their inputs, refused before any text is read.
  refused("train-lm --input c.jsonl --out lm", 2, {"--tokenizer"});
  refused("train-lm --input c.jsonl --out lm --tokenizer tok --init tok", 2, {"--init", "--stage reader"});
  refused("train-lm --stage reader --input c.jsonl --out lm", 2, {"--init"});
  refused("train-lm --stage reader --input c.jsonl --out lm --init tok --tokenizer tok", 2, {"--tokenizer"});
  refused("train-lm --input c.jsonl --out lm --tokenizer tok --length-window 4", 2, {"--length-window", "--stage reader"});
  refused("train-lm --input c.jsonl --out lm --tokenizer tok --head-weight 4", 2, {"--head-weight", "--stage reader"});
  refused("train-lm --input c.jsonl --out lm --tokenizer tok --answer-prefix A:", 2, {"--answer-prefix", "--stage reader"});
  refused("train-lm --stage reader --input c.jsonl --out lm --init tok --answer-prefix A:", 2,
          {"answer_prefix \"A:\"", "a newline then at most 8 characters"});
  EXPECT_FALSE(fs::exists(dir_ / "lm"));
  refused("train-lm --input c.jsonl --out lm --tokenizer tok --heads 3", 2, {"heads", "3"});
  refused("train-lm --input c.jsonl --out lm --tokenizer tok --seq-len 600", 2, {"seq_len", "600"});
  refused("train-lm --input c.jsonl --out lm --tokenizer nowhere", 2, {"nowhere", "no such folder"});
  refused("train-lm --input c.jsonl --out lm --tokenizer tok --precision fp16", 2, {"--precision", "fp16", "auto, fp32 or bf16"});
  // bf16 on a CPU needs its bf16 instructions (tests/models/test_runtime.cpp has both sides).
  if (!attune::this_machine().bf16)
    refused("train-lm --input c.jsonl --out lm --tokenizer tok --device cpu --precision bf16", 2, {"--precision", "avx512_bf16"});
  refused("train-lm --input c.jsonl --input t.txt --out lm --tokenizer tok --max-texts 1,2,3", 2,
          {"--max-texts 1,2,3", "3 counts for 2 --input files"});
  refused("train-lm --input c.jsonl --input t.txt --out lm --tokenizer tok --max-texts 1,x", 2, {"--max-texts (input 2)", "\"x\""});
  refused("train-lm --stage reader --init tok --input c.jsonl --out lm --join-fields", 2, {"--join-fields", "--stage pretrain"});
  refused("train-lm --stage reader --init tok --input c.jsonl --out lm --repeat-share 0.5", 2, {"--repeat-share", "--stage pretrain"});
  refused("train-lm --input c.jsonl --out lm --tokenizer tok --repeat-share 1.5", 2, {"--repeat-share"});
  refused("train-lm --stage reader --init tok --input c.jsonl --out lm --sample-texts 5", 2, {"--sample-texts", "--stage pretrain"});
  refused("train-lm --input c.jsonl --input t.txt --out lm --tokenizer tok --sample-texts 5", 2,
          {"--sample-texts 5", "1 counts for 2 --input files"});
  refused("train-lm --input c.jsonl --out lm --tokenizer tok --sample-texts 5 --max-texts 5", 2, {"--sample-texts and --max-texts"});
  refused("train-lm --input c.jsonl --out lm --tokenizer tok --sample-texts x", 2, {"--sample-texts (input 1)", "\"x\""});
  refused("train-lm --input c.jsonl --out lm --tokenizer tok --group-by author --sample-texts 5", 2,
          {"--group-by and --sample-texts", "orders whole files"});
  refused("train-lm --input c.jsonl --input t.txt --out lm --tokenizer tok --group-by author", 2, {"t.txt", "not JSONL"});
  refused("train-lm --input c.jsonl --out lm --tokenizer tok --group-by nosuch --quiet", 2, {"--group-by nosuch", "no line"});
  EXPECT_FALSE(fs::exists(dir_ / "lm"));
  // --stage reader reads commits (repo, author, date, subject, text) and its --reader-k.
  write("commits.jsonl", R"({"id": "a", "repo": "r", "author": "x", "date": "2020-01-01", "subject": "s", "text": "t"})" "\n");
  refused("train-lm --stage reader --init tok --input c.jsonl --out lm --quiet", 1, {"c.jsonl", "line 1", "repo"});
  refused("train-lm --stage reader --init tok --input commits.jsonl --out lm --reader-k 1,x --quiet", 2, {"--reader-k", "1,x"});
  refused("train-lm --stage reader --init tok --input commits.jsonl --out lm --tasks commit_foo --quiet", 2,
          {"--tasks", "commit_foo", "not a reader task"});
  refused("train-lm --stage reader --init tok --input commits.jsonl --out lm --tasks qa --quiet", 2, {"--claims", "--corpus"});
  refused("train-lm --stage reader --init tok --input commits.jsonl --out lm --claims commits.jsonl --quiet", 2, {"add qa to --tasks"});
  refused("train-lm --stage reader --init tok --input commits.jsonl --out lm --tasks qa --claims nowhere.jsonl --corpus c.jsonl --quiet", 2,
          {"nowhere.jsonl", "no such file"});
  EXPECT_FALSE(fs::exists(dir_ / "lm"));
}

// The reader stage end to end on a tiny model: by default it takes every commit task the
// commits can give, and says which it left out (one author: no commit_pick contrast); a task
// named in --tasks that the commits cannot give is refused.
TEST_F(Cli, TrainLmReaderStageLeavesOutADefaultTaskTheCommitsCannotGive) {
  std::string jsonl;
  for (int i = 0; i < 24; ++i) {
    char line[256];
    std::snprintf(line, sizeof line,
                  R"({"id": "c%d", "repo": "r", "author": "x", "date": "2020-01-%02d", "subject": "%s: change %d", )"
                  R"("text": "this change fixes thing %d when the input is empty"})" "\n",
                  i, i + 1, i % 2 ? "net" : "core", i, i);
    jsonl += line;
  }
  write("commits.jsonl", jsonl);
  ASSERT_EQ(run("train-tokenizer --input commits.jsonl --vocab-size 300 --out tok --quiet").rc, 0);
  auto r = run("train-lm --input commits.jsonl --tokenizer tok --out lm --hidden 32 --layers 1 --heads 2 --kv-heads 1 "
               "--intermediate 64 --seq-len 32 --quiet");
  ASSERT_EQ(r.rc, 0) << r.err;
  // Pretraining on two sources: each line's fields one text (--join-fields, in --fields order: a
  // passage then its name), a seeded sample of each source (--max-texts, one count per input).
  std::string passages;
  for (int i = 0; i < 5; ++i)
    passages += R"({"title": "pkg)" + std::to_string(i) + R"(", "text": "a tool that does thing )" + std::to_string(i) + "\"}\n";
  write("passages.jsonl", passages);
  const std::string joint = "train-lm --input commits.jsonl --input passages.jsonl --fields text,title,subject --join-fields "
                            "--max-texts 10,0 --tokenizer tok --hidden 32 --layers 1 --heads 2 --kv-heads 1 --intermediate 64 "
                            "--seq-len 32 --quiet --out ";
  r = run(joint + "lmj");
  ASSERT_EQ(r.rc, 0) << r.err;
  const std::string data = nlohmann::json::parse(slurp(dir_ / "lmj/attune_train.json")).at("data");
  EXPECT_NE(data.find("commits.jsonl (10 of 24 texts, a seeded sample, fields joined)"), std::string::npos) << data;
  EXPECT_NE(data.find("passages.jsonl (5 texts, fields joined)"), std::string::npos) << data;
  ASSERT_EQ(run(joint + "lmj2").rc, 0);  // the same sample and weights again
  EXPECT_EQ(slurp(dir_ / "lmj/model.safetensors"), slurp(dir_ / "lmj2/model.safetensors"));
  // --sample-texts: the same seeded sample of each input, also of one input alone (--max-texts N
  // would take its first N texts).
  r = run("train-lm --input commits.jsonl --input passages.jsonl --fields text,title,subject --join-fields --sample-texts 10,0 "
          "--tokenizer tok --hidden 32 --layers 1 --heads 2 --kv-heads 1 --intermediate 64 --seq-len 32 --quiet --out lmj3");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(slurp(dir_ / "lmj/model.safetensors"), slurp(dir_ / "lmj3/model.safetensors"));
  const std::string one = "train-lm --input commits.jsonl --tokenizer tok --hidden 32 --layers 1 --heads 2 --kv-heads 1 "
                          "--intermediate 64 --seq-len 16 --quiet ";
  ASSERT_EQ(run(one + "--sample-texts 20 --out lms").rc, 0);
  ASSERT_EQ(run(one + "--max-texts 20 --out lmf").rc, 0);
  const std::string sdata = nlohmann::json::parse(slurp(dir_ / "lms/attune_train.json")).at("data");
  EXPECT_NE(sdata.find("commits.jsonl (20 of 48 texts, a seeded sample)"), std::string::npos) << sdata;
  EXPECT_NE(slurp(dir_ / "lms/model.safetensors"), slurp(dir_ / "lmf/model.safetensors")) << "a sample, not the first 20";
  // --group-by: each author's lines packed together (a chain of BM25 neighbours), recorded, deterministic;
  // the same texts in another order train other weights. A line without the field is a group of its own.
  std::string two = jsonl;
  for (int i = 0; i < 12; ++i)
    two += R"({"id": "d)" + std::to_string(i) + R"(", "author": "y", "subject": "docs: typo )" + std::to_string(i % 3) +
           R"(", "text": "spelling in the manual page )" + std::to_string(i % 4) + "\"}\n";
  two += R"({"id": "e", "subject": "a line without an author", "text": "it stays where it is"})" "\n";
  write("two.jsonl", two);
  const std::string grouped = "train-lm --input two.jsonl --tokenizer tok --hidden 32 --layers 1 --heads 2 --kv-heads 1 "
                              "--intermediate 64 --seq-len 16 --quiet --sample-texts 0 ";
  r = run(grouped + "--group-by author --out lmg");
  ASSERT_EQ(r.rc, 0) << r.err;
  const std::string gdata = nlohmann::json::parse(slurp(dir_ / "lmg/attune_train.json")).at("data");
  EXPECT_NE(gdata.find("two.jsonl (74 texts, grouped by author)"), std::string::npos) << gdata;
  ASSERT_EQ(run(grouped + "--group-by author --out lmg2").rc, 0);
  EXPECT_EQ(slurp(dir_ / "lmg/model.safetensors"), slurp(dir_ / "lmg2/model.safetensors"));
  ASSERT_EQ(run(grouped + "--out lmg3").rc, 0);
  EXPECT_NE(slurp(dir_ / "lmg/model.safetensors"), slurp(dir_ / "lmg3/model.safetensors")) << "the same texts in file order";
  // An input no line of which has the field is named on stderr (also with --quiet) and kept in file order.
  r = run("train-lm --input two.jsonl --input passages.jsonl --group-by author --tokenizer tok --hidden 32 --layers 1 --heads 2 "
          "--kv-heads 1 --intermediate 64 --seq-len 16 --quiet --out lmg4");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.err.find("passages.jsonl: no line has a string \"author\": its texts stay in file order"), std::string::npos) << r.err;
  const std::string g4 = nlohmann::json::parse(slurp(dir_ / "lmg4/attune_train.json")).at("data");
  EXPECT_NE(g4.find("two.jsonl (74 texts, grouped by author) + passages.jsonl (10 texts)"), std::string::npos) << g4;
  r = run("train-lm --stage reader --init lm --input commits.jsonl --out rd");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.err.find("no commit_pick example in the commits of --input (left out of the default --tasks)"), std::string::npos)
      << r.err;
  const auto rec = nlohmann::json::parse(slurp(dir_ / "rd/attune_train.json"));
  // The record names each task's count and the document modes it drew from (the defaults here).
  const std::string six = "none/bm25/bm25-shuffled/random/recency/bm25+best";
  EXPECT_NE(rec.at("data").get<std::string>().find("commit_subject 23 of " + six + ", commit_area 23 of " + six), std::string::npos)
      << rec.at("data");
  EXPECT_TRUE(fs::exists(dir_ / "rd/attune_reader.json"));
  // Modes for one task (TASK=MODE/MODE), the rest for the others; each keeps those it has.
  r = run("train-lm --stage reader --init lm --input commits.jsonl --out rdm --quiet "
          "--reader-modes commit_subject=bm25/bm25+best,none,random,bm25+gold");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(nlohmann::json::parse(slurp(dir_ / "rdm/attune_train.json")).at("data").get<std::string>().find(
                "commit_subject 23 of bm25/bm25+best, commit_area 23 of none/random"),
            std::string::npos);
  r = run("train-lm --stage reader --init lm --input commits.jsonl --out rd2 --tasks commit_subject,commit_pick --quiet");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("--tasks commit_pick: the inputs give no example of it"), std::string::npos) << r.err;
  // Histories that give no example of any default task (every author one commit): refused.
  std::string lonely;
  for (int i = 0; i < 3; ++i)
    lonely += R"({"id": "l)" + std::to_string(i) + R"(", "repo": "r", "author": "a)" + std::to_string(i) +
              R"(", "date": "2020-01-01", "subject": "net: one", "text": "a lone commit"})" "\n";
  write("lonely.jsonl", lonely);
  r = run("train-lm --stage reader --init lm --input lonely.jsonl --out rd3 --quiet");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("the inputs give no example of any of them"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "rd3" / "model.safetensors"));
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

// Classification metrics score against the dataset's labels.json (beside the golds), not a
// built-in list that disagrees with the data; a gold outside the effective list is refused.
TEST_F(Cli, MetricsReadTheDatasetsLabelsAndRefuseGoldsOutsideThem) {
  write("area/dev_outputs.json",
        R"({"task": "commit_area", "golds": [{"id": "a", "output": "net"}, {"id": "b", "output": "fs"}, {"id": "c", "output": "mm"}]})");
  write("p.jsonl", "{\"id\": \"a\", \"output\": \"net\"}\n{\"id\": \"b\", \"output\": \"fs\"}\n{\"id\": \"c\", \"output\": \"mm\"}\n");
  // Without a list beside the golds: git's built-in list, which has none of these labels.
  auto r = run("metrics --task commit_area --predictions p.jsonl --golds area/dev_outputs.json");
  EXPECT_EQ(r.rc, 1);
  for (const char* part : {"area/dev_outputs.json: golds[0] (id \"a\"): field \"output\": gold \"net\" is not one of the 15 labels",
                           "the built-in list of commit_area", "labels.json"})
    EXPECT_NE(r.err.find(part), std::string::npos) << part << " in " << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  // The dataset's own list beside the golds: perfect predictions score 1.
  write("area/labels.json", R"(["net", "fs", "mm", "sched"])");
  r = run("metrics --task commit_area --predictions p.jsonl --golds area/dev_outputs.json");
  ASSERT_EQ(r.rc, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_DOUBLE_EQ(j["accuracy"].get<double>(), 1.0);
  // sched has no support and no prediction: F1 0 for it (sklearn's zero_division=0), 3/4.
  EXPECT_DOUBLE_EQ(j["f1"].get<double>(), 0.75);
  // A --labels list missing one of the data's labels refuses, naming the list.
  write("short.json", R"(["net", "fs"])");
  r = run("metrics --task commit_area --predictions p.jsonl --golds area/dev_outputs.json --labels short.json");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("golds[2] (id \"c\"): field \"output\": gold \"mm\" is not one of the 2 labels of commit_area (from short.json)"),
            std::string::npos) << r.err;
  // An out-of-set prediction is wrong and nobody's positive: mm loses its only TP (F1 0).
  write("p2.jsonl", "{\"id\": \"a\", \"output\": \"net\"}\n{\"id\": \"b\", \"output\": \"fs\"}\n{\"id\": \"c\", \"output\": \"memory\"}\n");
  r = run("metrics --task commit_area --predictions p2.jsonl --golds area/dev_outputs.json");
  ASSERT_EQ(r.rc, 0) << r.err;
  j = nlohmann::json::parse(r.out);
  EXPECT_NEAR(j["accuracy"].get<double>(), 2.0 / 3.0, 1e-12);
  EXPECT_DOUBLE_EQ(j["f1"].get<double>(), 0.5);
  // --labels on a task without labels is a usage error.
  r = run("metrics --task lamp4 --predictions p.jsonl --golds area/dev_outputs.json --labels short.json");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("takes no label list (option --labels)"), std::string::npos) << r.err;
}

TEST_F(Cli, MetricsGoldsDuplicatesIntegerIdsNumbersAndEmpty) {
  write("dup.json", R"({"task": "LaMP_3", "golds": [{"id": "a", "output": "5"}, {"id": "a", "output": "5"}]})");
  write("p.jsonl", "{\"id\": \"a\", \"output\": \"5\"}\n");
  auto r = run("metrics --task lamp3 --predictions p.jsonl --golds dup.json");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("dup.json: golds[1] (id \"a\"): field \"id\": duplicate gold id (first at golds[0])"), std::string::npos) << r.err;
  // Integer ids and numeric outputs, in the golds and in the predictions.
  write("g.json", R"({"task": "LaMP_3", "golds": [{"id": 1, "output": 5}, {"id": "2", "output": 1}]})");
  write("n.jsonl", "{\"id\": 1, \"output\": 4}\n{\"id\": 2, \"output\": \"1\"}\n");
  r = run("metrics --task lamp3 --predictions n.jsonl --golds g.json");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_DOUBLE_EQ(nlohmann::json::parse(r.out)["mae"].get<double>(), 0.5);
  write("pd.jsonl", "{\"id\": 1, \"output\": 4}\n{\"id\": \"1\", \"output\": 4}\n");
  r = run("metrics --task lamp3 --predictions pd.jsonl --golds g.json");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("pd.jsonl: line 2 (id \"1\"): field \"id\": duplicate id (first on line 1)"), std::string::npos) << r.err;
  write("empty.json", R"({"task": "LaMP_3", "golds": []})");
  r = run("metrics --task lamp3 --predictions n.jsonl --golds empty.json");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("empty.json: no golds"), std::string::npos) << r.err;
}

TEST_F(Cli, DataAndQuestionsTogetherAreAUsageError) {
  const std::string g = kSample + "/commit_subject/";
  auto r = run("import --data " + kSample + " --task commit_subject --questions " + g + "dev_questions.json --store s.db");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("--data"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--questions"), std::string::npos) << r.err;
  r = run("eval --data " + kSample + " --task commit_subject --outputs " + g + "dev_outputs.json --quiet --store s.db");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("--outputs"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--questions"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "s.db"));
}

TEST_F(Cli, EmptyQuestionsAndEmptyCorpusAreRefused) {
  write("q.json", "[]");
  write("o.json", R"({"task": "LaMP_4", "golds": []})");
  auto r = run("import --task lamp4 --questions q.json --outputs o.json --store s.db");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("q.json: no examples"), std::string::npos) << r.err;
  r = run("eval --task lamp4 --questions q.json --outputs o.json --background o.json --quiet --store s.db");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("q.json: no examples"), std::string::npos) << r.err;
  write("deb/tiny_corpus.jsonl", "\n");
  write("deb/qa_dev.jsonl", "{\"id\": \"q1\", \"input\": \"Which Debian package is described as: x?\", \"output\": \"p\"}\n");
  r = run("eval --data deb --task qa --retrievers bm25 --llm planted:first --quiet --store s.db");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("deb/tiny_corpus.jsonl: empty corpus"), std::string::npos) << r.err;
}

TEST_F(Cli, EvalRefusesAGoldDocThatIsNotInTheCorpus) {
  write("deb/tiny_corpus.jsonl", "{\"id\": \"p1\", \"title\": \"p1\", \"text\": \"a network tool\"}\n"
                                 "{\"id\": \"p2\", \"title\": \"p2\", \"text\": \"an audio tool\"}\n");
  write("deb/qa_dev.jsonl",
        "{\"id\": \"q1\", \"input\": \"Which Debian package is described as: network?\", \"output\": \"p1\", \"gold_doc\": \"p1\"}\n"
        "{\"id\": \"q2\", \"input\": \"Which Debian package is described as: audio?\", \"output\": \"p2\", \"gold_doc\": \"p-2\"}\n");
  write("deb/qa_train.jsonl", "{\"id\": \"t1\", \"input\": \"Which Debian package is described as: x?\", \"output\": \"p1\"}\n");
  auto r = run("eval --data deb --task qa --retrievers bm25 --quiet --store s.db");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("deb/qa_dev.jsonl: line 2 (id \"q2\"): field \"gold_doc\": no passage with id \"p-2\" in the corpus deb/tiny_corpus.jsonl"),
            std::string::npos) << r.err;
  write("deb/qa_dev.jsonl",
        "{\"id\": \"q1\", \"input\": \"Which Debian package is described as: network?\", \"output\": \"p1\", \"gold_doc\": \"p1\"}\n");
  r = run("eval --data deb --task qa --retrievers bm25 --quiet --store s.db");
  EXPECT_EQ(r.rc, 0) << r.err;
}

// eval --questions/--outputs reads labels.json beside the questions (or --labels), as --data does.
TEST_F(Cli, EvalWithQuestionsFilesReadsTheLabelsBesideThem) {
  const std::string q = R"([{"id": "a", "input": "x description: fix the net", "profile": [{"id": "1", "description": "net fix", "tag": "net"}]},
                            {"id": "b", "input": "x description: fix the fs", "profile": [{"id": "2", "description": "fs fix", "tag": "fs"}]}])";
  const std::string o = R"({"task": "commit_area", "golds": [{"id": "a", "output": "net"}, {"id": "b", "output": "fs"}]})";
  write("area/dev_questions.json", q);
  write("area/dev_outputs.json", o);
  const std::string files = "--task commit_area --questions area/dev_questions.json --outputs area/dev_outputs.json "
                            "--background area/dev_outputs.json --retrievers none --quiet --store s.db";
  auto r = run("eval " + files);
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("area/dev_outputs.json: golds[0] (id \"a\"): field \"output\": gold \"net\" is not one of the 15 labels"),
            std::string::npos) << r.err;
  write("labels.json", R"(["net", "fs"])");
  r = run("eval " + files + " --labels labels.json");
  EXPECT_EQ(r.rc, 0) << r.err;
  write("area/labels.json", R"(["net", "fs", "mm"])");
  r = run("eval " + files);
  EXPECT_EQ(r.rc, 0) << r.err;
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

TEST_F(Cli, OutputsGoToStdoutWithADashAndFailedStdoutWritesExitOne) {
  auto r = run("rank --data " + kSample + " --task commit_subject --split dev --retriever bm25 --k 2 --out - --store s.db");
  ASSERT_EQ(r.rc, 0) << r.err;
  std::istringstream lines(r.out);
  std::string line;
  std::size_t n = 0;
  while (std::getline(lines, line)) {
    EXPECT_EQ(nlohmann::json::parse(line)["ranking"].size(), 2u);
    ++n;
  }
  EXPECT_EQ(n, 72u);
  EXPECT_FALSE(fs::exists(dir_ / "-"));
  // A symlinked --out is written through.
  write("real.jsonl", "");
  fs::create_symlink("real.jsonl", dir_ / "link.jsonl");
  ASSERT_EQ(run("rank --data " + kSample + " --task commit_subject --split dev --retriever bm25 --k 2 --out link.jsonl --store s.db").rc, 0);
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(dir_ / "link.jsonl")));
  EXPECT_EQ(slurp(dir_ / "real.jsonl"), r.out);
  // Every verb that prints fails (exit 1) when standard output cannot be written.
  const std::string bin = std::string(ATTUNE_BINARY_DIR) + "/tools/attune/attune";
  for (const std::string& verb :
       {"eval --data " + kSample + " --task commit_subject --split dev --retrievers none --quiet --store s.db",
        "import --data " + kSample + " --task commit_subject --store s.db"}) {
    const std::string cmd = "cd '" + dir_.string() + "' && '" + bin + "' " + verb + " > /dev/full 2>err.txt";
    const int status = std::system(cmd.c_str());
    EXPECT_EQ(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 1) << verb;
    EXPECT_NE(slurp(dir_ / "err.txt").find("standard output"), std::string::npos) << verb << ": " << slurp(dir_ / "err.txt");
  }
}

TEST_F(Cli, AStoreThatKeepsNothingIsRefused) {
  for (const std::string store : {"''", ":memory:", "file::memory:?cache=shared", "'file:x.db?mode=memory'"}) {
    auto r = run("import --data " + kSample + " --task commit_subject --store " + store);
    EXPECT_EQ(r.rc, 2) << store;
    EXPECT_NE(r.err.find("--store"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(store == "''" ? "is empty" : "in-memory database"), std::string::npos) << r.err;
  }
  auto e = run("eval --data " + kSample + " --task commit_subject --split dev --retrievers none --quiet --store ''");
  EXPECT_EQ(e.rc, 2);
  EXPECT_NE(e.err.find("--store is empty"), std::string::npos) << e.err;
  EXPECT_EQ(run("import --data " + kSample + " --task commit_subject --store kept.db").rc, 0);
  EXPECT_TRUE(fs::exists(dir_ / "kept.db"));
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

// eval --agents: one evaluation per agent (its task, language model and k), then each row's
// macro average over the agents with significance on the pooled examples (paper 002's Table 1).
TEST_F(Cli, EvalForEachAgentThenTheMacroAverage) {
  {
    std::ofstream a(dir_ / "agents.json");
    a << R"({"agents": [{"name": "ref", "task": "commit_subject", "llm": "reference", "k": 2},
                        {"name": "first", "task": "commit_subject", "llm": "planted:first", "k": 1}]})";
  }
  auto r = run("eval --data " + kSample + " --agents agents.json --split dev --retrievers none,bm25 --limit 20 --out m.json --store s.db");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("agent ref: task commit_subject, llm reference, k 2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("agent first: task commit_subject, llm planted:first, k 1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("macro average over 2 agents (40 examples pooled)"), std::string::npos) << r.out;
  const auto j = nlohmann::json::parse(slurp(dir_ / "m.json"));
  ASSERT_EQ(j["agents"].size(), 2u);
  EXPECT_EQ(j["agents"][1]["report"]["k"], 1);
  EXPECT_EQ(j["agents"][1]["report"]["per_example"]["bm25"].size(), 20u);
  const double ref = j["agents"][0]["report"]["results"]["bm25"]["rouge-1"], first = j["agents"][1]["report"]["results"]["bm25"]["rouge-1"];
  EXPECT_DOUBLE_EQ(j["macro"]["rows"]["bm25"]["agents"]["first"].get<double>(), first);
  EXPECT_NEAR(j["macro"]["rows"]["bm25"]["macro"].get<double>(), (ref + first) / 2, 1e-12);
  EXPECT_TRUE(j["macro"]["significance"]["bm25"].contains("none"));
  // Each agent names its own task and language model and k: those options are refused beside it.
  for (const std::string extra : {"--llm reference", "--k 3", "--task commit_subject"}) {
    auto bad = run("eval --data " + kSample + " --agents agents.json --split dev --retrievers bm25 --limit 5 " + extra);
    EXPECT_EQ(bad.rc, 2) << extra << ": " << bad.err;
  }
  auto none = run("eval --data " + kSample + " --split dev --retrievers bm25");
  EXPECT_EQ(none.rc, 2);
  EXPECT_NE(none.err.find("--task is required (or --agents FILE)"), std::string::npos) << none.err;
  auto missing = run("eval --data " + kSample + " --agents nowhere.json --split dev --retrievers bm25");
  EXPECT_EQ(missing.rc, 2);
  EXPECT_NE(missing.err.find("--agents nowhere.json: no such file"), std::string::npos) << missing.err;
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
  // --decode copy: the answer is a span of the prompt.
  auto copy = run("generate --llm local:" + model + " --prompt 'Lily saw a big red dog in the park.' --decode copy --max-new-tokens 10 --device cpu");
  ASSERT_EQ(copy.rc, 0) << copy.err;
  std::string answer = copy.out.substr(0, copy.out.find_last_not_of('\n') + 1);
  answer.erase(0, answer.find_first_not_of(" \t\n"));
  EXPECT_FALSE(answer.empty()) << copy.out;
  EXPECT_NE(std::string("Lily saw a big red dog in the park.").find(answer), std::string::npos) << copy.out;
  // feedback --decode copy: its records are filed under "ID;decode=copy" and leave free decoding's as they were.
  const std::string fb = "feedback --data " + kSample + " --task commit_subject --split dev --llm local:" + model +
                         " --limit 2 --top-l 2 --max-new-tokens 8 --device cpu --quiet --store fb.db";
  ASSERT_EQ(run(fb).rc, 0);
  const auto records_of = [&](std::size_t nth) {
    auto st = attune::store::open_sqlite(dir_ / "fb.db");
    std::vector<attune::store::RunRecord> runs;
    for (const auto& r : st->runs())
      if (r.verb == "feedback") runs.push_back(r);
    const auto j = nlohmann::json::parse(runs.at(nth).summary_json);
    return std::pair{j.at("records_model").get<std::string>(),
                     st->feedback_get(j.at("dataset").get<std::string>(), "doc", j.at("records_model").get<std::string>())};
  };
  const auto [free_model, freely] = records_of(0);
  auto copied_run = run(fb + " --decode copy");
  ASSERT_EQ(copied_run.rc, 0) << copied_run.err;
  const auto [copy_model, copied] = records_of(1);
  EXPECT_EQ(copy_model, free_model + ";decode=copy");
  ASSERT_EQ(freely.size(), 4u);
  ASSERT_EQ(copied.size(), 4u);
  const auto [again_model, again] = records_of(0);
  ASSERT_EQ(again.size(), 4u);
  bool differs = false;
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(again[i].output, freely[i].output);
    EXPECT_FALSE(copied[i].output.empty());
    differs |= copied[i].output != freely[i].output;
  }
  EXPECT_TRUE(differs) << "copy and free decoding gave the same four answers";
  // The model's context (512 positions) holds at least one prompt token: 511 new tokens at most.
  auto past = run("generate --llm local:" + model + " --prompt '' --max-new-tokens 512 --device cpu");
  EXPECT_EQ(past.rc, 2);
  EXPECT_NE(past.err.find("max_new_tokens = 512: must be below the context of"), std::string::npos) << past.err;
  EXPECT_NE(past.err.find("(512 positions, the prompt's first token included): at most 511 (option --max-new-tokens)"),
            std::string::npos) << past.err;
  EXPECT_EQ(std::count(past.err.begin(), past.err.end(), '\n'), 1) << past.err;
  auto last = run("generate --llm local:" + model + " --prompt '' --max-new-tokens 511 --device cpu");
  EXPECT_EQ(last.rc, 0) << last.err;
  // eval refuses it before any retrieval or generation.
  auto ev = run("eval --data " + kSample + " --task commit_subject --split dev --retrievers none --llm local:" + model +
                " --max-new-tokens 100000 --device cpu --quiet --store s.db");
  EXPECT_EQ(ev.rc, 2);
  EXPECT_NE(ev.err.find("at most 511 (option --max-new-tokens)"), std::string::npos) << ev.err;
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
  // One line naming the file (core/file.h adds the reason: "cannot open: No such file ...").
  EXPECT_EQ(no_file.err.rfind("attune: absent.txt: cannot open", 0), 0u) << no_file.err;
  EXPECT_EQ(std::count(no_file.err.begin(), no_file.err.end(), '\n'), 1) << no_file.err;
  write("p.txt", "x");
  auto two = run("score --llm reference --prompt x --prompt-file p.txt --target y");
  EXPECT_EQ(two.rc, 2);
  EXPECT_NE(two.err.find("not both"), std::string::npos) << two.err;
  auto top_p = run("generate --llm reference --prompt x --temperature 1 --top-p 0");
  EXPECT_EQ(top_p.rc, 2);
  EXPECT_NE(top_p.err.find("top_p = 0: must be in (0, 1] (option --top-p)"), std::string::npos) << top_p.err;
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

// A corpus task: dense:DIR searches the whole corpus itself (not BM25's hits), its
// passage embeddings are cached in the store, and rrf(bm25,dense:DIR) ranks the union.
TEST_F(Cli, DenseSearchesTheWholeCorpusOnCorpusTasksAndCachesItsEmbeddings) {
  const std::string vocab = std::string(ATTUNE_SHARED_DIR) + "/models/bert-base-uncased-vocab";
  if (!fs::exists(vocab + "/vocab.txt")) GTEST_SKIP() << "needs ../shared/models/bert-base-uncased-vocab (absent in this checkout)";
  const char* words[] = {"network", "server", "library", "kernel", "python", "file", "system", "client", "image", "audio"};
  std::string corpus, dev, train;
  for (int i = 0; i < 60; ++i) {
    const std::string pkg = "pkg" + std::to_string(i);
    const std::string text = std::string("Section: misc. A ") + words[i % 10] + " tool for " + words[(i / 10) % 10] + " work.";
    corpus += nlohmann::json({{"id", pkg}, {"title", pkg}, {"text", text}}).dump() + "\n";
    const std::string q = std::string("Which Debian package is described as: ") + words[i % 10] + " " + words[(i / 10) % 10] + "?";
    (i % 6 == 0 ? dev : train) += nlohmann::json({{"id", "qa-" + pkg}, {"input", q}, {"output", pkg}, {"gold_doc", pkg}}).dump() + "\n";
  }
  write("deb/tiny_corpus.jsonl", corpus);
  write("deb/qa_dev.jsonl", dev);
  write("deb/qa_train.jsonl", train);
  auto p = run("pretrain-encoder --data deb --task qa --tokenizer " + vocab +
               " --hidden 32 --layers 1 --heads 2 --max-length 32 --batch-size 8 --quiet --seed 3 --steps 2 --out enc");
  ASSERT_EQ(p.rc, 0) << p.err;
  // rank --k 0: BM25 ranks only passages sharing a query word; dense ranks its own top-100,
  // here the whole 60-passage corpus.
  auto b = run("rank --data deb --task qa --split dev --retriever bm25 --k 0 --out bm25.jsonl --quiet");
  ASSERT_EQ(b.rc, 0) << b.err;
  auto dn = run("rank --data deb --task qa --split dev --retriever dense:enc --k 0 --out dense.jsonl --device cpu");
  ASSERT_EQ(dn.rc, 0) << dn.err;
  EXPECT_NE(dn.err.find("embedding 60 of 60 corpus passages"), std::string::npos) << dn.err;
  std::ifstream bin(dir_ / "bm25.jsonl"), din(dir_ / "dense.jsonl");
  std::string bl, dl;
  std::size_t lines = 0;
  while (std::getline(bin, bl) && std::getline(din, dl)) {
    auto bj = nlohmann::json::parse(bl), dj = nlohmann::json::parse(dl);
    EXPECT_LT(bj["ranking"].size(), 60u);
    EXPECT_EQ(dj["ranking"].size(), 60u);
    ++lines;
  }
  EXPECT_EQ(lines, 10u);
  // eval: the embeddings come from the store now; r@5 for each retriever's own ranking.
  auto e = run("eval --data deb --task qa --split dev --retrievers bm25,dense:enc,'rrf(bm25,dense:enc)' --llm reference --out e.json");
  ASSERT_EQ(e.rc, 0) << e.err;
  EXPECT_EQ(e.err.find("embedding 60"), std::string::npos) << e.err;
  auto rep = nlohmann::json::parse(slurp(dir_ / "e.json"));
  for (auto spec : {"bm25", "dense:enc", "rrf(bm25,dense:enc)"}) {
    ASSERT_TRUE(rep["results"].contains(spec)) << rep["results"].dump();
    EXPECT_TRUE(rep["results"][spec].contains("r@5")) << spec;
  }
  auto fb = run("feedback --data deb --task qa --split dev --kind doc --initial dense:enc --top-l 3 --llm reference --quiet");
  ASSERT_EQ(fb.rc, 0) << fb.err;
  EXPECT_NE(fb.out.find("30 records"), std::string::npos) << fb.out;
  auto missing = run("eval --data deb --task qa --split dev --retrievers dense:nowhere --llm reference --quiet");
  EXPECT_NE(missing.rc, 0);
  EXPECT_EQ(std::count(missing.err.begin(), missing.err.end(), '\n'), 1) << missing.err;
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
  // --resume with nothing to resume fails before any text is read (here: an --add-source
  // that does not exist would fail later, and is not the error reported).
  auto nothing = run("pretrain-encoder " + common + " --steps 4 --out fresh --resume --add-source nowhere:qa");
  EXPECT_EQ(nothing.rc, 2);
  EXPECT_NE(nothing.err.find("no checkpoint to resume"), std::string::npos) << nothing.err;
  // --add-source mixes another dataset in (profiles + a corpus); a malformed one is refused.
  std::string corpus;
  for (int i = 0; i < 6; ++i)
    corpus += "{\"id\": \"p" + std::to_string(i) + "\", \"title\": \"pkg" + std::to_string(i) +
              "\", \"text\": \"Section: utils. a tool that does thing number " + std::to_string(i) + " well\"}\n";
  write("deb/tiny_corpus.jsonl", corpus);
  auto mixed = run("pretrain-encoder " + common + " --steps 2 --out mixed --add-source deb:qa");
  ASSERT_EQ(mixed.rc, 0) << mixed.err;
  const auto mixed_meta = nlohmann::json::parse(slurp(dir_ / "mixed" / "attune_train.json"));
  EXPECT_GE(mixed_meta["torch_threads"].get<int>(), 1);
  const std::string described = mixed_meta["data"];
  EXPECT_NE(described.find("train profiles"), std::string::npos) << described;
  EXPECT_NE(described.find(" + "), std::string::npos) << described;
  EXPECT_NE(described.find("(6 passages)"), std::string::npos) << described;
  auto bad = run("pretrain-encoder " + common + " --steps 2 --out bad --add-source " + kSample);
  EXPECT_EQ(bad.rc, 2);
  EXPECT_NE(bad.err.find("expected DIR:TASK"), std::string::npos) << bad.err;
  // --add-texts: a commits.jsonl-like file, subject and description joined into one text a
  // line; a repeated line is one text, a line with neither field is counted, not guessed.
  write("commits.jsonl",
        "{\"id\": \"c1\", \"subject\": \"fix the parser\", \"text\": \"the parser read one byte too many\"}\n"
        "{\"id\": \"c2\", \"subject\": \"add a test\", \"text\": \"covers the empty input\"}\n"
        "{\"id\": \"c1\", \"subject\": \"fix the parser\", \"text\": \"the parser read one byte too many\"}\n"
        "{\"id\": \"c3\", \"author\": \"x\"}\n");
  auto texts = run("pretrain-encoder " + common + " --steps 2 --out texts --add-texts commits.jsonl");
  ASSERT_EQ(texts.rc, 0) << texts.err;
  const std::string with_texts = nlohmann::json::parse(slurp(dir_ / "texts" / "attune_train.json"))["data"];
  EXPECT_NE(with_texts.find("commits.jsonl (2 texts, 1 repeats left out, 1 lines without a field)"), std::string::npos)
      << with_texts;
  for (const auto& [args, message] : std::vector<std::pair<std::string, std::string>>{
           {"--add-texts nope.jsonl", "--add-texts nope.jsonl: no such file"},
           {"--add-texts commits.jsonl --text-fields missing", "no line has a non-empty string among --text-fields missing"},
           {"--add-texts commits.jsonl --text-fields ,", "--text-fields: name at least one field"}}) {
    auto refused = run("pretrain-encoder " + common + " --steps 2 --out refused " + args);
    EXPECT_NE(refused.rc, 0) << args;
    EXPECT_NE(refused.err.find(message), std::string::npos) << args << ": " << refused.err;
  }
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

// attune train (ROPG) end to end: doc feedback collected on the way, a --config file, the
// trained folder usable as a plain retriever spec, resume and bad-input refusals.
TEST_F(Cli, TrainRopgThenEvalTheTrainedFolder) {
  const std::string data = "--data " + kSample + " --task commit_subject";
  if (!tiny_encoder(data)) GTEST_SKIP() << "needs ../shared/models/bert-base-uncased-vocab (absent in this checkout)";
  write("kd.toml", "# ROPG-KD, tiny\nmethod = \"ropg-kd\"\nepochs = 2\nbatch_size = 32  # examples per step\nlr = 1e-4\n"
                   "[data]\nlimit = 40\ndev-limit = 10\n");
  auto t = run("train --config kd.toml " + data + " --init enc --out kd --seed 5 --device cpu --threads 1");
  ASSERT_EQ(t.rc, 0) << t.err;
  EXPECT_NE(t.out.find("trained ropg-kd on 40 commit_subject train examples"), std::string::npos) << t.out;
  EXPECT_NE(t.err.find("doc feedback on commit_subject train"), std::string::npos) << t.err;
  EXPECT_NE(t.err.find("epoch 2/2"), std::string::npos) << t.err;
  auto meta = nlohmann::json::parse(slurp(dir_ / "kd" / "attune_train.json"));
  EXPECT_EQ(meta["method"], "ropg-kd");
  EXPECT_EQ(meta["seed"], 5);
  EXPECT_EQ(meta["torch_threads"], 1);  // --threads sets torch's threads too, and the run records them
  EXPECT_EQ(meta["options"]["epochs"], 2);
  EXPECT_EQ(meta["options"]["batch_size"], 32);
  EXPECT_EQ(meta["epochs"].size(), 2u);
  // The command line wins over the file.
  auto t2 = run("train --config kd.toml " + data + " --init enc --out kd1 --epochs 1 --target-temperature 0.1 --quiet --device cpu");
  ASSERT_EQ(t2.rc, 0) << t2.err;
  const auto meta1 = nlohmann::json::parse(slurp(dir_ / "kd1" / "attune_train.json"));
  EXPECT_EQ(meta1["options"]["epochs"], 1);
  EXPECT_EQ(meta1["options"]["target_temperature"], 0.1);
  EXPECT_EQ(meta["options"]["target_temperature"], 1.0);  // the paper's, by default
  // A temperature that means nothing for the method is refused, not ignored.
  auto rl_t = run("train --method ropg-rl " + data + " --init enc --out x --target-temperature 0.5 --quiet");
  EXPECT_EQ(rl_t.rc, 2);
  EXPECT_NE(rl_t.err.find("--target-temperature applies to ropg-kd"), std::string::npos) << rl_t.err;
  EXPECT_EQ(run("train --method ropg-kd " + data + " --init enc --out x --target-temperature -1 --quiet").rc, 2);
  // A bad option value is refused before any work, naming the value and the flag.
  auto bad_lr = run("train --method ropg-kd " + data + " --init enc --out x --lr -1 --quiet");
  EXPECT_EQ(bad_lr.rc, 2);
  EXPECT_NE(bad_lr.err.find("fit.lr = -1: must be a number >= 0 (0 = learning switched off, a control run) (option --lr)"), std::string::npos) << bad_lr.err;
  EXPECT_EQ(bad_lr.err.find("feedback"), std::string::npos) << bad_lr.err;
  // Feedback came from the store's cache the second time.
  auto rl = run("train --method ropg-rl " + data + " --init enc --out rl --epochs 1 --batch-size 32 --limit 40 --dev-limit 10 --device cpu");
  ASSERT_EQ(rl.rc, 0) << rl.err;
  EXPECT_NE(rl.err.find("(0 new model calls"), std::string::npos) << rl.err;
  // --max-new-tokens reaches the feedback's generations: other outputs, so new model calls.
  auto short_gen = run("train --method ropg-rl " + data + " --init enc --out rl2 --epochs 1 --batch-size 32 --limit 40 --dev-limit 10 --device cpu --max-new-tokens 2");
  ASSERT_EQ(short_gen.rc, 0) << short_gen.err;
  EXPECT_EQ(short_gen.err.find("(0 new model calls"), std::string::npos) << short_gen.err;
  EXPECT_NE(short_gen.err.find("new model calls"), std::string::npos) << short_gen.err;
  // --document-dates (paper 000's " date: DATE"): recorded in the run and the folder, which
  // eval then reads the same way; refused for a method it means nothing to.
  auto dated = run("train --method ropg-kd " + data + " --init enc --out kdd --epochs 1 --batch-size 32 --limit 40 --dev-limit 10 --device cpu --quiet --document-dates");
  ASSERT_EQ(dated.rc, 0) << dated.err;
  EXPECT_EQ(nlohmann::json::parse(slurp(dir_ / "kdd" / "attune_model.json")).value("document_dates", false), true);
  EXPECT_EQ(nlohmann::json::parse(slurp(dir_ / "kdd" / "attune_train.json"))["options"]["document_fields"], nlohmann::json({"date"}));
  EXPECT_FALSE(nlohmann::json::parse(slurp(dir_ / "kd" / "attune_model.json")).contains("document_dates"));
  // --document-fields: any field of the profile items (here commit_subject's title), recorded the same way.
  auto titled = run("train --method ropg-kd " + data + " --init enc --out kdt --epochs 1 --batch-size 32 --limit 40 --dev-limit 10 --device cpu --quiet --document-fields title");
  ASSERT_EQ(titled.rc, 0) << titled.err;
  EXPECT_EQ(nlohmann::json::parse(slurp(dir_ / "kdt" / "attune_model.json"))["document_fields"], nlohmann::json({"title"}));
  EXPECT_FALSE(nlohmann::json::parse(slurp(dir_ / "kdt" / "attune_model.json")).contains("document_dates"));
  EXPECT_EQ(nlohmann::json::parse(slurp(dir_ / "kdd" / "attune_model.json"))["document_fields"], nlohmann::json({"date"}));
  auto no_field = run("train --method ropg-kd " + data + " --init enc --out x --epochs 1 --limit 40 --dev-limit 10 --quiet --document-fields tag");
  EXPECT_EQ(no_field.rc, 2);
  EXPECT_NE(no_field.err.find("has no field \"tag\""), std::string::npos) << no_field.err;
  auto twice = run("train --method ropg-kd " + data + " --init enc --out x --quiet --document-dates --document-fields date");
  EXPECT_EQ(twice.rc, 2);
  EXPECT_NE(twice.err.find("\"date\" is named twice"), std::string::npos) << twice.err;
  auto fields_rspg = run("train --method rspg-pre " + data + " --init enc --out x --document-fields title --quiet");
  EXPECT_EQ(fields_rspg.rc, 2);
  EXPECT_NE(fields_rspg.err.find("--document-fields applies to ropg-kd, ropg-rl and luf"), std::string::npos) << fields_rspg.err;
  auto dated_rspg = run("train --method rspg-pre " + data + " --init enc --out x --document-dates --quiet");
  EXPECT_EQ(dated_rspg.rc, 2);
  EXPECT_NE(dated_rspg.err.find("--document-dates applies to ropg-kd, ropg-rl and luf"), std::string::npos) << dated_rspg.err;
  // --kd-target likelihood (REPLUG-LSR's signal): likelihood feedback on train, the task
  // metric's on dev (the kept epoch is chosen on what eval reports).
  auto lsr = run("train --method ropg-kd " + data + " --init enc --out kdl --epochs 1 --batch-size 32 --limit 40 --dev-limit 10 --device cpu --kd-target likelihood");
  ASSERT_EQ(lsr.rc, 0) << lsr.err;
  EXPECT_NE(lsr.err.find("likelihood feedback on commit_subject train"), std::string::npos) << lsr.err;
  EXPECT_NE(lsr.err.find("doc feedback on commit_subject dev"), std::string::npos) << lsr.err;
  EXPECT_EQ(nlohmann::json::parse(slurp(dir_ / "kdl" / "attune_train.json"))["options"]["kd_target"], "likelihood");
  EXPECT_EQ(meta["options"]["kd_target"], "utility");  // 000's, by default
  auto lsr_rl = run("train --method ropg-rl " + data + " --init enc --out x --kd-target likelihood --quiet");
  EXPECT_EQ(lsr_rl.rc, 2);
  EXPECT_NE(lsr_rl.err.find("--kd-target applies to ropg-kd"), std::string::npos) << lsr_rl.err;
  auto lsr_bad = run("train --method ropg-kd " + data + " --init enc --out x --kd-target replug --quiet");
  EXPECT_EQ(lsr_bad.rc, 2);
  EXPECT_NE(lsr_bad.err.find("expected utility or likelihood"), std::string::npos) << lsr_bad.err;
  auto e = run("eval " + data + " --split dev --retrievers bm25,dense:enc,kd,rl,kdd --llm reference --quiet --limit 20 --out e.json");
  ASSERT_EQ(e.rc, 0) << e.err;
  auto rep = nlohmann::json::parse(slurp(dir_ / "e.json"));
  for (auto spec : {"kd", "rl", "kdd"}) EXPECT_TRUE(rep["results"].contains(spec)) << rep["results"].dump();
  // A run that did not finish (killed: "complete": false) is refused as a spec unless asked.
  auto marker = nlohmann::json::parse(slurp(dir_ / "kd" / "attune_model.json"));
  EXPECT_EQ(marker["complete"], true);
  marker["complete"] = false;
  write("kd/attune_model.json", marker.dump());
  auto inc = run("eval " + data + " --split dev --retrievers bm25,kd --llm reference --quiet --limit 5");
  EXPECT_EQ(inc.rc, 2);
  EXPECT_NE(inc.err.find("is a training run that did not finish (step 4 of 4)"), std::string::npos) << inc.err;
  EXPECT_NE(inc.err.find("--allow-incomplete"), std::string::npos) << inc.err;
  EXPECT_EQ(run("eval " + data + " --split dev --retrievers bm25,kd --llm reference --quiet --limit 5 --allow-incomplete").rc, 0);
  marker["complete"] = true;
  write("kd/attune_model.json", marker.dump());
  // Refusals: the folder holds a run; unknown or unbuilt methods; no --init; a plain folder as a spec.
  EXPECT_EQ(run("train --method ropg-kd " + data + " --init enc --out kd --device cpu --quiet").rc, 2);
  auto resumed = run("train --config kd.toml " + data + " --init enc --out kd --resume --seed 5 --device cpu --quiet");
  EXPECT_EQ(resumed.rc, 0) << resumed.err;  // finished run: nothing left to do, still fine
  auto other_seed = run("train --config kd.toml " + data + " --init enc --out kd --resume --seed 6 --device cpu --quiet");
  EXPECT_EQ(other_seed.rc, 2);
  EXPECT_NE(other_seed.err.find("\"seed\""), std::string::npos) << other_seed.err;
  EXPECT_EQ(run("train --method ropg " + data + " --init enc --out x").rc, 2);
  EXPECT_EQ(run("train --method ropg-kd " + data + " --out x").rc, 2);
  EXPECT_EQ(run("train --config absent.toml " + data + " --out x").rc, 2);
  write("bad.toml", "epochs = 2\nlr 5\n");
  auto bad_cfg = run("train --config bad.toml " + data + " --method ropg-kd --init enc --out x");
  EXPECT_EQ(bad_cfg.rc, 2);
  EXPECT_NE(bad_cfg.err.find("bad.toml line 2: expected key = value"), std::string::npos) << bad_cfg.err;
  auto plain = run("eval " + data + " --split dev --retrievers enc --llm reference --quiet");
  EXPECT_EQ(plain.rc, 2);
  EXPECT_NE(plain.err.find("dense:enc"), std::string::npos) << plain.err;
}

// attune train --method luf end to end: a judge's labels of the initial top-l (cached in the
// store: the second run asks the judge nothing), the ROPG trainer's LUF losses, and the
// folder as a retriever spec.
TEST_F(Cli, TrainLufFromAJudgesLabelsThenEvalTheTrainedFolder) {
  const std::string data = "--data " + kSample + " --task commit_subject";
  if (!tiny_encoder(data)) GTEST_SKIP() << "needs ../shared/models/bert-base-uncased-vocab (absent in this checkout)";
  const std::string common = "train --method luf " + data + " --init enc --llm 'planted:judge?word=fix' --limit 30 "
                             "--dev-limit 10 --epochs 2 --batch-size 8 --top-l 8 --seed 5 --device cpu";
  auto t = run(common + " --out luf");
  ASSERT_EQ(t.rc, 0) << t.err;
  EXPECT_NE(t.err.find("train: luf labels on commit_subject train: "), std::string::npos) << t.err;
  auto meta = nlohmann::json::parse(slurp(dir_ / "luf" / "attune_train.json"));
  EXPECT_EQ(meta["options"]["objective"], "luf") << meta.dump();
  EXPECT_EQ(meta["options"]["luf"]["lambda_strict"], 1.0) << meta.dump();
  EXPECT_NE(t.err.find(" model calls (0 cached)"), std::string::npos) << t.err;
  // What it learnt from, for `attune report`: each training query's spread of judged utilities.
  ASSERT_TRUE(meta.contains("feedback")) << meta.dump();
  EXPECT_EQ(meta["feedback"]["kind"], "judge");
  EXPECT_EQ(meta["feedback"]["spread"].size(), meta["feedback"]["queries"].get<std::size_t>());
  EXPECT_GT(meta["feedback"]["queries"].get<int>(), 0);
  auto again = run(common + " --out luf2 --luf-weights 1,0,0.5 --luf-gamma 0.2");
  ASSERT_EQ(again.rc, 0) << again.err;
  EXPECT_EQ(again.err.find(" (0 cached)"), std::string::npos) << again.err;  // the judge's replies came from the store
  auto meta2 = nlohmann::json::parse(slurp(dir_ / "luf2" / "attune_train.json"));
  EXPECT_EQ(meta2["options"]["luf"]["lambda_flaccid"], 0.0) << meta2.dump();
  EXPECT_EQ(meta2["options"]["luf"]["lambda_hard"], 0.5) << meta2.dump();
  EXPECT_EQ(meta2["options"]["luf"]["gamma"], 0.2) << meta2.dump();
  for (const char* bad_opt : {"--luf-weights 1,1", "--luf-weights 1,x,1", "--luf-weights 0,0,0", "--luf-weights 1,-1,1",
                              "--luf-gamma -1", "--luf-gamma nan"}) {
    auto b = run(common + " --out luf_bad_opt " + bad_opt);
    EXPECT_EQ(b.rc, 2) << bad_opt << ": " << b.err;
  }
  EXPECT_EQ(run("train --method ropg-kd " + data + " --init enc --out kd_luf --luf-gamma 1 --quiet").rc, 2);
  auto e = run("eval " + data + " --split dev --retrievers bm25,luf --llm reference --quiet --limit 10");
  ASSERT_EQ(e.rc, 0) << e.err;
  EXPECT_NE(e.out.find("luf"), std::string::npos) << e.out;
  // LUF-only input checks: a judge whose replies are never readable labels nothing to learn from.
  auto bad = run("train --method luf " + data + " --init enc --llm 'planted:judge?malformed=always' --limit 10 "
                 "--dev-split '' --epochs 1 --out luf_bad");
  EXPECT_EQ(bad.rc, 1) << bad.err;
  EXPECT_NE(bad.err.find("judged candidate documents"), std::string::npos) << bad.err;
}

// attune train --method pearl end to end: likelihood labels, the cross-encoder, dev
// calibration and selective revision, the folder usable as a plain retriever spec.
TEST_F(Cli, TrainPearlThenEvalTheTrainedFolder) {
  const std::string data = "--data " + kSample + " --task commit_subject";
  if (!tiny_encoder(data)) GTEST_SKIP() << "needs ../shared/models/bert-base-uncased-vocab (absent in this checkout)";
  const std::string common = "train --method pearl " + data + " --init enc --limit 30 --dev-limit 10 --epochs 2 "
                             "--batch-size 8 --lr 1e-4 --pearl-max-length 64 --seed 5 --device cpu";
  auto t = run(common + " --out pearl");
  ASSERT_EQ(t.rc, 0) << t.err;
  EXPECT_NE(t.out.find("trained pearl on "), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("calibration r"), std::string::npos) << t.out;
  EXPECT_NE(t.err.find("pearl labels on commit_subject train"), std::string::npos) << t.err;
  EXPECT_NE(t.err.find("epoch 2/2"), std::string::npos) << t.err;
  auto meta = nlohmann::json::parse(slurp(dir_ / "pearl" / "attune_train.json"));
  EXPECT_EQ(meta["method"], "pearl");
  EXPECT_EQ(meta["seed"], 5);
  EXPECT_GE(meta["torch_threads"].get<int>(), 1);
  EXPECT_EQ(meta["options"]["epochs"], 2);
  EXPECT_EQ(meta["options"]["lr"], 1e-4);
  EXPECT_GT(meta["labels"]["count"].get<int>(), 30);
  EXPECT_EQ(meta["dev"]["examples"], 10);
  EXPECT_TRUE(meta["dev"].contains("calibration_r")) << meta.dump();
  EXPECT_TRUE(meta["dev"].contains("theta")) << meta.dump();
  EXPECT_GE(meta["dev"]["metric_with_revision"].get<double>(), meta["dev"]["metric_without_revision"].get<double>());
  // The labels come from the store's cache the second time (ablation: no anchor).
  auto t2 = run(common + " --out pearl2 --no-anchor --dev-split \"\"");
  ASSERT_EQ(t2.rc, 0) << t2.err;
  EXPECT_NE(t2.err.find("(0 new model calls"), std::string::npos) << t2.err;
  EXPECT_EQ(nlohmann::json::parse(slurp(dir_ / "pearl2" / "attune_train.json"))["options"]["anchor"], false);
  // The plain folder reranks what it was trained on, the initial retriever's top-l (bm25,
  // 16 by default); cross:DIR reranks whatever it is given.
  auto marker = nlohmann::json::parse(slurp(dir_ / "pearl" / "attune_model.json"));
  EXPECT_EQ(marker["rerank"], (nlohmann::json{{"initial", "bm25"}, {"top_l", 16}})) << marker.dump();
  auto e = run("eval " + data + " --split dev --retrievers \"bm25,pearl,cross:pearl,rerank(bm25,16,cross:pearl)\" "
               "--llm reference --quiet --limit 20 --out e.json");
  ASSERT_EQ(e.rc, 0) << e.err;
  auto rep = nlohmann::json::parse(slurp(dir_ / "e.json"));
  EXPECT_TRUE(rep["results"].contains("pearl")) << rep["results"].dump();
  const auto& per = rep["per_example"];
  ASSERT_EQ(per["pearl"].size(), 20u);
  for (std::size_t i = 0; i < 20; ++i)
    EXPECT_EQ(per["pearl"][i]["retrieved"], per["rerank(bm25,16,cross:pearl)"][i]["retrieved"]) << i;
  EXPECT_EQ(run("eval " + data + " --split dev --retrievers \"rerank(bm25,0,pearl)\" --llm reference --quiet --limit 2").rc, 2);
  // Refusals: the folder holds a run; resume with other options; bad options; no --init.
  EXPECT_EQ(run(common + " --out pearl --quiet").rc, 2);
  EXPECT_EQ(run(common + " --out pearl --resume --quiet").rc, 0);
  EXPECT_EQ(run(common + " --out pearl --resume --pearl-tau 2 --quiet").rc, 2);
  EXPECT_EQ(run(common + " --out bad --pearl-keep 0 --quiet").rc, 2);
  EXPECT_EQ(run(common + " --out bad --pearl-y0 x --quiet").rc, 2);
  EXPECT_EQ(run(common + " --out bad --pearl-y0 p101 --quiet").rc, 2);
  // y0 as a percentile of the positives' labels: p25 lies at or below the median.
  auto q = run(common + " --out pearl25 --pearl-y0 p25 --dev-split \"\" --quiet");
  ASSERT_EQ(q.rc, 0) << q.err;
  auto m25 = nlohmann::json::parse(slurp(dir_ / "pearl25" / "attune_train.json"));
  EXPECT_EQ(m25["options"]["y0_percentile"], 25.0);
  EXPECT_LE(m25["y0"].get<double>(), meta["y0"].get<double>());
  EXPECT_EQ(run("train --method pearl " + data + " --out x").rc, 2);
}

// attune train --method rspg-post, then the selector folder in attune eval: its pool joins
// the table, its row answers each example with the chosen member, and the selection report
// compares it with WIG, NQC, sigma_max, sigma_50% and the oracle bounds.
TEST_F(Cli, TrainRspgThenEvalTheSelector) {
  const std::string vocab = std::string(ATTUNE_SHARED_DIR) + "/models/bert-base-uncased-vocab";
  if (!fs::exists(vocab + "/vocab.txt")) GTEST_SKIP() << "needs ../shared/models/bert-base-uncased-vocab (absent in this checkout)";
  const std::string data = "--data " + kSample + " --task commit_subject";
  auto p = run("pretrain-encoder " + data + " --tokenizer " + vocab +
               " --hidden 32 --layers 1 --heads 2 --max-length 64 --batch-size 8 --quiet --seed 3 --steps 2 --out enc");
  ASSERT_EQ(p.rc, 0) << p.err;
  auto t = run("train --method rspg-post " + data + " --init enc --out sel --pool none,recency,bm25 --limit 30 "
               "--dev-limit 10 --epochs 1 --batch-size 8 --lr 1e-4 --seed 5 --device cpu --quiet");
  ASSERT_EQ(t.rc, 0) << t.err;
  EXPECT_EQ(nlohmann::json::parse(slurp(dir_ / "sel" / "attune_train.json"))["options"]["target_normalization"], "none");
  // z-scored targets: recorded with the run (a resume with the other is refused).
  auto z = run("train --method rspg-post " + data + " --init enc --out selz --pool none,recency,bm25 --limit 30 "
               "--dev-limit 10 --epochs 1 --batch-size 8 --lr 1e-4 --seed 5 --device cpu --quiet --target-normalization zscore");
  ASSERT_EQ(z.rc, 0) << z.err;
  EXPECT_EQ(nlohmann::json::parse(slurp(dir_ / "selz" / "attune_train.json"))["options"]["target_normalization"], "zscore");
  auto other = run("train --method rspg-post " + data + " --init enc --out selz --pool none,recency,bm25 --limit 30 "
                   "--dev-limit 10 --epochs 1 --batch-size 8 --lr 1e-4 --seed 5 --device cpu --quiet --resume");
  EXPECT_EQ(other.rc, 2) << other.err;
  EXPECT_NE(other.err.find("target_normalization"), std::string::npos) << other.err;
  auto e = run("eval " + data + " --split dev --retrievers bm25,sel --llm reference --limit 20 --out e.json");
  ASSERT_EQ(e.rc, 0) << e.err;
  EXPECT_NE(e.out.find("selection by sel over 3 retrievers"), std::string::npos) << e.out;
  EXPECT_NE(e.out.find("selector's choices:"), std::string::npos) << e.out;
  auto rep = nlohmann::json::parse(slurp(dir_ / "e.json"));
  for (auto spec : {"none", "recency", "bm25", "sel"}) EXPECT_TRUE(rep["results"].contains(spec)) << spec;
  const auto& m = rep["selection"]["sel"]["methods"];
  for (auto name : {"sel", "wig", "nqc", "sigma_max", "sigma_50%", "oracle_lower", "oracle_upper"})
    ASSERT_TRUE(m.contains(name)) << name << " " << m.dump();
  EXPECT_DOUBLE_EQ(m["oracle_upper"]["success"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(m["sel"]["metrics"]["rouge-1"].get<double>(), rep["results"]["sel"]["rouge-1"].get<double>());
  const double up = m["oracle_upper"]["metrics"]["rouge-1"], low = m["oracle_lower"]["metrics"]["rouge-1"];
  for (auto spec : {"none", "recency", "bm25", "sel"}) {
    EXPECT_LE(rep["results"][spec]["rouge-1"].get<double>(), up + 1e-12) << spec;
    EXPECT_GE(rep["results"][spec]["rouge-1"].get<double>(), low - 1e-12) << spec;
  }
  // Each selector answer is its chosen member's answer for that example.
  const auto& per = rep["per_example"];
  ASSERT_EQ(per["sel"].size(), 20u);
  for (std::size_t i = 0; i < 20; ++i) {
    const std::string chosen = per["sel"][i]["chosen"];
    EXPECT_EQ(per["sel"][i]["output"], per[chosen][i]["output"]) << i;
  }
  // A selector folder without its selector.json is refused, naming the file.
  fs::create_directories(dir_ / "broken");
  write("broken/attune_model.json", "{\"kind\": \"selector\", \"method\": \"rspg-pre\"}");
  auto b = run("eval " + data + " --split dev --retrievers bm25,broken --llm reference --quiet --limit 5");
  EXPECT_NE(b.rc, 0);
  EXPECT_NE(b.err.find("selector.json"), std::string::npos) << b.err;
  EXPECT_EQ(std::count(b.err.begin(), b.err.end(), '\n'), 1) << b.err;
}

// The openai: backend against a loopback server in this process that answers like vLLM.
// Several servers of one model (openai:URL1,URL2,...#MODEL) through `eval`: a dead server
// listed first slows nothing, the live ones share the generations, and the results are
// those of one server (the answers do not depend on which replica gave them).
TEST_F(Cli, EvalAcrossSeveralServersOfOneModelGivesOneServersResults) {
  struct Replica {
    httplib::Server svr;
    std::atomic<int> hits{0};
    std::thread th;
    int port = 0;
    Replica() {
      svr.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
        ++hits;
        const auto body = nlohmann::json::parse(req.body);
        const std::string prompt = body["prompt"];
        // A deterministic answer: the prompt's last three words.
        std::istringstream in(prompt);
        std::vector<std::string> words{std::istream_iterator<std::string>(in), {}};
        std::string text;
        for (std::size_t i = words.size() > 3 ? words.size() - 3 : 0; i < words.size(); ++i) text += " " + words[i];
        res.set_content(nlohmann::json({{"choices", {{{"text", text}}}}}).dump(), "application/json");
      });
      port = svr.bind_to_any_port("127.0.0.1");
      th = std::thread([this] { svr.listen_after_bind(); });
    }
    ~Replica() {
      svr.stop();
      th.join();
    }
    std::string url() const { return "http://127.0.0.1:" + std::to_string(port) + "/v1"; }
  };
  Replica a, b;
  // A server that is gone (its port refuses connections), and one that hangs: it accepts
  // connections (the kernel's backlog) and never answers.
  int dead = 0;
  {
    httplib::Server gone;
    dead = gone.bind_to_any_port("127.0.0.1");
    gone.stop();  // closes the listening socket
  }
  httplib::Server hung;
  const int hung_port = hung.bind_to_any_port("127.0.0.1");  // listening, never accepting
  const std::string eval = "eval --data " + kSample + " --task commit_subject --split dev --k 1 --retrievers bm25 ";
  auto one = run(eval + "--llm 'openai:" + a.url() + "#m' --store one.db --out one.json");
  ASSERT_EQ(one.rc, 0) << one.err;
  const int one_server_calls = a.hits;
  a.hits = 0;
  // backoff=5: a retry that waited would show; timeout=1 bounds what the hung server holds.
  const auto t0 = std::chrono::steady_clock::now();
  auto several = run(eval + "--llm 'openai:http://127.0.0.1:" + std::to_string(dead) + "/v1,http://127.0.0.1:" +
                     std::to_string(hung_port) + "/v1," + a.url() + "," + b.url() +
                     "#m?backoff=5&timeout=1' --store several.db --out several.json");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(several.rc, 0) << several.err;
  EXPECT_EQ(a.hits + b.hits, one_server_calls);
  EXPECT_GT(a.hits.load(), 0);
  EXPECT_GT(b.hits.load(), 0);
  // Counters per server, in the order given: the gone one refused and the hung one timed
  // out, each a few times before it was set aside; the live ones never failed.
  for (const char* live : {" endpoint 3 requests, 0 endpoint 3 errors", " endpoint 4 requests, 0 endpoint 4 errors",
                           " 0 backoff seconds"})
    EXPECT_NE(several.err.find(live), std::string::npos) << live << "\n" << several.err;
  EXPECT_EQ(several.err.find(" 0 endpoint 1 errors"), std::string::npos) << several.err;
  EXPECT_EQ(several.err.find(" 0 endpoint 2 errors"), std::string::npos) << several.err;
  EXPECT_NE(several.err.find(" 0 failures"), std::string::npos) << several.err;
  EXPECT_LT(seconds, 8.0) << "the requests on the hung server took more than a timeout and a retry\n" << several.err;
  const auto r1 = nlohmann::json::parse(slurp(dir_ / "one.json"))["results"];
  const auto r2 = nlohmann::json::parse(slurp(dir_ / "several.json"))["results"];
  EXPECT_EQ(r1.dump(), r2.dump());
  hung.stop();
}

TEST_F(Cli, OpenAIBackendGeneratesAndScoresAgainstALoopbackServer) {
  httplib::Server svr;
  svr.set_tcp_nodelay(true);
  svr.Post("/v1/completions", [](const httplib::Request& req, httplib::Response& res) {
    const auto body = nlohmann::json::parse(req.body);
    const std::string prompt = body["prompt"];
    nlohmann::json choice;
    if (body.value("echo", false)) {
      if (prompt != "the answer is yes please") {
        res.status = 400;
        res.set_content(R"({"error":{"message":"unexpected prompt"}})", "application/json");
        return;
      }
      // "the"(0) " answer"(3) " is"(10) " yes"(13) " please"(17), then the generated "."
      choice = {{"text", prompt + "."},
                {"logprobs",
                 {{"tokens", {"the", " answer", " is", " yes", " please", "."}},
                  {"token_logprobs", {nullptr, -1.5, -0.5, -0.25, -0.75, -9.0}},
                  {"text_offset", {0, 3, 10, 13, 17, 24}}}}};
    } else {
      choice = {{"text", "gen:" + prompt + ":" + std::to_string(body["max_tokens"].get<int>())}};
    }
    res.set_content(nlohmann::json({{"choices", {choice}}}).dump(), "application/json");
  });
  const int port = svr.bind_to_any_port("127.0.0.1");
  std::thread th([&] { svr.listen_after_bind(); });
  const std::string llm = "'openai:http://127.0.0.1:" + std::to_string(port) + "/v1#m?backoff=0.01'";

  auto r = run("score --llm " + llm + " --prompt 'the answer is' --target ' yes please'");
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out, "-1.000000\n");
  EXPECT_NE(r.err.find("llm: 1 requests, 0 retries"), std::string::npos) << r.err;
  r = run("generate --llm " + llm + " --prompt hello --max-new-tokens 5 --quiet");
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out, "gen:hello:5\n");
  EXPECT_EQ(r.err, "");
  r = run("score --llm " + llm + " --prompt 'other' --target ' words' --quiet");  // a 400: no retry, exit 1
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("HTTP 400: unexpected prompt"), std::string::npos) << r.err;
  svr.stop();
  th.join();

  r = run("score --llm 'openai:http://127.0.0.1:" + std::to_string(port) + "/v1' --prompt a --target b");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("'#'"), std::string::npos) << r.err;
  r = run("generate --llm 'openai:http://127.0.0.1:1/v1#m?colour=red' --prompt a");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("colour"), std::string::npos) << r.err;
  // A password in the URL reaches neither the error nor the store's record of the run.
  r = run("eval --data " + kSample + " --task commit_subject --split dev --retrievers none --limit 1 --quiet --store pw.db "
          "--llm 'openai:http://bob:s3cret@127.0.0.1:1/v1#m?retries=0'");
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.err.find("s3cret"), std::string::npos) << r.err;
  std::string stored;
  for (const char* f : {"pw.db", "pw.db-wal"})
    if (fs::exists(dir_ / f)) stored += slurp(dir_ / f);
  EXPECT_NE(stored.find("bob:***@127.0.0.1"), std::string::npos);  // the run was recorded, redacted
  EXPECT_EQ(stored.find("s3cret"), std::string::npos);
}

// attune serve-llm: a model served over the OpenAI API until SIGINT, used by attune itself.
TEST_F(Cli, ServeLlmServesAModelToTheOpenAIBackendUntilInterrupted) {
  const auto [port, pid] = start_serve_llm("planted:first");
  ASSERT_FALSE(port.empty()) << slurp(dir_ / "serve.err");
  auto r = run("generate --llm 'openai:http://127.0.0.1:" + port + "/v1#planted:first:v5' --quiet --prompt "
               "'\"fix the parser\" is the title for \"x\". q'");
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out, "fix the parser\n");
  ASSERT_EQ(std::system(("kill -INT " + pid).c_str()), 0);
  bool gone = false;
  for (int i = 0; i < 200 && !gone; ++i) {
    gone = std::system(("kill -0 " + pid + " 2>/dev/null").c_str()) != 0;
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(gone) << "serve-llm did not stop on SIGINT";
  const auto err = slurp(dir_ / "serve.err");
  EXPECT_NE(err.find("stopped after 1 requests"), std::string::npos) << err;
  // A remote model is not proxied; a port that is taken is a usage error.
  r = run("serve-llm --llm 'openai:http://127.0.0.1:1/v1#m'");
  EXPECT_EQ(r.rc, 2) << r.err;
  // --latency-ms is a duration in 0..60000.
  for (const char* bad : {"-5", "60001", "soon"}) {
    r = run(std::string("serve-llm --llm reference --port 0 --latency-ms ") + bad);
    EXPECT_EQ(r.rc, 2) << bad << ": " << r.err;
    EXPECT_NE(r.err.find("--latency-ms"), std::string::npos) << bad << ": " << r.err;
  }
}

// attune judge (LUF labels): the planted judge served over the OpenAI API labels the sample's
// bm25 top 8; multi-level judging reads fewer words than judging every document and finds a
// relevant document for as many queries; a judge whose every reply is malformed leaves
// every document unlabelled ("failed") and says so, and bad options are usage errors.
TEST_F(Cli, JudgeLabelsTopKMultiLevelThroughTheOpenAIBackendAndNeverGuesses) {
  const auto [port, pid] = start_serve_llm("planted:judge?word=fix&malformed=first");
  ASSERT_FALSE(port.empty()) << slurp(dir_ / "serve.err");
  const std::string data = "--data " + kSample + " --task commit_subject --split dev --k 8 --quiet ";
  auto r = run("judge " + data + "--llm 'openai:http://127.0.0.1:" + port +
               "/v1#planted:judge:v1:word=fix:malformed=first' --compare --out labels.jsonl");
  std::system(("kill -INT " + pid).c_str());
  ASSERT_EQ(r.rc, 0) << r.err;
  // Every first ask was malformed and asked again: no group failed.
  EXPECT_NE(r.out.find("0 groups failed"), std::string::npos) << r.out;
  std::size_t lines = 0, labelled = 0, found = 0;
  std::istringstream in(slurp(dir_ / "labels.jsonl"));
  std::string line;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    ++lines;
    for (const auto& l : j["labels"]) {
      labelled += l["label"] != "unjudged";
      EXPECT_NE(l["label"], "failed") << line;
    }
    if (!j["first_relevant"].is_null()) {
      ++found;
      const auto& first = j["labels"][j["first_relevant"].get<std::size_t>()];
      EXPECT_TRUE(first["label"] == "answer" || first["label"] == "relevant") << line;
    }
  }
  EXPECT_GT(lines, 0u);
  EXPECT_GT(labelled, 0u);
  // "--compare": every document judged; multi-level spends fewer words for the same queries found.
  const auto cmp = r.out.find("judge --compare: every document: ");
  ASSERT_NE(cmp, std::string::npos) << r.out;
  std::size_t every_calls = 0, every_words = 0, every_found = 0, multi_calls = 0, multi_words = 0, multi_found = 0;
  double pct = 0;
  ASSERT_EQ(std::sscanf(r.out.c_str() + cmp,
                        "judge --compare: every document: %zu model calls, %zu words, a relevant one found for %zu "
                        "queries; multi-level: %zu calls, %zu words (%lf%%), found for %zu",
                        &every_calls, &every_words, &every_found, &multi_calls, &multi_words, &pct, &multi_found),
            7)
      << r.out;
  EXPECT_EQ(multi_found, every_found);
  EXPECT_EQ(multi_found, found);
  EXPECT_LT(multi_words, every_words);
  EXPECT_LT(multi_calls, every_calls);

  // The replies are cached in the store and the labels kept as feedback: a rerun asks nothing.
  auto again = run("judge --data " + kSample + " --task commit_subject --split dev --k 8 --llm 'planted:judge?word=fix' "
                   "--store judge.db --out l1.jsonl");
  ASSERT_EQ(again.rc, 0) << again.err;
  EXPECT_NE(again.err.find(" 0 cache hits"), std::string::npos) << again.err;
  again = run("judge --data " + kSample + " --task commit_subject --split dev --k 8 --llm 'planted:judge?word=fix' "
              "--store judge.db --out l2.jsonl");
  ASSERT_EQ(again.rc, 0) << again.err;
  EXPECT_NE(again.err.find(" 0 cache misses"), std::string::npos) << again.err;
  EXPECT_EQ(slurp(dir_ / "l1.jsonl"), slurp(dir_ / "l2.jsonl"));
  {
    auto st = attune::store::open_sqlite(dir_ / "judge.db");
    const auto runs = st->runs();
    ASSERT_FALSE(runs.empty());
    EXPECT_EQ(runs.back().verb, "judge");
    EXPECT_EQ(runs.back().status, "ok");
    EXPECT_GT(nlohmann::json::parse(runs.back().summary_json)["labelled"].template get<int>(), 0);
  }

  // A judge that never answers in the format: nothing is labelled, every document "failed".
  r = run("judge " + data + "--llm 'planted:judge?malformed=always' --retries 1 --limit 3 --out bad.jsonl");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("0 documents labelled"), std::string::npos) << r.out;
  std::istringstream bad(slurp(dir_ / "bad.jsonl"));
  while (std::getline(bad, line))
    for (const auto& l : nlohmann::json::parse(line)["labels"]) EXPECT_EQ(l["label"], "failed") << line;
  EXPECT_EQ(run("judge " + data + "--llm planted:judge --groups 1,0,2 --out x.jsonl").rc, 2);
  EXPECT_EQ(run("judge " + data + "--llm planted:judge --groups 1,two --out x.jsonl").rc, 2);
  EXPECT_EQ(run("judge " + data + "--llm 'planted:judge?word=Fix' --out x.jsonl").rc, 2);
}

// attune serve: feedback acknowledged before a kill -9 is all in the store after it, and the
// server restarts on that store with every document. Clients send feedback from 4 threads
// while the server is killed at an arbitrary moment.
TEST_F(Cli, ServeLosesNoAcknowledgedFeedbackWhenKilled) {
  auto r = run("tenant add acme --store s.db");
  ASSERT_EQ(r.rc, 0) << r.err;
  const std::string key = r.out.substr(0, r.out.find('\n'));
  ASSERT_EQ(key.rfind("atk_", 0), 0u) << r.out;
  EXPECT_EQ(run("tenant add acme --store s.db").rc, 2);  // exists
  EXPECT_EQ(run("tenant list --store typo.db").rc, 2);   // no such store: not an empty list
  EXPECT_FALSE(fs::exists(dir_ / "typo.db"));
  EXPECT_EQ(run("tenant revoke atk_00000000 --store s.db").rc, 2);  // no such key
  const std::string bin = std::string(ATTUNE_BINARY_DIR) + "/tools/attune/attune";
  const auto start = [&] {
    fs::remove(dir_ / "port.txt");
    const std::string cmd = "cd '" + dir_.string() + "' && ('" + bin +
                            "' serve --store s.db --port 0 --port-file port.txt >serve.out 2>serve.err & echo $! >pid.txt)";
    EXPECT_EQ(std::system(cmd.c_str()), 0);
    for (int i = 0; i < 400 && !fs::exists(dir_ / "port.txt"); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(25));
    EXPECT_TRUE(fs::exists(dir_ / "port.txt")) << slurp(dir_ / "serve.err");
    const auto p = slurp(dir_ / "port.txt");
    return std::stoi(p.substr(0, p.find('\n')));
  };
  int port = start();
  const auto client = [&](int p) {
    auto c = std::make_unique<httplib::Client>("127.0.0.1", p);
    c->set_default_headers({{"Authorization", "Bearer " + key}});
    c->set_connection_timeout(2);
    c->set_read_timeout(5);
    return c;
  };
  auto c = client(port);
  auto put = c->Put("/v1/users/ann/documents",
                    R"({"documents": [{"id": "a1", "text": "fix the parser crash"}, {"id": "a2", "text": "release notes"}]})",
                    "application/json");
  ASSERT_TRUE(put);
  ASSERT_EQ(put->status, 200) << put->body;
  auto got = c->Post("/v1/retrieve", R"({"user": "ann", "query": "parser crash", "k": 2})", "application/json");
  ASSERT_TRUE(got);
  ASSERT_EQ(got->status, 200) << got->body;
  // The server's own counters are in /metrics beside the service's (the dense micro-batcher's).
  auto metrics = c->Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("\nattune_dense_queries_total 0\n"), std::string::npos) << metrics->body;
  const std::string rid = nlohmann::json::parse(got->body)["request_id"];

  std::mutex mu;
  std::vector<int> acknowledged;
  std::vector<std::thread> senders;
  for (int t = 0; t < 4; ++t)
    senders.emplace_back([&, t] {
      auto cc = client(port);
      for (int i = 0;; ++i) {
        const int value = t * 1000000 + i;
        auto res = cc->Post("/v1/feedback", "{\"request_id\": \"" + rid + "\", \"reward\": " + std::to_string(value) + "}",
                            "application/json");
        if (!res || res->status != 200) return;  // the server is gone
        std::lock_guard lock(mu);
        acknowledged.push_back(value);
      }
    });
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  const auto pid = slurp(dir_ / "pid.txt");
  ASSERT_EQ(std::system(("kill -9 " + pid.substr(0, pid.find('\n'))).c_str()), 0);
  for (auto& s : senders) s.join();
  ASSERT_GT(acknowledged.size(), 20u) << "too few feedback calls before the kill to test anything";

  // Restart on the same store: the documents are there, and every acknowledged reward is stored.
  port = start();
  auto c2 = client(port);
  got = c2->Post("/v1/retrieve", R"({"user": "ann", "query": "parser crash", "k": 2})", "application/json");
  ASSERT_TRUE(got);
  EXPECT_EQ(got->status, 200);
  EXPECT_EQ(nlohmann::json::parse(got->body)["documents"].size(), 2u);
  auto st = attune::store::open_sqlite(dir_ / "s.db");
  std::set<int> stored;
  for (const auto& f : st->feedback_of(*st->tenant_find("acme"))) stored.insert(static_cast<int>(f.value));
  std::size_t lost = 0;
  for (int v : acknowledged) lost += !stored.count(v);
  EXPECT_EQ(lost, 0u) << "of " << acknowledged.size() << " acknowledged";
  const auto pid2 = slurp(dir_ / "pid.txt");
  ASSERT_EQ(std::system(("kill -TERM " + pid2.substr(0, pid2.find('\n'))).c_str()), 0);
  for (int i = 0; i < 200 && slurp(dir_ / "serve.err").find("stopped (SIGTERM)") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  EXPECT_NE(slurp(dir_ / "serve.err").find("stopped (SIGTERM)"), std::string::npos) << slurp(dir_ / "serve.err");
  std::printf("kill -9 after %zu acknowledged feedback calls: %zu stored, %zu lost\n", acknowledged.size(), stored.size(),
              lost);
}

// Two `attune serve` processes on one PostgreSQL database, as two machines behind a load
// balancer would run: a document added through one is served by the other, exactly one holds
// the learner lease, and when that one is killed (kill -9: no clean stop) the other takes it.
// (What the lease decides, one learner that goes on where the last stopped, is checked in
// Serve.TwoReplicasOnOnePostgresql...; here the processes, the URL and the real kill.)
TEST_F(Cli, TwoServeProcessesOnOnePostgresqlShareDocumentsAndTheLearnerLeaseSurvivesAKill) {
  const auto db = attune::fixtures::postgres_database();
  if (!db) GTEST_SKIP() << attune::fixtures::kNoPostgres;
  auto r = run("tenant add acme --store '" + db->url() + "'");
  ASSERT_EQ(r.rc, 0) << r.err;
  const std::string key = r.out.substr(0, r.out.find('\n'));
  fs::create_directories(dir_ / "enc");  // learning on needs a folder; no round runs (min_new_feedback)
  {
    std::ofstream(dir_ / "serve.json") << R"({"sync_seconds": 0.2, "learn": {"on": true, "init": "enc",
        "min_new_feedback": 1000000, "lease_seconds": 1.5}})";
  }
  const std::string bin = std::string(ATTUNE_BINARY_DIR) + "/tools/attune/attune";
  const auto start = [&](const std::string& tag) {
    const std::string cmd = "cd '" + dir_.string() + "' && ('" + bin + "' serve --store '" + db->url() +
                            "' --config serve.json --port 0 --port-file port-" + tag + ".txt >" + tag + ".out 2>" + tag +
                            ".err & echo $! >pid-" + tag + ".txt)";
    EXPECT_EQ(std::system(cmd.c_str()), 0);
    const fs::path pf = dir_ / ("port-" + tag + ".txt");
    for (int i = 0; i < 400 && !fs::exists(pf); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(25));
    EXPECT_TRUE(fs::exists(pf)) << slurp(dir_ / (tag + ".err"));
    const auto p = slurp(pf);
    return std::stoi(p.substr(0, p.find('\n')));
  };
  const int pa = start("a"), pb = start("b");
  const auto client = [&](int p) {
    auto c = std::make_unique<httplib::Client>("127.0.0.1", p);
    c->set_default_headers({{"Authorization", "Bearer " + key}});
    c->set_connection_timeout(2);
    c->set_read_timeout(5);
    return c;
  };
  auto ca = client(pa), cb = client(pb);
  const auto served = [&](httplib::Client& c, const std::string& query) {
    auto res = c.Post("/v1/retrieve", nlohmann::json{{"user", "ann"}, {"query", query}}.dump(), "application/json");
    return res && res->status == 200 ? res->body : std::string("no answer");
  };
  // b has loaded the tenant before a's write: what it serves later comes from syncing.
  EXPECT_EQ(served(*cb, "parser").find("\"a1\""), std::string::npos);
  auto put = ca->Put("/v1/users/ann/documents", R"({"documents": [{"id": "a1", "text": "fix the parser crash"}]})",
                     "application/json");
  ASSERT_TRUE(put);
  ASSERT_EQ(put->status, 200) << put->body;
  bool seen = false;
  for (int i = 0; i < 200 && !seen; ++i) {
    seen = served(*cb, "parser crash").find("\"a1\"") != std::string::npos;
    if (!seen) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(seen) << "a document put through one replica was never served by the other: " << slurp(dir_ / "b.err");
  const auto holds = [&](httplib::Client& c) {
    auto m = c.Get("/metrics");
    return m && m->body.find("\nattune_learner_lease 1\n") != std::string::npos;
  };
  // Exactly one holds the lease.
  bool one = false;
  for (int i = 0; i < 100 && !one; ++i) {
    one = holds(*ca) != holds(*cb);
    if (!one) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(one) << slurp(dir_ / "a.err") << slurp(dir_ / "b.err");
  const bool a_held = holds(*ca);
  auto& survivor = a_held ? *cb : *ca;
  const std::string killed = a_held ? "a" : "b", kept = a_held ? "b" : "a";
  const auto pid = slurp(dir_ / ("pid-" + killed + ".txt"));
  ASSERT_EQ(std::system(("kill -9 " + pid.substr(0, pid.find('\n'))).c_str()), 0);
  const auto killed_at = std::chrono::steady_clock::now();
  bool took = false;
  for (int i = 0; i < 200 && !took; ++i) {
    took = holds(survivor);
    if (!took) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const double after = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count();
  EXPECT_TRUE(took) << slurp(dir_ / (kept + ".err"));
  EXPECT_LT(after, 1.5 + 1.5 / 3 + 2) << "the lease passed only after " << after << " s";  // lease + a renewal + slack
  EXPECT_NE(slurp(dir_ / (kept + ".err")).find("holds the learner lease"), std::string::npos);
  EXPECT_EQ(served(survivor, "parser crash").find("\"a1\"") != std::string::npos, true);
  const auto pid2 = slurp(dir_ / ("pid-" + kept + ".txt"));
  ASSERT_EQ(std::system(("kill -TERM " + pid2.substr(0, pid2.find('\n'))).c_str()), 0);
  for (int i = 0; i < 200 && slurp(dir_ / (kept + ".err")).find("stopped (SIGTERM)") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  std::printf("the learner lease passed %.2f s after the kill (lease_seconds 1.5)\n", after);
}

// attune serve refuses a bad deployment before it listens: the file and key named.
TEST_F(Cli, ServeRefusesABadConfigAtStart) {
  { std::ofstream(dir_ / "bad.json") << R"({"retriever": "bm25", "limits": {"max_kk": 3}})"; }
  auto r = run("serve --store s.db --config bad.json --port 0");
  EXPECT_EQ(r.rc, 1) << r.err;
  EXPECT_NE(r.err.find("limits.max_kk"), std::string::npos) << r.err;
  { std::ofstream(dir_ / "spec.json") << R"({"retriever": "bm26"})"; }
  r = run("serve --store s.db --config spec.json --port 0");
  EXPECT_EQ(r.rc, 1) << r.err;  // a bad value in the file, as any other: the file and the key named
  EXPECT_NE(r.err.find("bm26"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("spec.json: field \"retriever\""), std::string::npos) << r.err;
  r = run("serve --store s.db --port 0 --learn on");
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_NE(r.err.find("--learn-init"), std::string::npos) << r.err;
  r = run("serve --store s.db --port 0 --learn on --learn-init no-such-dir");
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_NE(r.err.find("no-such-dir"), std::string::npos) << r.err;
  r = run("serve --store s.db --port 0 --learn maybe");
  EXPECT_EQ(r.rc, 2) << r.err;
  r = run("serve --store s.db --config missing.json --port 0");
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_NE(r.err.find("missing.json"), std::string::npos) << r.err;
  // LUF's learner needs its judge, and a judge is LUF's alone; user feedback needs a model that can judge.
  { std::ofstream(dir_ / "luf.json") << R"({"learn": {"on": true, "method": "luf", "init": "."}})"; }
  r = run("serve --store s.db --config luf.json --port 0");
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_NE(r.err.find("learn.judge"), std::string::npos) << r.err;
  { std::ofstream(dir_ / "judge.json") << R"({"learn": {"judge": "planted:judge"}})"; }
  r = run("serve --store s.db --config judge.json --port 0");
  EXPECT_EQ(r.rc, 2) << r.err;
  // RSPG's learner needs a pool, a pool is RSPG's alone, and each member must be a retriever.
  { std::ofstream(dir_ / "rspg.json") << R"({"learn": {"on": true, "method": "rspg", "init": "."}})"; }
  r = run("serve --store s.db --config rspg.json --port 0");
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_NE(r.err.find("learn.pool"), std::string::npos) << r.err;
  { std::ofstream(dir_ / "pool.json") << R"({"learn": {"pool": ["bm25", "recency"]}})"; }
  r = run("serve --store s.db --config pool.json --port 0");
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_NE(r.err.find("learn.pool is rspg's"), std::string::npos) << r.err;
  { std::ofstream(dir_ / "member.json") << R"({"learn": {"on": true, "method": "rspg", "init": ".", "pool": ["bm25", "bm26"]}})"; }
  r = run("serve --store s.db --config member.json --port 0");
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_NE(r.err.find("bm26"), std::string::npos) << r.err;
  { std::ofstream(dir_ / "uf.json") << R"({"user_feedback": {"llm": "reference"}})"; }
  r = run("serve --store s.db --config uf.json --port 0");
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_NE(r.err.find("user_feedback.llm"), std::string::npos) << r.err;
}

// attune user-feedback: a batch file curated into the tenant's corpus, a user's documents or
// nowhere (the planted curator's rule), every line checked before anything is filed.
TEST_F(Cli, UserFeedbackFilesABatchOfConversationsAndCountsThemByLabel) {
  ASSERT_EQ(run("tenant add acme --store uf.db").rc, 0);
  {
    std::ofstream f(dir_ / "conv.jsonl");
    f << R"({"id":"c1","user":"ann","conversation":"user: zstdtool compresses archives","label":"incorrect"})" << "\n"
      << R"({"id":"c2","user":"bob","messages":[{"role":"user","content":"I prefer vim for my editing"}],"label":"correct-personal"})"
      << "\n\n"
      << R"({"id":"c3","user":"bob","conversation":"user: ok"})" << "\n";
  }
  auto r = run("user-feedback --store uf.db --tenant acme --llm planted:curator --input conv.jsonl --out res.jsonl");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("3 conversations for tenant acme: no_information 1 personal 1 rejected 1"), std::string::npos) << r.out;
  const auto res = slurp(dir_ / "res.jsonl");
  EXPECT_NE(res.find(R"("document_id":"uf-c2","evidence":[],"filing":"personal")"), std::string::npos) << res;
  EXPECT_NE(res.find(R"("filing":"rejected","id":"c1")"), std::string::npos) << res;
  // Refused before anything is filed: an unknown tenant, a bad line, the reference reader.
  EXPECT_EQ(run("user-feedback --store uf.db --tenant nope --llm planted:curator --input conv.jsonl").rc, 2);
  {
    std::ofstream f(dir_ / "bad.jsonl");
    f << R"({"id":"c9","user":"ann","conversation":"user: I prefer nano for my notes"})" << "\n" << R"({"id":"c10"})" << "\n";
  }
  r = run("user-feedback --store uf.db --tenant acme --llm planted:curator --input bad.jsonl");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("line 2: field \"user\""), std::string::npos) << r.err;
  r = run("user-feedback --store uf.db --tenant acme --llm planted:curator --input conv.jsonl --out again.jsonl");
  ASSERT_EQ(r.rc, 0) << r.err;  // c9 was never filed: the second run files c2 again (replacing it), not c9
  EXPECT_EQ(slurp(dir_ / "again.jsonl").find("c9"), std::string::npos);
  EXPECT_EQ(run("user-feedback --store uf.db --tenant acme --llm reference --input conv.jsonl").rc, 2);
}
