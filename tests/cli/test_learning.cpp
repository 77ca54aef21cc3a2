// Learning checks (issue 14): a learner counts only when it is shown to learn. Each one
// (ROPG-KD on utilities and on likelihoods, ROPG-RL, LUF, RSPG-Pre, RSPG-Post and Pearl) is
// trained, through the command line users run, on feedback from a reader whose preference
// is planted and known (llm/planted.h `planted:gate?word=test`: an answer that helps only
// when a document holding "test" is in the prompt, whichever it is), served over HTTP by
// an OpenAI-compatible loopback server (llm/openai_server.h), so the `openai:` client, the
// feedback store and `eval` are the real ones. On a real sample of ../shared/data/git:
//  - with learning on, its dev top-1 planted utility moves at least half-way from its
//    starting retriever to the oracle (the best top-1 any ranking of the candidates gets),
//    and end to end on the test split it beats its start at p < 0.05 (the test split is
//    only read: nothing here is chosen on it);
//  - with learning switched off (--lr 0), the same run shows no gain: the check can fail.
// Skips, saying why, without ../shared.
#include <gtest/gtest.h>

#include <numeric>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <functional>
#include <iomanip>
#include <map>
#include <set>
#include <algorithm>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <csignal>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <httplib.h>
#include <thread>

#include "attune/engine/data_spec.h"
#include "attune/llm/openai_server.h"
#include "attune/tasks/task.h"
#include "attune/text/tokenizer.h"
#include "attune/llm/planted.h"
#include "cli_run.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const std::string kGit = std::string(ATTUNE_SHARED_DIR) + "/data/git";
const std::string kVocab = std::string(ATTUNE_SHARED_DIR) + "/models/bert-base-uncased-vocab";
const std::string kReader = "planted:gate?word=test";

using Result = attune::testing::CliResult;
using attune::testing::slurp;

