// Contriever-style pretraining: InfoNCE in closed form, crops, the loop (loss goes down,
// resume == uninterrupted).
#include <gtest/gtest.h>

#include <cmath>

#include "attune/core/error.h"
#include "attune/models/encoder.h"
#include "attune/models/weights.h"
#include "attune/train/contrastive.h"
#include "attune/train/pretrain.h"
#include "tiny_bert.h"

namespace attune::train {
namespace {

namespace fs = std::filesystem;

TEST(InfoNce, EqualsTheClosedFormOnA2x2CaseAndItsGradientIsSoftmaxMinusOneHot) {
  // q = I, so logits = k^T / tau = S / tau with S = [[1, 0.5], [0, 0.5]].
  const double tau = 0.5;
  auto q = torch::eye(2, torch::kFloat64);
  auto k = torch::tensor({{1.0, 0.0}, {0.5, 0.5}}, torch::kFloat64).requires_grad_(true);
  const double S[2][2] = {{1.0, 0.5}, {0.0, 0.5}};
  auto loss = info_nce(q, k, tau, /*symmetric=*/false);
  // Row i: -log softmax(S_i / tau)[i].
  auto row = [&](int i) {
    const double a = S[i][0] / tau, b = S[i][1] / tau, mine = S[i][i] / tau;
    return -(mine - std::log(std::exp(a) + std::exp(b)));
  };
  EXPECT_NEAR(loss.item<double>(), 0.5 * (row(0) + row(1)), 1e-12);
  loss.backward();
  // dL/dlogits = (softmax - onehot) / B; logits = k^T / tau => dL/dk = (dL/dlogits)^T / tau.
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j) {
      const double a = S[i][0] / tau, b = S[i][1] / tau;
      const double p = std::exp(S[i][j] / tau) / (std::exp(a) + std::exp(b));
      const double g = (p - (i == j ? 1.0 : 0.0)) / 2.0;
      EXPECT_NEAR(k.grad()[j][i].item<double>(), g / tau, 1e-12) << i << "," << j;
    }
  // Symmetric: the average of both directions (S^T for the k -> q direction).
  auto sym = info_nce(q, k.detach(), tau, true).item<double>();
  auto col = [&](int j) {
    const double a = S[0][j] / tau, b = S[1][j] / tau, mine = S[j][j] / tau;
    return -(mine - std::log(std::exp(a) + std::exp(b)));
  };
  EXPECT_NEAR(sym, 0.5 * (0.5 * (row(0) + row(1)) + 0.5 * (col(0) + col(1))), 1e-12);
}

TEST(RandomCrop, WithinBoundsLengthRatioAndSeeded) {
  CropOptions o;
  o.max_tokens = 62;
  for (std::size_t n : {1u, 3u, 4u, 5u, 10u, 40u, 100u, 500u}) {
    Rng rng(derive_seed(1, std::to_string(n)));
    for (int t = 0; t < 200; ++t) {
      const Crop c = random_crop(n, rng, o);
      ASSERT_LE(c.begin, c.end);
      ASSERT_LE(c.end, n);
      ASSERT_GE(c.size(), std::min<std::size_t>(n, 4));
      ASSERT_LE(c.size(), std::min<std::size_t>(62, std::max<std::size_t>(4, n / 2)));
      if (n >= 40) {
        ASSERT_GE(c.size(), std::max<std::size_t>(4, n / 10));
      }
    }
  }
  EXPECT_EQ(random_crop(0, *std::make_unique<Rng>(1), o).size(), 0u);
  Rng a(42), b(42), c(43);
  bool differs = false;
  for (int t = 0; t < 20; ++t) {
    const Crop x = random_crop(200, a, o), y = random_crop(200, b, o), z = random_crop(200, c, o);
    EXPECT_EQ(x.begin, y.begin);
    EXPECT_EQ(x.end, y.end);
    differs = differs || x.begin != z.begin || x.end != z.end;
  }
  EXPECT_TRUE(differs);
}

// Sentences over the tiny vocabulary; each text has its own word mix.
std::vector<std::string> tiny_texts(std::size_t n) {
  const auto& w = testing::tiny_words();
  std::vector<std::string> out;
  Rng rng(9);
  for (std::size_t i = 0; i < n; ++i) {
    std::string s;
    const std::size_t base = rng.below(w.size());
    for (int t = 0; t < 24; ++t) s += (t ? " " : "") + w[(base + rng.below(5) * 3) % w.size()];
    out.push_back(s);
  }
  return out;
}

PretrainOptions tiny_options(const fs::path& out, const fs::path& tok) {
  PretrainOptions o;
  o.fit.out = out;
  o.tokenizer = tok;
  o.hidden = 16;
  o.layers = 1;
  o.heads = 2;
  o.max_length = 16;
  o.fit.batch_size = 8;
  o.fit.lr = 3e-3;
  o.temperature = 0.1;
  o.steps = 40;
  o.fit.checkpoint_every = 0;
  o.fit.quiet = true;
  o.fit.seed = 5;
  o.fit.log_every = 8;
  return o;
}

TEST(Pretrain, AFewStepsOnTinyDataDecreaseTheLossAndWriteALoadableFolder) {
  const auto root = testing::fresh_dir("pretrain_loss");
  testing::write_tiny_vocab(root / "tok");
  auto o = tiny_options(root / "out", root / "tok");
  const auto res = pretrain_encoder(tiny_texts(64), o);
  EXPECT_EQ(res.steps_done, 40u);
  EXPECT_EQ(res.losses.size(), 40u);
  EXPECT_LT(res.last_loss, res.first_loss * 0.8) << res.first_loss << " -> " << res.last_loss;
  for (const char* f : {"config.json", "model.safetensors", "vocab.txt", "modules.json", "1_Pooling/config.json",
                        "attune_train.json", "checkpoint/optimizer.pt"})
    EXPECT_TRUE(fs::exists(o.fit.out / f)) << f;
  models::EncoderOptions eo;
  eo.device = "cpu";
  auto enc = models::TextEncoder::load(o.fit.out, eo);
  EXPECT_EQ(enc->dim(), 16u);
  // Normalised (cosine) as trained.
  const std::vector<std::string> t = {"the cat sat"};
  auto e = enc->embed(t);
  double norm = 0;
  for (float v : e) norm += static_cast<double>(v) * v;
  EXPECT_NEAR(norm, 1.0, 1e-5);
  // A second run into the same folder must be asked to resume.
  EXPECT_THROW(pretrain_encoder(tiny_texts(64), o), UsageError);
  fs::remove_all(root);
}

TEST(Pretrain, ResumeAfterACheckpointGivesTheWeightsOfAnUninterruptedRun) {
  const auto root = testing::fresh_dir("pretrain_resume");
  testing::write_tiny_vocab(root / "tok");
  const auto texts = tiny_texts(32);
  auto full = tiny_options(root / "full", root / "tok");
  full.steps = 12;
  full.fit.checkpoint_every = 4;
  pretrain_encoder(texts, full);

  auto part = full;
  part.fit.out = root / "part";
  part.fit.stop_after = 6;  // "killed" after step 6: the last checkpoint is step 6's
  auto r1 = pretrain_encoder(texts, part);
  EXPECT_EQ(r1.steps_done, 6u);
  EXPECT_FALSE(fs::exists(part.fit.out / "model.safetensors"));  // not finished
  part.fit.stop_after = 0;
  part.fit.resume = true;
  auto r2 = pretrain_encoder(texts, part);
  EXPECT_EQ(r2.steps_done, 12u);
  EXPECT_EQ(r2.losses.size(), 6u);

  const auto a = models::WeightSet::open(full.fit.out), b = models::WeightSet::open(part.fit.out);
  ASSERT_EQ(a.names(), b.names());
  for (const auto& n : a.names()) {
    auto ta = models::to_tensor(a.get(n)), tb = models::to_tensor(b.get(n));
    EXPECT_TRUE(torch::allclose(ta, tb, 0, 1e-6)) << n << " max diff " << (ta - tb).abs().max().item<double>();
  }
  // Resuming with a different option is refused, naming it.
  auto bad = part;
  bad.fit.lr = 1e-2;
  try {
    pretrain_encoder(texts, bad);
    FAIL() << "no throw";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("\"lr\""), std::string::npos) << e.what();
  }
  fs::remove_all(root);
}

TEST(Pretrain, BadOptionsAreUsageErrors) {
  const auto root = testing::fresh_dir("pretrain_bad");
  testing::write_tiny_vocab(root / "tok");
  auto o = tiny_options(root / "out", root / "tok");
  o.heads = 3;
  EXPECT_THROW(pretrain_encoder(tiny_texts(16), o), UsageError);
  o = tiny_options(root / "out", root / "tok");
  o.fit.resume = true;
  EXPECT_THROW(pretrain_encoder(tiny_texts(16), o), UsageError);  // nothing to resume
  o = tiny_options(root / "out", root / "tok");
  o.fit.batch_size = 100;
  EXPECT_THROW(pretrain_encoder(tiny_texts(16), o), Error);  // too few texts
  fs::remove_all(root);
}

}  // namespace
}  // namespace attune::train
