#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <numbers>

#include "attune/core/error.h"
#include "attune/models/decoding.h"
#include "attune/models/t5.h"
#include "attune/models/weights.h"

using namespace attune;
using namespace attune::models;
namespace fs = std::filesystem;

namespace {

T5Config tiny_t5_config(const std::string& proj = "gated-gelu", bool tied = true) {
  T5Config c;
  c.vocab_size = 13;
  c.d_model = 8;
  c.d_kv = 4;
  c.d_ff = 12;
  c.num_heads = 2;
  c.num_layers = 2;
  c.num_decoder_layers = 2;
  // Few buckets and a short max_distance, so that short test sequences reach the
  // logarithmic buckets and the clamp.
  c.num_buckets = 8;
  c.max_distance = 12;
  c.feed_forward_proj = proj;
  c.tie_embeddings = tied;
  c.eos_ids = {1};
  return c;
}

torch::Tensor row(const TokenIds& ids) { return torch::tensor(std::vector<std::int64_t>(ids.begin(), ids.end())).view({1, -1}); }

// An independent T5 forward pass in double precision with plain loops, reading the weights by
// their Hugging Face names. There is no machine with PyTorch/transformers for this work, so
// agreement with this transcription of modeling_t5.py stands in for a transformers-parity
// test: it checks the layer order, the unscaled attention, the position buckets, the RMS norm,
// the activations and the tied-embedding scaling independently of the torch code.
class NaiveT5 {
 public:
  using Vec = std::vector<double>;
  using Mat = std::vector<Vec>;

  explicit NaiveT5(T5& m) : c_(m.config()) {
    for (const auto& p : m.module().named_parameters()) w_[p.key()] = p.value().detach().to(torch::kCPU, torch::kFloat64).contiguous();
  }

  // HF _relative_position_bucket, one relative position (memory - query) at a time.
  static std::int64_t bucket(std::int64_t rp, bool bidirectional, std::int64_t num_buckets, std::int64_t max_distance) {
    std::int64_t b = 0;
    if (bidirectional) {
      num_buckets /= 2;
      if (rp > 0) b += num_buckets;
      rp = std::abs(rp);
    } else {
      rp = -std::min<std::int64_t>(rp, 0);
    }
    const std::int64_t max_exact = num_buckets / 2;
    if (rp < max_exact) return b + rp;
    const double large = std::log(static_cast<double>(rp) / max_exact) / std::log(static_cast<double>(max_distance) / max_exact) *
                         static_cast<double>(num_buckets - max_exact);
    return b + std::min<std::int64_t>(max_exact + static_cast<std::int64_t>(large), num_buckets - 1);
  }

  // Logits [T][V] for one unpadded encoder input and the decoder inputs.
  Mat logits(const TokenIds& enc_ids, const TokenIds& dec_ids) const {
    Mat x = embed(enc_ids);
    for (std::int64_t l = 0; l < c_.num_layers; ++l) {
      const std::string p = "encoder.block." + std::to_string(l) + ".layer.";
      const std::string bias = "encoder.block." + std::to_string(c_.bias_per_layer ? l : 0) + ".layer.0.SelfAttention.";
      auto h = norm(x, p + "0.layer_norm.weight");
      add(x, attention(h, h, p + "0.SelfAttention.", bias, true, false));
      add(x, ff(norm(x, p + "1.layer_norm.weight"), p + "1.DenseReluDense."));
    }
    const Mat enc = norm(x, "encoder.final_layer_norm.weight");
    Mat y = embed(dec_ids);
    for (std::int64_t l = 0; l < c_.num_decoder_layers; ++l) {
      const std::string p = "decoder.block." + std::to_string(l) + ".layer.";
      const std::string bias = "decoder.block." + std::to_string(c_.bias_per_layer ? l : 0) + ".layer.0.SelfAttention.";
      auto h = norm(y, p + "0.layer_norm.weight");
      add(y, attention(h, h, p + "0.SelfAttention.", bias, false, true));
      add(y, attention(norm(y, p + "1.layer_norm.weight"), enc, p + "1.EncDecAttention.", "", false, false));
      add(y, ff(norm(y, p + "2.layer_norm.weight"), p + "2.DenseReluDense."));
    }
    y = norm(y, "decoder.final_layer_norm.weight");
    if (!c_.tie_embeddings) return linear(y, "lm_head.weight");
    for (auto& r : y)
      for (auto& v : r) v /= std::sqrt(static_cast<double>(c_.d_model));
    return linear(y, "shared.weight");
  }