// One folder, one loopback reader and one starting encoder for the whole suite; the
// store is shared too, so a learner reuses the feedback another already collected.
class Learning : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!fs::exists(kGit + "/commit_subject/train_questions.json") || !fs::exists(kVocab + "/vocab.txt")) return;
    dir_ = fs::temp_directory_path() / ("attune_learning_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    reader_ = std::make_unique<attune::llm::PlantedReader>(attune::llm::parse_planted_spec(kReader));
    server_ = std::make_unique<attune::llm::OpenAIServer>(*reader_, attune::llm::ServeOptions{});
    server_->start();
    ASSERT_NO_FATAL_FAILURE(starting_encoder());
  }
  // A small encoder from scratch (about 5 s), long enough to read whole documents, in
  // dir_/enc. It is the same for every test (seeded): the first test process of a build
  // trains it into the build folder, keyed by the binary's time, and the others copy it.
  static void starting_encoder() {
    const fs::path bin = fs::path(ATTUNE_BINARY_DIR) / "tools/attune/attune-torch";
    const auto stamp = std::to_string(static_cast<std::uint64_t>(fs::last_write_time(bin).time_since_epoch().count()));
    const fs::path shared = fs::path(ATTUNE_BINARY_DIR) / "tests" / ("learning-enc-" + stamp);
    const fs::path lock_file = fs::path(ATTUNE_BINARY_DIR) / "tests" / "learning-enc.lock";
    const int fd = ::open(lock_file.c_str(), O_CREAT | O_RDWR, 0644);
    ASSERT_GE(fd, 0) << lock_file;
    ::flock(fd, LOCK_EX);
    if (!fs::exists(shared / "model.safetensors")) {
      const auto p = run("pretrain-encoder --data " + kGit + " --task commit_subject --tokenizer " + kVocab +
                         " --hidden 32 --layers 1 --heads 2 --max-length 128 --steps 100 --batch-size 32 --seed 1 "
                         "--quiet --out enc");
      if (p.rc == 0) {
        for (const auto& e : fs::directory_iterator(shared.parent_path()))  // an older build's
          if (e.path().filename().string().rfind("learning-enc-", 0) == 0 && e.is_directory()) fs::remove_all(e.path());
        fs::remove_all(shared.string() + ".tmp");  // a process killed while copying
        fs::copy(dir_ / "enc", shared.string() + ".tmp", fs::copy_options::recursive);
        fs::rename(shared.string() + ".tmp", shared);
      }
      ::flock(fd, LOCK_UN);
      ::close(fd);
      ASSERT_EQ(p.rc, 0) << p.err;
      return;
    }
    ::flock(fd, LOCK_UN);
    ::close(fd);
    fs::copy(shared, dir_ / "enc", fs::copy_options::recursive);
  }
  static void TearDownTestSuite() {
    if (server_) server_->stop();
    server_.reset();
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  void SetUp() override {
    if (!server_)
      GTEST_SKIP() << "needs ../shared/data/git and ../shared/models/bert-base-uncased-vocab (absent in this checkout)";
  }

  static Result run(const std::string& args) { return attune::testing::run_attune(dir_, args); }
  static std::string llm() { return "'" + server_->spec() + "'"; }

  // Trains `method` into `out` and returns its attune_train.json (the reader: `reader`, by
  // default the loopback server's).
  static json train(const std::string& method, const std::string& out, const std::string& extra,
                    const std::string& reader = "") {
    const auto r = run("train --method " + method + " --data " + kGit + " --task commit_subject --llm " +
                       (reader.empty() ? llm() : reader) + " --init enc --out " + out +
                       " --store learn.db --dev-limit 150 --quiet " + extra);
    EXPECT_EQ(r.rc, 0) << r.err;
    return json::parse(slurp(dir_ / out / "attune_train.json"));
  }
  // `eval` on the test split at k = 1: its JSON report.
  static json eval(const std::string& retrievers) {
    const auto r = run("eval --data " + kGit + " --task commit_subject --split test --limit 500 --k 1 --llm " + llm() +
                       " --store learn.db --quiet --retrievers '" + retrievers + "' --out eval.json");
    EXPECT_EQ(r.rc, 0) << r.err;
    return json::parse(slurp(dir_ / "eval.json"));
  }

  // The dev numbers of a ROPG run: start, kept and oracle top-1 utility.
  struct Dev {
    double start = 0, kept = 0, oracle = 0;
  };
  static Dev dev_of(const json& t) {
    Dev d{t.at("init_dev_top1"), t.at("init_dev_top1"), t.at("init_dev_oracle")};
    const auto best = t.at("best_epoch").get<std::size_t>();
    if (best > 0) d.kept = t.at("epochs").at(best - 1).at("dev_top1");
    return d;
  }

  // The learner and its control, then both against their start on test.
  // `name` the folders, `extra` more options, `reader` another --llm (the in-process reader
  // where the server cannot serve what the run asks, log-probabilities).
  static void check_ropg(const std::string& method, std::size_t limit, std::size_t epochs, const std::string& name = "",
                         const std::string& extra = "", const std::string& reader = "") {
    const std::string data = "--limit " + std::to_string(limit) + " --batch-size 16 " + extra + " ";
    const std::string folder = name.empty() ? method : name;
    const auto on = dev_of(train(method, folder, data + "--lr 1e-3 --epochs " + std::to_string(epochs), reader));
    // The control: the same run with learning switched off (one epoch: with lr 0 every
    // epoch is the same).
    const auto off_json = train(method, folder + "-off", data + "--lr 0 --epochs 1", reader);
    const auto off = dev_of(off_json);
    std::printf("%s: dev top-1 %.4f -> %.4f (oracle %.4f)\n", folder.c_str(), on.start, on.kept, on.oracle);
    ASSERT_GT(on.oracle, on.start + 0.02) << "no headroom: the check could not tell";
    EXPECT_GE(on.kept - on.start, 0.5 * (on.oracle - on.start))
        << folder << " recovered too little of the planted preference: dev top-1 " << on.start << " -> " << on.kept
        << " (oracle " << on.oracle << ")";
    EXPECT_EQ(off_json.at("best_epoch"), 0) << "with lr 0 an epoch beat the start";
    EXPECT_EQ(off.kept, off.start);
    EXPECT_EQ(off.start, on.start);

    // End to end (test split, read only): both folders retrieve as rerank(bm25, 16, .),
    // the protocol they were trained in, with the learned initial prior (the default): their
    // start is that protocol with `enc` and the prior weight the run started from, which
    // the control's folder records as its fusion (none when the weight started at 0).
    const auto marker = json::parse(slurp(dir_ / (folder + "-off") / "attune_model.json"));
    std::string start = "rerank(bm25,16,dense:enc)";
    if (marker.at("rerank").contains("fusion")) {
      const auto& f = marker.at("rerank").at("fusion");
      char buf[128];
      std::snprintf(buf, sizeof buf, "rerank(bm25,16,dense:enc,fuse=%.17g:%.17g)", f.at("reranker_scale").get<double>(),
                    f.at("initial_weight").get<double>());
      start = buf;
      EXPECT_DOUBLE_EQ(f.at("initial_weight").get<double>(), off_json.at("initial_prior").at("weight_start").get<double>());
    }
    const auto e = eval(folder + "," + folder + "-off," + start + ",bm25");
    const auto& sig = e.at("significance");
    std::printf("%s: test %s\n", folder.c_str(), e.at("results").dump().c_str());
    for (const std::string& base : {start, std::string("bm25")}) {
      const auto& better = sig.at(folder).at(base).at("rouge-1");
      EXPECT_TRUE(better.at("better").get<bool>() && better.at("p").get<double>() < 0.05)
          << folder << " vs " << base << " on test: " << better.dump() << " " << e.at("results").dump();
    }
    EXPECT_DOUBLE_EQ(e.at("results").at(folder + "-off").at("rouge-1").get<double>(),
                     e.at("results").at(start).at("rouge-1").get<double>())
        << "the control is not its start";
  }

  // RSPG (`method`: rspg-pre or rspg-post) over a pool, and its control; end to end the
  // trained selector against the untrained one (its start: the control folder holds it,
  // kept epoch 0).
  static void check_rspg(const std::string& method, std::size_t limit, std::size_t epochs) {
    const std::string pool = "--pool none,recency,bm25,dense:enc --k 1 --limit " + std::to_string(limit) +
                             " --batch-size 16 ";
    const std::string on_dir = method, off_dir = method + "-off";
    const auto t = train(method, on_dir, pool + "--lr 1e-3 --epochs " + std::to_string(epochs));
    const auto off = train(method, off_dir, pool + "--lr 0 --epochs 1");
    const double start = t.at("init_dev_utility"), oracle = t.at("init_dev_oracle");
    const auto best = t.at("best_epoch").get<std::size_t>();
    const double kept = best ? t.at("epochs").at(best - 1).at("dev_utility").get<double>() : start;
    ASSERT_GT(oracle, start + 0.01) << "no headroom: the check could not tell";
    EXPECT_GE(kept - start, 0.5 * (oracle - start))
        << method << " recovered too little of the planted preference: dev utility " << start << " -> " << kept
        << " (oracle " << oracle << ")";
    EXPECT_EQ(off.at("best_epoch"), 0) << "with lr 0 an epoch beat the start";
    EXPECT_EQ(off.at("init_dev_utility").get<double>(), start);
    const auto e = eval("none,recency,bm25,dense:enc," + on_dir + "," + off_dir);
    const auto& better = e.at("significance").at(on_dir).at(off_dir).at("rouge-1");
    EXPECT_TRUE(better.at("better").get<bool>() && better.at("p").get<double>() < 0.05)
        << method << " vs its start on test: " << better.dump() << " " << e.at("results").dump();
  }

  // Pearl: its labels are log-probabilities, which serve-llm does not serve, so it reads
  // the same reader in-process. Its start is the untrained cross-encoder (the --lr 0
  // control); its dev metric is end to end at k = 1 (--pearl-k 1) on the first 150 dev
  // examples, beside the oracle of the same candidates (eval --oracle 16 on bm25).
  static void check_pearl() {
    const std::string common = "--llm '" + kReader + "' --limit 400 --batch-size 16 --pearl-k 1 ";
    auto pearl = [&](const std::string& out, const std::string& extra) {
      const auto r = run("train --method pearl --data " + kGit + " --task commit_subject --init enc --out " + out +
                         " --store learn.db --dev-limit 150 --quiet " + common + extra);
      EXPECT_EQ(r.rc, 0) << r.err;
      return json::parse(slurp(dir_ / out / "attune_train.json")).at("dev").at("metric_without_revision").get<double>();
    };
    const double on = pearl("pearl", "--lr 1e-3 --epochs 2"), off = pearl("pearl-off", "--lr 0 --epochs 1");
    const auto r = run("eval --data " + kGit + " --task commit_subject --split dev --limit 150 --k 1 --llm '" + kReader +
                       "' --store learn.db --quiet --retrievers bm25 --oracle 16 --out dev.json");
    ASSERT_EQ(r.rc, 0) << r.err;
    const auto d = json::parse(slurp(dir_ / "dev.json"));
    const double bm25 = d.at("results").at("bm25").at("rouge-1"), oracle = d.at("oracle").at("bm25").at("best_single");
    ASSERT_GT(oracle, bm25 + 0.02) << "no headroom: the check could not tell";
    EXPECT_GE(on - off, 0.5 * (oracle - off))
        << "pearl recovered too little of the planted preference: dev " << off << " (untrained) -> " << on << " (oracle "
        << oracle << ")";
    EXPECT_LT(off - bm25, 0.5 * (oracle - bm25)) << "the untrained reranker already knew the preference";
    const auto e = [&] {
      const auto t = run("eval --data " + kGit + " --task commit_subject --split test --limit 500 --k 1 --llm '" +
                         kReader + "' --store learn.db --quiet --retrievers bm25,pearl,pearl-off --out test.json");
      EXPECT_EQ(t.rc, 0) << t.err;
      return json::parse(slurp(dir_ / "test.json"));
    }();
    const auto& better = e.at("significance").at("pearl").at("pearl-off").at("rouge-1");
    EXPECT_TRUE(better.at("better").get<bool>() && better.at("p").get<double>() < 0.05)
        << "pearl vs its start on test: " << better.dump() << " " << e.at("results").dump();
  }

  // PURPLE: its rewards are log-probabilities asked inside the training loop, so it reads
  // the reader in-process. It selects an ordered profile of K = 5 from BM25's top 20; its
  // start is the untrained selector (the --lr 0 control), which with the default
  // --initial-prior learned orders as BM25 does. Dev and test are end to end at
  // k = 5, beside the oracle of the same candidates (the best single document of BM25's
  // top 20 put first: the reader answers from the first document it likes).
  static void check_purple() {
    const std::string common = "--llm '" + kReader + "' --initial bm25 --limit 500 ";
    auto purple = [&](const std::string& out, const std::string& extra) {
      const auto r = run("train --method purple --data " + kGit + " --task commit_subject --init enc --out " + out +
                         " --store learn.db --dev-limit 150 --quiet " + common + extra);
      EXPECT_EQ(r.rc, 0) << r.err;
      return json::parse(slurp(dir_ / out / "attune_train.json"));
    };
    const auto on_json = purple("purple", "--lr 1e-3 --epochs 3"), off_json = purple("purple-off", "--lr 0 --epochs 1");
    EXPECT_EQ(off_json.at("best_epoch"), 0) << "with lr 0 an epoch beat the start";
    EXPECT_GE(on_json.at("best_epoch").get<std::size_t>(), 1u) << "no epoch beat the untrained selector on dev";
    const auto at = [&](const std::string& split, const std::string& retrievers, const std::string& extra) {
      const auto r = run("eval --data " + kGit + " --task commit_subject --split " + split + " --limit " +
                         (split == "dev" ? "150" : "500") + " --k 5 --llm '" + kReader +
                         "' --store learn.db --quiet --retrievers " + retrievers + " " + extra + " --out " + split + ".json");
      EXPECT_EQ(r.rc, 0) << r.err;
      return json::parse(slurp(dir_ / (split + ".json")));
    };
    const auto d = at("dev", "bm25,purple,purple-off", "--oracle 20");
    const double on = d.at("results").at("purple").at("rouge-1"), off = d.at("results").at("purple-off").at("rouge-1");
    const double oracle = d.at("oracle").at("bm25").at("best_single");
    ASSERT_GT(oracle, off + 0.02) << "no headroom: the check could not tell";
    EXPECT_GE(on - off, 0.5 * (oracle - off))
        << "purple recovered too little of the planted preference: dev " << off << " (untrained) -> " << on << " (oracle "
        << oracle << ")";
    const auto e = at("test", "bm25,purple,purple-off", "");
    for (const std::string& base : {std::string("purple-off"), std::string("bm25")}) {
      const auto& better = e.at("significance").at("purple").at(base).at("rouge-1");
      EXPECT_TRUE(better.at("better").get<bool>() && better.at("p").get<double>() < 0.05)
          << "purple vs " << base << " on test: " << better.dump() << " " << e.at("results").dump();
    }
  }

  static fs::path dir_;
  static std::unique_ptr<attune::llm::PlantedReader> reader_;
  static std::unique_ptr<attune::llm::OpenAIServer> server_;
};

