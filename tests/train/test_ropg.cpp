// Learning-from-feedback objectives against their closed forms (METHODS.md §1-4), and the
// ROPG trainer on tiny data: it learns, it resumes to the same weights, it refuses bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <numeric>

#include "attune/core/error.h"
#include "attune/core/rng.h"
#include "attune/feedback/collect.h"
#include "attune/store/feedback_log.h"
#include "attune/models/config.h"
#include "attune/models/encoder.h"
#include "attune/models/weights.h"
#include "attune/train/objectives.h"
#include "attune/train/ropg.h"
#include "commit_fixture.h"
#include "tiny_bert.h"

namespace attune::train {
namespace {

namespace fs = std::filesystem;
using Vec = std::vector<double>;

Vec softmax(const Vec& x) {
  double mx = *std::max_element(x.begin(), x.end()), z = 0;
  Vec p(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) z += (p[i] = std::exp(x[i] - mx));
  for (auto& v : p) v /= z;
  return p;
}

torch::Tensor t2(const std::vector<Vec>& rows) {
  std::vector<double> flat;
  for (const auto& r : rows) flat.insert(flat.end(), r.begin(), r.end());
  return torch::tensor(flat, torch::kFloat64).view({static_cast<std::int64_t>(rows.size()), -1}).clone();
}

// Row 0: 4 real candidates; row 1: 3 real + 1 padding (whose score and utility are junk).
struct Case {
  std::vector<Vec> s = {{0.3, -1.2, 2.0, 0.5}, {1.0, 0.1, -0.4, 99.0}};
  std::vector<Vec> u = {{0.2, 0.9, 0.0, 0.4}, {1.0, 0.0, 0.5, 42.0}};
  std::vector<std::size_t> n = {4, 3};
  torch::Tensor mask() const {
    return torch::tensor({1, 1, 1, 1, 1, 1, 1, 0}, torch::kBool).view({2, 4});
  }
  Vec real(const std::vector<Vec>& m, std::size_t r) const { return Vec(m[r].begin(), m[r].begin() + static_cast<std::ptrdiff_t>(n[r])); }
};

TEST(Objectives, KdLossIsTheKlOfTheUtilitySoftmaxAndItsGradientIsSoftmaxMinusTarget) {
  Case c;
  auto s = t2(c.s).requires_grad_(true);
  auto loss = ropg_kd_loss(s, t2(c.u), c.mask());
  double want = 0;
  for (std::size_t r = 0; r < 2; ++r) {
    const Vec p = softmax(c.real(c.u, r)), q = softmax(c.real(c.s, r));
    for (std::size_t i = 0; i < c.n[r]; ++i) want += p[i] * (std::log(p[i]) - std::log(q[i]));
  }
  EXPECT_NEAR(loss.item<double>(), want / 2, 1e-12);
  loss.backward();
  for (std::size_t r = 0; r < 2; ++r) {
    const Vec p = softmax(c.real(c.u, r)), q = softmax(c.real(c.s, r));
    for (std::size_t i = 0; i < 4; ++i) {
      const double g = i < c.n[r] ? (q[i] - p[i]) / 2 : 0.0;  // padding: no gradient
      EXPECT_NEAR(s.grad()[static_cast<long>(r)][static_cast<long>(i)].item<double>(), g, 1e-12) << r << "," << i;
    }
  }
}

TEST(Objectives, KdTargetTemperatureDividesTheUtilitiesAndSharpensTheTarget) {
  Case c;
  const double T = 0.25;
  auto s = t2(c.s).requires_grad_(true);
  auto loss = ropg_kd_loss(s, t2(c.u), c.mask(), false, T);
  loss.backward();
  for (std::size_t r = 0; r < 2; ++r) {
    Vec ut = c.real(c.u, r);
    for (auto& v : ut) v /= T;
    const Vec p = softmax(ut), q = softmax(c.real(c.s, r));
    for (std::size_t i = 0; i < c.n[r]; ++i)
      EXPECT_NEAR(s.grad()[static_cast<long>(r)][static_cast<long>(i)].item<double>(), (q[i] - p[i]) / 2, 1e-12) << r << "," << i;
    // Sharper: the best candidate's target share grows as T falls.
    const Vec p1 = softmax(c.real(c.u, r));
    const auto best = static_cast<std::size_t>(std::max_element(p1.begin(), p1.end()) - p1.begin());
    EXPECT_GT(p[best], p1[best]);
  }
  EXPECT_THROW(ropg_kd_loss(t2(c.s), t2(c.u), c.mask(), false, 0.0), c10::Error);
}

TEST(Objectives, DoubleSoftmaxKdIsTheReferenceCodesCrossEntropyOnSoftmaxedScores) {
  Case c;
  auto loss = ropg_kd_loss(t2(c.s), t2(c.u), c.mask(), /*double_softmax=*/true).item<double>();
  double want = 0;
  for (std::size_t r = 0; r < 2; ++r) {
    const Vec p = softmax(c.real(c.u, r)), q = softmax(softmax(c.real(c.s, r)));
    for (std::size_t i = 0; i < c.n[r]; ++i) want += p[i] * (std::log(p[i]) - std::log(q[i]));
  }
  EXPECT_NEAR(loss, want / 2, 1e-12);
  EXPECT_GT(std::abs(loss - ropg_kd_loss(t2(c.s), t2(c.u), c.mask()).item<double>()), 1e-3);  // not the same loss
}

TEST(Objectives, AFittedPolicyScaleRecoversTheScaleOfATargetAndLeavesNoGradientAlongIt) {
  Case c;
  // A target that is exactly softmax(2.5 s) per row: the fitted scale is 2.5 and the KL 0.
  auto s = t2(c.s);
  const auto target = masked_softmax(s * 2.5, c.mask());
  EXPECT_NEAR(fit_policy_scale(target, s, c.mask()), 2.5, 1e-6);
  // Utilities whose softmax is that target (log target, up to a per-row constant).
  auto u = torch::log(target.clamp_min(1e-300)).masked_fill(~c.mask(), 0.0);
  auto sg = t2(c.s).requires_grad_(true);
  auto loss = ropg_kd_loss(sg, u, c.mask(), false, 1.0, /*fit_scale=*/true);
  EXPECT_NEAR(loss.item<double>(), 0.0, 1e-9);
  // A broad target against sharp scores: at the fitted c the gradient has no component
  // along the scores themselves (d loss / d c = 0), unlike the fixed scale's.
  auto sharp = (t2(c.s) * 20).requires_grad_(true);
  auto broad = t2(c.s) * 0.5 + t2(c.u);  // agrees with the scores' order in part, far broader
  EXPECT_LT(fit_policy_scale(masked_softmax(broad, c.mask()), sharp.detach(), c.mask()), 0.2);
  ropg_kd_loss(sharp, broad, c.mask(), false, 1.0, true).backward();
  const auto along = (sharp.grad() * sharp.detach()).masked_fill(~c.mask(), 0.0).sum().item<double>();
  EXPECT_NEAR(along, 0.0, 1e-6);
  auto fixed = (t2(c.s) * 20).requires_grad_(true);
  ropg_kd_loss(fixed, broad, c.mask()).backward();
  EXPECT_GT((fixed.grad() * fixed.detach()).masked_fill(~c.mask(), 0.0).sum().item<double>(), 0.1);  // pushed flatter
  // A flat target needs c at its lower end; the double softmax is refused.
  EXPECT_NEAR(fit_policy_scale(masked_softmax(torch::zeros_like(s), c.mask()), s, c.mask()), 1e-4, 1e-9);
  EXPECT_THROW(ropg_kd_loss(t2(c.s), t2(c.u), c.mask(), true, 1.0, true), c10::Error);
}

TEST(Objectives, ReinforceAveragedOverEnumeratedActionsIsTheExactPolicyGradient) {
  Case c;
  // Reward per (row, action): arbitrary, padding never drawn.
  const std::vector<Vec> R = {{0.5, -0.25, 1.0, 0.0}, {-1.0, 0.75, 0.3, 0.0}};
  const auto mask = c.mask();
  // Exact: d/ds_rj (1/B) sum_r E_{pi_r}[R_r] = pi_rj (R_rj - E_r[R]) / B.
  Vec pi0 = softmax(c.real(c.s, 0)), pi1 = softmax(c.real(c.s, 1));
  auto expected_grad = torch::zeros({2, 4}, torch::kFloat64);
  for (std::size_t r = 0; r < 2; ++r) {
    const Vec& pi = r ? pi1 : pi0;
    double er = 0;
    for (std::size_t i = 0; i < c.n[r]; ++i) er += pi[i] * R[r][i];
    for (std::size_t i = 0; i < c.n[r]; ++i) expected_grad[static_cast<long>(r)][static_cast<long>(i)] = pi[i] * (R[r][i] - er) / 2;
  }
  // Estimator: every joint action (a0, a1) weighted by pi0(a0) pi1(a1); the loss is
  // -(1/B) sum r log pi, so its gradient is minus the ascent direction.
  auto avg = torch::zeros({2, 4}, torch::kFloat64);
  for (std::size_t a0 = 0; a0 < 4; ++a0)
    for (std::size_t a1 = 0; a1 < 3; ++a1) {
      auto s = t2(c.s).requires_grad_(true);
      auto loss = reinforce_loss(s, mask, torch::tensor({static_cast<long>(a0), static_cast<long>(a1)}),
                                 torch::tensor({R[0][a0], R[1][a1]}, torch::kFloat64));
      loss.backward();
      avg += pi0[a0] * pi1[a1] * (-s.grad());
    }
  EXPECT_TRUE(torch::allclose(avg, expected_grad, 0, 1e-12)) << avg << expected_grad;
  // An action on padding is refused.
  EXPECT_THROW(reinforce_loss(t2(c.s), mask, torch::tensor({0L, 3L}), torch::tensor({1.0, 1.0}, torch::kFloat64)),
               c10::Error);
}

TEST(Objectives, CalibratedKlWithTheAnchorMatchesPearlEq3TermByTerm) {
  Case c;
  const double y0 = 0.3, tau = 5.0;
  auto s = t2(c.s).requires_grad_(true);
  auto loss = calibrated_kl_loss(s, t2(c.u), c.mask(), y0, tau, /*anchor=*/true);
  double want = 0;
  std::vector<Vec> grads(2, Vec(4, 0.0));
  for (std::size_t r = 0; r < 2; ++r) {
    Vec y = {y0}, z = {0.0};
    for (std::size_t i = 0; i < c.n[r]; ++i) {
      y.push_back(c.u[r][i] / tau);
      z.push_back(c.s[r][i]);
    }
    y[0] = y0 / tau;
    const Vec t = softmax(y), q = softmax(z);
    for (std::size_t i = 0; i < t.size(); ++i) want -= t[i] * std::log(q[i]);  // -sum_i t_i log q_i
    for (std::size_t i = 0; i < c.n[r]; ++i) grads[r][i] = (q[i + 1] - t[i + 1]) / 2;  // CE gradient, anchor logit fixed at 0
  }
  EXPECT_NEAR(loss.item<double>(), want / 2, 1e-12);
  loss.backward();
  for (std::size_t r = 0; r < 2; ++r)
    for (std::size_t i = 0; i < 4; ++i)
      EXPECT_NEAR(s.grad()[static_cast<long>(r)][static_cast<long>(i)].item<double>(), grads[r][i], 1e-12) << r << "," << i;
  // Shifting every score by a constant changes the anchored loss (scale calibration), but
  // not the anchor-free listwise loss.
  auto shifted = t2(c.s) + 1.5;
  EXPECT_GT(std::abs(calibrated_kl_loss(shifted, t2(c.u), c.mask(), y0, tau).item<double>() - loss.item<double>()), 1e-3);
  EXPECT_NEAR(calibrated_kl_loss(shifted, t2(c.u), c.mask(), y0, tau, false).item<double>(),
              calibrated_kl_loss(t2(c.s), t2(c.u), c.mask(), y0, tau, false).item<double>(), 1e-12);
  // Without the anchor: -sum softmax(y / tau) log softmax(s).
  double plain = 0;
  for (std::size_t r = 0; r < 2; ++r) {
    Vec y = c.real(c.u, r);
    for (auto& v : y) v /= tau;
    const Vec t = softmax(y), q = softmax(c.real(c.s, r));
    for (std::size_t i = 0; i < t.size(); ++i) plain -= t[i] * std::log(q[i]);
  }
  EXPECT_NEAR(calibrated_kl_loss(t2(c.s), t2(c.u), c.mask(), y0, tau, false).item<double>(), plain / 2, 1e-12);
}

TEST(Objectives, ListwiseKlHonoursTheTargetTemperature) {
  Case c;
  const auto full = torch::ones({2, 4}, torch::kBool);
  c.n = {4, 4};
  c.s[1][3] = 0.2;
  c.u[1][3] = 0.1;
  double want = 0;
  for (std::size_t r = 0; r < 2; ++r) {
    Vec y = c.u[r];
    for (auto& v : y) v /= 0.5;
    const Vec p = softmax(y), q = softmax(c.s[r]);
    for (std::size_t i = 0; i < 4; ++i) want += p[i] * (std::log(p[i]) - std::log(q[i]));
  }
  EXPECT_NEAR(listwise_kl_loss(t2(c.s), t2(c.u), full, 0.5).item<double>(), want / 2, 1e-12);
}

TEST(Objectives, ZScoredTargetsArePerRowStandardScoresAndFlatRowsAreUniform) {
  auto u = torch::tensor({0.0, 0.1, 0.2, 0.0, 0.5, 0.5, 0.5, 9.0}, torch::kFloat64).view({2, 4});
  auto mask = torch::tensor({true, true, true, false, true, true, true, false}).view({2, 4});
  const auto z = zscore_rows(u, mask);
  // Row 0: mean 0.1, population sd sqrt(0.02/3); padding stays 0 (not counted).
  const double sd = std::sqrt(0.02 / 3);
  EXPECT_NEAR(z[0][0].item<double>(), -0.1 / sd, 1e-9);
  EXPECT_NEAR(z[0][1].item<double>(), 0.0, 1e-9);
  EXPECT_NEAR(z[0][2].item<double>(), 0.1 / sd, 1e-9);
  EXPECT_EQ(z[0][3].item<double>(), 0.0);
  // Row 1 is flat over its real candidates (the 9 is padding): all 0, a uniform target.
  for (int i = 0; i < 4; ++i) EXPECT_EQ(z[1][i].item<double>(), 0.0);
  // Scale-free: utilities 10x apart give the same target.
  EXPECT_TRUE(torch::allclose(zscore_rows(u * 10, mask), z));
  EXPECT_TRUE(torch::equal(normalize_targets(u, mask, TargetNormalization::None), u));
  EXPECT_EQ(parse_target_normalization("zscore"), TargetNormalization::ZScore);
  EXPECT_EQ(to_string(TargetNormalization::None), "none");
  EXPECT_THROW(parse_target_normalization("minmax"), UsageError);
}

// ---------------------------------------------------------------- the trainer

// Each query is about one word; of its candidates exactly those holding that word help
// (utility 1), the others do not (0). The initial (random) encoder does not know that.
std::vector<RopgExample> synthetic(std::size_t n, std::uint64_t seed) {
  const auto& w = testing::tiny_words();
  Rng rng(seed);
  std::vector<RopgExample> out;
  for (std::size_t i = 0; i < n; ++i) {
    RopgExample e;
    e.id = "q" + std::to_string(i);
    const std::string key = w[rng.below(6)];
    e.query = key + " " + w[10 + rng.below(10)];
    const std::size_t good = rng.below(6);
    for (std::size_t j = 0; j < 6; ++j) {
      std::string d;
      for (int t = 0; t < 5; ++t) {
        std::string x = w[6 + rng.below(w.size() - 6)];
        d += (t ? " " : "") + x;
      }
      if (j == good) d = key + " " + d;
      e.docs.push_back(d);
      e.utility.push_back(j == good ? 1.0 : 0.0);
    }
    out.push_back(e);
  }
  return out;
}

RopgOptions tiny_ropg(const fs::path& root, const std::string& out, RopgObjective obj) {
  RopgOptions o;
  o.objective = obj;
  o.init = root / "init";
  o.fit.out = root / out;
  o.fit.epochs = 8;
  o.fit.batch_size = 8;
  o.fit.micro_batch = 4;
  o.fit.lr = 3e-3;
  o.query_max_length = 16;
  o.doc_max_length = 16;
  o.fit.quiet = true;
  o.fit.seed = 3;
  return o;
}

class Ropg : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = testing::fresh_dir(std::string("ropg_") + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    testing::write_tiny_encoder(root_ / "init", models::Pooling::Mean, false, 11);
  }
  void TearDown() override { fs::remove_all(root_); }
  fs::path root_;
};

TEST_F(Ropg, KdRaisesTheTopOneUtilityOnHeldOutQueries) {
  const auto train = synthetic(64, 1), dev = synthetic(32, 2);
  auto o = tiny_ropg(root_, "kd", RopgObjective::KD);
  const auto res = train_ropg(train, dev, o);
  ASSERT_EQ(res.epochs.size(), 8u);
  EXPECT_EQ(res.steps_done, 64u);
  ASSERT_GT(res.best_epoch, 0u) << "no epoch beat the start on dev";
  const auto& best = res.epochs[res.best_epoch - 1];
  EXPECT_GT(best.dev_top1, res.init_dev_top1 + 0.2) << res.init_dev_top1 << " -> " << best.dev_top1;
  EXPECT_GT(best.dev_expected, res.init_dev_expected);
  EXPECT_LT(res.epochs.back().loss, res.epochs.front().loss);
  for (const char* f : {"config.json", "model.safetensors", "vocab.txt", "attune_train.json", "attune_model.json",
                        "checkpoint/optimizer.pt", "checkpoint/state.json"})
    EXPECT_TRUE(fs::exists(o.fit.out / f)) << f;
  // The kept folder is a dense encoder.
  models::EncoderOptions eo;
  eo.device = "cpu";
  EXPECT_EQ(models::TextEncoder::load(o.fit.out, eo)->dim(), 8u);
  EXPECT_THROW(train_ropg(train, dev, o), UsageError);  // the folder holds a run
}

TEST_F(Ropg, FrozenWordEmbeddingsStayAsLoadedWhileTheLayersLearn) {
  auto o = tiny_ropg(root_, "frozen", RopgObjective::KD);
  o.fit.epochs = 2;
  o.freeze_word_embeddings = true;
  train_ropg(synthetic(32, 1), synthetic(8, 2), o);
  // The last epoch's weights (the checkpoint), whichever epoch was kept.
  const auto before = models::load_bert(root_ / "init", torch::kCPU).model->named_parameters();
  const auto after = models::load_bert(o.fit.out / "checkpoint", torch::kCPU).model->named_parameters();
  std::size_t moved = 0;
  for (const auto& kv : before) {
    const bool same = torch::equal(kv.value(), after[kv.key()]);
    if (kv.key() == "embeddings.word_embeddings.weight") {
      EXPECT_TRUE(same) << "the frozen embeddings moved";
    }
    moved += !same;
  }
  EXPECT_GT(moved, 5u) << "the layers above the embeddings did not learn";
  std::ifstream in(o.fit.out / "attune_train.json");
  const auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j["options"]["freeze_word_embeddings"], true);
  // KD's default fitted policy scale: each epoch records the mean c it fitted.
  EXPECT_EQ(j["options"]["policy_scale"], "fitted");
  ASSERT_EQ(j["epochs"].size(), 2u);
  for (const auto& e : j["epochs"]) EXPECT_GT(e.value("policy_scale", 0.0), 0.0) << e.dump();
}

