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

// x[0, n) <- exp(x - m) in place, n a multiple of W; returns their sum.
ATTUNE_INLINE float exp_shifted_sum(float* x, std::int64_t n, float m) {
  v16f sum{};
  for (std::int64_t i = 0; i < n; i += W) {
    const v16f e = exp_nonpositive(load(x + i) - m);
    store(x + i, e);
    sum += e;
  }
  return hsum(sum);
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define ATTUNE_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define ATTUNE_CLONES  // other targets: the compiler's own vector width
#endif

// x ([L] rows, stride apart, d floats) -> xt [d][Lp], zero past L.
// Sixteen source rows at a time, so that they stay in L1 while their columns are written.
ATTUNE_INLINE void transpose_pad(const float* x, std::int64_t stride, std::int64_t L, std::int64_t d, std::int64_t Lp, float* xt) {
  for (std::int64_t j0 = 0; j0 < L; j0 += W) {
    const std::int64_t j1 = std::min(L, j0 + W);
    for (std::int64_t c = 0; c < d; ++c)
      for (std::int64_t j = j0; j < j1; ++j) xt[c * Lp + j] = x[j * stride + c];
  }
  for (std::int64_t c = 0; c < d; ++c) std::fill(xt + c * Lp + L, xt + (c + 1) * Lp, 0.0f);
}

// x -> xp [Lp][dp], zero past L and past d.
ATTUNE_INLINE void pad_rows(const float* x, std::int64_t stride, std::int64_t L, std::int64_t d, std::int64_t Lp, std::int64_t dp,
                            float* xp) {
  for (std::int64_t j = 0; j < Lp; ++j) {
    float* row = xp + j * dp;
    if (j < L) {
      std::memcpy(row, x + j * stride, static_cast<std::size_t>(d) * sizeof(float));
      std::fill(row + d, row + dp, 0.0f);
    } else {
      std::fill(row, row + dp, 0.0f);
    }
  }
}

ATTUNE_CLONES
void attention_head_impl(const float* q, const float* k, const float* v, const float* mask, float* out, std::int64_t L,
                         std::int64_t d, std::int64_t in_stride, std::int64_t out_stride, float* scratch) {
  const std::int64_t Lp = round_up(L), dp = round_up(d);
  float* kt = scratch;         // [d][Lp]  k transposed: a score vector is 16 keys at once
  float* vp = kt + d * Lp;     // [Lp][dp] v, rows and width padded with zeros
  float* bias = vp + Lp * dp;  // [Lp]     the mask; -inf on the padding keys
  float* s = bias + Lp;        // [R][Lp]  scores, then probabilities (unnormalised)
  float* o = s + R * Lp;       // [R][dp]  output rows before they are copied out
  transpose_pad(k, in_stride, L, d, Lp, kt);
  pad_rows(v, in_stride, L, d, Lp, dp, vp);
  for (std::int64_t j = 0; j < Lp; ++j) bias[j] = j < L ? (mask ? mask[j] : 0.0f) : -INFINITY;

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
      inv[r] = 1.0f / exp_shifted_sum(sr, Lp, hmax(mx));
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
    i = V / W * W;
    float s = exp_shifted_sum(p, i, m);
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

// ---------------------------------------------------------------- causal attention, training

namespace {

// Rows i0.. of x (stride floats apart; `rows` <= 4 real, the rest repeat the last) against
// the columns [0, jend) of yt ([d][Lp], a transposed operand): out[r][j] = scale x_r . y_j.
ATTUNE_INLINE void score_rows(const float* x, std::int64_t stride, std::int64_t i0, std::int64_t rows, const float* yt,
                              std::int64_t Lp, std::int64_t d, std::int64_t jend, float scale, float* out) {
  const float* x0 = x + i0 * stride;
  const float* x1 = x + (i0 + std::min<std::int64_t>(1, rows - 1)) * stride;
  const float* x2 = x + (i0 + std::min<std::int64_t>(2, rows - 1)) * stride;
  const float* x3 = x + (i0 + std::min<std::int64_t>(3, rows - 1)) * stride;
  std::int64_t jb = 0;
  for (; jb + 2 * W <= jend; jb += 2 * W) {
    v16f a0{}, a1{}, a2{}, a3{}, b0{}, b1{}, b2{}, b3{};
    for (std::int64_t c = 0; c < d; ++c) {
      const v16f k0 = load(yt + c * Lp + jb), k1 = load(yt + c * Lp + jb + W);
      const float q0 = x0[c], q1 = x1[c], q2 = x2[c], q3 = x3[c];
      a0 += q0 * k0, b0 += q0 * k1;
      a1 += q1 * k0, b1 += q1 * k1;
      a2 += q2 * k0, b2 += q2 * k1;
      a3 += q3 * k0, b3 += q3 * k1;
    }
    store(out + jb, a0 * scale), store(out + jb + W, b0 * scale);
    store(out + Lp + jb, a1 * scale), store(out + Lp + jb + W, b1 * scale);
    store(out + 2 * Lp + jb, a2 * scale), store(out + 2 * Lp + jb + W, b2 * scale);
    store(out + 3 * Lp + jb, a3 * scale), store(out + 3 * Lp + jb + W, b3 * scale);
  }
  for (; jb < jend; jb += W) {
    v16f a0{}, a1{}, a2{}, a3{};
    for (std::int64_t c = 0; c < d; ++c) {
      const v16f k0 = load(yt + c * Lp + jb);
      a0 += x0[c] * k0, a1 += x1[c] * k0, a2 += x2[c] * k0, a3 += x3[c] * k0;
    }
    store(out + jb, a0 * scale), store(out + Lp + jb, a1 * scale);
    store(out + 2 * Lp + jb, a2 * scale), store(out + 3 * Lp + jb, a3 * scale);
  }
}

// out[u][c] = sum_{t in [t0, t1)} a(u, t) y[t][c] for 4 rows u and the dp (padded) columns of
// y ([Lp][dp]); a(u, t) = a[u * Lp + t] (rows of a) or, Transposed, a[t * Lp + u] (columns).
template <bool Transposed>
ATTUNE_INLINE void combine_rows(const float* a, std::int64_t Lp, std::int64_t t0, std::int64_t t1, const float* y,
                                std::int64_t dp, float* out) {
  const auto at = [&](std::int64_t u, std::int64_t t) { return Transposed ? a[t * Lp + u] : a[u * Lp + t]; };
  std::int64_t cb = 0;
  // 16 named accumulators (an array of them was kept on the stack, a load and a store per FMA)
  for (; cb + 4 * W <= dp; cb += 4 * W) {
    v16f c00{}, c01{}, c02{}, c03{}, c10{}, c11{}, c12{}, c13{}, c20{}, c21{}, c22{}, c23{}, c30{}, c31{}, c32{}, c33{};
    for (std::int64_t t = t0; t < t1; ++t) {
      const float* yr = y + t * dp + cb;
      const v16f y0 = load(yr), y1 = load(yr + W), y2 = load(yr + 2 * W), y3 = load(yr + 3 * W);
      const float s0 = at(0, t), s1 = at(1, t), s2 = at(2, t), s3 = at(3, t);
      c00 += s0 * y0, c01 += s0 * y1, c02 += s0 * y2, c03 += s0 * y3;
      c10 += s1 * y0, c11 += s1 * y1, c12 += s1 * y2, c13 += s1 * y3;
      c20 += s2 * y0, c21 += s2 * y1, c22 += s2 * y2, c23 += s2 * y3;
      c30 += s3 * y0, c31 += s3 * y1, c32 += s3 * y2, c33 += s3 * y3;
    }
    float* o = out + cb;
    store(o, c00), store(o + W, c01), store(o + 2 * W, c02), store(o + 3 * W, c03);
    o += dp;
    store(o, c10), store(o + W, c11), store(o + 2 * W, c12), store(o + 3 * W, c13);
    o += dp;
    store(o, c20), store(o + W, c21), store(o + 2 * W, c22), store(o + 3 * W, c23);
    o += dp;
    store(o, c30), store(o + W, c31), store(o + 2 * W, c32), store(o + 3 * W, c33);
  }
  for (; cb < dp; cb += W) {
    v16f c0{}, c1{}, c2{}, c3{};
    for (std::int64_t t = t0; t < t1; ++t) {
      const v16f yv = load(y + t * dp + cb);
      c0 += at(0, t) * yv, c1 += at(1, t) * yv, c2 += at(2, t) * yv, c3 += at(3, t) * yv;
    }
    store(out + cb, c0), store(out + dp + cb, c1), store(out + 2 * dp + cb, c2), store(out + 3 * dp + cb, c3);
  }
}

// rows [0, rows) of o4 ([4][dp]) -> out rows r0.. (stride apart, d floats each).
ATTUNE_INLINE void put_rows(const float* o4, std::int64_t rows, std::int64_t dp, std::int64_t d, float* out, std::int64_t r0,
                            std::int64_t stride) {
  for (std::int64_t r = 0; r < rows; ++r)
    std::memcpy(out + (r0 + r) * stride, o4 + r * dp, static_cast<std::size_t>(d) * sizeof(float));
}

// out rows i0.. (rows <= 4 real) = rows i0.. of m ([..][Lp]) times y ([Lp][dp]) over [0, last);
// a short last block repeats its last row (through rep, [4][Lp]); o4 [4][dp] is scratch.
ATTUNE_INLINE void block_times(const float* m, std::int64_t i0, std::int64_t rows, std::int64_t Lp, std::int64_t last, const float* y,
                               std::int64_t dp, std::int64_t d, float* rep, float* o4, float* out, std::int64_t stride) {
  const float* a = m + i0 * Lp;
  if (rows < 4) {
    for (std::int64_t r = 0; r < 4; ++r)
      std::memcpy(rep + r * Lp, m + (i0 + std::min(r, rows - 1)) * Lp, static_cast<std::size_t>(Lp) * sizeof(float));
    a = rep;
  }
  combine_rows<false>(a, Lp, 0, last, y, dp, o4);
  put_rows(o4, rows, dp, d, out, i0, stride);
}

ATTUNE_INLINE v16f iota16() {
  v16f v;
  for (int i = 0; i < W; ++i) v[i] = static_cast<float>(i);
  return v;
}

ATTUNE_CLONES
void causal_forward_impl(const float* q, const float* k, const float* v, float* out, float* p, std::int64_t L, std::int64_t d,
                         std::int64_t stride, float scale, float* scratch) {
  const std::int64_t Lp = round_up(L), dp = round_up(d);
  float* kt = scratch;       // [d][Lp]
  float* vp = kt + d * Lp;   // [Lp][dp]
  float* o4 = vp + Lp * dp;  // [4][dp]
  float* rep = o4 + 4 * dp;  // [4][Lp]: a last block's rows when L is not a multiple of 4
  transpose_pad(k, stride, L, d, Lp, kt);
  pad_rows(v, stride, L, d, Lp, dp, vp);
  const v16f lanes = iota16();
  for (std::int64_t i0 = 0; i0 < L; i0 += 4) {
    const std::int64_t rows = std::min<std::int64_t>(4, L - i0), last = i0 + rows;  // keys [0, last) are seen
    const std::int64_t jend = round_up(last);
    float* sb = rows == 4 ? p + i0 * Lp : rep;  // scores, then exp(s - max), in p's own rows when they exist
    score_rows(q, stride, i0, rows, kt, Lp, d, jend, scale, sb);
    for (std::int64_t r = 0; r < rows; ++r) {
      float* sr = sb + r * Lp;
      const float i = static_cast<float>(i0 + r);
      v16f mx = splat(-INFINITY);
      for (std::int64_t jb = 0; jb < jend; jb += W) {
        const v16i future = (lanes + static_cast<float>(jb)) > i;
        const v16f x = future ? splat(-INFINITY) : load(sr + jb);
        store(sr + jb, x);
        mx = vmax(mx, x);
      }
      const float inv = 1.0f / exp_shifted_sum(sr, jend, hmax(mx));
      float* pr = p + (i0 + r) * Lp;
      for (std::int64_t jb = 0; jb < jend; jb += W) store(pr + jb, load(sr + jb) * inv);
      std::fill(pr + jend, pr + Lp, 0.0f);
    }
    // out rows = p rows . v over the keys [0, last)
    block_times(p, i0, rows, Lp, last, vp, dp, d, rep, o4, out, stride);
  }
}

ATTUNE_CLONES
void causal_backward_impl(const float* q, const float* k, const float* v, const float* o, const float* dout, const float* p,
                          float* dq, float* dk, float* dv, std::int64_t L, std::int64_t d, std::int64_t stride, float scale,
                          float* scratch) {
  const std::int64_t Lp = round_up(L), dp = round_up(d);
  float* vt = scratch;         // [d][Lp]
  float* kp = vt + d * Lp;     // [Lp][dp]
  float* qp = kp + Lp * dp;    // [Lp][dp]
  float* dop = qp + Lp * dp;   // [Lp][dp]
  float* ds = dop + Lp * dp;   // [Lp][Lp]: (p (dp - D)) scale, zero past each block's keys and past L
  float* o4 = ds + Lp * Lp;    // [4][dp]
  float* rep = o4 + 4 * dp;    // [4][Lp]
  transpose_pad(v, stride, L, d, Lp, vt);
  pad_rows(k, stride, L, d, Lp, dp, kp);
  pad_rows(q, stride, L, d, Lp, dp, qp);
  pad_rows(dout, stride, L, d, Lp, dp, dop);
  std::fill(ds + L * Lp, ds + Lp * Lp, 0.0f);
  for (std::int64_t i0 = 0; i0 < L; i0 += 4) {
    const std::int64_t rows = std::min<std::int64_t>(4, L - i0), last = i0 + rows, jend = round_up(last);
    float* sb = rows == 4 ? ds + i0 * Lp : rep;
    score_rows(dout, stride, i0, rows, vt, Lp, d, jend, 1.0f, sb);  // dP = dO V^T
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::int64_t i = i0 + r;
      // D = sum_j p_ij dP_ij = dO_i . O_i, in vectors (a scalar chain of FMAs was a sixth of the backward)
      const float* gi = dout + i * stride;
      const float* oi = o + i * stride;
      v16f dv16{};
      std::int64_t c = 0;
      for (; c + W <= d; c += W) dv16 += load(gi + c) * load(oi + c);
      float D = hsum(dv16);
      for (; c < d; ++c) D += gi[c] * oi[c];
      const float* pr = p + i * Lp;
      float* sr = sb + r * Lp;
      float* dr = ds + i * Lp;
      for (std::int64_t jb = 0; jb < jend; jb += W) store(dr + jb, load(pr + jb) * (load(sr + jb) - D) * scale);
      std::fill(dr + jend, dr + Lp, 0.0f);
    }
    // dQ rows = dS rows . K over the keys [0, last)
    block_times(ds, i0, rows, Lp, last, kp, dp, d, rep, o4, dq, stride);
  }
  // dV rows t = sum_{i >= t} p_it dO_i, dK rows t = sum_{i >= t} dS_it Q_i: the columns of p and
  // dS, four at a time (columns past L are zero in both, their rows are not written).
  for (std::int64_t t0 = 0; t0 < L; t0 += 4) {
    const std::int64_t rows = std::min<std::int64_t>(4, L - t0);
    combine_rows<true>(p + t0, Lp, t0, L, dop, dp, o4);
    put_rows(o4, rows, dp, d, dv, t0, stride);
    combine_rows<true>(ds + t0, Lp, t0, L, qp, dp, o4);
    put_rows(o4, rows, dp, d, dk, t0, stride);
  }
}

}  // namespace

std::size_t causal_attention_scratch_floats(std::int64_t L, std::int64_t d) {
  const std::int64_t Lp = round_up(L), dp = round_up(d);
  const std::int64_t fwd = d * Lp + Lp * dp + 4 * dp + 4 * Lp;
  const std::int64_t bwd = d * Lp + 3 * Lp * dp + Lp * Lp + 4 * dp + 4 * Lp;
  return static_cast<std::size_t>(std::max(fwd, bwd));
}

void causal_attention_forward(const float* q, const float* k, const float* v, float* out, float* p, const CausalHead& h,
                              float* scratch) {
  if (h.length <= 0 || h.head_dim <= 0) return;
  causal_forward_impl(q, k, v, out, p, h.length, h.head_dim, h.stride, h.scale, scratch);
}

void causal_attention_backward(const float* q, const float* k, const float* v, const float* out, const float* dout, const float* p,
                               float* dq, float* dk, float* dv, const CausalHead& h, float* scratch) {
  if (h.length <= 0 || h.head_dim <= 0) return;
  causal_backward_impl(q, k, v, out, dout, p, dq, dk, dv, h.length, h.head_dim, h.stride, h.scale, scratch);
}

}  // namespace attune::models