fs::path Learning::dir_;
std::unique_ptr<attune::llm::PlantedReader> Learning::reader_;
std::unique_ptr<attune::llm::OpenAIServer> Learning::server_;

TEST_F(Learning, RopgKdRecoversAPlantedPreferenceAndNotWithLearningOff) {
  check_ropg("ropg-kd", 2500, 3);
}

// REPLUG-LSR's signal (--kd-target likelihood): log-probabilities, read in-process.
TEST_F(Learning, RopgKdOnLikelihoodsRecoversAPlantedPreferenceAndNotWithLearningOff) {
  check_ropg("ropg-kd", 2500, 3, "ropg-kd-ll", "--kd-target likelihood", "'" + kReader + "'");
}

TEST_F(Learning, RopgRlRecoversAPlantedPreferenceAndNotWithLearningOff) {
  check_ropg("ropg-rl", 2500, 4);
}

// LUF (issue 18): its labels come from a judge, `planted:judge?word=test`, whose rule is
// the reader's preference (a document holding "test" contains the answer), read
// in-process; its dev metric is the judged score of the top document, and end to end it is
// read by the loopback reader like every other learner here.
TEST_F(Learning, LufRecoversAPlantedJudgesPreferenceAndNotWithLearningOff) {
  check_ropg("luf", 2500, 2, "luf", "", "'planted:judge?word=test'");
}

TEST_F(Learning, RspgPreRecoversAPlantedPreferenceAndNotWithLearningOff) { check_rspg("rspg-pre", 500, 2); }

TEST_F(Learning, RspgPostRecoversAPlantedPreferenceAndNotWithLearningOff) { check_rspg("rspg-post", 500, 2); }

TEST_F(Learning, PearlRecoversAPlantedPreferenceAndNotWithLearningOff) { check_pearl(); }

// PURPLE (003) selects an ordered profile; the reader answers from the first document it likes.
TEST_F(Learning, PurpleRecoversAPlantedPreferenceAndNotWithLearningOff) { check_purple(); }

// IUM's planted-preference check (issue 16): two agents on commit_subject whose readers
// like different documents (those holding "test", those holding "fix"; a document is useful
// to an agent when its output with it alone scores above 0). One reranker serves both: for
// each agent, its reranker gets at least half-way from BM25 to the oracle of BM25's top 16
// on dev, and on test it beats BM25, the lr-0 control and the other agent's reranker at
// p < 0.05 (so the agent tokens are read, not only the documents).
TEST_F(Learning, IumRecoversTwoAgentsPlantedPreferencesAndNotWithLearningOff) {
  {
    std::ofstream a(dir_ / "agents-gate.json");
    a << R"({"agents": [{"name": "tests", "task": "commit_subject", "llm": "planted:gate?word=test", "k": 1},
                        {"name": "fixes", "task": "commit_subject", "llm": "planted:gate?word=fix", "k": 1}]})";
  }
  const auto train = [&](const std::string& out, const std::string& extra) {
    const auto r = run("train --method ium --agents agents-gate.json --data " + kGit +
                       " --task commit_subject --init enc --out " + out + " --store learn.db --limit 600 --dev-limit 100 "
                       "--ium-iterations 1 --ium-feedback-k 16 --ium-positive-at 0.001 --batch-size 32 --micro-batch 32 --quiet " + extra);
    EXPECT_EQ(r.rc, 0) << r.err;
    return json::parse(slurp(dir_ / out / "iter-1" / "attune_train.json"));
  };
  const auto on_json = train("ium-gate", "--lr 1e-3 --epochs 5"), off_json = train("ium-gate-off", "--lr 0 --epochs 1");
  EXPECT_EQ(off_json.at("best_epoch"), 0) << "with lr 0 an epoch beat the start";
  EXPECT_GE(on_json.at("best_epoch").get<std::size_t>(), 1u) << "no epoch beat the untrained reranker on dev";
  const auto spec = [](const std::string& folder, const std::string& word) {
    return "rerank(bm25,16,ium:" + folder + "/iter-1?task=commit_subject&model=planted:gate?word=" + word + ")";
  };
  for (const std::string word : {"test", "fix"}) {
    const std::string other = word == "test" ? "fix" : "test";
    const std::string own = spec("ium-gate", word), off = spec("ium-gate-off", word), wrong = spec("ium-gate", other);
    const auto at = [&](const std::string& split, const std::string& retrievers, const std::string& extra) {
      const auto r = run("eval --data " + kGit + " --task commit_subject --split " + split + " --limit " +
                         (split == "dev" ? "150" : "500") + " --k 1 --llm 'planted:gate?word=" + word +
                         "' --store learn.db --quiet --retrievers '" + retrievers + "' " + extra + " --out ium-" + split + ".json");
      EXPECT_EQ(r.rc, 0) << r.err;
      return json::parse(slurp(dir_ / ("ium-" + split + ".json")));
    };
    const auto d = at("dev", "bm25," + own, "--oracle 16");
    const double on = d.at("results").at(own).at("rouge-1"), bm25 = d.at("results").at("bm25").at("rouge-1");
    const double oracle = d.at("oracle").at("bm25").at("best_single");
    ASSERT_GT(oracle, bm25 + 0.02) << word << ": no headroom: the check could not tell";
    EXPECT_GE(on - bm25, 0.5 * (oracle - bm25))
        << word << ": IUM recovered too little of the planted preference: dev bm25 " << bm25 << " -> " << on << " (oracle "
        << oracle << ")";
    const auto e = at("test", "bm25," + own + "," + off + "," + wrong, "");
    for (const std::string& base : {std::string("bm25"), off, wrong}) {
      const auto& better = e.at("significance").at(own).at(base).at("rouge-1");
      EXPECT_TRUE(better.at("better").get<bool>() && better.at("p").get<double>() < 0.05)
          << word << ": " << own << " vs " << base << " on test: " << better.dump() << " " << e.at("results").dump();
    }
  }
}

