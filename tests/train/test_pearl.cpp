// Pearl (METHODS.md §4): request selection, positive/negative sampling, the fixed few-shot
// set, calibration (Pearson r), the revision threshold, and the cross-encoder trainer on
// tiny data: it learns, it resumes to the same weights, it refuses bad options.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <fstream>
#include <numeric>
#include <set>

#include "attune/core/error.h"
#include "attune/core/rng.h"
#include "attune/models/encoder.h"
#include "attune/models/weights.h"
#include "attune/report/inputs.h"
#include "attune/llm/reference.h"
#include "attune/retrieval/candidates.h"
#include "attune/store/store.h"
#include "attune/tasks/task.h"
#include "attune/text/tokenizer.h"
#include "attune/train/pearl.h"
#include "commit_fixture.h"
#include "tiny_bert.h"

namespace attune::train {
namespace {

namespace fs = std::filesystem;

TEST(PearlPure, MedianAndPercentile) {
  // (Pearl's calibration r is metrics::pearson, tested in tests/metrics.)
  EXPECT_EQ(median({3, 1, 2}), 2.0);
  EXPECT_EQ(median({4, 1, 2, 3}), 2.5);
  EXPECT_TRUE(std::isnan(median({})));
  EXPECT_EQ(percentile({4, 1, 2, 3}, 50), 2.5);   // = the median
  EXPECT_EQ(percentile({4, 1, 2, 3}, 25), 1.75);  // numpy: 1 + 0.75 * (2 - 1)
  EXPECT_EQ(percentile({4, 1, 2, 3}, 100), 4.0);
  EXPECT_EQ(percentile({4, 1, 2, 3}, 0), 1.0);
  EXPECT_EQ(percentile({7}, 75), 7.0);
  EXPECT_TRUE(std::isnan(percentile({}, 25)));
}

PearlRequest req(const std::string& id, std::vector<double> labels) {
  PearlRequest r;
  r.id = id;
  r.query = "q " + id;
  for (std::size_t i = 0; i < labels.size(); ++i) r.docs.push_back("d" + std::to_string(i));
  r.label = std::move(labels);
  return r;
}

TEST(PearlPure, KeepsTheTopTwoThirdsOfRequestsByTheirBestLabel) {
  // Best labels 1, 5, 3, -2, 4, 0: ceil(2/3 * 6) = 4 kept -> requests 1, 4, 2, 0.
  std::vector<PearlRequest> rs = {req("a", {1, -1}), req("b", {0, 5}), req("c", {3, 2}),
                                  req("d", {-2, -3}), req("e", {4, 4}), req("f", {0, -1})};
  EXPECT_EQ(select_requests(rs, 2.0 / 3.0), (std::vector<std::size_t>{0, 1, 2, 4}));
  EXPECT_EQ(select_requests(rs, 1.0).size(), 6u);
  EXPECT_EQ(select_requests(rs, 0.1), (std::vector<std::size_t>{1}));
  EXPECT_THROW(select_requests(rs, 0.0), UsageError);
}

TEST(PearlPure, TwoPositivesEachWithThreeNegativesFromTheOtherCandidates) {
  std::vector<PearlRequest> rs = {req("r0", {0.1, 2.0, -1.0, 0.5, 3.0, -0.5, 0.0, 1.0}), req("r1", {1.0, 0.0, 2.0}),
                                  req("r2", {-5, -6})};
  PearlSampling s;
  s.keep_fraction = 1.0;
  s.seed = 7;
  const auto lists = pearl_lists(rs, s);
  // r0: positives 4 (3.0) and 1 (2.0); r1: positives 2 and 0, one negative (1) each; r2: 0 with negative 1.
  ASSERT_EQ(lists.size(), 5u);
  EXPECT_EQ(lists[0].request, 0u);
  EXPECT_EQ(lists[0].docs[0], 4u);
  EXPECT_EQ(lists[1].docs[0], 1u);
  for (std::size_t i = 0; i < 2; ++i) {
    ASSERT_EQ(lists[i].docs.size(), 4u);
    std::set<std::size_t> neg(lists[i].docs.begin() + 1, lists[i].docs.end());
    EXPECT_EQ(neg.size(), 3u);  // distinct
    for (auto d : neg) {
      EXPECT_LT(d, 8u);
      EXPECT_NE(d, 4u);
      EXPECT_NE(d, 1u);
    }
  }
  EXPECT_EQ(lists[2].docs, (std::vector<std::size_t>{2, 1}));
  EXPECT_EQ(lists[3].docs, (std::vector<std::size_t>{0, 1}));
  EXPECT_EQ(lists[4].docs, (std::vector<std::size_t>{0, 1}));  // 2 candidates: one positive
  // Seeded: the same seed, the same lists; the default keep fraction drops r2.
  const auto again = pearl_lists(rs, s);
  for (std::size_t i = 0; i < lists.size(); ++i) EXPECT_EQ(again[i].docs, lists[i].docs);
  s.keep_fraction = 2.0 / 3.0;
  EXPECT_EQ(pearl_lists(rs, s).size(), 4u);
  bool differs = false;
  for (std::uint64_t seed = 0; seed < 20 && !differs; ++seed) {
    s.seed = seed;
    differs = pearl_lists(rs, s)[0].docs != lists[0].docs;
  }
  EXPECT_TRUE(differs);
  rs[0].label.pop_back();
  EXPECT_THROW(pearl_lists(rs, s), Error);
}

TEST(PearlPure, TheFewShotSetIsFixedSeededAndOutsideTheCandidates) {
  std::vector<std::size_t> top(16);
  for (std::size_t i = 0; i < 16; ++i) top[i] = 19 - i;  // profile 0..19, top-l = 4..19
  const auto f = few_shot_indices(20, top, 1, 3, "ex1");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_LT(f[0], 4u);
  EXPECT_EQ(few_shot_indices(20, top, 1, 3, "ex1"), f);  // the same for every d of the example
  const auto two = few_shot_indices(20, top, 2, 3, "ex1");
  EXPECT_EQ(two.size(), 2u);
  EXPECT_NE(two[0], two[1]);
  std::set<std::size_t> seen;
  for (int k = 0; k < 40; ++k) seen.insert(few_shot_indices(20, top, 1, 3, "ex" + std::to_string(k))[0]);
  EXPECT_EQ(seen.size(), 4u);  // all of 0..3 drawn across examples
  // Everything is a candidate: drawn from the candidates.
  const auto inside = few_shot_indices(16, std::vector<std::size_t>(top.begin() + 4, top.end()), 1, 3, "ex1");
  ASSERT_EQ(inside.size(), 1u);
  EXPECT_LT(inside[0], 16u);
}

TEST(PearlPure, TheUsersFewShotSetIsFixedAcrossItsRequestsAndOutsideTheCandidates) {
  auto profile = [](std::size_t n) {
    std::vector<Document> p(n);
    for (std::size_t i = 0; i < n; ++i) p[i].id = "doc" + std::to_string(i);
    return p;
  };
  const auto p20 = profile(20), p30 = profile(30);
  const std::vector<std::size_t> none;
  // Two requests of one user (the later one's profile holds 10 more documents): every
  // document of the later F that the earlier profile had is in the earlier F (only a newer
  // document with a smaller key can take a place).
  const auto a = user_few_shot_indices(p20, none, 2, 7, "alice");
  const auto b = user_few_shot_indices(p30, none, 2, 7, "alice");
  ASSERT_EQ(a.size(), 2u);
  ASSERT_EQ(b.size(), 2u);
  for (auto i : b)
    if (i < 20) {
      EXPECT_EQ(std::count(a.begin(), a.end(), i), 1) << i;
    }
  EXPECT_EQ(user_few_shot_indices(p20, none, 2, 7, "alice"), a);  // deterministic
  // Candidates are left out while enough others remain.
  std::vector<std::size_t> top(a.begin(), a.end());
  const auto c = user_few_shot_indices(p20, top, 2, 7, "alice");
  for (auto i : c) EXPECT_EQ(std::count(top.begin(), top.end(), i), 0) << i;
  // Another user (or seed) draws its own order: across 20 users F is not one document.
  std::set<std::size_t> firsts;
  for (int u = 0; u < 20; ++u) firsts.insert(user_few_shot_indices(p20, none, 1, 7, "user" + std::to_string(u))[0]);
  EXPECT_GT(firsts.size(), 5u);
  // A profile of candidates only: drawn from all of it.
  std::vector<std::size_t> all(20);
  std::iota(all.begin(), all.end(), 0);
  EXPECT_EQ(user_few_shot_indices(p20, all, 1, 7, "alice").size(), 1u);
}

TEST(PearlPure, TheRevisionThresholdMaximisesTheDevMetric) {
  const std::vector<double> s1 = {0.1, 0.5, 0.9, 0.3}, first = {0, 1, 1, 0.2}, revised = {1, 0, 0, 0.5};
  // theta 0.5 revises 0.1 and 0.3: (1 + 1 + 1 + 0.5) / 4 = 0.875 (never: 0.55; all: 0.375).
  const auto c = choose_revision_threshold(s1, first, revised);
  EXPECT_EQ(c.theta, 0.5);
  EXPECT_NEAR(c.with, 0.875, 1e-12);
  EXPECT_NEAR(c.without, 0.55, 1e-12);
  EXPECT_EQ(c.revised, 2u);
  // Revising never helps: theta = -inf.
  const auto never = choose_revision_threshold(s1, first, std::vector<double>(4, 0.0));
  EXPECT_TRUE(std::isinf(never.theta) && never.theta < 0);
  EXPECT_EQ(never.revised, 0u);
  // Lower is better (MAE): revising all wins.
  const auto mae = choose_revision_threshold(s1, {2, 2, 2, 2}, {1, 1, 1, 1}, false);
  EXPECT_TRUE(std::isinf(mae.theta) && mae.theta > 0);
  EXPECT_NEAR(mae.with, 1.0, 1e-12);
  // Cross-fitted: odd positions fit theta 0.5 (revising 0.3), applied to the even ones (0.1
  // revised -> 1, 0.9 kept -> 1); even positions fit theta 0.9, applied to the odd ones (both
  // revised -> 0 + 0.5). (1 + 1 + 0 + 0.5) / 4 = 0.625, below the in-sample 0.875.
  EXPECT_NEAR(cross_fitted_revision(s1, first, revised), 0.625, 1e-12);
  EXPECT_TRUE(std::isnan(cross_fitted_revision({0.1}, {1}, {0})));
}

// ---------------------------------------------------------------- the trainer

// Each request is about one word; candidates holding it have label 3, the others -1 (+ a
// little noise). The initial (random) cross-encoder does not know that.
std::vector<PearlRequest> synthetic_requests(std::size_t n, std::uint64_t seed) {
  const auto& w = testing::tiny_words();
  Rng rng(seed);
  std::vector<PearlRequest> out;
  for (std::size_t i = 0; i < n; ++i) {
    PearlRequest e;
    e.id = "q" + std::to_string(seed) + "-" + std::to_string(i);
    const std::string key = w[rng.below(6)];
    e.query = key;
    const std::size_t good = rng.below(6);
    for (std::size_t j = 0; j < 6; ++j) {
      std::string d;
      for (int t = 0; t < 3; ++t) d += std::string(t ? " " : "") + w[6 + rng.below(w.size() - 6)];
      if (j == good) d = key + " " + d;
      e.docs.push_back(d);
      e.label.push_back(j == good ? 3.0 : -1.0 + 0.1 * rng.uniform());
    }
    out.push_back(e);
  }
  return out;
}

PearlOptions tiny_pearl(const fs::path& root, const std::string& out) {
  PearlOptions o;
  o.init = root / "init";
  o.fit.out = root / out;
  o.fit.epochs = 6;
  o.fit.batch_size = 8;
  o.fit.micro_batch = 8;
  o.fit.lr = 5e-3;
  o.fit.warmup = 0.05;
  o.max_length = 16;
  o.sampling.keep_fraction = 1.0;
  o.fit.quiet = true;
  o.fit.seed = 3;
  return o;
}

class Pearl : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = testing::fresh_dir(std::string("pearl_") + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    testing::write_tiny_encoder(root_ / "init", models::Pooling::Mean, false, 11);  // no pooler, no classifier
  }
  void TearDown() override { fs::remove_all(root_); }
  fs::path root_;
};

TEST_F(Pearl, TheTrainedCrossEncoderRanksTheUsefulDocumentsFirst) {
  const auto train = synthetic_requests(48, 1), held_out = synthetic_requests(24, 2);
  auto o = tiny_pearl(root_, "pearl");
  const auto res = train_pearl(train, held_out, o);
  EXPECT_EQ(res.kept_requests, 48u);
  EXPECT_EQ(res.lists, 96u);
  EXPECT_EQ(res.steps_done, 6u * 12u);
  EXPECT_NEAR(res.y0, 1.0, 1.0);  // median of {3, ~-1}: between the two
  EXPECT_GT(res.eval_top1_after, res.eval_top1_before + 1.0) << res.eval_top1_before << " -> " << res.eval_top1_after;
  EXPECT_LT(res.epoch_loss.back(), res.epoch_loss.front());
  for (const char* f : {"config.json", "model.safetensors", "vocab.txt", "attune_train.json", "attune_model.json",
                        "checkpoint/optimizer.pt", "checkpoint/state.json"})
    EXPECT_TRUE(fs::exists(o.fit.out / f)) << f;
  nlohmann::json marker, meta;
  std::ifstream(o.fit.out / "attune_model.json") >> marker;
  std::ifstream(o.fit.out / "attune_train.json") >> meta;
  EXPECT_EQ(marker["kind"], "cross");
  EXPECT_FALSE(marker.contains("rerank"));  // no initial retriever named: cross:DIR alone
  EXPECT_EQ(meta["method"], "pearl");
  EXPECT_EQ(meta["labels"]["count"], 48u * 6u);
  EXPECT_NEAR(meta["labels"]["positive_fraction"].get<double>(), 1.0 / 6.0, 1e-12);
  EXPECT_EQ(meta["options"]["tau"], 5.0);
  // Its epochs are {epoch, loss} records like every trainer's, so `attune report` reads the
  // folder and draws its curve (a list of bare losses was refused there).
  const auto runs = report::read_train(o.fit.out);
  ASSERT_EQ(runs.size(), 1u);
  ASSERT_EQ(runs[0].epochs.size(), res.epoch_loss.size());
  for (std::size_t i = 0; i < res.epoch_loss.size(); ++i) {
    EXPECT_EQ(runs[0].epochs[i].epoch, i + 1);
    EXPECT_DOUBLE_EQ(runs[0].epochs[i].loss, res.epoch_loss[i]);
  }
  // The folder is a cross-encoder whose scores are the trained model's: useful first.
  models::EncoderOptions eo;
  eo.device = "cpu";
  const auto ce = models::CrossEncoder::load(o.fit.out, eo);
  double top = 0;
  for (const auto& r : held_out) {
    const auto s = ce->score(r.query, r.docs);
    top += r.label[static_cast<std::size_t>(std::max_element(s.begin(), s.end()) - s.begin())];
  }
  EXPECT_NEAR(top / static_cast<double>(held_out.size()), res.eval_top1_after, 1e-9);
  EXPECT_THROW(train_pearl(train, held_out, o), UsageError);  // the folder holds a run
}

TEST_F(Pearl, ResumeAfterAKillGivesTheWeightsOfAnUninterruptedRun) {
  const auto train = synthetic_requests(12, 4);
  auto full = tiny_pearl(root_, "full");
  full.fit.epochs = 3;  // 24 lists / 8 = 3 steps per epoch
  full.fit.checkpoint_every = 2;
  const auto a_res = train_pearl(train, {}, full);
  EXPECT_EQ(a_res.steps_done, 9u);
  auto part = full;
  part.fit.out = root_ / "part";
  part.fit.stop_after = 4;  // killed mid-epoch 2, after its step-4 checkpoint
  EXPECT_EQ(train_pearl(train, {}, part).steps_done, 4u);
  part.fit.stop_after = 0;
  part.fit.resume = true;
  const auto r = train_pearl(train, {}, part);
  EXPECT_EQ(r.steps_done, 9u);
  EXPECT_EQ(r.losses.size(), 5u);
  EXPECT_EQ(r.epoch_loss.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) EXPECT_DOUBLE_EQ(r.epoch_loss[i], a_res.epoch_loss[i]);
  const auto a = models::WeightSet::open(full.fit.out), b = models::WeightSet::open(part.fit.out);
  ASSERT_EQ(a.names(), b.names());
  EXPECT_TRUE(std::find(a.names().begin(), a.names().end(), "classifier.weight") != a.names().end());
  for (const auto& n : a.names())
    EXPECT_TRUE(torch::equal(models::to_tensor(a.get(n)), models::to_tensor(b.get(n)))) << n;
  auto bad = part;
  bad.fit.lr = 1.0;
  EXPECT_THROW(train_pearl(train, {}, bad), UsageError);  // resume with other options
}

TEST_F(Pearl, BadOptionsAndInputAreRefused) {
  auto o = tiny_pearl(root_, "bad");
  auto one = synthetic_requests(4, 1);
  for (auto& e : one) {
    e.docs.resize(1);
    e.label.resize(1);
  }
  EXPECT_THROW(train_pearl(one, {}, o), Error);  // no list
  auto mismatched = synthetic_requests(4, 1);
  mismatched[2].label.pop_back();
  EXPECT_THROW(train_pearl(mismatched, {}, o), Error);
  for (auto edit : std::vector<std::function<void(PearlOptions&)>>{
           [](PearlOptions& x) { x.fit.epochs = 0; }, [](PearlOptions& x) { x.tau = 0; },
           [](PearlOptions& x) { x.sampling.keep_fraction = 0; }, [](PearlOptions& x) { x.fit.lr = -1; },
           [](PearlOptions& x) { x.fit.warmup = 1; }, [](PearlOptions& x) { x.init.clear(); },
           [](PearlOptions& x) { x.sampling.positives = 0; }}) {
    auto b = tiny_pearl(root_, "bad");
    edit(b);
    EXPECT_THROW(train_pearl(synthetic_requests(4, 1), {}, b), UsageError);
  }
  o.init = root_ / "absent";
  EXPECT_THROW(train_pearl(synthetic_requests(4, 1), {}, o), Error);
}

}  // namespace
}  // namespace attune::train

