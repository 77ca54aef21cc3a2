// PURPLE: the Plackett-Luce policy's probabilities and draws, the z-scored rewards, the
// selector learning a planted reward over a frozen encoder (and not with learning off),
// the saved folder ranking as the trained head did, the ablations, and bad options.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "attune/core/error.h"
#include "attune/core/rng.h"
#include "attune/models/config.h"
#include "attune/models/purple.h"
#include "attune/neural/dense.h"
#include "attune/retrieval/spec.h"
#include "attune/train/purple.h"
#include "tiny_bert.h"

namespace attune::train {
namespace {

namespace fs = std::filesystem;

TEST(PlackettLuce, TheProbabilitiesOfAllOrdersSumToOne) {
  const std::vector<double> w = {0.9, 0.5, 0.1, 0.3};
  for (std::size_t K : {1u, 2u, 4u}) {
    double total = 0;
    std::vector<std::size_t> order;
    std::function<void()> rec = [&] {
      if (order.size() == K) {
        total += std::exp(plackett_luce_log_prob(w, order));
        return;
      }
      for (std::size_t i = 0; i < w.size(); ++i) {
        if (std::find(order.begin(), order.end(), i) != order.end()) continue;
        order.push_back(i);
        rec();
        order.pop_back();
      }
    };
    rec();
    EXPECT_NEAR(total, 1.0, 1e-12) << "K = " << K;
  }
  // Eq. 3 by hand: 0.9 / 1.8 * 0.1 / (1.8 - 0.9).
  const std::vector<std::size_t> o = {0, 2};
  EXPECT_NEAR(plackett_luce_log_prob(w, o), std::log(0.9 / 1.8) + std::log(0.1 / 0.9), 1e-12);
}

TEST(PlackettLuce, DrawsFollowTheProbabilities) {
  const std::vector<double> w = {0.9, 0.5, 0.1};
  Rng rng(3);
  std::map<std::vector<std::size_t>, int> seen;
  const int n = 40000;
  for (int i = 0; i < n; ++i) {
    const auto s = plackett_luce_sample(w, 2, rng);
    ASSERT_EQ(s.size(), 2u);
    ASSERT_NE(s[0], s[1]);
    ++seen[s];
  }
  EXPECT_EQ(seen.size(), 6u);
  for (const auto& [order, count] : seen)
    EXPECT_NEAR(static_cast<double>(count) / n, std::exp(plackett_luce_log_prob(w, order)), 0.01)
        << order[0] << "," << order[1];
  // K above the candidates: all of them, once each.
  const auto all = plackett_luce_sample(w, 10, rng);
  EXPECT_EQ(all.size(), 3u);
}

TEST(PlackettLuce, TopKAndZScores) {
  const std::vector<double> w = {0.2, 0.7, 0.7, 0.9};
  EXPECT_EQ(top_k_order(w, 3), (std::vector<std::size_t>{3, 1, 2}));  // ties: the earlier first
  EXPECT_EQ(top_k_order(w, 9).size(), 4u);
  const std::vector<double> flat = {-3, -3, -3};
  EXPECT_EQ(zscore(flat), (std::vector<double>{0, 0, 0}));
  const std::vector<double> r = {1, 3};
  EXPECT_EQ(zscore(r), (std::vector<double>{-1, 1}));
}

// Each example: 6 records of random words; 1 or 2 of them hold "apple". The planted reward
// of a profile is sum_k [record k holds apple] / (k + 1): apple records first is best.
struct Planted {
  std::vector<PurpleExample> examples;
  std::vector<std::vector<bool>> apple;
};
Planted planted(std::size_t n, std::uint64_t seed) {
  const auto& w = testing::tiny_words();
  Rng rng(seed);
  Planted p;
  for (std::size_t i = 0; i < n; ++i) {
    PurpleExample e;
    e.id = "x" + std::to_string(seed) + "-" + std::to_string(i);
    e.query = w[20 + rng.below(5)] + " " + w[20 + rng.below(5)];
    std::vector<bool> a(6, false);
    a[rng.below(6)] = true;
    if (rng.below(2)) a[rng.below(6)] = true;
    for (std::size_t r = 0; r < 6; ++r) {
      std::string t;
      for (int k = 0; k < 5; ++k) t += (k ? " " : "") + w[rng.below(10)];
      if (a[r]) t.insert(rng.below(2) ? 0 : t.size(), rng.below(2) ? "apple " : " apple");
      e.records.push_back(t);
    }
    p.examples.push_back(e);
    p.apple.push_back(a);
  }
  return p;
}
ProfileReward reward_of(const Planted& p) {
  return [&p](std::span<const ProfileRequest> reqs) {
    std::vector<double> out;
    for (const auto& q : reqs) {
      double r = 0;
      for (std::size_t k = 0; k < q.records.size(); ++k)
        if (p.apple[q.example][q.records[k]]) r += 1.0 / static_cast<double>(k + 1);
      out.push_back(r);
    }
    return out;
  };
}

class Purple : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = testing::fresh_dir(std::string("purple_") + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    testing::write_tiny_encoder(root_ / "init", models::Pooling::Mean, false, 13);
  }
  void TearDown() override { fs::remove_all(root_); }
  PurpleOptions tiny(const std::string& out) const {
    PurpleOptions o;
    o.init = root_ / "init";
    o.fit.out = root_ / out;
    o.k = 2;
    o.samples = 8;
    o.heads = 2;
    o.layers = 1;
    o.max_length = 16;
    o.initial_retriever = "bm25";
    o.top_l = 6;
    o.fit.epochs = 6;
    o.fit.batch_size = 8;
    o.fit.micro_batch = 8;
    o.fit.lr = 1e-2;
    o.fit.quiet = true;
    o.fit.seed = 5;
    return o;
  }
  fs::path root_;
};

TEST_F(Purple, LearnsAPlantedRewardAndNotWithLearningOffAndTheSavedFolderAgrees) {
  const auto tr = planted(96, 1), dv = planted(48, 2);
  const auto rt = reward_of(tr), rd = reward_of(dv);
  const auto on = train_purple(tr.examples, dv.examples, rt, rd, tiny("on"));
  ASSERT_EQ(on.steps_done, on.total_steps);
  ASSERT_GE(on.best_epoch, 1u) << "no epoch beat the untrained selector";
  const double kept = on.epochs[on.best_epoch - 1].dev_reward;
  // Random order gets about 0.5 of the best; the selector must put apple records first.
  EXPECT_GT(kept, on.init_dev_reward + 0.2) << "dev reward " << on.init_dev_reward << " -> " << kept;
  EXPECT_GT(on.reward_calls, 0u);
  auto off_o = tiny("off");
  off_o.fit.lr = 0;
  off_o.fit.epochs = 1;
  const auto off = train_purple(tr.examples, dv.examples, rt, rd, off_o);
  EXPECT_EQ(off.best_epoch, 0u);
  EXPECT_NEAR(off.epochs[0].dev_reward, off.init_dev_reward, 1e-12);

  // The folder: a PURPLE model whose top-1 is an apple record about as often as the kept
  // dev reward says, and whose marker makes it rerank(bm25,6,purple:DIR).
  const auto m = models::PurpleModel::load(root_ / "on", Device::parse("cpu"));
  EXPECT_EQ(m->k(), 2u);
  double reward = 0;
  for (std::size_t i = 0; i < dv.examples.size(); ++i) {
    const auto p = m->propensities(dv.examples[i].query, dv.examples[i].records);
    ASSERT_EQ(p.size(), 6u);
    std::vector<double> w(p.begin(), p.end());
    const auto top = top_k_order(w, 2);
    for (std::size_t k = 0; k < top.size(); ++k)
      if (dv.apple[i][top[k]]) reward += 1.0 / static_cast<double>(k + 1);
  }
  EXPECT_NEAR(reward / static_cast<double>(dv.examples.size()), kept, 1e-6);
  const auto marker = models::read_json_file(root_ / "on" / "attune_model.json");
  EXPECT_EQ(marker["kind"], "purple");
  EXPECT_EQ(marker["rerank"]["initial"], "bm25");
  EXPECT_EQ(marker["rerank"]["top_l"], 6);
  EXPECT_TRUE(marker["complete"].get<bool>());
}

// When the first stage's own order already puts the liked records first, an untrained
// selector (lr 0) is below it on dev: the result and attune_train.json say so.
TEST_F(Purple, SaysWhenTheKeptSelectorIsBelowTheFirstStagesOwnOrder) {
  auto tr = planted(48, 3), dv = planted(24, 4);
  for (auto* p : {&tr, &dv})
    for (auto& a : p->apple) a = {true, true, false, false, false, false};  // the first stage's top 2 are the liked ones
  const auto rt = reward_of(tr), rd = reward_of(dv);
  auto o = tiny("below");
  o.fit.lr = 0;
  o.fit.epochs = 1;
  const auto res = train_purple(tr.examples, dv.examples, rt, rd, o);
  EXPECT_DOUBLE_EQ(res.first_stage_dev_reward, 1.5);
  EXPECT_LT(res.init_dev_reward, 1.5);
  EXPECT_TRUE(res.below_first_stage);
  EXPECT_TRUE(models::read_json_file(root_ / "below" / "attune_train.json").at("below_first_stage").get<bool>());
}

// The initial prior's examples: as planted(), but the query holds two of the records' words,
// so BM25 over the records scores them; the records (and their apple flags) are put in BM25's
// order and its scores kept, as the workflow gives them. "apple" is not in the query: BM25's
// order is random with respect to the reward.
Planted planted_bm25(std::size_t n, std::uint64_t seed) {
  auto p = planted(n, seed);
  const auto& w = testing::tiny_words();
  const auto bm25 = retrieval::make_retriever(retrieval::parse_retriever_spec("bm25"), 0);
  Rng rng(seed + 100);
  for (std::size_t i = 0; i < n; ++i) {
    auto& e = p.examples[i];
    e.query = w[rng.below(10)] + " " + w[rng.below(10)];
    std::vector<Document> c;
    for (std::size_t r = 0; r < e.records.size(); ++r) c.push_back({"r" + std::to_string(r), "", e.records[r], {}, {}});
    const auto rk = bm25->rank({e.id, "u", e.query}, c, 0);
    EXPECT_EQ(rk.size(), e.records.size());
    std::vector<std::string> records;
    std::vector<bool> apple;
    for (std::size_t pos = 0; pos < rk.size(); ++pos) {
      records.push_back(e.records[rk.indices[pos]]);
      apple.push_back(p.apple[i][rk.indices[pos]]);
    }
    e.records = records;
    e.initial_scores = rk.scores;
    p.apple[i] = apple;
  }
  return p;
}

// With the learned initial prior the untrained selector is the first stage: the case the
// test above flags is not below it.
TEST_F(Purple, WithTheInitialPriorTheUntrainedSelectorOrdersAsTheFirstStage) {
  auto tr = planted(48, 3), dv = planted(24, 4);
  for (auto* p : {&tr, &dv}) {
    for (auto& a : p->apple) a = {true, true, false, false, false, false};
    for (auto& e : p->examples) e.initial_scores = {6, 5, 4, 3, 2, 1};
  }
  const auto rt = reward_of(tr), rd = reward_of(dv);
  auto o = tiny("prior0");
  o.fit.lr = 0;
  o.fit.epochs = 1;
  o.initial_prior = true;
  const auto res = train_purple(tr.examples, dv.examples, rt, rd, o);
  EXPECT_DOUBLE_EQ(res.first_stage_dev_reward, 1.5);
  EXPECT_DOUBLE_EQ(res.init_dev_reward, 1.5);
  EXPECT_FALSE(res.below_first_stage);
  EXPECT_DOUBLE_EQ(res.prior_weight_start, 0.25);
  EXPECT_DOUBLE_EQ(res.prior_weight, 0.25);  // lr 0: nothing learned
  // An example without one first-stage score per record is refused, naming it.
  auto bad = tr.examples;
  bad[2].initial_scores.pop_back();
  auto ob = o;
  ob.fit.out = root_ / "prior_bad";
  try {
    train_purple(bad, {}, rt, rt, ob);
    ADD_FAILURE() << "accepted an example without its first-stage scores";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(bad[2].id), std::string::npos) << e.what();
  }
}