// Online IUM (002 §4): each agent's own copy serves 100 queries, is updated on what it
// served, and serves the next 100. With the two planted agents above, the share of queries
// whose first served document is useful must rise from the first round (BM25) to the last;
// a rerun finds every round done and trains nothing.
TEST_F(Learning, IumOnlineServesBetterAfterEachAgentsUpdates) {
  {
    std::ofstream a(dir_ / "agents-online.json");
    a << R"({"agents": [{"name": "tests", "task": "commit_subject", "llm": "planted:gate?word=test", "k": 5},
                        {"name": "fixes", "task": "commit_subject", "llm": "planted:gate?word=fix", "k": 5}]})";
  }
  const std::string cmd = "train --method ium-online --ium-online-batch 100 --agents agents-online.json --data " + kGit +
                          " --task commit_subject --init enc --out ium-online --store learn.db --limit 300 "
                          "--ium-positive-at 0.001 --lr 1e-3 --batch-size 32 --micro-batch 32 --epochs 3 --quiet";
  const auto r = run(cmd);
  ASSERT_EQ(r.rc, 0) << r.err;
  for (const std::string agent : {"tests", "fixes"}) {
    const auto j = json::parse(slurp(dir_ / "ium-online" / agent / "online.json"));
    const auto& rounds = j.at("rounds");
    ASSERT_EQ(rounds.size(), 3u) << j.dump();
    EXPECT_EQ(rounds[0].at("served_by"), "bm25");
    const double first = rounds[0].at("served_top1_useful"), last = rounds[2].at("served_top1_useful");
    EXPECT_GT(last, first + 0.15) << agent << ": served top-1 useful did not rise: " << rounds.dump();
    for (const char* f : {"round-1", "round-2"}) EXPECT_TRUE(fs::exists(dir_ / "ium-online" / agent / f / "ium.json")) << agent << f;
  }
  const auto mtime = fs::last_write_time(dir_ / "ium-online/tests/round-2/ium_head.safetensors");
  const auto again = run(cmd);
  ASSERT_EQ(again.rc, 0) << again.err;
  EXPECT_EQ(fs::last_write_time(dir_ / "ium-online/tests/round-2/ium_head.safetensors"), mtime) << "a finished round was trained again";

  // --ium-online-promote: an update serves unless it does worse than the serving copy on the agent's dev queries. The
  // finished rounds are copied in, so the gate's decisions are made (dev feedback asked, both copies ranked) without
  // training again.
  fs::copy(dir_ / "ium-online", dir_ / "ium-gated", fs::copy_options::recursive | fs::copy_options::copy_symlinks);
  for (const std::string agent : {"tests", "fixes"}) fs::remove(dir_ / "ium-gated" / agent / "online.json");
  const auto gated = run(std::regex_replace(cmd, std::regex("--out ium-online"), "--out ium-gated") + " --ium-online-promote --dev-limit 100");
  ASSERT_EQ(gated.rc, 0) << gated.err;
  for (const std::string agent : {"tests", "fixes"}) {
    const auto j = json::parse(slurp(dir_ / "ium-gated" / agent / "online.json"));
    EXPECT_TRUE(j.at("promote").get<bool>());
    std::string last_promoted;
    double serving = -1, initial = -1;
    for (const auto& round : j.at("rounds")) {
      if (!round.contains("promoted")) continue;  // no update that round
      const double dev = round.at("dev_top1_useful"), before = round.at("serving_dev_top1_useful");
      if (serving >= 0) {
        EXPECT_DOUBLE_EQ(before, serving) << agent << ": the serving copy's dev measure changed: " << j.dump();
      }
      if (initial < 0) initial = before;  // BM25's: --init is a bare encoder
      EXPECT_EQ(round.at("promoted").get<bool>(), dev >= before) << agent << ": " << round.dump();
      if (round.at("promoted").get<bool>()) last_promoted = "round-" + std::to_string(round.at("round").get<int>());
      serving = round.at("promoted").get<bool>() ? dev : before;
    }
    // The planted preference is learnable: the copy serving at the end beats BM25 on dev, and it is the last promoted
    // one.
    ASSERT_FALSE(last_promoted.empty()) << agent << ": no update promoted: " << j.dump();
    EXPECT_GT(serving, initial) << agent << ": the serving copy is no better than BM25 on dev: " << j.dump();
    EXPECT_NE(gated.out.find("ium-gated/" + agent + "/" + last_promoted + " "), std::string::npos) << gated.out;
    EXPECT_EQ(fs::canonical(dir_ / "ium-gated" / agent / "serving"), fs::canonical(dir_ / "ium-gated" / agent / last_promoted));
  }
  // A `serving` that is not the run's own link (here a folder) is refused, not replaced.
  fs::remove(dir_ / "ium-gated/tests/serving");
  fs::create_directories(dir_ / "ium-gated/tests/serving/mine");
  const auto clash = run(std::regex_replace(cmd, std::regex("--out ium-online"), "--out ium-gated") + " --ium-online-promote --dev-limit 100");
  EXPECT_NE(clash.rc, 0);
  EXPECT_NE(clash.err.find("serving exists and is not the link to the serving copy"), std::string::npos) << clash.err;
  EXPECT_TRUE(fs::exists(dir_ / "ium-gated/tests/serving/mine"));
}

