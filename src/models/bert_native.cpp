#include "attune/models/bert_native.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "attune/core/error.h"
#include "attune/core/parallel.h"
#include "attune/models/attention_kernel.h"

namespace attune::models {

namespace {

using Act = BertNativeWeights::Activation;

// y[M, N] += x[M, K] W[N, K]^T (W row-major as torch's Linear keeps it).
void gemm_acc(const float* x, std::int64_t M, std::int64_t K, const float* W, std::int64_t N, float* y) {
  if (M == 0) return;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(M), static_cast<int>(N), static_cast<int>(K), 1.0f, x,
              static_cast<int>(K), W, static_cast<int>(K), 1.0f, y, static_cast<int>(N));
}

// Runs fn(lo, hi) over [0, rows) in up to `threads` contiguous chunks (inline for one).
template <class Fn>
void for_rows(std::int64_t rows, std::size_t threads, Fn&& fn) {
  // Below this many rows a second thread costs more than it saves.
  constexpr std::int64_t kMinRowsPerThread = 64;
  const auto chunks = static_cast<std::size_t>(
      std::clamp<std::int64_t>(rows / kMinRowsPerThread, 1, static_cast<std::int64_t>(std::max<std::size_t>(threads, 1))));
  if (chunks <= 1) {
    fn(std::int64_t{0}, rows);
    return;
  }
  const auto n = static_cast<std::int64_t>(chunks);
  parallel_for(chunks, chunks, [&](std::size_t c) {
    const auto i = static_cast<std::int64_t>(c);
    fn(rows * i / n, rows * (i + 1) / n);
  });
}

// Each row of y [rows, N] set to b [N] (plus src's row when given).
void set_rows(float* y, std::int64_t rows, const float* b, std::int64_t N, const float* src = nullptr) {
  for (std::int64_t r = 0; r < rows; ++r) {
    float* out = y + r * N;
    if (src) {
      const float* s = src + r * N;
      for (std::int64_t j = 0; j < N; ++j) out[j] = s[j] + b[j];
    } else {
      std::copy(b, b + N, out);
    }
  }
}

void layer_norm(float* x, std::int64_t lo, std::int64_t hi, std::int64_t H, const float* gamma, const float* beta, float eps) {
  for (std::int64_t r = lo; r < hi; ++r) {
    float* v = x + r * H;
    double sum = 0;
    for (std::int64_t j = 0; j < H; ++j) sum += v[j];
    const double mean = sum / static_cast<double>(H);
    double sq = 0;
    for (std::int64_t j = 0; j < H; ++j) sq += (v[j] - mean) * (v[j] - mean);
    const auto inv = static_cast<float>(1.0 / std::sqrt(sq / static_cast<double>(H) + static_cast<double>(eps)));
    const auto m = static_cast<float>(mean);
    for (std::int64_t j = 0; j < H; ++j) v[j] = (v[j] - m) * inv * gamma[j] + beta[j];
  }
}

void activate(float* x, std::int64_t n, Act act) {
  switch (act) {
    case Act::Gelu: gelu_erf(x, n); break;
    case Act::GeluTanh: gelu_tanh(x, n); break;
    case Act::Relu:
      for (std::int64_t i = 0; i < n; ++i) x[i] = std::max(x[i], 0.0f);
      break;
  }
}

// Attention of one query row over L keys (the last layer when only the first state is
// wanted): out[d] = softmax(q . k_j + mask_j) v_j. q is already scaled.
void attention_row(const float* q, const float* k, const float* v, const float* mask, std::int64_t L, std::int64_t d,
                   std::int64_t stride, float* out, float* p) {
  float top = -INFINITY;
  for (std::int64_t j = 0; j < L; ++j) {
    float s = 0;
    const float* kj = k + j * stride;
    for (std::int64_t t = 0; t < d; ++t) s += q[t] * kj[t];
    p[j] = s + mask[j];
    top = std::max(top, p[j]);
  }
  float total = 0;
  for (std::int64_t j = 0; j < L; ++j) total += (p[j] = std::exp(p[j] - top));
  std::fill(out, out + d, 0.0f);
  for (std::int64_t j = 0; j < L; ++j) {
    const float w = p[j] / total;
    const float* vj = v + j * stride;
    for (std::int64_t t = 0; t < d; ++t) out[t] += w * vj[t];
  }
}

void check_size(const std::vector<float>& t, std::int64_t want, const std::string& what) {
  if (static_cast<std::int64_t>(t.size()) != want)
    throw Error("native BERT: " + what + " holds " + std::to_string(t.size()) + " floats, expected " + std::to_string(want));
}

}  // namespace

