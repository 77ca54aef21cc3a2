#pragma once
// Fused scaled-dot-product attention for one (sequence, head) on float32 CPU memory, for
// inference: out = softmax(q k^T + mask) v, computed a few query rows at a time so the
// L x L scores never leave the cache. No torch in this header or its source (the models
// layer parallelises over (sequence, head) and falls back to torch ops where gradients are
// needed). On x86-64 the source is compiled for AVX-512, AVX2+FMA and baseline x86-64 and
// picks one at load time (GCC target_clones).
//
// Why: at BERT head sizes (32, 64) torch's batched matmuls run at a fraction of the BLAS
// rate, and the softmax over the materialised [B, h, L, L] scores is a memory-bound pass of
// its own; together they took a fifth of a MiniLM layer (bench/RESULTS.md).
#include <cstddef>
#include <cstdint>

namespace attune::models {

struct AttentionHead {
  std::int64_t length = 0;      // L: query and key positions
  std::int64_t head_dim = 0;    // d: any positive size
  std::int64_t in_stride = 0;   // floats between consecutive positions of q, k and v
  std::int64_t out_stride = 0;  // floats between consecutive positions of out
};

// Floats of scratch attention_head needs (per calling thread).
std::size_t attention_scratch_floats(const AttentionHead& shape);

// q, k, v: the head's first position (position i at q + i * in_stride, d contiguous
// floats); q is already scaled by 1/sqrt(d). mask: L additive key biases (0 attended, a
// large negative for padding) or nullptr. out: d floats per position at out + i * out_stride.
// scratch: attention_scratch_floats(shape) floats.
void attention_head(const float* q, const float* k, const float* v, const float* mask, float* out, const AttentionHead& shape,
                    float* scratch);

// GELU in place over n floats, vectorized as attention_head is: the erf form
// 0.5 x (1 + erf(x / sqrt 2)) with erf by Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7, the
// formula torch's vectorized CPU erf uses), and the tanh form (gelu_new). BertNative's
// activation; the scalar std::erf it replaced was a sixth of a small encoder's forward.
void gelu_erf(float* x, std::int64_t n);
void gelu_tanh(float* x, std::int64_t n);

// Causal self-attention of one (sequence, head) for training, forward and backward, on
// float32 CPU memory: out = softmax(scale q k^T, keys j <= i) v. q, k, v, out and their
// gradients have position i at ptr + i * stride (head_dim contiguous floats); p is the
// forward's softmax, [length][round_up(length, 16)] row-major with zeros past each row's
// keys, which the backward reads. Only the causal half of each product is computed, every
// product in the cache (the models layer parallelises over (sequence, head)); torch's path
// ran each head's L x L products as single-threaded BLAS calls, and the scale, mask and
// softmax as passes over [B, heads, L, L] tensors (bench/RESULTS.md).
struct CausalHead {
  std::int64_t length = 0;    // L
  std::int64_t head_dim = 0;  // d: any positive size
  std::int64_t stride = 0;    // floats between consecutive positions
  float scale = 1.0f;         // 1 / sqrt(d)
};
// Floats of scratch either direction needs (per calling thread).
std::size_t causal_attention_scratch_floats(std::int64_t length, std::int64_t head_dim);
void causal_attention_forward(const float* q, const float* k, const float* v, float* out, float* p, const CausalHead& shape,
                              float* scratch);
// dq, dk, dv are written (not accumulated), at the same positions and stride as q, k, v.
void causal_attention_backward(const float* q, const float* k, const float* v, const float* out, const float* dout, const float* p,
                               float* dq, float* dk, float* dv, const CausalHead& shape, float* scratch);

// Cross-entropy of `rows` rows of logits (vocab contiguous floats each, row r at
// x + r * vocab) against target[r] (in [0, vocab); the caller checks): loss[r] =
// logsumexp(row) - row[target[r]], and each row replaced in place by its softmax, which is
// what the gradient needs (softmax - one-hot). Vectorized as attention_head is; a NaN in a
// row gives a NaN loss. The fused output layer of Llama::train_loss_sum.
void softmax_xent_rows(float* x, std::int64_t rows, std::int64_t vocab, const std::int64_t* target, float* loss);

}  // namespace attune::models