// With the prior the selector still learns a preference the first stage does not hold (and
// not with learning off); the folder, as its own spec, is rerank(bm25,6,purple:DIR) with the
// prior added and ranks dev as the trained selector did; purple:DIR alone refuses.
TEST_F(Purple, WithTheInitialPriorLearnsAPlantedRewardAndTheFolderRanksWithThePrior) {
  const auto tr = planted_bm25(96, 1), dv = planted_bm25(48, 2);
  const auto rt = reward_of(tr), rd = reward_of(dv);
  auto o = tiny("prior");
  o.initial_prior = true;
  const auto on = train_purple(tr.examples, dv.examples, rt, rd, o);
  ASSERT_EQ(on.steps_done, on.total_steps);
  EXPECT_DOUBLE_EQ(on.init_dev_reward, on.first_stage_dev_reward);
  ASSERT_GE(on.best_epoch, 1u) << "no epoch beat the untrained selector";
  const double kept = on.epochs[on.best_epoch - 1].dev_reward;
  EXPECT_GT(kept, on.init_dev_reward + 0.2) << "dev reward " << on.init_dev_reward << " -> " << kept;
  EXPECT_FALSE(on.below_first_stage);
  auto off_o = o;
  off_o.fit.out = root_ / "prior_off";
  off_o.fit.lr = 0;
  off_o.fit.epochs = 1;
  const auto off = train_purple(tr.examples, dv.examples, rt, rd, off_o);
  EXPECT_EQ(off.best_epoch, 0u);
  EXPECT_NEAR(off.epochs[0].dev_reward, off.first_stage_dev_reward, 1e-12);

  const auto m = models::PurpleModel::load(root_ / "prior", Device::parse("cpu"));
  ASSERT_TRUE(m->initial_prior_weight().has_value());
  EXPECT_DOUBLE_EQ(*m->initial_prior_weight(), on.prior_weight);
  neural::register_retrievers(Device::parse("cpu"));
  const auto spec = retrieval::make_retriever(retrieval::parse_retriever_spec((root_ / "prior").string()), 0);
  EXPECT_NE(spec->name().find("rerank(bm25,6,purple:"), std::string::npos) << spec->name();
  double reward = 0;
  for (std::size_t i = 0; i < dv.examples.size(); ++i) {
    const auto& e = dv.examples[i];
    std::vector<Document> c;
    for (std::size_t r = 0; r < e.records.size(); ++r) c.push_back({"r" + std::to_string(r), "", e.records[r], {}, {}});
    const auto top = spec->rank({e.id, "u", e.query}, c, 2);
    ASSERT_EQ(top.size(), 2u);
    for (std::size_t k = 0; k < top.size(); ++k)
      if (dv.apple[i][top.indices[k]]) reward += 1.0 / static_cast<double>(k + 1);
  }
  EXPECT_NEAR(reward / static_cast<double>(dv.examples.size()), kept, 1e-9);
  const auto alone = retrieval::make_retriever(retrieval::parse_retriever_spec("purple:" + (root_ / "prior").string()), 0);
  std::vector<Document> c;
  for (std::size_t r = 0; r < dv.examples[0].records.size(); ++r) c.push_back({"r" + std::to_string(r), "", dv.examples[0].records[r], {}, {}});
  try {
    alone->rank({"q", "u", dv.examples[0].query}, c, 2);
    ADD_FAILURE() << "a prior-trained folder ranked without its prior";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("initial_prior"), std::string::npos) << e.what();
  }
}