// IUM's offline EM end to end on the Debian corpus: two agents, two iterations, each a finished folder; a rerun resumes by
// skipping them; eval reads the reranker for one agent through its spec.
TEST_F(Learning, IumRunsItsEmIterationsResumesAndServesEachAgent) {
  const std::string debian = std::string(ATTUNE_SHARED_DIR) + "/data/debian";
  if (!fs::exists(debian + "/qa_train.jsonl")) GTEST_SKIP() << "needs ../shared/data/debian (absent in this checkout)";
  {
    std::ofstream a(dir_ / "agents.json");
    a << R"({"agents": [{"name": "qa-ref", "task": "qa", "llm": "reference", "k": 5},
                        {"name": "fc-ref", "task": "factcheck", "llm": "reference", "k": 5}]})";
  }
  const std::string cmd = "train --method ium --agents agents.json --data " + debian +
                          " --task qa --init enc --out ium --store ium.db --limit 30 --dev-limit 10 --ium-iterations 2 "
                          "--ium-feedback-k 6 --batch-size 32 --lr 1e-4 --quiet";
  const auto r = run(cmd);
  ASSERT_EQ(r.rc, 0) << r.err;
  for (const char* it : {"iter-1", "iter-2"}) {
    const auto m = json::parse(slurp(dir_ / "ium" / it / "attune_model.json"));
    EXPECT_EQ(m.at("kind"), "ium");
    EXPECT_TRUE(m.at("complete").get<bool>()) << it;
    const auto cfg = json::parse(slurp(dir_ / "ium" / it / "ium.json"));
    EXPECT_EQ(cfg.at("tasks"), json({"qa", "factcheck"}));
    EXPECT_EQ(cfg.at("models"), json({"reference"}));
  }
  const auto again = run(cmd);
  ASSERT_EQ(again.rc, 0) << again.err;
  const auto e = run("eval --data " + debian + " --task factcheck --split dev --limit 10 --k 5 --llm reference --store ium.db "
                     "--quiet --retrievers 'bm25,rerank(bm25,100,ium:ium/iter-2?task=factcheck&model=reference)' --out ium.json");
  ASSERT_EQ(e.rc, 0) << e.err;
  EXPECT_EQ(json::parse(slurp(dir_ / "ium.json")).at("results").size(), 2u);
  const auto bad = run("train --method ium --agents no-such.json --data " + debian + " --task qa --init enc --out x --quiet");
  EXPECT_EQ(bad.rc, 2);
  EXPECT_NE(bad.err.find("--agents no-such.json: no such file"), std::string::npos) << bad.err;
}

// IUM's relevance start (--ium-relevance-start): OUT/iter-0 learns the Debian corpus's gold passages for qa before any
// feedback, its agents reading [UNK]; with learning off (--lr 0) it keeps its untrained start, so the check can fail. The
// EM's first iteration then starts from it (and collects its feedback on iter-0's ranking). A profile task is refused.
TEST_F(Learning, IumRelevanceStartLearnsTheGoldPassagesAndNotWithLearningOff) {
  const std::string debian = std::string(ATTUNE_SHARED_DIR) + "/data/debian";
  if (!fs::exists(debian + "/qa_train.jsonl")) GTEST_SKIP() << "needs ../shared/data/debian (absent in this checkout)";
  {
    std::ofstream a(dir_ / "agents-rel.json");
    a << R"({"agents": [{"name": "qa-first", "task": "qa", "llm": "planted:first", "k": 1}]})";
  }
  const std::string base = "train --method ium --agents agents-rel.json --data " + debian +
                           " --task qa --init enc --store ium-rel.db --limit 200 --dev-limit 50 --ium-feedback-k 16 "
                           "--ium-relevance-start --batch-size 32 --epochs 2 --quiet";
  const auto on = run(base + " --lr 1e-3 --ium-iterations 1 --out rel");
  ASSERT_EQ(on.rc, 0) << on.err;
  const auto t = json::parse(slurp(dir_ / "rel/iter-0/attune_train.json"));
  const double start = t.at("init_dev_top1").get<double>();
  const auto kept = t.at("best_epoch").get<std::size_t>();
  ASSERT_GE(kept, 1u) << t.dump();
  const double learned = t.at("epochs").at(kept - 1).at("dev_top1").get<double>();
  EXPECT_GE(learned, start + 0.1) << "dev top-1 gold: untrained " << start << ", kept epoch " << learned;
  const auto cfg = json::parse(slurp(dir_ / "rel/iter-0/ium.json"));
  EXPECT_EQ(cfg.at("tasks"), json::array()) << "the relevance start knows no agent";
  EXPECT_EQ(cfg.at("models"), json::array());
  const auto t1 = json::parse(slurp(dir_ / "rel/iter-1/attune_train.json"));
  EXPECT_EQ(fs::path(t1.at("options").at("init").get<std::string>()).filename(), "iter-0");
  EXPECT_TRUE(json::parse(slurp(dir_ / "rel/iter-1/attune_model.json")).at("complete").get<bool>());

  const auto off = run(base + " --lr 0 --ium-iterations 0 --out rel0");
  ASSERT_EQ(off.rc, 0) << off.err;
  const auto t0 = json::parse(slurp(dir_ / "rel0/iter-0/attune_train.json"));
  EXPECT_EQ(t0.at("best_epoch").get<std::size_t>(), 0u) << "learning off keeps the start";
  for (const auto& e : t0.at("epochs")) EXPECT_DOUBLE_EQ(e.at("dev_top1").get<double>(), t0.at("init_dev_top1").get<double>());

  {
    std::ofstream a(dir_ / "agents-relg.json");
    a << R"({"agents": [{"name": "subject", "task": "commit_subject", "llm": "planted:first", "k": 1}]})";
  }
  const auto bad = run("train --method ium --agents agents-relg.json --data " + kGit +
                       " --task commit_subject --init enc --out relx --ium-relevance-start --quiet");
  EXPECT_EQ(bad.rc, 2);
  EXPECT_NE(bad.err.find("names no gold passage"), std::string::npos) << bad.err;
  const auto bad2 = run("train --method ium --agents agents-rel.json --data " + debian +
                        " --task qa --init enc --out relx --ium-relevance-limit 10 --quiet");
  EXPECT_EQ(bad2.rc, 2);
  EXPECT_NE(bad2.err.find("--ium-relevance-limit applies to --ium-relevance-start"), std::string::npos) << bad2.err;
}

// An application's side of `attune serve`, for the checks that learn through its API: the
// server started in the background in `dir` (stderr in TAG.err, pid in pid-TAG.txt), a
// client with the tenant's key, and the calls the application makes.
struct ServeApp {
  fs::path dir;
  std::string tag;
  std::unique_ptr<httplib::Client> c;

  // Starts `attune serve --store STORE --config CONFIG` and connects (ASSERT_NO_FATAL_FAILURE it).
  void start(const fs::path& in, const std::string& name, const std::string& store, const std::string& config,
             const std::string& key) {
    dir = in;
    tag = name;
    const std::string bin = std::string(ATTUNE_BINARY_DIR) + "/tools/attune/attune";
    ASSERT_EQ(std::system(("cd '" + dir.string() + "' && ('" + bin + "' serve --store " + store + " --config " + config +
                           " --port 0 --port-file port-" + tag + ".txt >" + tag + ".out 2>" + tag + ".err & echo $! >pid-" +
                           tag + ".txt)").c_str()),
              0);
    const fs::path port = dir / ("port-" + tag + ".txt");
    for (int i = 0; i < 400 && !fs::exists(port); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(25));
    ASSERT_TRUE(fs::exists(port)) << log();
    c = std::make_unique<httplib::Client>("127.0.0.1", std::stoi(slurp(port)));
    c->set_default_headers({{"Authorization", "Bearer " + key}});
    c->set_read_timeout(60);
  }
  std::string log() const { return slurp(dir / (tag + ".err")); }
  json post(const std::string& path, const json& body) {
    auto res = c->Post(path, body.dump(), "application/json");
    EXPECT_TRUE(res) << path;
    EXPECT_EQ(res ? res->status : 0, 200) << (res ? res->body : "");
    return res ? json::parse(res->body) : json();
  }
  // Each example is a user (its id) whose profile is their documents.
  void put_user(const attune::Example& ex, const attune::tasks::Task& task) {
    json docs = json::array();
    for (const auto& d : ex.profile) docs.push_back({{"id", d.id}, {"text", task.document_text(d)}});
    auto res = c->Put("/v1/users/" + ex.id + "/documents", json{{"documents", docs}}.dump(), "application/json");
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200) << res->body;
  }
  // SIGTERM, then waits for the server to exit, so that the suite's teardown does not remove
  // its folder while the server still closes its store.
  void stop() const {
    const auto text = slurp(dir / ("pid-" + tag + ".txt"));
    const pid_t pid = static_cast<pid_t>(std::stol(text));
    ::kill(pid, SIGTERM);
    for (int i = 0; i < 600 && ::kill(pid, 0) == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
};

}  // namespace