namespace attune::train {
namespace {

// A reader whose log-probabilities are `bad` for its score requests number [from, to) (0
// based, in the order asked: per example the no-document prompt and the candidates', then
// the few-shot terms) and finite for the others.
class BadScores final : public llm::LanguageModel {
 public:
  BadScores(std::size_t from, std::size_t to, double bad) : from_(from), to_(to), bad_(bad) {}
  std::vector<llm::Generation> generate(std::span<const llm::Prompt> p, const llm::GenerateOptions&) override {
    return std::vector<llm::Generation>(p.size());
  }
  std::vector<double> score(std::span<const llm::ScoreRequest> r) override {
    std::vector<double> out;
    for (std::size_t i = 0; i < r.size(); ++i, ++seen_)
      out.push_back(seen_ >= from_ && seen_ < to_ ? bad_ : -1.0 - 0.1 * static_cast<double>(i));
    return out;
  }
  llm::ModelInfo info() const override {
    return {"test:bad-scores:" + std::to_string(from_) + ":" + std::to_string(to_) + ":" + std::to_string(bad_)};
  }

 private:
  std::size_t from_, to_, seen_ = 0;
  double bad_;
};


}  // namespace

// Pearl's labels are log-probability differences: a -inf or NaN from the reader would poison
// y0, the request selection and the loss, so it is refused, naming the example and term.
TEST(PearlLabels, NonFiniteLogProbabilitiesAreRefusedNamingTheTerm) {
  const auto ds = testing::commit_subject_users(2, {"parser cache", "pager color", "merge base", "reflog expiry", "pack bitmap"}, "pearl-bad-scores");
  const auto task = tasks::make_task("commit_subject");
  retrieval::ProfileCandidates source(*task);
  text::WhitespaceTokenizer tok;
  PearlLabelOptions o;
  o.top_l = 4;  // 4 candidates, the fifth document is the few-shot one
  o.run.threads = 1;
  o.run.progress = false;
  o.run.batch = 1;
  const auto fail = [&](std::size_t from, std::size_t to, double bad) -> std::string {
    const auto dir = testing::fresh_dir("pearl_bad_" + std::to_string(from) + (std::isnan(bad) ? "nan" : "inf"));
    auto store = store::open_sqlite(dir / "s.db");
    BadScores reader(from, to, bad);
    try {
      pearl_requests(ds, *task, source, reader, *store, tok, o);
    } catch (const Error& e) {
      fs::remove_all(dir);
      return e.what();
    }
    fs::remove_all(dir);
    return "";
  };
  // Finite everywhere: labels come back, one per candidate.
  {
    const auto dir = testing::fresh_dir("pearl_bad_none");
    auto store = store::open_sqlite(dir / "s.db");
    BadScores reader(0, 0, -1.0);
    const auto reqs = pearl_requests(ds, *task, source, reader, *store, tok, o);
    ASSERT_EQ(reqs.size(), 2u);
    for (const auto& r : reqs) {
      EXPECT_EQ(r.label.size(), 4u);
      for (double l : r.label) EXPECT_TRUE(std::isfinite(l));
    }
    fs::remove_all(dir);
  }
  const double inf = std::numeric_limits<double>::infinity();
  // Requests 0-4: q0 without a document, then its 4 candidates; 5-9 q1's; 10, 11 the
  // few-shot terms. A candidate's term of -inf: refused, naming it.
  const auto doc = fail(3, 4, -inf);
  EXPECT_NE(doc.find("log p(y | x, d)"), std::string::npos) << doc;
  EXPECT_NE(doc.find("q0, candidate"), std::string::npos) << doc;
  EXPECT_NE(doc.find("finite log-probabilities"), std::string::npos) << doc;
  // Every candidate's term finite, q1's few-shot term -inf: refused, naming the few-shot prompt.
  const auto few = fail(11, 12, -inf);
  EXPECT_NE(few.find("few-shot"), std::string::npos) << few;
  EXPECT_NE(few.find("q1"), std::string::npos) << few;
  // NaN never becomes a label either (the store refuses to keep it).
  EXPECT_FALSE(fail(3, 4, std::nan("")).empty());
  EXPECT_FALSE(fail(10, 11, std::nan("")).empty());
}

}  // namespace attune::train