 private:
  const torch::Tensor& w(const std::string& name) const {
    auto it = w_.find(name);
    if (it == w_.end()) throw std::runtime_error("naive T5: no weight " + name);
    return it->second;
  }
  static void add(Mat& x, const Mat& d) {
    for (std::size_t i = 0; i < x.size(); ++i)
      for (std::size_t j = 0; j < x[i].size(); ++j) x[i][j] += d[i][j];
  }
  Mat embed(const TokenIds& ids) const {
    auto e = w("shared.weight").accessor<double, 2>();
    Mat x;
    for (auto id : ids) {
      Vec r(static_cast<std::size_t>(c_.d_model));
      for (std::int64_t d = 0; d < c_.d_model; ++d) r[static_cast<std::size_t>(d)] = e[id][d];
      x.push_back(r);
    }
    return x;
  }
  Mat linear(const Mat& x, const std::string& name) const {
    const auto& W = w(name);
    auto a = W.accessor<double, 2>();
    Mat y(x.size(), Vec(static_cast<std::size_t>(W.size(0)), 0.0));
    for (std::size_t n = 0; n < x.size(); ++n)
      for (std::int64_t o = 0; o < W.size(0); ++o)
        for (std::int64_t i = 0; i < W.size(1); ++i) y[n][static_cast<std::size_t>(o)] += a[o][i] * x[n][static_cast<std::size_t>(i)];
    return y;
  }
  // T5LayerNorm: x / sqrt(mean(x^2) + eps) * weight; no mean, no bias.
  Mat norm(const Mat& x, const std::string& name) const {
    auto a = w(name).accessor<double, 1>();
    Mat y = x;
    for (auto& r : y) {
      double ms = 0;
      for (double v : r) ms += v * v;
      ms /= static_cast<double>(r.size());
      for (std::size_t d = 0; d < r.size(); ++d) r[d] = a[static_cast<std::int64_t>(d)] * r[d] / std::sqrt(ms + c_.eps);
    }
    return y;
  }
  // Multi-head attention without 1/sqrt(d); relative position bias from `bias_prefix`
  // (empty: none, as in cross-attention).
  Mat attention(const Mat& xq, const Mat& xkv, const std::string& prefix, const std::string& bias_prefix, bool bidirectional,
                bool causal) const {
    auto q = linear(xq, prefix + "q.weight"), k = linear(xkv, prefix + "k.weight"), v = linear(xkv, prefix + "v.weight");
    const auto H = static_cast<std::size_t>(c_.num_heads), D = static_cast<std::size_t>(c_.d_kv);
    Mat out(xq.size(), Vec(H * D, 0.0));
    for (std::size_t h = 0; h < H; ++h)
      for (std::size_t i = 0; i < xq.size(); ++i) {
        Vec s(xkv.size(), -std::numeric_limits<double>::infinity());
        double mx = -std::numeric_limits<double>::infinity();
        for (std::size_t j = 0; j < xkv.size(); ++j) {
          if (causal && j > i) continue;
          double dot = 0;
          for (std::size_t d = 0; d < D; ++d) dot += q[i][h * D + d] * k[j][h * D + d];
          if (!bias_prefix.empty()) {
            auto rb = w(bias_prefix + "relative_attention_bias.weight").accessor<double, 2>();
            const auto b = bucket(static_cast<std::int64_t>(j) - static_cast<std::int64_t>(i), bidirectional, c_.num_buckets, c_.max_distance);
            dot += rb[b][static_cast<std::int64_t>(h)];
          }
          s[j] = dot;
          mx = std::max(mx, dot);
        }
        double z = 0;
        for (auto& e : s) z += (e = std::exp(e - mx));
        for (std::size_t j = 0; j < xkv.size(); ++j)
          for (std::size_t d = 0; d < D; ++d) out[i][h * D + d] += s[j] / z * v[j][h * D + d];
      }
    return linear(out, prefix + "o.weight");
  }
  double act(double x) const {
    const auto& p = c_.feed_forward_proj;
    if (p == "relu" || p == "gated-relu") return std::max(0.0, x);
    if (p == "gated-gelu" || p == "gelu_new") {  // gelu_new: the tanh approximation
      return 0.5 * x * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (x + 0.044715 * x * x * x)));
    }
    if (p == "gelu") return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
    return x / (1 + std::exp(-x));  // silu
  }
  Mat ff(const Mat& x, const std::string& prefix) const {
    const bool gated = c_.feed_forward_proj.rfind("gated-", 0) == 0;
    Mat h = linear(x, prefix + (gated ? "wi_0.weight" : "wi.weight"));
    for (auto& r : h)
      for (auto& v : r) v = act(v);
    if (gated) {
      auto lin = linear(x, prefix + "wi_1.weight");
      for (std::size_t i = 0; i < h.size(); ++i)
        for (std::size_t j = 0; j < h[i].size(); ++j) h[i][j] *= lin[i][j];
    }
    return linear(h, prefix + "wo.weight");
  }

  T5Config c_;
  std::map<std::string, torch::Tensor> w_;
};