// attune serve learns from a planted reader's feedback sent through its API: an application
// (this test) puts each user's profile as their documents, asks /v1/retrieve for 16, has the
// reader answer with each served document alone, and sends the metric of each answer as
// that document's utility. The server's learner (ROPG-KD from `enc`) must then serve rankings
// whose top document is liked more often, on queries it learnt nothing from, under a new
// model version. (The learner itself, with its lr-0 control, is the ROPG-KD check above.)
// `learn` adds keys to the config's learn object: "" for ROPG-KD (the default learner).
// `judge` (optional) replaces the last check: it gets the served top-1 utilities of each
// held-out user before and after, and a function giving them under a spec the call names
// (one of the config's "retrievers", which `top_level` may add: "\"retrievers\": [...], ").
using ServeTop1 = std::function<std::vector<double>(const std::string& retriever)>;
static void check_serve_learns(const fs::path& dir_, attune::llm::PlantedReader* reader_, const std::string& learn,
                               const std::function<attune::testing::CliResult(const std::string&)>& run,
                               const std::string& top_level = "",
                               const std::function<void(const std::vector<double>&, const std::vector<double>&, const ServeTop1&)>&
                                   judge = {}) {
  attune::engine::DataSpec spec;
  spec.data = kGit;
  spec.task = "commit_subject";
  spec.split = "train";
  const auto ds = attune::engine::load_dataset(spec);
  spec.split = "dev";
  const auto held = attune::engine::load_dataset(spec);  // the held-out users: the dev split's first 160
  const auto task = attune::tasks::make_task("commit_subject");
  const auto tok = attune::text::make_tokenizer("whitespace");
  // As the ROPG-KD check: 2,500 training queries (2 epochs); 160 dev queries held out.
  constexpr std::size_t kTrain = 2500, kHeldOut = 160;
  ASSERT_GE(ds.examples.size(), kTrain);
  ASSERT_GE(held.examples.size(), kHeldOut);
  const auto r = run("tenant add acme --store serve.db");
  ASSERT_EQ(r.rc, 0) << r.err;
  const std::string key = r.out.substr(0, r.out.find('\n'));
  // The round starts once all the feedback is in: one record per served document, min(16, profile).
  std::size_t expected = 0;
  for (std::size_t i = 0; i < kTrain; ++i) expected += std::min<std::size_t>(16, ds.examples[i].profile.size());
  {
    std::ofstream(dir_ / "serve.json") << "{" << top_level << R"("retriever": "bm25", "learn": {"on": true, "init": "enc", "dir": "served",
        "interval_seconds": 1, "top_l": 16, "epochs": 2, )" << learn << R"("min_new_feedback": )" << expected << "}}";
  }
  ServeApp app;
  ASSERT_NO_FATAL_FAILURE(app.start(dir_, "serve", "serve.db", "serve.json", key));
  // The planted reader's utility of one document for an example: its answer with that document alone, scored.
  const auto utility = [&](const attune::Example& ex, const std::string& doc_id) {
    for (const auto& d : ex.profile)
      if (d.id == doc_id) {
        const auto prompt = task->prompt(ex, {&d}, *tok, {});
        return task->reward(reader_->answer(prompt), ex.output);
      }
    ADD_FAILURE() << "served a document " << doc_id << " that is not in the profile of " << ex.id;
    return 0.0;
  };
  // Served top-1 utility of each held-out user (the dev split's first 160), under the
  // tenant's model ("") or a spec the call names, and the model version that served.
  const auto top1s = [&](const std::string& retriever, std::string& version) {
    std::vector<double> u(kHeldOut, 0.0);
    for (std::size_t i = 0; i < kHeldOut; ++i) {
      const auto& ex = held.examples[i];
      json q = {{"user", ex.id}, {"query", task->query(ex)}, {"k", 1}};
      if (!retriever.empty()) q["retriever"] = retriever;
      const auto out = app.post("/v1/retrieve", q);
      version = out.value("model_version", "");
      if (!out["documents"].empty()) u[i] = utility(ex, out["documents"][0]["id"]);
    }
    return u;
  };
  std::vector<double> before_each, after_each;
  const auto mean = [](const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size()); };
  const auto served_top1 = [&](std::string& version) {
    (before_each.empty() ? before_each : after_each) = top1s("", version);
    return mean(after_each.empty() ? before_each : after_each);
  };
  for (std::size_t i = 0; i < kHeldOut; ++i) app.put_user(held.examples[i], *task);
  std::string before_version, after_version;
  const double before = served_top1(before_version);
  EXPECT_EQ(before_version, "bm25@v1");

  // Feedback on the training users: 16 served documents each, a utility for every one.
  std::size_t records = 0;
  for (std::size_t i = 0; i < kTrain; ++i) {
    const auto& ex = ds.examples[i];
    app.put_user(ex, *task);
    const auto out = app.post("/v1/retrieve", {{"user", ex.id}, {"query", task->query(ex)}, {"k", 16}});
    json utils = json::object();
    for (const auto& d : out["documents"]) utils[d["id"].get<std::string>()] = utility(ex, d["id"]);
    if (utils.empty()) continue;
    records += app.post("/v1/feedback", {{"request_id", out["request_id"]}, {"utilities", utils}}).value("records", 0);
  }
  ASSERT_EQ(records, expected) << "the feedback the learner waits for";
  // Wait for the round (it trains beside the request handlers) and its promotion.
  bool promoted = false;
  for (int i = 0; i < 600 && !promoted; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    promoted = app.log().find("promoted") != std::string::npos || app.log().find("kept the served model") != std::string::npos;
  }
  const std::string log = app.log();
  ASSERT_TRUE(promoted) << log;
  const double after = served_top1(after_version);
  std::printf("serve learning: held-out served top-1 utility %.4f (%s) -> %.4f (%s)\n%s", before, before_version.c_str(),
              after, after_version.c_str(), log.c_str());
  EXPECT_NE(log.find(": promoted;"), std::string::npos) << log;
  EXPECT_EQ(after_version.rfind("served/", 0), 0u) << after_version;
  EXPECT_NE(after_version.find("@v2"), std::string::npos) << after_version;
  if (judge)
    judge(before_each, after_each, [&](const std::string& spec) {
      std::string version;
      return top1s(spec, version);
    });
  else
    EXPECT_GT(after, before + 0.02) << "the served rankings did not improve";
  app.stop();
}