// LUF: the synthetic queries with judged labels: the helpful document contains the answer
// (2), one other is relevant (1, graded 0.3), one is not judged (-1), the rest irrelevant (0).
std::vector<RopgExample> judged(std::vector<RopgExample> ex, std::uint64_t seed) {
  Rng rng(seed);
  for (auto& e : ex) {
    const auto good = static_cast<std::size_t>(std::max_element(e.utility.begin(), e.utility.end()) - e.utility.begin());
    const std::size_t rel = (good + 1 + rng.below(5)) % 6, skip = (rel + 1 + rng.below(4)) % 6;
    e.judgement.assign(e.docs.size(), 0);
    e.judgement[good] = 2;
    if (rel != good) {
      e.judgement[rel] = 1;
      e.utility[rel] = 0.3;
    }
    if (skip != good && skip != rel) e.judgement[skip] = -1;
  }
  return ex;
}

TEST_F(Ropg, LufLearnsFromJudgedLabelsAndNotWithLearningOff) {
  const auto train = judged(synthetic(64, 1), 5), dev = judged(synthetic(32, 2), 6);
  auto o = tiny_ropg(root_, "luf", RopgObjective::LUF);
  const auto res = train_ropg(train, dev, o);
  ASSERT_GT(res.best_epoch, 0u) << "no epoch beat the start on dev";
  const auto& best = res.epochs[res.best_epoch - 1];
  EXPECT_GT(best.dev_top1, res.init_dev_top1 + 0.2) << res.init_dev_top1 << " -> " << best.dev_top1;
  EXPECT_LT(res.epochs.back().loss, res.epochs.front().loss);
  std::ifstream meta_in(o.fit.out / "attune_train.json");
  const auto meta = nlohmann::json::parse(meta_in);
  EXPECT_EQ(meta["options"]["objective"], "luf") << meta.dump();
  EXPECT_EQ(meta["options"]["luf"]["gamma"], 1.0) << meta.dump();
  // Learning switched off: the start is kept.
  auto off = tiny_ropg(root_, "luf0", RopgObjective::LUF);
  off.fit.lr = 0;
  off.fit.epochs = 2;
  EXPECT_EQ(train_ropg(train, dev, off).best_epoch, 0u);
  // Each loss alone learns too (the strict one here), and labels are required.
  auto strict = tiny_ropg(root_, "luf_strict", RopgObjective::LUF);
  strict.luf.lambda_flaccid = strict.luf.lambda_hard = 0;
  const auto rs = train_ropg(train, dev, strict);
  ASSERT_GT(rs.best_epoch, 0u);
  EXPECT_GT(rs.epochs[rs.best_epoch - 1].dev_top1, rs.init_dev_top1 + 0.2);
  auto bad = tiny_ropg(root_, "luf_bad", RopgObjective::LUF);
  EXPECT_THROW(train_ropg(synthetic(8, 1), dev, bad), Error);  // no labels
  bad.luf.lambda_strict = bad.luf.lambda_flaccid = bad.luf.lambda_hard = 0;
  EXPECT_THROW(train_ropg(train, dev, bad), UsageError);
  bad.luf.lambda_strict = 1;
  bad.luf.gamma = -1;
  EXPECT_THROW(train_ropg(train, dev, bad), UsageError);
  EXPECT_EQ(parse_ropg_objective("luf"), RopgObjective::LUF);
  bad.luf.gamma = 1;
  bad.luf.relevance_batches = true;  // without in-batch negatives it would change nothing
  EXPECT_THROW(train_ropg(train, dev, bad), UsageError);
}