// Teacher-forced definition: log_softmax of the cache-free forward over [start] + target.
std::vector<double> teacher_forced(T5& m, const TokenIds& prompt, const TokenIds& target) {
  TokenIds dec = {static_cast<std::int32_t>(m.config().decoder_start_id)};
  dec.insert(dec.end(), target.begin(), target.end());
  auto lp = torch::log_softmax(m.forward(row(prompt), row(dec)).to(torch::kFloat64), -1)[0];
  std::vector<double> out;
  for (std::size_t i = 0; i < target.size(); ++i) out.push_back(lp[static_cast<std::int64_t>(i)][target[i]].item<double>());
  return out;
}

void expect_close(const torch::Tensor& a, const torch::Tensor& b, double tol, const std::string& what) {
  ASSERT_EQ(a.sizes(), b.sizes()) << what;
  EXPECT_LT((a.to(torch::kFloat64) - b.to(torch::kFloat64)).abs().max().item<double>(), tol) << what;
}

}  // namespace

TEST(T5, RelativePositionBucketsMatchHuggingFace) {
  // Expected values: a plain-Python transcription of HF T5Attention._relative_position_bucket
  // (checked to agree with a float32 emulation at every entry), 32 buckets, max_distance 128.
  const std::vector<std::int64_t> rel = {-300, -200, -129, -128, -127, -100, -64, -63, -50, -33, -32, -31, -20, -17, -16, -15, -12,
                                         -9,   -8,   -7,   -5,   -3,   -2,   -1,  0,   1,   2,   3,   5,   7,   8,   9,   12,
                                         15,   16,   17,   20,   31,   32,   33,  50,  63,  64,  65,  100, 127, 128, 129, 200, 300};
  const std::vector<std::int64_t> bidirectional = {15, 15, 15, 15, 15, 15, 14, 13, 13, 12, 12, 11, 10, 10, 10, 9,  9,
                                                   8,  8,  7,  5,  3,  2,  1,  0,  17, 18, 19, 21, 23, 24, 24, 25,
                                                   25, 26, 26, 26, 27, 28, 28, 29, 29, 30, 30, 31, 31, 31, 31, 31, 31};
  const std::vector<std::int64_t> causal = {31, 31, 31, 31, 31, 30, 26, 26, 24, 21, 21, 21, 17, 16, 16, 15, 12,
                                            9,  8,  7,  5,  3,  2,  1,  0,  0,  0,  0,  0,  0,  0,  0,  0,
                                            0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0};
  auto t = torch::tensor(rel);
  auto bi = t5_relative_position_bucket(t, true, 32, 128), uni = t5_relative_position_bucket(t, false, 32, 128);
  for (std::size_t i = 0; i < rel.size(); ++i) {
    EXPECT_EQ(bi[static_cast<std::int64_t>(i)].item<std::int64_t>(), bidirectional[i]) << "bidirectional " << rel[i];
    EXPECT_EQ(uni[static_cast<std::int64_t>(i)].item<std::int64_t>(), causal[i]) << "unidirectional " << rel[i];
    EXPECT_EQ(NaiveT5::bucket(rel[i], true, 32, 128), bidirectional[i]) << rel[i];
    EXPECT_EQ(NaiveT5::bucket(rel[i], false, 32, 128), causal[i]) << rel[i];
  }
  // The tiny test configuration (8 buckets, max_distance 12), relative positions -14..14.
  const std::vector<std::int64_t> small_bi = {3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 1, 0, 5, 6, 6, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7};
  const std::vector<std::int64_t> small_uni = {7, 7, 7, 7, 7, 6, 6, 6, 5, 4, 4, 3, 2, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  auto s = torch::arange(-14, 15, torch::kInt64);
  auto sb = t5_relative_position_bucket(s, true, 8, 12), su = t5_relative_position_bucket(s, false, 8, 12);
  for (std::int64_t i = 0; i < 29; ++i) {
    EXPECT_EQ(sb[i].item<std::int64_t>(), small_bi[static_cast<std::size_t>(i)]) << i - 14;
    EXPECT_EQ(su[i].item<std::int64_t>(), small_uni[static_cast<std::size_t>(i)]) << i - 14;
  }
  // Shape is kept: [2, 3] in, [2, 3] out.
  EXPECT_EQ(t5_relative_position_bucket(torch::zeros({2, 3}, torch::kInt64), true, 32, 128).sizes(), (std::vector<std::int64_t>{2, 3}));
}

TEST(T5, ForwardMatchesNaiveDoubleReference) {
  struct Case {
    std::string proj;
    bool tied;
    std::string model_type;
    std::int64_t decoder_layers;
  };
  const std::vector<Case> cases = {{"relu", true, "t5", 2},        {"relu", false, "t5", 2},      {"gated-gelu", true, "t5", 2},
                                   {"gated-gelu", false, "t5", 3}, {"gated-silu", true, "t5", 2}, {"gated-silu", false, "t5", 2},
                                   {"gelu", true, "t5", 2},        {"gated-gelu", false, "umt5", 2}};
  const TokenIds enc = {4, 9, 2, 11, 7, 3, 12, 5, 1}, dec = {0, 6, 3, 3, 10, 8, 2};
  for (std::size_t ci = 0; ci < cases.size(); ++ci) {
    auto cfg = tiny_t5_config(cases[ci].proj, cases[ci].tied);
    cfg.model_type = cases[ci].model_type;
    cfg.bias_per_layer = cfg.model_type == "umt5";
    cfg.num_decoder_layers = cases[ci].decoder_layers;
    auto m = T5::random(cfg, 100 + ci);
    const std::string what = cases[ci].proj + (cases[ci].tied ? " tied " : " untied ") + cfg.model_type;
    auto ref = NaiveT5(*m).logits(enc, dec);
    auto got = m->forward(row(enc), row(dec))[0];
    ASSERT_EQ(got.size(0), static_cast<std::int64_t>(ref.size()));
    double worst = 0;
    for (std::size_t i = 0; i < ref.size(); ++i)
      for (std::size_t v = 0; v < ref[i].size(); ++v)
        worst = std::max(worst, std::abs(got[static_cast<std::int64_t>(i)][static_cast<std::int64_t>(v)].item<double>() - ref[i][v]));
    EXPECT_LT(worst, 1e-4) << what;
    // Encoder padding: a shorter prompt, right-padded in a batch, gives its unpadded result.
    const TokenIds short_enc(enc.begin(), enc.begin() + 4);
    auto ids = torch::cat({row(enc), torch::cat({row(short_enc), torch::full({1, 5}, 0, torch::kInt64)}, 1)}, 0);
    auto mask = torch::ones({2, 9}, torch::kBool);
    mask[1].narrow(0, 4, 5).fill_(false);
    auto batched = m->forward(ids, torch::cat({row(dec), row(dec)}, 0), mask);
    auto short_ref = NaiveT5(*m).logits(short_enc, dec);
    worst = 0;
    for (std::size_t i = 0; i < short_ref.size(); ++i)
      for (std::size_t v = 0; v < short_ref[i].size(); ++v)
        worst = std::max(worst, std::abs(batched[1][static_cast<std::int64_t>(i)][static_cast<std::int64_t>(v)].item<double>() - short_ref[i][v]));
    EXPECT_LT(worst, 1e-4) << what << " (padded)";
    expect_close(batched[0], got, 1e-5, what + " (batched row 0)");
  }
}

TEST(T5, TiedEmbeddingScalingOnlyWhenTied) {
  auto tied = T5::random(tiny_t5_config("gated-gelu", true), 21);
  auto untied = std::make_shared<T5>(tiny_t5_config("gated-gelu", false), torch::kCPU, torch::kFloat32);
  {
    torch::NoGradGuard g;
    auto src = tied->module().named_parameters();
    for (auto& p : untied->module().named_parameters()) {
      const std::string from = p.key() == "lm_head.weight" ? "shared.weight" : p.key();
      p.value().copy_(*src.find(from));
    }
    untied->module().eval();
  }
  EXPECT_TRUE(tied->module().named_parameters().find("lm_head.weight") == nullptr);
  auto e = row({5, 6, 7, 1}), d = row({0, 3, 4});
  auto a = tied->forward(e, d), b = untied->forward(e, d);
  expect_close(a, b / std::sqrt(8.0), 1e-6, "tied = untied(lm_head = shared) * d_model^-0.5");
  EXPECT_GT((a - b).abs().max().item<double>(), 1e-3);  // and the scaling is not applied when untied
}

TEST(T5, IncrementalDecodingEqualsCacheFree) {
  auto m = T5::random(tiny_t5_config("gated-gelu", false), 31);
  const TokenIds prompt = {3, 8, 2, 9, 1};
  const TokenIds target = {4, 7, 7, 2, 11, 5, 6, 9, 3, 10, 12, 4, 8};  // past max_distance: clamped buckets
  TokenIds dec = {0};
  dec.insert(dec.end(), target.begin(), target.end());
  auto full = m->forward(row(prompt), row(dec))[0];
  torch::Tensor first;
  auto state = m->start({prompt}, first);
  expect_close(first[0], full[0], 1e-5, "start");
  // One token, then a chunk of three, then the rest one by one.
  std::size_t i = 0;
  auto feed = [&](std::size_t n) {
    std::vector<std::int64_t> chunk(target.begin() + static_cast<std::ptrdiff_t>(i), target.begin() + static_cast<std::ptrdiff_t>(i + n));
    auto out = state->step(torch::tensor(chunk).view({1, -1}), torch::ones({1, static_cast<std::int64_t>(n)}, torch::kBool))[0];
    for (std::size_t j = 0; j < n; ++j)
      expect_close(out[static_cast<std::int64_t>(j)], full[static_cast<std::int64_t>(i + j + 1)], 1e-5, "position " + std::to_string(i + j + 1));
    i += n;
  };
  feed(1);
  feed(3);
  while (i < target.size()) feed(1);

  // Right padding in `valid` leaves the valid rows' results (and later steps) unchanged.
  state = m->start({prompt}, first);
  state->select(torch::zeros({2}, torch::kInt64));
  auto out = state->step(torch::tensor({4, 7, 9, 0}).view({2, 2}), torch::tensor({true, true, true, false}).view({2, 2}));
  auto r0 = m->forward(row(prompt), row({0, 4, 7, 5}))[0], r1 = m->forward(row(prompt), row({0, 9, 5}))[0];
  expect_close(out[0], r0.narrow(0, 1, 2), 1e-5, "row 0");
  expect_close(out[1][0], r1[1], 1e-5, "row 1");
  out = state->step(torch::tensor({5, 5}).view({2, 1}), torch::ones({2, 1}, torch::kBool));
  expect_close(out[0][0], r0[3], 1e-5, "row 0 after padding");
  expect_close(out[1][0], r1[2], 1e-5, "row 1 after padding");
  // select reorders every cache (self, cross, masks): swap rows with different prompts.
  std::vector<TokenIds> prompts = {{3, 8, 2, 9, 1}, {6, 1}};
  state = m->start(prompts, first);
  state->select(torch::tensor({1, 0, 1}));
  out = state->step(torch::tensor({4, 4, 2}).view({3, 1}), torch::ones({3, 1}, torch::kBool));
  expect_close(out[0][0], m->forward(row(prompts[1]), row({0, 4}))[0][1], 1e-5, "selected row 0");
  expect_close(out[1][0], m->forward(row(prompts[0]), row({0, 4}))[0][1], 1e-5, "selected row 1");
  expect_close(out[2][0], m->forward(row(prompts[1]), row({0, 2}))[0][1], 1e-5, "selected row 2");
}

TEST(T5, ScoreEqualsTeacherForcedSum) {
  auto m = T5::random(tiny_t5_config(), 3);
  TokenIds prompt = {1, 5, 7, 2, 1};
  std::vector<TokenIds> targets = {{3}, {4, 4, 9}, {10, 0, 1, 2, 3}, {}};
  auto per = score_tokens(*m, prompt, targets);
  std::vector<ScoreItem> items;
  for (auto& t : targets) items.push_back({&prompt, &t});
  auto sums = score(*m, items, {});
  for (std::size_t i = 0; i < targets.size(); ++i) {
    auto ref = teacher_forced(*m, prompt, targets[i]);
    ASSERT_EQ(per[i].size(), ref.size());
    double s = 0;
    for (std::size_t j = 0; j < ref.size(); ++j) {
      EXPECT_NEAR(per[i][j], ref[j], 1e-5) << i << "," << j;
      s += ref[j];
    }
    EXPECT_NEAR(sums[i], s, 1e-4) << i;
  }
  EXPECT_EQ(sums[3], 0.0);
}

TEST(T5, BatchedSharedAndOneByOneAgree) {
  auto m = T5::random(tiny_t5_config("relu", false), 5);
  std::vector<TokenIds> prompts = {{1, 2, 3}, {1}, {4, 5, 6, 7, 8, 9, 10, 11, 12, 1}, {1, 2, 3}};
  std::vector<TokenIds> targets = {{5, 6}, {7}, {8, 9, 10, 1}, {2, 2, 2}, {3}, {6, 5, 4, 3, 2, 1, 0, 12, 11}};
  std::vector<ScoreItem> items;
  for (std::size_t i = 0; i < 12; ++i) items.push_back({&prompts[i % prompts.size()], &targets[i % targets.size()]});
  ScoreOptions shared{true, 32}, naive{false, 32}, single{false, 1}, small_chunks{true, 2};
  auto a = score(*m, items, shared), b = score(*m, items, naive), c = score(*m, items, single), d = score(*m, items, small_chunks);
  for (std::size_t i = 0; i < items.size(); ++i) {
    EXPECT_NEAR(a[i], c[i], 1e-4) << i;
    EXPECT_NEAR(b[i], c[i], 1e-4) << i;
    EXPECT_NEAR(d[i], c[i], 1e-4) << i;
    EXPECT_LT(c[i], 0.0);
    double tf = 0;
    for (double x : teacher_forced(*m, *items[i].prompt, *items[i].target)) tf += x;
    EXPECT_NEAR(c[i], tf, 1e-4) << i;
  }
}

TEST(T5, BatchedGenerationEqualsOneByOne) {
  auto m = T5::random(tiny_t5_config(), 7);
  std::vector<TokenIds> prompts = {{1, 2, 3}, {1}, {4, 5, 6, 7, 8, 9}};
  DecodeOptions o;
  o.max_new_tokens = 8;
  o.eos_ids = {1};
  auto batched = generate(*m, prompts, o);
  std::size_t generated = 0;
  for (auto& b : batched) generated += b.size();
  EXPECT_GE(generated, 6u);  // not vacuous: the rows produce tokens before EOS
  o.batch_size = 1;
  for (std::size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(generate(*m, {prompts[i]}, o)[0], batched[i]) << i;
  // Greedy continuation equals repeated argmax of the cache-free forward.
  for (std::size_t p = 0; p < prompts.size(); ++p) {
    TokenIds dec = {0};
    for (auto tok : batched[p]) {
      EXPECT_EQ(m->forward(row(prompts[p]), row(dec))[0][-1].argmax().item<std::int64_t>(), tok) << p;
      dec.push_back(tok);
    }
    if (batched[p].size() < o.max_new_tokens) {  // stopped at EOS
      EXPECT_EQ(m->forward(row(prompts[p]), row(dec))[0][-1].argmax().item<std::int64_t>(), 1) << p;
    }
  }
}

TEST(T5, BeamSearchWithEnoughBeamsIsExhaustive) {
  auto cfg = tiny_t5_config("gated-silu", true);
  cfg.vocab_size = 5;
  auto m = T5::random(cfg, 11);
  TokenIds prompt = {1, 2, 4};
  const int T = 3;
  std::vector<TokenIds> all;
  for (int a = 0; a < 5; ++a)
    for (int b = 0; b < 5; ++b)
      for (int c = 0; c < 5; ++c) all.push_back({a, b, c});
  std::vector<ScoreItem> items;
  for (auto& s : all) items.push_back({&prompt, &s});
  auto scores = score(*m, items, {});
  auto best = std::max_element(scores.begin(), scores.end()) - scores.begin();
  DecodeOptions o;
  o.max_new_tokens = T;
  o.beams = 25;
  EXPECT_EQ(generate(*m, {prompt}, o)[0], all[static_cast<std::size_t>(best)]);
  o.beams = 4;
  EXPECT_EQ(generate(*m, {prompt}, o)[0].size(), 3u);
}

TEST(T5, SamplingIsSeededAndTinyTopPIsGreedy) {
  auto m = T5::random(tiny_t5_config(), 13);
  std::vector<TokenIds> prompts = {{1, 2, 3}, {4}};
  DecodeOptions o;
  o.max_new_tokens = 12;
  auto greedy = generate(*m, prompts, o);
  o.temperature = 1.0;
  o.seed = 42;
  auto s1 = generate(*m, prompts, o), s2 = generate(*m, prompts, o);
  EXPECT_EQ(s1, s2);
  o.batch_size = 1;
  EXPECT_EQ(generate(*m, {prompts[1]}, o)[0], s1[1]);  // independent of batching
  o.batch_size = 16;
  bool differs = false;
  for (std::uint64_t seed = 43; seed < 48 && !differs; ++seed) {
    o.seed = seed;
    differs = generate(*m, prompts, o) != s1;
  }
  EXPECT_TRUE(differs);
  o.top_p = 1e-9;
  EXPECT_EQ(generate(*m, prompts, o), greedy);
}

TEST(T5, ConfigFromHuggingFaceJson) {
  // The shape of google/flan-t5-small's config.json (sizes shrunk).
  auto c = T5Config::from(ConfigFile::parse(R"({"architectures": ["T5ForConditionalGeneration"], "model_type": "t5",
      "d_ff": 12, "d_kv": 4, "d_model": 8, "decoder_start_token_id": 0, "dense_act_fn": "gelu_new", "eos_token_id": 1,
      "feed_forward_proj": "gated-gelu", "is_gated_act": true, "layer_norm_epsilon": 1e-06, "num_heads": 2,
      "num_layers": 2, "num_decoder_layers": 3, "pad_token_id": 0, "relative_attention_max_distance": 128,
      "relative_attention_num_buckets": 32, "tie_word_embeddings": false, "vocab_size": 13})", "config.json"));
  EXPECT_EQ(c.d_model, 8);
  EXPECT_EQ(c.num_decoder_layers, 3);
  EXPECT_EQ(c.feed_forward_proj, "gated-gelu");
  EXPECT_FALSE(c.tie_embeddings);
  EXPECT_FALSE(c.bias_per_layer);
  EXPECT_EQ(c.eos_ids, (std::vector<std::int64_t>{1}));
  EXPECT_EQ(c.decoder_start_id, 0);
  // T5 v1.0 (t5-small): defaults for the optional keys; num_decoder_layers = num_layers.
  auto v1 = T5Config::from(ConfigFile::parse(R"({"architectures": ["T5WithLMHeadModel"], "d_ff": 12, "d_kv": 4,
      "d_model": 8, "num_heads": 2, "num_layers": 2, "vocab_size": 13, "pad_token_id": 3})", "config.json"));
  EXPECT_EQ(v1.num_decoder_layers, 2);
  EXPECT_EQ(v1.feed_forward_proj, "relu");
  EXPECT_TRUE(v1.tie_embeddings);
  EXPECT_EQ(v1.decoder_start_id, 3);  // defaults to pad_token_id
  EXPECT_EQ(v1.num_buckets, 32);
  EXPECT_EQ(v1.max_distance, 128);
  auto u = T5Config::from(ConfigFile::parse(R"({"model_type": "umt5", "d_ff": 12, "d_kv": 4, "d_model": 8,
      "num_heads": 2, "num_layers": 2, "vocab_size": 13, "feed_forward_proj": "gated-gelu"})", "config.json"));
  EXPECT_TRUE(u.bias_per_layer);
  auto bad = [](const std::string& json) {
    try {
      T5Config::from(ConfigFile::parse(json, "config.json"));
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(bad(R"({"architectures": ["T5EncoderModel"], "model_type": "t5"})").find("config.json: unsupported architecture \"T5EncoderModel\""), std::string::npos);
  EXPECT_NE(bad(R"({"model_type": "bart"})").find("unsupported architecture"), std::string::npos);
  EXPECT_NE(bad(R"({"model_type": "t5", "d_model": 8})").find("config.json: field \"vocab_size\": missing"), std::string::npos);
  EXPECT_NE(bad(R"({"model_type": "t5", "vocab_size": 13, "d_model": 8, "d_kv": 4, "d_ff": 12, "num_heads": 2, "num_layers": 2, "feed_forward_proj": "gated-tanh"})")
                .find("config.json: field \"feed_forward_proj\": unsupported \"gated-tanh\""),
            std::string::npos);
  try {
    T5(tiny_t5_config("swiglu"), torch::kCPU, torch::kFloat32);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("feed_forward_proj \"swiglu\""), std::string::npos) << e.what();
  }
}

TEST(T5, SaveLoadRoundTripAliasesAndShapeErrors) {
  auto dir = fs::temp_directory_path() / ("attune_t5_" + std::to_string(::getpid()));
  auto e = row({2, 9, 4, 1}), d = row({0, 5, 6, 7});
  for (bool tied : {true, false}) {
    auto m = T5::random(tiny_t5_config("gated-gelu", tied), 17);
    fs::remove_all(dir);
    m->save(dir);
    auto back = T5::load(dir, torch::kCPU);
    EXPECT_TRUE(torch::equal(m->forward(e, d), back->forward(e, d))) << tied;
    EXPECT_EQ(back->config().tie_embeddings, tied);
    EXPECT_EQ(back->config().num_buckets, 8);
    EXPECT_EQ(back->config().feed_forward_proj, "gated-gelu");
  }
  // Checkpoints that store the embedding only as encoder.embed_tokens.weight load too, and
  // extra aliases (decoder.embed_tokens, a tied lm_head) are ignored.
  auto m = T5::random(tiny_t5_config("relu", true), 19);
  fs::remove_all(dir);
  m->save(dir);
  std::vector<NamedTensor> renamed;
  for (const auto& p : m->module().named_parameters()) {
    if (p.key() == "shared.weight") {
      renamed.push_back(from_tensor("encoder.embed_tokens.weight", p.value()));
      renamed.push_back(from_tensor("decoder.embed_tokens.weight", p.value()));
      renamed.push_back(from_tensor("lm_head.weight", p.value()));
    } else {
      renamed.push_back(from_tensor(p.key(), p.value()));
    }
  }
  write_safetensors(dir / "model.safetensors", renamed);
  EXPECT_TRUE(torch::equal(m->forward(e, d), T5::load(dir, torch::kCPU)->forward(e, d)));
  // Neither shared.weight nor an alias: the error names the tensor.
  renamed.erase(std::remove_if(renamed.begin(), renamed.end(), [](const NamedTensor& t) { return t.name.find("embed_tokens") != std::string::npos; }),
                renamed.end());
  write_safetensors(dir / "model.safetensors", renamed);
  try {
    T5::load(dir, torch::kCPU);
    FAIL() << "expected a missing-tensor error";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("missing tensor \"shared.weight\""), std::string::npos) << err.what();
  }
  // A shape that disagrees with config.json names the tensor.
  m->save(dir);
  std::ofstream(dir / "config.json") << R"({"model_type": "t5", "vocab_size": 13, "d_model": 8, "d_kv": 4, "d_ff": 10,
      "num_heads": 2, "num_layers": 2, "relative_attention_num_buckets": 8, "relative_attention_max_distance": 12})";
  try {
    T5::load(dir, torch::kCPU);
    FAIL() << "expected a shape error";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("field \"d_ff\": gives 10 but tensor \"encoder.block.0.layer.1.DenseReluDense.wi.weight\" in " + dir.string() + " has shape [12, 8] (expected [10, 8])"),
              std::string::npos)
        << err.what();
  }
  fs::remove_all(dir);
}

TEST(T5, RejectsEmptyAndOutOfVocabularyPrompts) {
  auto m = T5::random(tiny_t5_config(), 23);
  torch::Tensor first;
  EXPECT_THROW(m->start({{}}, first), Error);
  EXPECT_THROW(m->start({{3, 13}}, first), Error);
  EXPECT_THROW(m->start({}, first), Error);
}