// Paper 004's personal store in attune serve, with a real encoder: beside the shared corpus a
// user's documents are ranked only when their cosine with the query, under personal.encoder,
// reaches personal.threshold. The server ranks with dense:enc too, so the scores it serves
// are those cosines: a first server that admits everything (threshold -1) shows them, and a
// second one, with the threshold between two of them, must serve exactly the documents at or
// above it, and no other user's.
TEST_F(Learning, ServeAdmitsPersonalDocumentsAboveTheThreshold) {
  for (const char* f : {"personal.db", "personal.db-wal", "personal.db-shm"}) fs::remove_all(dir_ / f);
  const auto r = run("tenant add acme --store personal.db");
  ASSERT_EQ(r.rc, 0) << r.err;
  const std::string key = r.out.substr(0, r.out.find('\n'));
  const std::string query = "fix the test for the parser";
  const json corpus = {{"documents", json::array({{{"id", "c1"}, {"text", "fix a crash in the parser"}},
                                                  {{"id", "c2"}, {"text", "add a test for the lexer"}}})}};
  const json mine = {{"documents", json::array({{{"id", "p1"}, {"text", "fix the test for the parser"}},
                                                {{"id", "p2"}, {"text", "parser tests fail on windows"}},
                                                {{"id", "p3"}, {"text", "update the changelog"}},
                                                {{"id", "p4"}, {"text", "bump version to 2.1"}}})}};
  // The personal documents served to ann, id -> score (every one: k is larger than them all).
  const auto serve = [&](double threshold, const std::string& tag, bool load) {
    std::ofstream(dir_ / "personal.json") << R"({"retriever": "dense:enc", "personal": {"encoder": "enc", "threshold": )"
                                          << std::setprecision(17) << threshold << "}}";
    ServeApp app;
    std::map<std::string, double> got;
    [&] { ASSERT_NO_FATAL_FAILURE(app.start(dir_, tag, "personal.db", "personal.json", key)); }();
    if (!app.c) return got;
    if (load) {
      app.post("/v1/corpus/documents", corpus);
      auto res = app.c->Put("/v1/users/ann/documents", mine.dump(), "application/json");
      EXPECT_TRUE(res && res->status == 200);
    }
    const auto out = app.post("/v1/retrieve", {{"user", "ann"}, {"query", query}, {"k", 20}});
    for (const auto& d : out["documents"])
      if (d["source"] == "user") got[d["id"].get<std::string>()] = d["score"].get<double>();
    const auto other = app.post("/v1/retrieve", {{"user", "bob"}, {"query", query}, {"k", 20}});
    for (const auto& d : other["documents"]) EXPECT_EQ(d["source"], "corpus") << other.dump();
    app.stop();
    return got;
  };
  const auto all = serve(-1, "personal-all", true);
  ASSERT_EQ(all.size(), 4u) << "threshold -1 admits every personal document";
  EXPECT_NEAR(all.at("p1"), 1.0, 1e-4) << "the query's own text: cosine 1";
  std::vector<double> scores;
  for (const auto& [id, s] : all) scores.push_back(s);
  std::sort(scores.begin(), scores.end(), std::greater<>());
  ASSERT_GT(scores[1] - scores[2], 1e-6) << "two documents with one cosine: no threshold between them";
  const double threshold = (scores[1] + scores[2]) / 2;
  const auto some = serve(threshold, "personal-some", false);
  std::set<std::string> expected, got;
  for (const auto& [id, s] : all)
    if (s >= threshold) expected.insert(id);
  for (const auto& [id, s] : some) got.insert(id);
  EXPECT_EQ(got.size(), 2u);
  EXPECT_EQ(got, expected) << "threshold " << threshold;
}

TEST_F(Learning, ServeLearnsFromAPlantedReadersFeedbackSentThroughItsApi) {
  check_serve_learns(dir_, reader_.get(), "", [](const std::string& a) { return run(a); });
}

// LUF in attune serve (paper 004): the judge labels what was served (its rule is the reader's
// preference); the users' utilities still decide the promotion.
TEST_F(Learning, ServeLearnsWithLufFromAJudgesLabelsOfWhatItServed) {
  for (const char* f : {"served", "serve.db", "serve.db-wal", "serve.db-shm", "port-serve.txt", "pid-serve.txt", "serve.err", "serve.out"})
    fs::remove_all(dir_ / f);  // the ROPG-KD check's, when both run in one process
  check_serve_learns(dir_, reader_.get(), R"("method": "luf", "judge": "planted:judge?word=test", )",
                     [](const std::string& a) { return run(a); });
}

// RSPG in attune serve (paper 000 §5): a selector between bm25 and recency, trained on the
// planted reader's utilities of what each member would have put first among the served
// documents, then served as the tenant's retriever (selector:DIR): per query it picks the
// member whose first document it reads as liked.
TEST_F(Learning, ServeLearnsToSelectARetrieverWithRspg) {
  for (const char* f : {"served", "serve.db", "serve.db-wal", "serve.db-shm", "port-serve.txt", "pid-serve.txt", "serve.err", "serve.out"})
    fs::remove_all(dir_ / f);  // another serve check's, when they run in one process
  // It must move at least half-way from always-bm25 (the start) to the pool's oracle (each
  // held-out user's better first document of the two), on users it learnt nothing from, and
  // beat always-recency too.
  check_serve_learns(dir_, reader_.get(), R"("method": "rspg", "pool": ["bm25", "recency"], )",
                     [](const std::string& a) { return run(a); }, R"("retrievers": ["recency"], )",
                     [](const std::vector<double>& before, const std::vector<double>& after, const ServeTop1& top1) {
                       const auto recency = top1("recency");
                       double b = 0, a = 0, r = 0, oracle = 0;
                       for (std::size_t i = 0; i < before.size(); ++i) {
                         b += before[i];
                         a += after[i];
                         r += recency[i];
                         oracle += std::max(before[i], recency[i]);
                       }
                       const double n = static_cast<double>(before.size());
                       b /= n, a /= n, r /= n, oracle /= n;
                       std::printf("rspg served top-1: always bm25 %.4f, always recency %.4f, selector %.4f, pool oracle %.4f\n", b,
                                   r, a, oracle);
                       ASSERT_GT(oracle, b) << "the pool leaves nothing to select";
                       EXPECT_GE(a - b, 0.5 * (oracle - b)) << "less than half-way from bm25 to the pool's oracle";
                       EXPECT_GT(a, r) << "no better than always recency";
                     });
  // The promoted folder is also a row of `attune eval`: a retriever of its own (it is not run
  // as a selector over the task's prompts, which it was not trained on).
  const auto t = run("eval --data " + kGit + " --task commit_subject --split dev --limit 40 --k 1 --llm '" + kReader +
                     "' --store rspg_eval.db --quiet --retrievers bm25,served/1/v2 --out rspg_eval.json");
  ASSERT_EQ(t.rc, 0) << t.err;
  const auto e = json::parse(slurp(dir_ / "rspg_eval.json"));
  EXPECT_TRUE(e.at("results").contains("served/1/v2")) << e.at("results").dump();
  EXPECT_EQ(e.at("results").size(), 2u) << e.at("results").dump();
}