// Paper 004 Eq. 2's B and Eq. 1: in-batch negatives, and micro-batches grouped by shared
// relevant documents. The synthetic queries share documents, so the grouping is exercised.
TEST_F(Ropg, LufWithInBatchNegativesAndRelevanceGuidedBatchesLearnsAndRecordsThem) {
  const auto train = judged(synthetic(64, 1), 5), dev = judged(synthetic(32, 2), 6);
  auto o = tiny_ropg(root_, "luf_ib", RopgObjective::LUF);
  o.luf.in_batch = o.luf.relevance_batches = true;
  const auto res = train_ropg(train, dev, o);
  ASSERT_GT(res.best_epoch, 0u) << "no epoch beat the start on dev";
  EXPECT_GT(res.epochs[res.best_epoch - 1].dev_top1, res.init_dev_top1 + 0.2);
  std::ifstream meta_in(o.fit.out / "attune_train.json");
  const auto meta = nlohmann::json::parse(meta_in);
  EXPECT_EQ(meta["options"]["luf"]["in_batch"], true) << meta.dump();
  EXPECT_EQ(meta["options"]["luf"]["relevance_batches"], true) << meta.dump();
  auto off = tiny_ropg(root_, "luf_ib0", RopgObjective::LUF);
  off.luf.in_batch = off.luf.relevance_batches = true;
  off.fit.lr = 0;
  off.fit.epochs = 1;
  EXPECT_EQ(train_ropg(train, dev, off).best_epoch, 0u);
}