TEST_F(Purple, PointwiseScoresEachRecordAloneAndTheListModelReadsTheOthers) {
  const auto tr = planted(8, 1);
  const auto rt = reward_of(tr);
  for (bool pointwise : {true, false}) {
    auto o = tiny(pointwise ? "pw" : "list");
    o.record_transformer = !pointwise;
    o.fit.epochs = 1;
    train_purple(tr.examples, {}, rt, rt, o);
    const auto m = models::PurpleModel::load(o.fit.out, Device::parse("cpu"));
    const auto& e = tr.examples[0];
    const auto all = m->propensities(e.query, e.records);
    std::vector<std::string> fewer(e.records.begin(), e.records.begin() + 2);
    fewer.push_back("river stone river stone");
    const auto some = m->propensities(e.query, fewer);
    if (pointwise) {
      EXPECT_NEAR(all[0], some[0], 1e-6);
      EXPECT_NEAR(all[1], some[1], 1e-6);
    } else {
      EXPECT_GT(std::abs(all[0] - some[0]) + std::abs(all[1] - some[1]), 1e-6) << "the list model ignored the other records";
    }
    for (float x : all) {
      EXPECT_GT(x, 0.0f);
      EXPECT_LT(x, 1.0f);
    }
  }
}

TEST_F(Purple, ResumeAsksForTheSameProfilesAndEndsWithTheSameHead) {
  const auto tr = planted(32, 1), dv = planted(16, 2);
  const auto rt = reward_of(tr), rd = reward_of(dv);
  auto whole = tiny("whole");
  whole.fit.epochs = 2;
  train_purple(tr.examples, dv.examples, rt, rd, whole);
  auto part = tiny("part");
  part.fit.epochs = 2;
  part.fit.checkpoint_every = 3;
  part.fit.stop_after = 5;
  train_purple(tr.examples, dv.examples, rt, rd, part);
  part.fit.stop_after = 0;
  part.fit.resume = true;
  train_purple(tr.examples, dv.examples, rt, rd, part);
  const auto a = models::PurpleModel::load(root_ / "whole", Device::parse("cpu"));
  const auto b = models::PurpleModel::load(root_ / "part", Device::parse("cpu"));
  for (const auto& e : dv.examples) {
    const auto pa = a->propensities(e.query, e.records), pb = b->propensities(e.query, e.records);
    for (std::size_t i = 0; i < pa.size(); ++i) EXPECT_NEAR(pa[i], pb[i], 1e-5);
  }
}

