// BERT-family encoder: forward pass against a naive double-precision reimplementation,
// padding invariance, save/load, loader errors; dense and cross-encoder retrievers; the
// retriever registry.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <tuple>

#include "attune/core/error.h"
#include "attune/models/attention_kernel.h"
#include "attune/models/bert.h"
#include "attune/models/bert_native.h"
#include "attune/models/encoder.h"
#include "attune/models/weights.h"
#include "attune/neural/dense.h"
#include "attune/retrieval/retriever.h"
#include "attune/text/subword.h"
#include "tiny_bert.h"

namespace attune {
namespace {

namespace fs = std::filesystem;
using models::BertConfig;
using models::BertModel;
using models::Pooling;
using testing::fresh_dir;
using testing::random_bert;
using testing::tiny_config;

// ---------------------------------------------------------------- naive reference

// One tensor as doubles (row-major) for the loops below.
struct Params {
  std::map<std::string, std::vector<double>> t;
  explicit Params(const torch::nn::Module& m) {
    for (const auto& item : m.named_parameters()) {
      auto c = item.value().detach().to(torch::kFloat64).contiguous();
      t[item.key()] = std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
    }
  }
  const std::vector<double>& operator[](const std::string& k) const { return t.at(k); }
};

using Mat = std::vector<std::vector<double>>;  // [rows][cols]

Mat linear(const Mat& x, const std::vector<double>& W, const std::vector<double>& b, std::size_t out) {
  const std::size_t in = x[0].size();
  Mat y(x.size(), std::vector<double>(out));
  for (std::size_t r = 0; r < x.size(); ++r)
    for (std::size_t o = 0; o < out; ++o) {
      double s = b[o];
      for (std::size_t i = 0; i < in; ++i) s += x[r][i] * W[o * in + i];
      y[r][o] = s;
    }
  return y;
}

void layer_norm(Mat& x, const std::vector<double>& w, const std::vector<double>& b, double eps) {
  for (auto& row : x) {
    double mean = 0, var = 0;
    for (double v : row) mean += v;
    mean /= static_cast<double>(row.size());
    for (double v : row) var += (v - mean) * (v - mean);
    var /= static_cast<double>(row.size());  // biased, as torch LayerNorm
    for (std::size_t h = 0; h < row.size(); ++h) row[h] = (row[h] - mean) / std::sqrt(var + eps) * w[h] + b[h];
  }
}

// Last hidden states of one sequence (positions with mask 0 are not attended to).
Mat naive_forward(const Params& p, const BertConfig& c, const std::vector<int>& ids, const std::vector<int>& types,
                  const std::vector<int>& mask) {
  const std::size_t L = ids.size(), H = static_cast<std::size_t>(c.hidden_size), I = static_cast<std::size_t>(c.intermediate_size);
  const std::size_t heads = static_cast<std::size_t>(c.num_heads), dh = H / heads;
  Mat x(L, std::vector<double>(H));
  for (std::size_t t = 0; t < L; ++t)
    for (std::size_t h = 0; h < H; ++h)
      x[t][h] = p["embeddings.word_embeddings.weight"][ids[t] * H + h] + p["embeddings.position_embeddings.weight"][t * H + h] +
                p["embeddings.token_type_embeddings.weight"][types[t] * H + h];
  layer_norm(x, p["embeddings.LayerNorm.weight"], p["embeddings.LayerNorm.bias"], c.layer_norm_eps);
  for (std::int64_t l = 0; l < c.num_layers; ++l) {
    const std::string pre = "encoder.layer." + std::to_string(l) + ".";
    auto q = linear(x, p[pre + "attention.self.query.weight"], p[pre + "attention.self.query.bias"], H);
    auto k = linear(x, p[pre + "attention.self.key.weight"], p[pre + "attention.self.key.bias"], H);
    auto v = linear(x, p[pre + "attention.self.value.weight"], p[pre + "attention.self.value.bias"], H);
    Mat ctx(L, std::vector<double>(H, 0.0));
    for (std::size_t hd = 0; hd < heads; ++hd)
      for (std::size_t i = 0; i < L; ++i) {
        std::vector<double> s(L, 0.0);
        double mx = -1e300;
        for (std::size_t j = 0; j < L; ++j) {
          if (!mask[j]) continue;
          for (std::size_t d = 0; d < dh; ++d) s[j] += q[i][hd * dh + d] * k[j][hd * dh + d];
          s[j] /= std::sqrt(static_cast<double>(dh));
          mx = std::max(mx, s[j]);
        }
        double z = 0;
        for (std::size_t j = 0; j < L; ++j) z += mask[j] ? std::exp(s[j] - mx) : 0.0;
        for (std::size_t j = 0; j < L; ++j) {
          if (!mask[j]) continue;
          const double a = std::exp(s[j] - mx) / z;
          for (std::size_t d = 0; d < dh; ++d) ctx[i][hd * dh + d] += a * v[j][hd * dh + d];
        }
      }
    auto a = linear(ctx, p[pre + "attention.output.dense.weight"], p[pre + "attention.output.dense.bias"], H);
    for (std::size_t t = 0; t < L; ++t)
      for (std::size_t h = 0; h < H; ++h) a[t][h] += x[t][h];
    layer_norm(a, p[pre + "attention.output.LayerNorm.weight"], p[pre + "attention.output.LayerNorm.bias"], c.layer_norm_eps);
    auto inter = linear(a, p[pre + "intermediate.dense.weight"], p[pre + "intermediate.dense.bias"], I);
    for (auto& row : inter)
      for (double& z : row) z = 0.5 * z * (1.0 + std::erf(z / std::sqrt(2.0)));  // GELU, erf form
    auto o = linear(inter, p[pre + "output.dense.weight"], p[pre + "output.dense.bias"], H);
    for (std::size_t t = 0; t < L; ++t)
      for (std::size_t h = 0; h < H; ++h) o[t][h] += a[t][h];
    layer_norm(o, p[pre + "output.LayerNorm.weight"], p[pre + "output.LayerNorm.bias"], c.layer_norm_eps);
    x = o;
  }
  return x;
}

TEST(BertForward, MatchesNaiveDoubleReferenceWithPaddingAndPooling) {
  const BertConfig c = tiny_config();
  auto m = random_bert(c, /*pooler=*/true, 7);
  const Params p(*m);
  // Three rows of lengths 6, 3 and 5 padded to 6, with segment ids on the first.
  const std::vector<std::vector<int>> ids = {{2, 5, 9, 12, 3, 20}, {2, 7, 3, 0, 0, 0}, {2, 30, 31, 6, 3, 0}};
  const std::vector<std::vector<int>> types = {{0, 0, 0, 0, 1, 1}, {0, 0, 0, 0, 0, 0}, {0, 0, 0, 0, 0, 0}};
  const std::vector<std::vector<int>> mask = {{1, 1, 1, 1, 1, 1}, {1, 1, 1, 0, 0, 0}, {1, 1, 1, 1, 1, 0}};
  auto to_t = [](const std::vector<std::vector<int>>& v) {
    auto t = torch::zeros({static_cast<long>(v.size()), static_cast<long>(v[0].size())}, torch::kInt64);
    for (std::size_t i = 0; i < v.size(); ++i)
      for (std::size_t j = 0; j < v[i].size(); ++j) t[i][j] = v[i][j];
    return t;
  };
  torch::NoGradGuard g;
  const auto T_ids = to_t(ids), T_types = to_t(types), T_mask = to_t(mask);
  auto hidden = m->forward(T_ids, T_types, T_mask);
  auto mean = models::pool_embeddings(hidden, T_mask, Pooling::Mean, false);
  auto cls = models::pool_embeddings(hidden, T_mask, Pooling::Cls, false);
  auto mean_n = models::pool_embeddings(hidden, T_mask, Pooling::Mean, true);
  const auto H = static_cast<std::size_t>(c.hidden_size);
  for (std::size_t r = 0; r < ids.size(); ++r) {
    const Mat ref = naive_forward(p, c, ids[r], types[r], mask[r]);
    std::vector<double> ref_mean(H, 0.0);
    double n = 0, norm = 0;
    for (std::size_t t = 0; t < ids[r].size(); ++t) {
      if (!mask[r][t]) continue;
      n += 1;
      for (std::size_t h = 0; h < H; ++h) {
        EXPECT_NEAR(hidden[r][t][h].item<double>(), ref[t][h], 1e-4) << "row " << r << " token " << t << " dim " << h;
        ref_mean[h] += ref[t][h];
      }
    }
    for (std::size_t h = 0; h < H; ++h) norm += (ref_mean[h] / n) * (ref_mean[h] / n);
    for (std::size_t h = 0; h < H; ++h) {
      EXPECT_NEAR(mean[r][h].item<double>(), ref_mean[h] / n, 1e-4) << "mean row " << r;
      EXPECT_NEAR(cls[r][h].item<double>(), ref[0][h], 1e-4) << "cls row " << r;
      EXPECT_NEAR(mean_n[r][h].item<double>(), ref_mean[h] / n / std::sqrt(norm), 1e-4) << "normalised row " << r;
    }
    // Pooler: tanh(W h_cls + b).
    auto pooled = m->pool(hidden);
    for (std::size_t o = 0; o < H; ++o) {
      double s = p["pooler.dense.bias"][o];
      for (std::size_t i = 0; i < H; ++i) s += p["pooler.dense.weight"][o * H + i] * ref[0][i];
      EXPECT_NEAR(pooled[r][o].item<double>(), std::tanh(s), 1e-4);
    }
  }
}

// The fused CPU attention kernel against softmax(q k^T + mask) v in doubles: head sizes
// below, at and between the 16-float vector width, lengths that are not multiples of 16 or
// of the 4-row block, strided q/k/v as the fused [L, 3H] projection lays them out, padding
// keys masked with -1e9, and no mask.
TEST(FusedAttention, MatchesSoftmaxAttentionInDoubles) {
  torch::manual_seed(3);
  for (std::int64_t d : {4, 16, 32, 40, 64}) {
    for (std::int64_t L : {1, 3, 16, 37, 130}) {
      for (bool masked : {false, true}) {
        const std::int64_t in_stride = 3 * d + 5, out_stride = d + 3;
        auto buf = torch::randn({L, in_stride});
        const float* q = buf.data_ptr<float>();
        const float* k = q + d;
        const float* v = q + 2 * d;
        std::vector<float> mask(static_cast<std::size_t>(L), 0.0f);
        if (masked)
          for (std::int64_t j = 0; j < L; ++j)
            if (j % 3 == 2) mask[static_cast<std::size_t>(j)] = -1e9f;
        std::vector<float> out(static_cast<std::size_t>(L * out_stride), 7.0f);
        const models::AttentionHead shape{L, d, in_stride, out_stride};
        std::vector<float> scratch(models::attention_scratch_floats(shape));
        models::attention_head(q, k, v, masked ? mask.data() : nullptr, out.data(), shape, scratch.data());
        for (std::int64_t i = 0; i < L; ++i) {
          std::vector<double> w(static_cast<std::size_t>(L));
          double mx = -1e300, sum = 0;
          for (std::int64_t j = 0; j < L; ++j) {
            double s = mask[static_cast<std::size_t>(j)];
            for (std::int64_t c = 0; c < d; ++c) s += double(q[i * in_stride + c]) * k[j * in_stride + c];
            w[static_cast<std::size_t>(j)] = s;
            mx = std::max(mx, s);
          }
          for (auto& x : w) sum += (x = std::exp(x - mx));
          for (std::int64_t c = 0; c < out_stride; ++c) {
            const float got = out[static_cast<std::size_t>(i * out_stride + c)];
            if (c >= d) {
              EXPECT_EQ(got, 7.0f) << "wrote past the head, d " << d << " L " << L;
              continue;
            }
            double ref = 0;
            for (std::int64_t j = 0; j < L; ++j) ref += w[static_cast<std::size_t>(j)] / sum * v[j * in_stride + c];
            ASSERT_NEAR(got, ref, 2e-5 * (1 + std::abs(ref))) << "d " << d << " L " << L << " masked " << masked << " row " << i << " col " << c;
          }
        }
      }
    }
  }
}

// The vectorized GELUs against their definitions in doubles, over [-12, 12] and on lengths
// that leave a tail after the 16-float vectors; infinities and large values saturate.
TEST(FusedAttention, VectorizedGeluMatchesItsDefinitionInDoubles) {
  for (std::int64_t n : {1, 15, 16, 17, 4001}) {
    std::vector<float> x(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) x[static_cast<std::size_t>(i)] = n == 1 ? 0.7f : -12.0f + 24.0f * static_cast<float>(i) / static_cast<float>(n - 1);
    auto e = x, t = x;
    models::gelu_erf(e.data(), n);
    models::gelu_tanh(t.data(), n);
    for (std::size_t i = 0; i < x.size(); ++i) {
      const double v = x[i];
      const double want_e = 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
      const double want_t = 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
      EXPECT_NEAR(e[i], want_e, 2e-6 * std::max(1.0, std::abs(v))) << "erf form at " << v;
      EXPECT_NEAR(t[i], want_t, 2e-6 * std::max(1.0, std::abs(v))) << "tanh form at " << v;
    }
  }
  std::vector<float> big = {1e30f, -1e30f, INFINITY};
  auto big_t = big;
  models::gelu_erf(big.data(), 3);
  models::gelu_tanh(big_t.data(), 3);
  EXPECT_EQ(big[0], 1e30f);
  EXPECT_EQ(big[1], 0.0f);
  EXPECT_EQ(big[2], INFINITY);
  EXPECT_EQ(big_t[0], 1e30f);
  EXPECT_EQ(big_t[1], 0.0f);
}

// Inference (no grad) takes the fused kernel, training the torch ops; both give the same
// hidden states, padding included.
TEST(FusedAttention, BertForwardWithoutGradMatchesTheTorchPath) {
  for (auto [hidden, heads] : {std::pair<std::int64_t, std::int64_t>{8, 2}, {64, 2}, {64, 4}}) {
    auto c = tiny_config();
    c.hidden_size = hidden, c.num_heads = heads, c.intermediate_size = 2 * hidden;
    auto m = random_bert(c, false, 11);
    auto ids = torch::randint(5, c.vocab_size, {3, 21}, torch::kInt64), types = torch::zeros({3, 21}, torch::kInt64);
    auto mask = torch::ones({3, 21}, torch::kInt64);
    mask.index_put_({1, torch::indexing::Slice(9)}, 0);
    mask.index_put_({2, torch::indexing::Slice(20)}, 0);
    torch::Tensor fused;
    {
      torch::NoGradGuard g;
      fused = m->forward(ids, types, mask);
    }
    auto reference = m->forward(ids, types, mask);
    ASSERT_TRUE(reference.requires_grad());  // the torch path, with autograd
    EXPECT_LT((fused - reference.detach()).abs().max().item<float>(), 1e-5) << "hidden " << hidden << " heads " << heads;
  }
}

// The Error `fn` throws names every one of `parts`.
template <class E = Error>
void expect_thrown_naming(const std::function<void()>& fn, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "no error";
  } catch (const E& e) {
    for (const auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what() << " lacks " << p;
  }
}

// The encoders' CPU inference path (models/bert_native.h) computes BertModel's graph without
// torch operators: the same hidden states to float32 rounding, padding included, for each
// activation; the first-token-only last layer gives the first rows; the pooler matches; the
// thread count does not change a bit; bad ids are refused.
TEST(BertNative, MatchesTheTorchForwardForEachActivationWithPadding) {
  for (const char* act : {"gelu", "gelu_new", "relu"})
    for (auto [hidden, heads, layers] : {std::tuple<std::int64_t, std::int64_t, std::int64_t>{8, 2, 2}, {64, 4, 3}, {32, 1, 1}}) {
      auto c = tiny_config();
      c.hidden_size = hidden, c.num_heads = heads, c.num_layers = layers, c.intermediate_size = 3 * hidden, c.hidden_act = act;
      auto m = random_bert(c, /*pooler=*/true, 21);
      const models::BertNative native(models::bert_native_weights(m));
      torch::manual_seed(22);
      const std::int64_t B = 3, L = 19;
      auto ids = torch::randint(0, c.vocab_size, {B, L}, torch::kInt64), types = torch::randint(0, 2, {B, L}, torch::kInt64);
      auto mask = torch::ones({B, L}, torch::kInt64);
      mask.index_put_({1, torch::indexing::Slice(7)}, 0);
      mask.index_put_({2, torch::indexing::Slice(18)}, 0);
      torch::NoGradGuard g;
      const auto ref = m->forward(ids, types, mask).contiguous();
      const std::string where = std::string(act) + " hidden " + std::to_string(hidden) + " layers " + std::to_string(layers);
      std::vector<float> full, first, again;
      native.forward(ids.data_ptr<std::int64_t>(), types.data_ptr<std::int64_t>(), mask.data_ptr<std::int64_t>(), B, L, false, full, 1);
      ASSERT_EQ(full.size(), static_cast<std::size_t>(B * L * hidden));
      const auto got = torch::from_blob(full.data(), {B, L, hidden}, torch::kFloat32);
      EXPECT_LT((got - ref).abs().max().item<float>(), 2e-5) << where;
      native.forward(ids.data_ptr<std::int64_t>(), types.data_ptr<std::int64_t>(), mask.data_ptr<std::int64_t>(), B, L, true, first, 1);
      ASSERT_EQ(first.size(), static_cast<std::size_t>(B * hidden));
      const auto cls = torch::from_blob(first.data(), {B, hidden}, torch::kFloat32);
      EXPECT_LT((cls - ref.select(1, 0)).abs().max().item<float>(), 2e-5) << where;
      std::vector<float> pooled;
      native.pool(first.data(), B, pooled);
      const auto pool_ref = m->pool(ref);
      EXPECT_LT((torch::from_blob(pooled.data(), {B, hidden}, torch::kFloat32) - pool_ref).abs().max().item<float>(), 2e-5) << where;
      // More threads, the same bits.
      native.forward(ids.data_ptr<std::int64_t>(), types.data_ptr<std::int64_t>(), mask.data_ptr<std::int64_t>(), B, L, false, again, 2);
      EXPECT_EQ(again, full) << where;
    }
  auto c = tiny_config();
  const models::BertNative native(models::bert_native_weights(random_bert(c, false, 23)));
  std::vector<std::int64_t> ids = {2, 5, 3}, types = {0, 0, 0}, mask = {1, 1, 1};
  std::vector<float> out;
  ids[1] = c.vocab_size;
  expect_thrown_naming([&] { native.forward(ids.data(), types.data(), mask.data(), 1, 3, false, out, 1); },
                       {"token id " + std::to_string(c.vocab_size), "outside the vocabulary"});
  ids[1] = 5, types[2] = 2;
  expect_thrown_naming([&] { native.forward(ids.data(), types.data(), mask.data(), 1, 3, false, out, 1); },
                       {"token type 2", "type_vocab_size"});
  std::vector<std::int64_t> longer(static_cast<std::size_t>(c.max_positions + 1), 5), zeros(longer.size(), 0), ones(longer.size(), 1);
  expect_thrown_naming([&] { native.forward(longer.data(), zeros.data(), ones.data(), 1, c.max_positions + 1, false, out, 1); },
                       {"max_position_embeddings"});
  expect_thrown_naming([&] { native.pool(out.data(), 0, out); }, {"no pooler"});
}

// TextEncoder and CrossEncoder take the native path on the CPU; ATTUNE_ENCODER_KERNEL=torch
// takes torch's operators. Both give the same embeddings and scores; a bad value is refused.
TEST(BertNative, TheEncodersGiveTheSameOutputsOnEitherKernel) {
  const auto dir = fresh_dir("bert_kernels");
  testing::write_tiny_encoder(dir, Pooling::Mean, true);
  models::EncoderOptions eo;
  eo.device = "cpu";
  eo.batch_size = 3;
  const std::vector<std::string> texts = {"the red dog ran fast on the big green river stone", "the cat sat", "a small car",
                                          "debian package library kernel network server client file system", "python"};
  const auto native = models::TextEncoder::load(dir, eo)->embed(texts);
  ::setenv("ATTUNE_ENCODER_KERNEL", "torch", 1);
  const auto torch_ops = models::TextEncoder::load(dir, eo)->embed(texts);
  ::setenv("ATTUNE_ENCODER_KERNEL", "fast", 1);
  expect_thrown_naming<UsageError>([&] { models::TextEncoder::load(dir, eo); }, {"ATTUNE_ENCODER_KERNEL=fast", "native or torch"});
  ::unsetenv("ATTUNE_ENCODER_KERNEL");
  ASSERT_EQ(native.size(), torch_ops.size());
  for (std::size_t i = 0; i < native.size(); ++i) EXPECT_NEAR(native[i], torch_ops[i], 1e-5) << i;
  // CLS pooling takes the first-token-only last layer.
  const auto cls_dir = fresh_dir("bert_kernels_cls");
  testing::write_tiny_encoder(cls_dir, Pooling::Cls, false);
  const auto cls_native = models::TextEncoder::load(cls_dir, eo)->embed(texts);
  ::setenv("ATTUNE_ENCODER_KERNEL", "torch", 1);
  const auto cls_torch = models::TextEncoder::load(cls_dir, eo)->embed(texts);
  ::unsetenv("ATTUNE_ENCODER_KERNEL");
  for (std::size_t i = 0; i < cls_native.size(); ++i) EXPECT_NEAR(cls_native[i], cls_torch[i], 1e-5) << i;
  fs::remove_all(dir);
  fs::remove_all(cls_dir);
}

TEST(BertForward, ParameterNamesAreHuggingFaceNames) {
  auto m = random_bert(tiny_config(), true, 1);
  std::set<std::string> names;
  for (const auto& item : m->named_parameters()) names.insert(item.key());
  for (const char* n : {"embeddings.word_embeddings.weight", "embeddings.position_embeddings.weight",
                        "embeddings.token_type_embeddings.weight", "embeddings.LayerNorm.weight", "embeddings.LayerNorm.bias",
                        "encoder.layer.0.attention.self.query.weight", "encoder.layer.1.attention.self.value.bias",
                        "encoder.layer.0.attention.output.dense.weight", "encoder.layer.0.attention.output.LayerNorm.bias",
                        "encoder.layer.1.intermediate.dense.weight", "encoder.layer.1.output.dense.bias",
                        "encoder.layer.1.output.LayerNorm.weight", "pooler.dense.weight"})
    EXPECT_TRUE(names.count(n)) << n;
  EXPECT_EQ(names.size(), 5u + 2u * 16u + 2u);
}

// ---------------------------------------------------------------- facade, save / load

TEST(TextEncoder, EmbeddingDoesNotDependOnBatchPartners) {
  const auto dir = fresh_dir("bert_pad");
  testing::write_tiny_encoder(dir, Pooling::Mean, false);
  models::EncoderOptions eo;
  eo.device = "cpu";
  eo.batch_size = 8;
  auto enc = models::TextEncoder::load(dir, eo);
  ASSERT_EQ(enc->dim(), 8u);
  const std::vector<std::string> alone = {"the cat sat"};
  const std::vector<std::string> mixed = {"the red dog ran fast on the big green river stone", "the cat sat",
                                          "a small car", "debian package library kernel network server client file system"};
  const auto a = enc->embed(alone), b = enc->embed(mixed);
  for (std::size_t h = 0; h < 8; ++h) EXPECT_NEAR(a[h], b[8 + h], 1e-5) << h;
  // Batch size 1 (no padding at all) agrees too, for every text.
  eo.batch_size = 1;
  auto one = models::TextEncoder::load(dir, eo)->embed(mixed);
  for (std::size_t i = 0; i < b.size(); ++i) EXPECT_NEAR(one[i], b[i], 1e-5) << i;
  fs::remove_all(dir);
}

TEST(TextEncoder, SaveLoadRoundTripGivesIdenticalOutputs) {
  const auto dir = fresh_dir("bert_rt");
  testing::write_tiny_vocab(dir);
  auto m = random_bert(tiny_config(), false, 3);
  models::SaveBertOptions so;
  so.pooling = Pooling::Cls;
  so.normalize = true;
  so.max_seq_length = 16;
  so.attune_metadata = {{"seed", 3}};
  models::save_bert(m, dir, so);
  for (const char* f : {"config.json", "model.safetensors", "vocab.txt", "modules.json", "1_Pooling/config.json",
                        "sentence_bert_config.json", "attune_train.json"})
    EXPECT_TRUE(fs::exists(dir / f)) << f;
  const auto spec = models::read_pooling_spec(dir);
  EXPECT_EQ(spec.pooling, Pooling::Cls);
  EXPECT_TRUE(spec.normalize);
  EXPECT_EQ(spec.max_seq_length, 16u);

  auto loaded = models::load_bert(dir, torch::Device(torch::kCPU));
  torch::NoGradGuard g;
  auto ids = torch::tensor({{2, 5, 6, 7, 3}, {2, 9, 3, 0, 0}}, torch::kInt64);
  auto mask = torch::tensor({{1, 1, 1, 1, 1}, {1, 1, 1, 0, 0}}, torch::kInt64);
  auto types = torch::zeros_like(ids);
  EXPECT_TRUE(torch::equal(m->forward(ids, types, mask), loaded.model->forward(ids, types, mask)));

  // The facade follows the folder: CLS pooling, normalised.
  models::EncoderOptions eo;
  eo.device = "cpu";
  auto enc = models::TextEncoder::load(dir, eo);
  const std::vector<std::string> t = {"the cat sat"};  // [CLS] the cat sat [SEP] = 2 5 6 7 3
  auto e = enc->embed(t);
  auto ref = models::pool_embeddings(m->forward(ids.narrow(0, 0, 1), types.narrow(0, 0, 1), mask.narrow(0, 0, 1)),
                                     mask.narrow(0, 0, 1), Pooling::Cls, true);
  for (std::size_t h = 0; h < 8; ++h) EXPECT_NEAR(e[h], ref[0][h].item<float>(), 1e-6);
  fs::remove_all(dir);
}

void expect_error_containing(const std::function<void()>& fn, const std::vector<std::string>& parts) {
  try {
    fn();
    FAIL() << "no error";
  } catch (const Error& e) {
    for (const auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what() << " lacks " << p;
  }
}

void write_config(const fs::path& dir, nlohmann::json j) {
  std::ofstream(dir / "config.json") << j.dump();
}

TEST(LoadBert, ErrorsNameTheFileAndTensorOrKey) {
  const auto dir = fresh_dir("bert_err");
  testing::write_tiny_encoder(dir, Pooling::Mean, false);
  auto cfg = tiny_config().to_json();
  // A third layer in config.json that the weights do not have.
  auto more = cfg;
  more["num_hidden_layers"] = 3;
  write_config(dir, more);
  expect_error_containing([&] { models::load_bert(dir, torch::Device(torch::kCPU)); },
                          {dir.string(), "missing tensor", "encoder.layer.2.attention.self.query.weight"});
  // An absurd layer count is refused from the weights' header, before any allocation.
  auto huge = cfg;
  huge["num_hidden_layers"] = 1000000;
  write_config(dir, huge);
  expect_error_containing([&] { models::load_bert(dir, torch::Device(torch::kCPU)); },
                          {"config.json", "\"num_hidden_layers\": 1000000 layers", "holds 2"});
  // A wider feed-forward than the weights.
  auto wide = cfg;
  wide["intermediate_size"] = 20;
  write_config(dir, wide);
  expect_error_containing([&] { models::load_bert(dir, torch::Device(torch::kCPU)); },
                          {dir.string(), "encoder.layer.0.intermediate.dense.weight", "shape [16, 8]", "[20, 8]"});
  auto other = cfg;
  other["model_type"] = "gpt2";
  write_config(dir, other);
  expect_error_containing([&] { models::load_bert(dir, torch::Device(torch::kCPU)); }, {"config.json", "model_type", "gpt2"});
  auto act = cfg;
  act["hidden_act"] = "swish";
  write_config(dir, act);
  expect_error_containing([&] { models::load_bert(dir, torch::Device(torch::kCPU)); }, {"config.json", "hidden_act", "swish"});
  cfg.erase("hidden_size");
  write_config(dir, cfg);
  expect_error_containing([&] { models::load_bert(dir, torch::Device(torch::kCPU)); }, {"config.json", "hidden_size"});
  fs::remove_all(dir);
}

// ---------------------------------------------------------------- cross-encoder

// BertForSequenceClassification folder: "bert."-prefixed encoder + pooler, classifier.*.
void write_cross_encoder(const fs::path& dir, BertModel& m, torch::nn::Linear& head) {
  testing::write_tiny_vocab(dir);
  std::vector<models::NamedTensor> ts;
  for (const auto& item : m->named_parameters()) ts.push_back(models::from_tensor("bert." + item.key(), item.value()));
  ts.push_back(models::from_tensor("classifier.weight", head->weight));
  ts.push_back(models::from_tensor("classifier.bias", head->bias));
  models::write_safetensors(dir / "model.safetensors", ts);
  auto j = tiny_config().to_json();
  j["architectures"] = {"BertForSequenceClassification"};
  j["num_labels"] = head->weight.size(0);
  write_config(dir, j);
}

// Both kernels score alike, with one label (the logit) and two (log p(last label)).
TEST(CrossEncoder, TheNativeAndTorchKernelsScoreAlike) {
  for (std::int64_t labels : {1, 2}) {
    const auto dir = fresh_dir("bert_cross_kernels");
    auto m = random_bert(tiny_config(), true, 31);
    torch::manual_seed(32);
    torch::nn::Linear head(8, labels);
    write_cross_encoder(dir, m, head);
    models::EncoderOptions eo;
    eo.device = "cpu";
    eo.batch_size = 2;
    const std::vector<std::string> docs = {"the cat sat on the mat", "a red car", "dog", "big green tree house", "python file system"};
    const auto native = models::CrossEncoder::load(dir, eo)->score("the cat ran", docs);
    ::setenv("ATTUNE_ENCODER_KERNEL", "torch", 1);
    const auto torch_ops = models::CrossEncoder::load(dir, eo)->score("the cat ran", docs);
    ::unsetenv("ATTUNE_ENCODER_KERNEL");
    ASSERT_EQ(native.size(), docs.size());
    for (std::size_t i = 0; i < docs.size(); ++i) EXPECT_NEAR(native[i], torch_ops[i], 1e-5) << labels << " labels, doc " << i;
    if (labels == 2) {
      for (float v : native) EXPECT_LT(v, 0.0f);  // a log probability
    }
    fs::remove_all(dir);
  }
}

TEST(CrossEncoder, ScoresAreTheClassifierOnThePooledPairAndTheRerankerOrdersByThem) {
  const auto dir = fresh_dir("bert_cross");
  auto m = random_bert(tiny_config(), true, 11);
  torch::manual_seed(12);
  torch::nn::Linear head(8, 1);
  write_cross_encoder(dir, m, head);
  models::EncoderOptions eo;
  eo.device = "cpu";
  eo.batch_size = 2;
  auto ce = models::CrossEncoder::load(dir, eo);
  const std::vector<std::string> docs = {"the cat sat on the mat", "a red car", "dog", "big green tree house", "python file system"};
  const auto s = ce->score("the cat", docs);
  ASSERT_EQ(s.size(), docs.size());
  // Reference: [CLS] the cat [SEP] doc [SEP] with segment 1 on the document, one pair at a time.
  auto tok = text::SubwordTokenizer::load(dir);
  torch::NoGradGuard g;
  for (std::size_t i = 0; i < docs.size(); ++i) {
    auto enc = tok->encode_pair("the cat", docs[i]);
    auto ids = torch::tensor(std::vector<std::int64_t>(enc.ids.begin(), enc.ids.end())).unsqueeze(0);
    auto types = torch::tensor(std::vector<std::int64_t>(enc.type_ids.begin(), enc.type_ids.end())).unsqueeze(0);
    EXPECT_EQ(types[0][-1].item<std::int64_t>(), 1);
    auto ref = head(m->pool(m->forward(ids, types, torch::ones_like(ids))));
    EXPECT_NEAR(s[i], ref[0][0].item<float>(), 1e-5) << i;
  }
  neural::CrossEncoderRetriever r(ce);
  std::vector<Document> cands;
  for (std::size_t i = 0; i < docs.size(); ++i) cands.push_back({"d" + std::to_string(i), "u", docs[i], {}, {}});
  auto ranking = r.rank({"q", "u", "the cat"}, cands, 0);
  ASSERT_EQ(ranking.size(), docs.size());
  for (std::size_t j = 1; j < ranking.size(); ++j) EXPECT_GE(s[ranking.indices[j - 1]], s[ranking.indices[j]]);
  for (std::size_t j = 0; j < ranking.size(); ++j) EXPECT_FLOAT_EQ(ranking.scores[j], s[ranking.indices[j]]);
  fs::remove_all(dir);
}

TEST(CrossEncoder, APlainBertModelIsRejectedNamingTheConfig) {
  const auto dir = fresh_dir("bert_cross_err");
  testing::write_tiny_encoder(dir, Pooling::Mean, false);
  expect_error_containing([&] { models::CrossEncoder::load(dir, {"cpu"}); }, {"config.json", "BertForSequenceClassification"});
  fs::remove_all(dir);
}

// ---------------------------------------------------------------- dense retriever, registry

TEST(Registry, DenseIsAUsageErrorUntilRegisteredThenBuilds) {
  const auto dir = fresh_dir("bert_registry");
  testing::write_tiny_encoder(dir, Pooling::Mean, true);
  // gtest_discover_tests runs each test in its own process, and this test comes first in
  // the file, so nothing has registered the neural kinds yet.
  EXPECT_THROW(retrieval::make_retriever("dense:" + dir.string(), 0), UsageError);
  neural::register_retrievers();
  auto r = retrieval::make_retriever("dense:" + dir.string(), 0);
  EXPECT_EQ(r->name(), "dense:" + dir.string());
  auto fused = retrieval::make_retriever("rrf(bm25,dense:" + dir.string() + ")", 0);
  EXPECT_NE(fused->name().find("dense:"), std::string::npos);
  EXPECT_THROW(retrieval::make_retriever("dense:" + (dir / "nope").string(), 0), Error);
  fs::remove_all(dir);
}

TEST(DenseRetriever, RanksAnExactDuplicateFirstAndEmbedsEachTextOnce) {
  const auto dir = fresh_dir("bert_dense");
  testing::write_tiny_encoder(dir, Pooling::Mean, /*normalize=*/true, 5);
  models::EncoderOptions eo;
  eo.device = "cpu";
  neural::DenseRetriever r(models::TextEncoder::load(dir, eo));
  const std::vector<std::string> texts = {"the red dog ran fast", "a small car on the river", "debian kernel network server",
                                          "the big green tree", "python file system library", "blue apple"};
  std::vector<Document> cands;
  for (std::size_t i = 0; i < texts.size(); ++i) cands.push_back({"d" + std::to_string(i), "u", texts[i], {}, {}});
  for (std::size_t target = 0; target < texts.size(); ++target) {
    auto ranking = r.rank({"q" + std::to_string(target), "u", texts[target]}, cands, 3);
    ASSERT_EQ(ranking.size(), 3u);
    EXPECT_EQ(ranking.indices[0], target);
    EXPECT_NEAR(ranking.scores[0], 1.0, 1e-5);  // cosine of a text with itself
  }
  EXPECT_EQ(r.cached(), texts.size());  // six queries, each text embedded once
  // Another user's documents with the same texts are not served from u's entries (no
  // cross-user timing or collision channel); each user's own repeats still hit the cache.
  std::vector<Document> theirs;
  for (std::size_t i = 0; i < texts.size(); ++i) theirs.push_back({"e" + std::to_string(i), "v", texts[i], {}, {}});
  const auto mine = r.rank({"qv", "v", texts[0]}, theirs, 3);
  EXPECT_EQ(r.cached(), 2 * texts.size());
  EXPECT_EQ(mine.indices, (r.rank({"qu", "u", texts[0]}, cands, 3).indices));  // same vectors, same order
  r.rank({"qv2", "v", texts[1]}, theirs, 3);
  EXPECT_EQ(r.cached(), 2 * texts.size());
  EXPECT_NE(neural::text_key("a"), neural::text_key("b"));
  EXPECT_EQ(neural::text_key("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  fs::remove_all(dir);
}

// --document-dates (paper 000's ROPG reads "text date: DATE"): a folder that records it is
// read that way by dense:DIR; a document without a date is refused, not read without one.
TEST(DenseRetriever, AFolderTrainedWithDocumentDatesReadsEachDocumentWithItsDate) {
  Document d{"d1", "u", "fix the parser", {}, std::string("2021-03-04")};
  EXPECT_EQ(retrieval::dated_text(d, d.text), "fix the parser date: 2021-03-04");
  Document undated{"d2", "u", "fix the pager", {}, std::nullopt};
  EXPECT_THROW(retrieval::dated_text(undated, undated.text), UsageError);

  const auto dir = fresh_dir("bert_dense_dates");
  testing::write_tiny_encoder(dir, Pooling::Mean, /*normalize=*/true, 5);
  models::EncoderOptions eo;
  eo.device = "cpu";
  // The query is document a's text: plain, a is its exact duplicate (cosine 1); dated, a is
  // read with its date and is not, and the dated scores are those of the dated texts
  // ranked as plain documents.
  std::vector<Document> same = {{"a", "u", "the red dog ran fast", {}, std::string("2001-01-01")},
                                {"b", "u", "blue apple tree", {}, std::string("2024-12-31")}};
  const retrieval::Query q{"q", "u", "the red dog ran fast"};
  neural::DenseRetriever plain(models::TextEncoder::load(dir, eo)), dated(models::TextEncoder::load(dir, eo), true);
  const auto p = plain.rank(q, same, 2), t = dated.rank(q, same, 2);
  ASSERT_EQ(p.indices[0], 0u);
  EXPECT_NEAR(p.scores[0], 1.0, 1e-5);
  EXPECT_LT(t.scores[std::find(t.indices.begin(), t.indices.end(), 0u) - t.indices.begin()], 1.0 - 1e-4);
  std::vector<Document> spelled = same;
  for (auto& s : spelled) s.text = retrieval::dated_text(s, s.text);
  const auto want = plain.rank(q, spelled, 2);
  EXPECT_EQ(t.indices, want.indices);
  for (std::size_t i = 0; i < 2; ++i) EXPECT_NEAR(t.scores[i], want.scores[i], 1e-6);
  same.push_back(undated);
  EXPECT_THROW(dated.rank(q, same, 2), UsageError);
  EXPECT_NO_THROW(plain.rank(q, same, 2));
  // dense:DIR reads the marker of a trained folder.
  neural::register_retrievers();
  same.pop_back();
  const auto before = retrieval::make_retriever("dense:" + dir.string(), 0)->rank(q, same, 2);
  EXPECT_NEAR(before.scores[0], 1.0, 1e-5);  // no marker: plain
  std::ofstream(dir / "attune_model.json") << R"({"kind": "dense", "document_dates": true})";
  const auto after = retrieval::make_retriever("dense:" + dir.string(), 0)->rank(q, same, 2);
  EXPECT_EQ(after.indices, want.indices);
  for (std::size_t i = 0; i < 2; ++i) EXPECT_NEAR(after.scores[i], want.scores[i], 1e-6);

  // --document-fields: a profile item's fields (commit_area's tag), in the order named; the
  // date is the field `date`. A document without one is refused.
  for (auto& s : same) s.fields["tag"] = s.id == "a" ? "net" : "core";
  EXPECT_EQ(retrieval::fielded_text(same[0], same[0].text, {"tag", "date"}), "the red dog ran fast tag: net date: 2001-01-01");
  EXPECT_EQ(retrieval::fielded_text(same[0], same[0].text, {"date"}), retrieval::dated_text(same[0], same[0].text));
  EXPECT_EQ(retrieval::fielded_text(same[0], same[0].text, {}), same[0].text);
  try {
    (void)retrieval::fielded_text(undated, undated.text, {"tag"});
    ADD_FAILURE() << "a document without the field was read without it";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("has no field \"tag\""), std::string::npos) << e.what();
  }
  std::vector<Document> tagged = same;
  for (auto& s : tagged) s.text = retrieval::fielded_text(s, s.text, {"tag"});
  const auto want_tag = plain.rank(q, tagged, 2);
  std::ofstream(dir / "attune_model.json") << R"({"kind": "dense", "document_fields": ["tag"]})";
  const auto by_tag = retrieval::make_retriever("dense:" + dir.string(), 0)->rank(q, same, 2);
  EXPECT_EQ(by_tag.indices, want_tag.indices);
  for (std::size_t i = 0; i < 2; ++i) EXPECT_NEAR(by_tag.scores[i], want_tag.scores[i], 1e-6);
  EXPECT_GT(std::abs(by_tag.scores[0] - after.scores[0]) + std::abs(by_tag.scores[1] - after.scores[1]), 1e-4)
      << "the tag was not read";
  std::ofstream(dir / "attune_model.json") << R"({"kind": "dense", "document_fields": "tag"})";
  EXPECT_THROW(retrieval::make_retriever("dense:" + dir.string(), 0), Error);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace attune