BertNative::BertNative(BertNativeWeights w) : w_(std::move(w)) {
  const std::int64_t H = w_.hidden, I = w_.intermediate;
  if (H <= 0 || w_.heads <= 0 || H % w_.heads || I <= 0 || w_.vocab <= 0 || w_.max_positions <= 0 || w_.type_vocab <= 0)
    throw Error("native BERT: bad shape (hidden " + std::to_string(H) + ", heads " + std::to_string(w_.heads) + ")");
  check_size(w_.word, w_.vocab * H, "word_embeddings");
  check_size(w_.position, w_.max_positions * H, "position_embeddings");
  check_size(w_.token_type, w_.type_vocab * H, "token_type_embeddings");
  check_size(w_.ln_gamma, H, "embeddings.LayerNorm.weight");
  check_size(w_.ln_beta, H, "embeddings.LayerNorm.bias");
  for (std::size_t i = 0; i < w_.layers.size(); ++i) {
    const auto& l = w_.layers[i];
    const std::string at = "layer " + std::to_string(i) + " ";
    check_size(l.w_qkv, 3 * H * H, at + "query|key|value weight");
    check_size(l.b_qkv, 3 * H, at + "query|key|value bias");
    check_size(l.w_attn_out, H * H, at + "attention.output.dense.weight");
    check_size(l.b_attn_out, H, at + "attention.output.dense.bias");
    check_size(l.ln1_gamma, H, at + "attention.output.LayerNorm.weight");
    check_size(l.ln1_beta, H, at + "attention.output.LayerNorm.bias");
    check_size(l.w_inter, I * H, at + "intermediate.dense.weight");
    check_size(l.b_inter, I, at + "intermediate.dense.bias");
    check_size(l.w_out, H * I, at + "output.dense.weight");
    check_size(l.b_out, H, at + "output.dense.bias");
    check_size(l.ln2_gamma, H, at + "output.LayerNorm.weight");
    check_size(l.ln2_beta, H, at + "output.LayerNorm.bias");
  }
  if (!w_.pool_w.empty() || !w_.pool_b.empty()) {
    check_size(w_.pool_w, H * H, "pooler.dense.weight");
    check_size(w_.pool_b, H, "pooler.dense.bias");
  }
}