TEST(RelevanceGuidedOrder, GroupsQueriesThatShareRelevantDocuments) {
  // Queries 0..5; 0, 2 and 4 share document 7; 1 and 5 share 9; 3 shares nothing.
  const std::vector<std::vector<std::uint64_t>> rel = {{7, 1}, {9}, {7}, {3}, {7, 7}, {9, 2}};
  const std::vector<std::size_t> base = {0, 1, 2, 3, 4, 5};
  EXPECT_EQ(relevance_guided_order(rel, base, 3), (std::vector<std::size_t>{0, 2, 4, 1, 5, 3}));
  // Groups of 2: 0 takes 2 (earlier of the two sharing 7); then 1 takes 5; 3 shares nothing: the next, 4.
  EXPECT_EQ(relevance_guided_order(rel, base, 2), (std::vector<std::size_t>{0, 2, 1, 5, 3, 4}));
  // Another base order is followed for seeds and ties.
  EXPECT_EQ(relevance_guided_order(rel, {5, 4, 3, 2, 1, 0}, 3), (std::vector<std::size_t>{5, 1, 4, 3, 2, 0}));
  EXPECT_EQ(relevance_guided_order(rel, base, 1), base);
  EXPECT_THROW(relevance_guided_order(rel, base, 0), UsageError);
}