// Online IUM per agent in attune serve (paper 002 §4): two agents of one tenant, "tests" and
// "fixes", whose readers like different documents (planted:gate?word=test and ?word=fix),
// ask /v1/retrieve with their "agent" and send their own reader's utilities. The server's
// IUM learner trains each agent's reranker on that agent's feedback alone; each agent's
// promoted version must then serve, on users it learnt nothing from, a top document its own
// reader likes more often than BM25's, and more often than the other agent's model does.
TEST_F(Learning, ServeLearnsEachAgentsPlantedPreferenceWithOnlineIum) {
  attune::engine::DataSpec spec;
  spec.data = kGit;
  spec.task = "commit_subject";
  spec.split = "train";
  const auto ds = attune::engine::load_dataset(spec);
  spec.split = "dev";
  const auto held = attune::engine::load_dataset(spec);
  const auto task = attune::tasks::make_task("commit_subject");
  const auto tok = attune::text::make_tokenizer("whitespace");
  constexpr std::size_t kTrain = 300, kHeldOut = 160, kServed = 8;
  const auto t0 = std::chrono::steady_clock::now();
  const auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  ASSERT_GE(ds.examples.size(), 2 * kTrain);
  const std::map<std::string, std::string> words = {{"tests", "test"}, {"fixes", "fix"}};
  std::map<std::string, std::unique_ptr<attune::llm::PlantedReader>> readers;
  for (const auto& [agent, word] : words)
    readers[agent] = std::make_unique<attune::llm::PlantedReader>(attune::llm::parse_planted_spec("planted:gate?word=" + word));
  const auto r = run("tenant add agents --store serve-ium.db");
  ASSERT_EQ(r.rc, 0) << r.err;
  const std::string key = r.out.substr(0, r.out.find('\n'));
  // Each agent gets its own 300 training users, and sends exactly `budget` utilities (the
  // smaller agent's all): each round starts once all of its agent's feedback is in, never on a part.
  std::map<std::string, std::size_t> expected;
  std::size_t at = 0;
  for (const auto& [agent, word] : words)
    for (std::size_t i = 0; i < kTrain; ++i) expected[agent] += std::min(kServed, ds.examples[at++].profile.size());
  const std::size_t budget = std::min(expected["tests"], expected["fixes"]);
  {
    std::ofstream(dir_ / "serve-ium.json")
        << R"({"retriever": "bm25",
               "agents": {"tests": {"task": "commit_subject", "model": "planted-test"},
                          "fixes": {"task": "commit_subject", "model": "planted-fix"}},
               "learn": {"on": true, "method": "ium", "init": "enc", "dir": "served-ium", "interval_seconds": 1,
                         "epochs": 3, "lr": 1e-3, "positive_at": 0.001, "min_new_feedback": )"
        << budget << "}}";
  }
  ServeApp app;
  ASSERT_NO_FATAL_FAILURE(app.start(dir_, "serve-ium", "serve-ium.db", "serve-ium.json", key));
  const auto utility = [&](const std::string& agent, const attune::Example& ex, const std::string& doc_id) {
    for (const auto& d : ex.profile)
      if (d.id == doc_id) return task->reward(readers.at(agent)->answer(task->prompt(ex, {&d}, *tok, {})), ex.output);
    ADD_FAILURE() << "served a document " << doc_id << " that is not in the profile of " << ex.id;
    return 0.0;
  };
  // The share of held-out users whose served top document `reader`'s agent finds useful, when `served_as` asks.
  const auto useful_top1 = [&](const std::string& served_as, const std::string& reader, std::string& version) {
    std::size_t useful = 0;
    for (std::size_t i = 0; i < kHeldOut; ++i) {
      const auto& ex = held.examples[i];
      const auto out = app.post("/v1/retrieve", {{"user", ex.id}, {"query", task->query(ex)}, {"k", 1}, {"agent", served_as}});
      version = out.value("model_version", "");
      if (!out["documents"].empty()) useful += utility(reader, ex, out["documents"][0]["id"]) > 0.001;
    }
    return static_cast<double>(useful) / kHeldOut;
  };
  for (std::size_t i = 0; i < kHeldOut; ++i) app.put_user(held.examples[i], *task);
  std::map<std::string, double> before;
  std::string version;
  for (const auto& [agent, word] : words) {
    before[agent] = useful_top1(agent, agent, version);
    EXPECT_EQ(version, "bm25@v1");
  }
  at = 0;
  for (const auto& [agent, word] : words) {
    std::size_t records = 0;
    for (std::size_t i = 0; i < kTrain; ++i) {
      const auto& ex = ds.examples[at++];
      app.put_user(ex, *task);
      const auto out = app.post("/v1/retrieve", {{"user", ex.id}, {"query", task->query(ex)}, {"k", kServed}, {"agent", agent}});
      json utils = json::object();
      for (const auto& d : out["documents"])
        if (records + utils.size() < budget) utils[d["id"].get<std::string>()] = utility(agent, ex, d["id"]);
      if (utils.empty()) continue;
      records += app.post("/v1/feedback", {{"request_id", out["request_id"]}, {"utilities", utils}}).value("records", 0);
    }
    ASSERT_EQ(records, budget) << agent;
    std::printf("serve ium: %s's feedback in after %.0f s\n", agent.c_str(), elapsed());
  }
  // Wait for both agents' rounds.
  const auto decided = [&](const std::string& agent) {
    const std::string log = app.log();
    for (std::size_t p = log.find("agent " + agent + ":"); p != std::string::npos; p = log.find("agent " + agent + ":", p + 1)) {
      const std::string line = log.substr(p, log.find('\n', p) - p);
      if (line.find("promoted") != std::string::npos || line.find("kept the served model") != std::string::npos) return true;
    }
    return false;
  };
  for (int i = 0; i < 1200 && !(decided("tests") && decided("fixes")); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const std::string log = app.log();
  ASSERT_TRUE(decided("tests") && decided("fixes")) << elapsed() << " s\n" << log;
  std::map<std::string, double> after, crossed;
  std::map<std::string, std::string> versions;
  for (const auto& [agent, word] : words) {
    const std::string other = agent == "tests" ? "fixes" : "tests";
    after[agent] = useful_top1(agent, agent, versions[agent]);
    crossed[agent] = useful_top1(other, agent, version);  // the other agent's model, judged by this agent's reader
  }
  std::printf("serve ium: %.0f s; held-out share of useful top documents: tests %.4f -> %.4f (%s; fixes' model %.4f), "
              "fixes %.4f -> %.4f (%s; tests' model %.4f)\n%s",
              elapsed(), before["tests"], after["tests"], versions["tests"].c_str(), crossed["tests"], before["fixes"], after["fixes"],
              versions["fixes"].c_str(), crossed["fixes"], log.c_str());
  for (const auto& [agent, word] : words) {
    EXPECT_NE(log.find("agent " + agent + ": "), std::string::npos) << log;
    EXPECT_NE(versions[agent].find("ium:served-ium/1/" + agent + "/v2"), std::string::npos) << versions[agent];
    EXPECT_GT(after[agent], before[agent] + 0.05) << agent << ": the served rankings did not improve";
    EXPECT_GT(after[agent], crossed[agent] + 0.05) << agent << ": the other agent's model serves it as well: the agent is not read";
  }
  app.stop();
}