void BertNative::forward(const std::int64_t* ids, const std::int64_t* type_ids, const std::int64_t* mask, std::int64_t B,
                         std::int64_t L, bool first_only, std::vector<float>& out, std::size_t threads) const {
  const std::int64_t H = w_.hidden, I = w_.intermediate, heads = w_.heads, d = H / heads, M = B * L;
  if (B < 0 || L < 1) throw Error("native BERT: a batch needs at least one position");
  if (L > w_.max_positions)
    throw Error("native BERT: " + std::to_string(L) + " positions, beyond max_position_embeddings " + std::to_string(w_.max_positions));
  threads = std::max<std::size_t>(threads, 1);

  // Embeddings: word + position + token type, then LayerNorm (BertEmbeddings).
  std::vector<float> x(static_cast<std::size_t>(M * H)), bias(static_cast<std::size_t>(M));
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t j = 0; j < L; ++j) {
      const std::int64_t r = b * L + j, id = ids[r], t = type_ids[r];
      if (id < 0 || id >= w_.vocab)
        throw Error("native BERT: token id " + std::to_string(id) + " outside the vocabulary of " + std::to_string(w_.vocab));
      if (t < 0 || t >= w_.type_vocab)
        throw Error("native BERT: token type " + std::to_string(t) + " outside type_vocab_size " + std::to_string(w_.type_vocab));
      const float *we = w_.word.data() + id * H, *pe = w_.position.data() + j * H, *te = w_.token_type.data() + t * H;
      float* row = x.data() + r * H;
      for (std::int64_t c = 0; c < H; ++c) row[c] = we[c] + pe[c] + te[c];
      // 0 where attended, a large negative on padding keys, as BertModel's additive mask.
      bias[static_cast<std::size_t>(r)] = (1.0f - static_cast<float>(mask[r])) * -1e9f;
    }
  for_rows(M, threads, [&](std::int64_t lo, std::int64_t hi) { layer_norm(x.data(), lo, hi, H, w_.ln_gamma.data(), w_.ln_beta.data(), w_.eps); });

  std::vector<float> qkv(static_cast<std::size_t>(M * 3 * H)), ctx(static_cast<std::size_t>(M * H)), h(static_cast<std::size_t>(M * H)),
      inter(static_cast<std::size_t>(M * I));
  const AttentionHead shape{L, d, 3 * H, H};
  for (std::size_t li = 0; li < w_.layers.size(); ++li) {
    const auto& l = w_.layers[li];
    const bool last_first = first_only && li + 1 == w_.layers.size();
    set_rows(qkv.data(), M, l.b_qkv.data(), 3 * H);
    gemm_acc(x.data(), M, H, l.w_qkv.data(), 3 * H, qkv.data());
    // Rows this layer carries on: every position, or each sequence's first one.
    const std::int64_t R = last_first ? B : M;
    const std::int64_t tasks = B * heads;
    const auto chunks = static_cast<std::size_t>(std::min<std::int64_t>(tasks, static_cast<std::int64_t>(4 * threads)));
    parallel_for(chunks, threads, [&](std::size_t chunk) {
      std::vector<float> scratch(last_first ? static_cast<std::size_t>(L) : attention_scratch_floats(shape));
      const auto c = static_cast<std::int64_t>(chunk), n = static_cast<std::int64_t>(chunks);
      for (std::int64_t t = tasks * c / n; t < tasks * (c + 1) / n; ++t) {
        const std::int64_t b = t / heads, hd = t % heads;
        const float* q = qkv.data() + b * L * 3 * H + hd * d;
        if (last_first)
          attention_row(q, q + H, q + 2 * H, bias.data() + b * L, L, d, 3 * H, ctx.data() + b * H + hd * d, scratch.data());
        else
          attention_head(q, q + H, q + 2 * H, bias.data() + b * L, ctx.data() + b * L * H + hd * d, shape, scratch.data());
      }
    });
    // The residual: every row of x, or the first row of each sequence.
    if (last_first) {
      for (std::int64_t b = 0; b < B; ++b) std::copy(x.begin() + b * L * H, x.begin() + b * L * H + H, x.begin() + b * H);
    }
    // h = LayerNorm(ctx W_o^T + b_o + x)
    set_rows(h.data(), R, l.b_attn_out.data(), H, x.data());
    gemm_acc(ctx.data(), R, H, l.w_attn_out.data(), H, h.data());
    for_rows(R, threads, [&](std::int64_t lo, std::int64_t hi) { layer_norm(h.data(), lo, hi, H, l.ln1_gamma.data(), l.ln1_beta.data(), w_.eps); });
    // x = LayerNorm(act(h W_i^T + b_i) W_out^T + b_out + h)
    set_rows(inter.data(), R, l.b_inter.data(), I);
    gemm_acc(h.data(), R, H, l.w_inter.data(), I, inter.data());
    for_rows(R, threads, [&](std::int64_t lo, std::int64_t hi) { activate(inter.data() + lo * I, (hi - lo) * I, w_.activation); });
    set_rows(x.data(), R, l.b_out.data(), H, h.data());
    gemm_acc(inter.data(), R, I, l.w_out.data(), H, x.data());
    for_rows(R, threads, [&](std::int64_t lo, std::int64_t hi) { layer_norm(x.data(), lo, hi, H, l.ln2_gamma.data(), l.ln2_beta.data(), w_.eps); });
  }
  if (first_only) {
    out.resize(static_cast<std::size_t>(B * H));
    if (w_.layers.empty()) {
      for (std::int64_t b = 0; b < B; ++b) std::copy(x.begin() + b * L * H, x.begin() + b * L * H + H, out.begin() + b * H);
    } else {
      std::copy(x.begin(), x.begin() + B * H, out.begin());
    }
  } else {
    out = std::move(x);
  }
}

void BertNative::pool(const float* first, std::int64_t rows, std::vector<float>& out) const {
  if (w_.pool_w.empty()) throw Error("this BERT has no pooler (pooler.dense) to pool with");
  const std::int64_t H = w_.hidden;
  out.resize(static_cast<std::size_t>(rows * H));
  set_rows(out.data(), rows, w_.pool_b.data(), H);
  gemm_acc(first, rows, H, w_.pool_w.data(), H, out.data());
  for (auto& v : out) v = std::tanh(v);
}

}  // namespace attune::models