TEST_F(Ropg, RlRaisesTheExpectedUtility) {
  const auto train = synthetic(64, 1), dev = synthetic(32, 2);
  auto o = tiny_ropg(root_, "rl", RopgObjective::RL);
  o.fit.epochs = 12;
  o.fit.lr = 5e-3;
  const auto res = train_ropg(train, dev, o);
  ASSERT_GT(res.best_epoch, 0u) << "no epoch beat the start on dev";
  const auto& best = res.epochs[res.best_epoch - 1];
  EXPECT_GT(best.dev_expected, res.init_dev_expected + 0.05) << res.init_dev_expected << " -> " << best.dev_expected;
  EXPECT_GT(best.dev_top1, res.init_dev_top1);
}

TEST_F(Ropg, ResumeAfterAKillGivesTheWeightsOfAnUninterruptedRun) {
  const auto train = synthetic(24, 4), dev = synthetic(8, 5);
  auto full = tiny_ropg(root_, "full", RopgObjective::RL);
  full.fit.epochs = 3;  // 3 steps per epoch
  full.fit.checkpoint_every = 2;
  train_ropg(train, dev, full);
  auto part = full;
  part.fit.out = root_ / "part";
  part.fit.stop_after = 4;  // killed mid-epoch 2, after its step-4 checkpoint
  EXPECT_EQ(train_ropg(train, dev, part).steps_done, 4u);
  part.fit.stop_after = 0;
  part.fit.resume = true;
  const auto r = train_ropg(train, dev, part);
  EXPECT_EQ(r.steps_done, 9u);
  EXPECT_EQ(r.losses.size(), 5u);
  EXPECT_EQ(r.epochs.size(), 3u);
  const auto a = models::WeightSet::open(full.fit.out), b = models::WeightSet::open(part.fit.out);
  ASSERT_EQ(a.names(), b.names());
  for (const auto& n : a.names())
    EXPECT_TRUE(torch::equal(models::to_tensor(a.get(n)), models::to_tensor(b.get(n)))) << n;
  // Killed before the first epoch ended (no kept epoch yet: best_dev is "none" in the state).
  auto early = full;
  early.fit.out = root_ / "early";
  early.fit.stop_after = 2;
  EXPECT_EQ(train_ropg(train, dev, early).steps_done, 2u);
  early.fit.stop_after = 0;
  early.fit.resume = true;
  EXPECT_EQ(train_ropg(train, dev, early).steps_done, 9u);
  const auto c = models::WeightSet::open(early.fit.out);
  for (const auto& n : a.names())
    EXPECT_TRUE(torch::equal(models::to_tensor(a.get(n)), models::to_tensor(c.get(n)))) << n;
  auto bad = part;
  bad.fit.lr = 1.0;
  EXPECT_THROW(train_ropg(train, dev, bad), UsageError);  // resume with other options
}

