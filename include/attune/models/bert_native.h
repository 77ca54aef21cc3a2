#pragma once
// BERT-family inference on the CPU without torch operators: the same graph as BertModel
// (models/bert.h: embeddings + LayerNorm, post-LN layers, GELU/ReLU, the fused attention
// kernel), run with BLAS sgemm on buffers this class owns and plain loops for the rest.
//
// Why: at the sizes a server encodes per request (one query of 32-128 tokens, or 20
// (query, document) pairs through a 2-layer, 128-wide cross-encoder) torch's per-operator
// cost (dispatch, tensor allocation, a fresh output per op) is most of a forward pass
// (bench/RESULTS.md, "A forward pass without torch operators"). Results equal BertModel's
// to float32 rounding (tests/models: BertNative.*). No torch in this header or its source:
// models/encoder.cpp copies the loaded weights in (bert_native_weights in bert.h).
#include <cstddef>
#include <cstdint>
#include <vector>

namespace attune::models {

struct BertNativeLayer {
  std::vector<float> w_qkv, b_qkv;          // [3H, H] query | key | value rows, query rows and bias scaled by 1/sqrt(d)
  std::vector<float> w_attn_out, b_attn_out;  // [H, H], [H]
  std::vector<float> ln1_gamma, ln1_beta;   // [H]
  std::vector<float> w_inter, b_inter;      // [I, H], [I]
  std::vector<float> w_out, b_out;          // [H, I], [H]
  std::vector<float> ln2_gamma, ln2_beta;   // [H]
};

struct BertNativeWeights {
  enum class Activation { Gelu, GeluTanh, Relu };
  std::int64_t hidden = 0, heads = 0, intermediate = 0, vocab = 0, max_positions = 0, type_vocab = 0;
  float eps = 1e-12f;
  Activation activation = Activation::Gelu;
  std::vector<float> word, position, token_type;  // [vocab, H], [max_positions, H], [type_vocab, H]
  std::vector<float> ln_gamma, ln_beta;           // [H]
  std::vector<BertNativeLayer> layers;
  std::vector<float> pool_w, pool_b;              // [H, H], [H]; empty when the model has no pooler
};

class BertNative {
 public:
  // Error when a tensor's size does not match the shape fields.
  explicit BertNative(BertNativeWeights w);

  // ids, type_ids, mask: [B, L] row-major (mask 1 = token, 0 = padding). first_only false:
  // out = the last hidden states [B, L, H]. first_only true: out = each sequence's first
  // ([CLS]) state [B, H]; the last layer then computes only that row after its keys and
  // values (what a cross-encoder's pooler reads). Padding never changes a real token's
  // state. `threads`: workers for the attention heads and the row-wise passes (sgemm
  // threads as BLAS decides). Error for an id outside the vocabulary, a type id outside
  // type_vocab_size or L beyond max_position_embeddings.
  void forward(const std::int64_t* ids, const std::int64_t* type_ids, const std::int64_t* mask, std::int64_t B, std::int64_t L,
               bool first_only, std::vector<float>& out, std::size_t threads) const;

  // tanh(pooler.dense(x)) for `rows` first-token states [rows, H] -> out [rows, H]; Error
  // when the model has no pooler.
  void pool(const float* first, std::int64_t rows, std::vector<float>& out) const;

  const BertNativeWeights& weights() const { return w_; }

 private:
  BertNativeWeights w_;
};

}  // namespace attune::models
