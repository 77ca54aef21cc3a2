#include "attune/models/attention_kernel.h"

#include <algorithm>
#include <cmath>
#include <cstring>

// GCC vector extensions: one source, compiled by target_clones for AVX-512 (a vector is
// one zmm register), AVX2+FMA (two ymm) and baseline x86-64 (four xmm). The helpers are
// always_inline so that each clone inlines them with its own instruction set.
#define ATTUNE_INLINE __attribute__((always_inline)) inline
// The helpers take and return 64-byte vectors; they are always inlined into a clone, so the
// ABI for passing them (which differs without AVX-512) never applies.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace attune::models {

namespace {

constexpr std::int64_t W = 16;  // floats per vector
constexpr std::int64_t R = 4;   // query rows scored and summed together (4 accumulators)

typedef float v16f __attribute__((vector_size(64)));
typedef std::int32_t v16i __attribute__((vector_size(64)));

std::int64_t round_up(std::int64_t n) { return (n + W - 1) / W * W; }

ATTUNE_INLINE v16f load(const float* p) {
  v16f v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
ATTUNE_INLINE void store(float* p, v16f v) { std::memcpy(p, &v, sizeof v); }
ATTUNE_INLINE v16f splat(float x) { return v16f{} + x; }
ATTUNE_INLINE v16f vmax(v16f a, v16f b) { return a > b ? a : b; }
ATTUNE_INLINE float hmax(v16f v) {
  float m = v[0];
  for (int i = 1; i < W; ++i) m = std::max(m, v[i]);
  return m;
}
ATTUNE_INLINE float hsum(v16f v) {
  float s = 0;
  for (int i = 0; i < W; ++i) s += v[i];
  return s;
}

// exp(x) for x <= 0 (softmax's x - max): Cephes expf's range reduction and degree-5
// polynomial, ~1 ulp; 0 below -87.34 (where exp leaves the normal floats) and for -inf.
ATTUNE_INLINE v16f exp_nonpositive(v16f x) {
  const v16f lo = splat(-87.3365447505f);
  const v16i under = x < lo;
  x = under ? lo : x;
  const v16f n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // round to nearest
  v16f r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  v16f y = splat(1.9875691500e-4f);
  y = y * r + 1.3981999507e-3f;
  y = y * r + 8.3334519073e-3f;
  y = y * r + 4.1665795894e-2f;
  y = y * r + 1.6666665459e-1f;
  y = y * r + 5.0000001201e-1f;
  y = y * (r * r) + r + 1.0f;
  const v16i bits = (__builtin_convertvector(n, v16i) + 127) << 23;  // 2^n
  v16f scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return under ? splat(0.0f) : y * scale;
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define ATTUNE_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define ATTUNE_CLONES  // other targets: the compiler's own vector width
#endif

ATTUNE_CLONES
void attention_head_impl(const float* q, const float* k, const float* v, const float* mask, float* out, std::int64_t L,
                         std::int64_t d, std::int64_t in_stride, std::int64_t out_stride, float* scratch) {
  const std::int64_t Lp = round_up(L), dp = round_up(d);
  float* kt = scratch;         // [d][Lp]  k transposed: a score vector is 16 keys at once
  float* vp = kt + d * Lp;     // [Lp][dp] v, rows and width padded with zeros
  float* bias = vp + Lp * dp;  // [Lp]     the mask; -inf on the padding keys
  float* s = bias + Lp;        // [R][Lp]  scores, then probabilities (unnormalised)
  float* o = s + R * Lp;       // [R][dp]  output rows before they are copied out
  for (std::int64_t c = 0; c < d; ++c) {
    float* row = kt + c * Lp;
    for (std::int64_t j = 0; j < L; ++j) row[j] = k[j * in_stride + c];
    std::fill(row + L, row + Lp, 0.0f);
  }
  for (std::int64_t j = 0; j < Lp; ++j) {
    float* row = vp + j * dp;
    if (j < L) {
      std::memcpy(row, v + j * in_stride, static_cast<std::size_t>(d) * sizeof(float));
      std::fill(row + d, row + dp, 0.0f);
    } else {
      std::fill(row, row + dp, 0.0f);
    }
    bias[j] = j < L ? (mask ? mask[j] : 0.0f) : -INFINITY;
  }

  for (std::int64_t i0 = 0; i0 < L; i0 += R) {
    const std::int64_t rows = std::min(R, L - i0);
    // Rows past the end repeat the last real row; their results are not copied out.
    const float* q0 = q + i0 * in_stride;
    const float* q1 = q + (i0 + std::min<std::int64_t>(1, rows - 1)) * in_stride;
    const float* q2 = q + (i0 + std::min<std::int64_t>(2, rows - 1)) * in_stride;
    const float* q3 = q + (i0 + std::min<std::int64_t>(3, rows - 1)) * in_stride;
    float* s0 = s;
    float* s1 = s + Lp;
    float* s2 = s + 2 * Lp;
    float* s3 = s + 3 * Lp;

    // scores = q k^T + bias, 16 keys x 4 queries per step
    for (std::int64_t jb = 0; jb < Lp; jb += W) {
      v16f a0{}, a1{}, a2{}, a3{};
      for (std::int64_t c = 0; c < d; ++c) {
        const v16f kv = load(kt + c * Lp + jb);
        a0 += q0[c] * kv;
        a1 += q1[c] * kv;
        a2 += q2[c] * kv;
        a3 += q3[c] * kv;
      }
      const v16f b = load(bias + jb);
      store(s0 + jb, a0 + b);
      store(s1 + jb, a1 + b);
      store(s2 + jb, a2 + b);
      store(s3 + jb, a3 + b);
    }

    // softmax numerators exp(s - max) in place, and 1 / their sums
    float inv[R];
    for (std::int64_t r = 0; r < R; ++r) {
      float* sr = s + r * Lp;
      v16f mx = load(sr);
      for (std::int64_t jb = W; jb < Lp; jb += W) mx = vmax(mx, load(sr + jb));
      const float m = hmax(mx);
      v16f sum{};
      for (std::int64_t jb = 0; jb < Lp; jb += W) {
        const v16f e = exp_nonpositive(load(sr + jb) - m);
        store(sr + jb, e);
        sum += e;
      }
      inv[r] = 1.0f / hsum(sum);
    }

    // out = (p v) / sum, 16 output features x 4 queries per step
    for (std::int64_t cb = 0; cb < dp; cb += W) {
      v16f a0{}, a1{}, a2{}, a3{};
      for (std::int64_t j = 0; j < L; ++j) {
        const v16f vv = load(vp + j * dp + cb);
        a0 += s0[j] * vv;
        a1 += s1[j] * vv;
        a2 += s2[j] * vv;
        a3 += s3[j] * vv;
      }
      store(o + cb, a0 * inv[0]);
      store(o + dp + cb, a1 * inv[1]);
      store(o + 2 * dp + cb, a2 * inv[2]);
      store(o + 3 * dp + cb, a3 * inv[3]);
    }
    for (std::int64_t r = 0; r < rows; ++r)
      std::memcpy(out + (i0 + r) * out_stride, o + r * dp, static_cast<std::size_t>(d) * sizeof(float));
  }
}

}  // namespace

std::size_t attention_scratch_floats(const AttentionHead& a) {
  const std::int64_t Lp = round_up(a.length), dp = round_up(a.head_dim);
  return static_cast<std::size_t>(a.head_dim * Lp + Lp * dp + Lp + R * Lp + R * dp);
}

void attention_head(const float* q, const float* k, const float* v, const float* mask, float* out, const AttentionHead& a,
                    float* scratch) {
  if (a.length <= 0 || a.head_dim <= 0) return;
  attention_head_impl(q, k, v, mask, out, a.length, a.head_dim, a.in_stride, a.out_stride, scratch);
}

// ---------------------------------------------------------------- GELU

namespace {

// erf(x) by Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7; the formula torch's vectorized
// CPU erf uses): 1 - (a1 t + ... + a5 t^5) exp(-x^2), t = 1 / (1 + p |x|), sign restored.
ATTUNE_INLINE v16f erf16(v16f x) {
  const v16i neg = x < 0.0f;
  const v16f a = neg ? -x : x;
  const v16f t = 1.0f / (a * 0.3275911f + 1.0f);
  v16f r = splat(1.061405429f);
  r = r * t + -1.453152027f;
  r = r * t + 1.421413741f;
  r = r * t + -0.284496736f;
  r = r * t + 0.254829592f;
  const v16f e = 1.0f - r * t * exp_nonpositive(-(a * a));
  return neg ? -e : e;
}

// 0.5 x (1 + tanh(u)) = x sigmoid(2u), from exp(-2|u|) <= 1 alone.
ATTUNE_INLINE v16f gelu_tanh16(v16f x) {
  const v16f u = 0.79788456080286536f * (x + 0.044715f * x * x * x);
  const v16i neg = u < 0.0f;
  const v16f e = exp_nonpositive(-2.0f * (neg ? -u : u));
  return neg ? x * e / (1.0f + e) : x / (1.0f + e);
}

template <bool Tanh>
ATTUNE_INLINE void gelu_body(float* x, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + W <= n; i += W) {
    const v16f v = load(x + i);
    store(x + i, Tanh ? gelu_tanh16(v) : 0.5f * v * (1.0f + erf16(v * 0.70710678118654752f)));
  }
  if (i < n) {  // the tail, through a padded vector
    float buf[W] = {};
    std::memcpy(buf, x + i, static_cast<std::size_t>(n - i) * sizeof(float));
    const v16f v = load(buf);
    store(buf, Tanh ? gelu_tanh16(v) : 0.5f * v * (1.0f + erf16(v * 0.70710678118654752f)));
    std::memcpy(x + i, buf, static_cast<std::size_t>(n - i) * sizeof(float));
  }
}

ATTUNE_CLONES void gelu_erf_impl(float* x, std::int64_t n) { gelu_body<false>(x, n); }
ATTUNE_CLONES void gelu_tanh_impl(float* x, std::int64_t n) { gelu_body<true>(x, n); }

}  // namespace

void gelu_erf(float* x, std::int64_t n) { gelu_erf_impl(x, n); }
void gelu_tanh(float* x, std::int64_t n) { gelu_tanh_impl(x, n); }

// ---------------------------------------------------------------- softmax cross-entropy rows

namespace {

ATTUNE_CLONES
void softmax_xent_rows_impl(float* x, std::int64_t rows, std::int64_t V, const std::int64_t* target, float* loss) {
  for (std::int64_t r = 0; r < rows; ++r) {
    float* p = x + r * V;
    std::int64_t i = 0;
    float m = -INFINITY;
    if (V >= W) {
      v16f mv = load(p);
      for (i = W; i + W <= V; i += W) mv = vmax(mv, load(p + i));
      m = hmax(mv);
    }
    for (; i < V; ++i) m = std::max(m, p[i]);
    const float picked = p[target[r]];
    v16f sv{};
    for (i = 0; i + W <= V; i += W) {
      const v16f e = exp_nonpositive(load(p + i) - m);
      store(p + i, e);
      sv += e;
    }
    float s = hsum(sv);
    for (; i < V; ++i) s += (p[i] = std::exp(p[i] - m));
    const float inv = 1.0f / s;
    for (i = 0; i + W <= V; i += W) store(p + i, load(p + i) * inv);
    for (; i < V; ++i) p[i] *= inv;
    loss[r] = m + std::log(s) - picked;
  }
}

}  // namespace

void softmax_xent_rows(float* x, std::int64_t rows, std::int64_t vocab, const std::int64_t* target, float* loss) {
  if (rows <= 0 || vocab <= 0) return;
  softmax_xent_rows_impl(x, rows, vocab, target, loss);
}

}  // namespace attune::models