TEST_F(Ropg, ThePolicyTemperatureSharpensThePolicyAndIsRecorded) {
  const auto train = synthetic(16, 1), dev = synthetic(16, 2);
  auto flat = tiny_ropg(root_, "flat", RopgObjective::KD);
  flat.fit.epochs = 1;
  auto sharp = flat;
  sharp.fit.out = root_ / "sharp";
  sharp.policy_temperature = 0.05;
  EXPECT_EQ(resolve_policy_temperature(flat), 1.0);  // the paper's, by default
  const auto a = train_ropg(train, dev, flat), b = train_ropg(train, dev, sharp);
  EXPECT_EQ(a.policy_temperature, 1.0);
  EXPECT_EQ(b.policy_temperature, 0.05);
  // The same initial encoder ranks alike (top-1), but a sharper policy puts more of its
  // mass on its first choice, so E_pi[u] moves away from the uniform mean.
  EXPECT_EQ(a.init_dev_top1, b.init_dev_top1);
  EXPECT_NE(a.init_dev_expected, b.init_dev_expected);
  std::ifstream in(sharp.fit.out / "attune_train.json");
  EXPECT_EQ(nlohmann::json::parse(in)["options"]["policy_temperature"], 0.05);
  auto bad = tiny_ropg(root_, "bad", RopgObjective::KD);
  bad.policy_temperature = -1;
  EXPECT_THROW(bad.validate(), UsageError);
}

TEST_F(Ropg, UnsetPolicyTemperatureIsTheOneTheEncoderWasTrainedAt) {
  auto o = tiny_ropg(root_, "own", RopgObjective::KD);
  EXPECT_FALSE(encoder_temperature(o.init).has_value());  // a folder that records none: 1, the paper's
  EXPECT_EQ(resolve_policy_temperature(o), 1.0);
  // An RSPG folder's "temperature" is its target's, not the encoder's scale: not read.
  models::write_json_file(o.init / "attune_train.json", {{"method", "rspg-pre"}, {"options", {{"temperature", 1.0}}}});
  EXPECT_FALSE(encoder_temperature(o.init).has_value());
  models::write_json_file(o.init / "attune_train.json",
                          {{"objective", "contriever-infonce"}, {"options", {{"temperature", 0.05}}}});  // pretrain-encoder's
  EXPECT_EQ(resolve_policy_temperature(o), 0.05);
  o.policy_temperature = 0.5;  // given: it wins
  EXPECT_EQ(resolve_policy_temperature(o), 0.5);
  o.policy_temperature.reset();
  // A trained ROPG folder passes its own on (a run started from it uses the same scale).
  o.fit.epochs = 1;
  o.fit.quiet = true;
  const auto train = synthetic(8, 1);
  EXPECT_EQ(train_ropg(train, {}, o).policy_temperature, 0.05);
  EXPECT_EQ(encoder_temperature(o.fit.out), 0.05);
  models::write_json_file(o.init / "attune_train.json", {{"objective", "contriever-infonce"}, {"options", {{"temperature", -2}}}});
  EXPECT_THROW(resolve_policy_temperature(o), Error);
}

TEST_F(Ropg, TheRerankProtocolIsRecordedSoTheFolderRetrievesAsItWasTrained) {
  const auto train = synthetic(8, 1);
  auto o = tiny_ropg(root_, "rr", RopgObjective::KD);
  o.fit.epochs = 1;
  o.rerank = RopgOptions::Rerank{"bm25", 4};
  train_ropg(train, {}, o);
  const auto m = models::read_json_file(o.fit.out / "attune_model.json");
  EXPECT_EQ(m.at("rerank").at("initial"), "bm25");
  EXPECT_EQ(m.at("rerank").at("top_l"), 4);
  EXPECT_EQ(models::read_json_file(o.fit.out / "attune_train.json").at("options").at("target_normalization"), "zscore");
  auto plain = tiny_ropg(root_, "plain", RopgObjective::KD);
  plain.fit.epochs = 1;
  train_ropg(train, {}, plain);
  EXPECT_FALSE(models::read_json_file(plain.fit.out / "attune_model.json").contains("rerank"));
  auto bad = tiny_ropg(root_, "bad", RopgObjective::KD);
  bad.rerank = RopgOptions::Rerank{"", 4};
  EXPECT_THROW(bad.validate(), UsageError);
}

// The synthetic queries with initial scores: `informative` puts the helpful candidate
// highest (a noisy score), else the scores are noise alone.
std::vector<RopgExample> with_initial_scores(std::vector<RopgExample> ex, bool informative, std::uint64_t seed) {
  Rng rng(seed);
  for (auto& e : ex)
    for (double u : e.utility) e.initial_score.push_back((informative ? 2 * u : 0.0) + rng.uniform());
  return ex;
}

TEST_F(Ropg, ALearnedInitialPriorStartsFromAnInformativeInitialOrderAndIgnoresANoisyOne) {
  const auto train_raw = synthetic(64, 1), dev_raw = synthetic(32, 2);
  auto o = tiny_ropg(root_, "informative", RopgObjective::KD);
  o.fit.epochs = 2;
  o.rerank = RopgOptions::Rerank{"bm25", 6};
  o.initial_prior = InitialPrior::Learned;
  const auto good = train_ropg(with_initial_scores(train_raw, true, 7), with_initial_scores(dev_raw, true, 8), o);
  EXPECT_GT(good.initial_weight_start, 0) << "the grid ignored an initial order that ranks the helpful candidate first";
  EXPECT_EQ(good.init_dev_top1, 1.0) << "the start is not the initial order";
  const auto marker = models::read_json_file(o.fit.out / "attune_model.json");
  ASSERT_TRUE(marker.at("rerank").contains("fusion"));
  EXPECT_NEAR(marker.at("rerank").at("fusion").at("reranker_scale").get<double>(), 1.0 / good.policy_temperature, 1e-12);
  EXPECT_EQ(marker.at("rerank").at("fusion").at("initial_weight").get<double>(), good.initial_weight);
  const auto rec = models::read_json_file(o.fit.out / "attune_train.json");
  EXPECT_EQ(rec.at("initial_prior").at("weight").get<double>(), good.initial_weight);
  EXPECT_EQ(rec.at("initial_prior").at("weight_start").get<double>(), good.initial_weight_start);
  EXPECT_EQ(rec.at("options").at("initial_prior"), "learned");

  auto noisy = o;
  noisy.fit.out = root_ / "noisy";
  noisy.fit.lr = 0;  // the start alone
  noisy.fit.epochs = 1;
  const auto bad = train_ropg(with_initial_scores(train_raw, false, 7), with_initial_scores(dev_raw, false, 8), noisy);
  EXPECT_EQ(bad.initial_weight_start, 0) << "the grid kept an initial order that carries nothing";
  EXPECT_FALSE(models::read_json_file(noisy.fit.out / "attune_model.json").at("rerank").contains("fusion"));
}