TEST_F(Purple, KeepingTheEncoderStatesChangesNoResult) {
  const auto tr = planted(24, 1), dv = planted(8, 2);
  const auto rt = reward_of(tr), rd = reward_of(dv);
  auto kept = tiny("kept"), recomputed = tiny("recomputed");
  kept.fit.epochs = recomputed.fit.epochs = 2;
  recomputed.state_cache_mb = 0;
  const auto a = train_purple(tr.examples, dv.examples, rt, rd, kept);
  const auto b = train_purple(tr.examples, dv.examples, rt, rd, recomputed);
  ASSERT_EQ(a.epochs.size(), b.epochs.size());
  for (std::size_t e = 0; e < a.epochs.size(); ++e) {
    EXPECT_DOUBLE_EQ(a.epochs[e].loss, b.epochs[e].loss);
    EXPECT_DOUBLE_EQ(a.epochs[e].dev_reward, b.epochs[e].dev_reward);
  }
}

TEST_F(Purple, BadOptionsAndRewardsAreRefused) {
  const auto tr = planted(8, 1);
  const auto rt = reward_of(tr);
  const auto refused = [&](PurpleOptions o, const std::string& field) {
    try {
      train_purple(tr.examples, {}, rt, rt, o);
      ADD_FAILURE() << "accepted a bad " << field;
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  };
  auto o = tiny("bad");
  o.samples = 1;
  refused(o, "samples");
  o = tiny("bad");
  o.k = 0;
  refused(o, "k = 0");
  o = tiny("bad");
  o.cross_attention = false;
  o.record_transformer = false;
  refused(o, "never read the query");
  o = tiny("bad");
  o.heads = 3;  // does not divide the tiny encoder's 8
  refused(o, "heads = 3");
  o = tiny("bad");
  o.initial_prior = true;
  o.prior_weight = 0;
  refused(o, "prior weight");
  // A non-finite reward names the example.
  const ProfileReward nan = [](std::span<const ProfileRequest> reqs) { return std::vector<double>(reqs.size(), std::nan("")); };
  try {
    train_purple(tr.examples, {}, nan, nan, tiny("nan"));
    ADD_FAILURE() << "accepted a NaN reward";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("finite"), std::string::npos) << e.what();
  }
  // An example with one record cannot be trained on.
  auto one = tr.examples;
  one[0].records.resize(1);
  EXPECT_THROW(train_purple(one, {}, rt, rt, tiny("one")), Error);
}

}  // namespace
}  // namespace attune::train