TEST_F(Ropg, ALearnedInitialPriorResumesToTheSameWeightAndNeedsItsInputs) {
  const auto train = with_initial_scores(synthetic(24, 4), true, 3), dev = with_initial_scores(synthetic(8, 5), true, 4);
  auto full = tiny_ropg(root_, "full", RopgObjective::KD);
  full.fit.epochs = 3;
  full.fit.checkpoint_every = 2;
  full.fit.keep_start = false;  // keep the last epoch: its weight has moved
  full.rerank = RopgOptions::Rerank{"bm25", 6};
  full.initial_prior = InitialPrior::Learned;
  const auto a = train_ropg(train, {}, full);
  EXPECT_NE(a.initial_weight, a.initial_weight_start) << "the weight did not learn";
  auto part = full;
  part.fit.out = root_ / "part";
  part.fit.stop_after = 4;
  train_ropg(train, {}, part);
  part.fit.stop_after = 0;
  part.fit.resume = true;
  const auto b = train_ropg(train, {}, part);
  EXPECT_EQ(b.initial_weight_start, a.initial_weight_start);
  EXPECT_EQ(b.initial_weight, a.initial_weight);
  const auto wa = models::WeightSet::open(full.fit.out), wb = models::WeightSet::open(part.fit.out);
  for (const auto& n : wa.names())
    EXPECT_TRUE(torch::equal(models::to_tensor(wa.get(n)), models::to_tensor(wb.get(n)))) << n;

  auto dense = tiny_ropg(root_, "dense", RopgObjective::KD);
  dense.initial_prior = InitialPrior::Learned;  // no rerank protocol: no initial retriever
  EXPECT_THROW(dense.validate(), UsageError);
  auto unscored = full;
  unscored.fit.out = root_ / "unscored";
  unscored.fit.resume = false;
  EXPECT_THROW(train_ropg(synthetic(8, 1), {}, unscored), Error);  // examples without initial scores
  EXPECT_EQ(parse_initial_prior("learned"), InitialPrior::Learned);
  EXPECT_EQ(to_string(InitialPrior::None), "none");
  EXPECT_THROW(parse_initial_prior("fixed"), UsageError);
}

TEST_F(Ropg, KdLeavesOutQueriesWhoseCandidatesAllHelpAlike) {
  auto train = synthetic(16, 1);
  for (std::size_t i = 0; i < 6; ++i) std::fill(train[i].utility.begin(), train[i].utility.end(), 0.0);
  auto o = tiny_ropg(root_, "skip", RopgObjective::KD);
  o.fit.epochs = 1;
  const auto res = train_ropg(train, {}, o);
  EXPECT_EQ(res.flat_skipped, 6u);
  EXPECT_EQ(res.steps_done, 2u);  // 10 queries in batches of 8
  auto paper = tiny_ropg(root_, "all", RopgObjective::KD);
  paper.fit.epochs = 1;
  paper.skip_flat = false;
  const auto all = train_ropg(train, {}, paper);
  EXPECT_EQ(all.flat_skipped, 0u);
  EXPECT_EQ(all.steps_done, 2u);  // 16 queries in batches of 8
  for (auto& e : train) std::fill(e.utility.begin(), e.utility.end(), 0.5);
  auto none = tiny_ropg(root_, "none", RopgObjective::KD);
  try {
    train_ropg(train, {}, none);
    FAIL() << "trained on queries with nothing to learn";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("16 had all equal utilities"), std::string::npos) << e.what();
  }
}

TEST_F(Ropg, RlRefusesQueriesThatAllRewardAlike) {
  auto train = synthetic(16, 1);
  for (std::size_t i = 0; i < 6; ++i) std::fill(train[i].utility.begin(), train[i].utility.end(), 0.0);
  auto some = tiny_ropg(root_, "rl_some", RopgObjective::RL);
  some.fit.epochs = 1;
  EXPECT_EQ(train_ropg(train, {}, some).steps_done, 2u);  // flat queries among others: kept, as the paper does
  for (auto& e : train) std::fill(e.utility.begin(), e.utility.end(), 0.0);
  auto none = tiny_ropg(root_, "rl_none", RopgObjective::RL);
  try {
    train_ropg(train, {}, none);
    FAIL() << "ROPG-RL trained on rewards that are all the same";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ROPG-RL has no training example"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("16 had all equal utilities"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(root_ / "rl_none" / "model.safetensors"));
}

TEST_F(Ropg, BadInputIsRefused) {
  auto o = tiny_ropg(root_, "bad", RopgObjective::KD);
  auto one = synthetic(4, 1);
  for (auto& e : one) {
    e.docs.resize(1);
    e.utility.resize(1);
  }
  EXPECT_THROW(train_ropg(one, {}, o), Error);  // nothing to rank
  auto mismatched = synthetic(4, 1);
  mismatched[2].utility.pop_back();
  EXPECT_THROW(train_ropg(mismatched, {}, o), Error);
  o.fit.epochs = 0;
  EXPECT_THROW(train_ropg(synthetic(4, 1), {}, o), UsageError);
  o = tiny_ropg(root_, "bad2", RopgObjective::KD);
  o.init = root_ / "absent";
  EXPECT_THROW(train_ropg(synthetic(4, 1), {}, o), Error);
  EXPECT_THROW(parse_ropg_objective("ropg"), UsageError);
  o = tiny_ropg(root_, "bad3", RopgObjective::RL);
  o.fit_policy_scale = true;  // ROPG-KD's
  EXPECT_THROW(train_ropg(synthetic(4, 1), {}, o), UsageError);
  o = tiny_ropg(root_, "bad4", RopgObjective::KD);
  o.double_softmax = true;
  EXPECT_FALSE(o.fits_policy_scale());  // the default leaves the double softmax as it is
  o.fit_policy_scale = true;           // asked for: refused
  EXPECT_THROW(train_ropg(synthetic(4, 1), {}, o), UsageError);
  EXPECT_TRUE(tiny_ropg(root_, "kd", RopgObjective::KD).fits_policy_scale());
  EXPECT_FALSE(tiny_ropg(root_, "luf", RopgObjective::LUF).fits_policy_scale());
}

}  // namespace
}  // namespace attune::train

namespace attune::train {
namespace {

// A feedback log in memory (the store's interface, as feedback::collect fills it).
class MemoryLog final : public store::FeedbackLog {
 public:
  void feedback_put(const std::vector<store::FeedbackRecord>& records) override {
    for (const auto& r : records) rows.push_back(r);
  }
  std::vector<store::FeedbackRecord> feedback_get(const std::string& dataset, const std::string& kind,
                                                  const std::string& model) override {
    std::vector<store::FeedbackRecord> out;
    for (const auto& r : rows)
      if (r.dataset == dataset && r.kind == kind && r.model == model) out.push_back(r);
    return out;
  }
  std::vector<store::FeedbackRecord> rows;
};


}  // namespace

// KdTarget::Likelihood reads the likelihood records: each document's value is
// log p(y | x, d) - log p(y | x) (the no-document record, item ""), REPLUG-LSR's signal; a
// non-finite one is refused. Utility reads the doc records as they are.
TEST(RopgExamples, TheLikelihoodTargetIsTheGainOverNoDocumentAndMustBeFinite) {
  const auto ds = testing::commit_subject_users(1, {"parser cache", "pager color", "merge base"}, "ropg-values");
  const auto task = tasks::make_task("commit_subject");
  retrieval::ProfileCandidates source(*task);
  const std::string key = feedback::dataset_key(ds);
  MemoryLog log;
  log.feedback_put({{key, "q0", "likelihood", "", "m", "", -9.0},
                    {key, "q0", "likelihood", "u0-parser cache", "m", "", -2.0},
                    {key, "q0", "likelihood", "u0-pager color", "m", "", -8.5},
                    {key, "q0", "likelihood", "u0-merge base", "m", "", -10.0},
                    {key, "q0", "doc", "u0-parser cache", "m", "fix parser cache", 1.0},
                    {key, "q0", "doc", "u0-pager color", "m", "fix pager color", 0.33},
                    {key, "q0", "doc", "u0-merge base", "m", "add merge base", 0.0}});
  const auto ll = ropg_examples(ds, *task, source, log, "m", "bm25", 16, 0, 0, {}, KdTarget::Likelihood);
  ASSERT_EQ(ll.size(), 1u);
  ASSERT_EQ(ll[0].docs.size(), 3u);
  const auto ut = ropg_examples(ds, *task, source, log, "m", "bm25", 16, 0);
  ASSERT_EQ(ut.size(), 1u);
  EXPECT_EQ(ut[0].docs, ll[0].docs);  // the same candidates in the same order
  std::map<std::string, double> want_ll = {{"fix parser cache", 7.0}, {"fix pager color", 0.5}, {"fix merge base", -1.0}};
  std::map<std::string, double> want_u = {{"fix parser cache", 1.0}, {"fix pager color", 0.33}, {"fix merge base", 0.0}};
  for (std::size_t i = 0; i < 3; ++i) {
    const auto title = ll[0].docs[i].substr(0, ll[0].docs[i].find(" the "));
    EXPECT_DOUBLE_EQ(ll[0].utility[i], want_ll.at(title)) << ll[0].docs[i];
    EXPECT_DOUBLE_EQ(ut[0].utility[i], want_u.at(title)) << ut[0].docs[i];
  }
  // No no-document record: refused, naming it.
  MemoryLog partial;
  for (const auto& r : log.rows)
    if (!(r.kind == "likelihood" && r.item.empty())) partial.rows.push_back(r);
  try {
    ropg_examples(ds, *task, source, partial, "m", "bm25", 16, 0, 0, {}, KdTarget::Likelihood);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no-document prompt"), std::string::npos) << e.what();
  }
  // A -inf log-probability: refused.
  log.feedback_put({{key, "q0", "likelihood", "u0-pager color", "m", "", -std::numeric_limits<double>::infinity()}});
  MemoryLog inf;
  for (const auto& r : log.rows)
    if (!(r.kind == "likelihood" && r.item == "u0-pager color" && std::isfinite(r.value))) inf.rows.push_back(r);
  try {
    ropg_examples(ds, *task, source, inf, "m", "bm25", 16, 0, 0, {}, KdTarget::Likelihood);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("finite log-probabilities"), std::string::npos) << e.what();
  }
  EXPECT_EQ(parse_kd_target("likelihood"), KdTarget::Likelihood);
  EXPECT_THROW(parse_kd_target("replug"), UsageError);
}

}  // namespace attune::train
