#pragma once
// T5-family encoder-decoder LMs (T5 v1.0, T5 v1.1 / Flan-T5, mT5, umT5) as a Decoder: the
// prompt is encoded once per start(), the decoder runs from decoder_start_token_id with a
// self-attention KV cache and cross-attention K/V kept for the whole state. Module names
// mirror Hugging Face's T5ForConditionalGeneration, so weights load by name. Includes torch.
#include <torch/torch.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "attune/models/config.h"
#include "attune/models/decoding.h"

namespace attune::models {

struct T5Config {
  std::int64_t vocab_size = 0, d_model = 0, d_kv = 0, d_ff = 0, num_heads = 0;
  std::int64_t num_layers = 0;          // encoder blocks
  std::int64_t num_decoder_layers = 0;  // decoder blocks (config.json default: num_layers)
  std::int64_t num_buckets = 32;        // relative_attention_num_buckets
  std::int64_t max_distance = 128;      // relative_attention_max_distance
  double eps = 1e-6;                    // layer_norm_epsilon
  // "relu" (T5 v1.0: wi, wo), "gated-gelu" (v1.1 / Flan: wi_0, wi_1, wo with gelu_new, the
  // tanh approximation), "gated-silu"; also "gelu", "silu", "gelu_new", "gated-relu".
  std::string feed_forward_proj = "relu";
  // Tied: the decoder output is scaled by d_model^-0.5 and multiplied by shared.weight (HF);
  // untied: lm_head.weight, no scaling.
  bool tie_embeddings = true;
  // umT5: every block has its own relative_attention_bias; T5/mT5: only block 0 of each
  // stack, shared by the stack's blocks.
  bool bias_per_layer = false;
  std::string model_type = "t5";  // "t5" | "mt5" | "umt5" (written back by save)
  std::int64_t pad_id = 0;
  std::int64_t decoder_start_id = 0;  // first decoder input (config.json default: pad_token_id)
  std::vector<std::int64_t> eos_ids = {1};
  // Error naming the file and key for a missing field, an unsupported feed_forward_proj or
  // an unsupported architecture.
  static T5Config from(const ConfigFile& c);
  // Architectures this class loads.
  static bool supports(const ConfigFile& c);
};

// Hugging Face's T5Attention._relative_position_bucket on int64 relative positions
// (memory - query), computed with the same float32 operations: bidirectional (encoder) uses
// num_buckets/2 buckets per sign, unidirectional (decoder) maps every key after the query to
// bucket 0. Half of the buckets are exact distances, the rest logarithmic up to max_distance.
torch::Tensor t5_relative_position_bucket(const torch::Tensor& relative_position, bool bidirectional,
                                          std::int64_t num_buckets, std::int64_t max_distance);

class T5Model;  // the torch module (t5.cpp)

// Weights loaded once and shared read-only; each generate/score call makes its own state.
class T5 final : public Decoder {
 public:
  // dir: a Hugging Face folder (config.json + safetensors). shared.weight may instead be
  // stored as encoder.embed_tokens.weight or decoder.embed_tokens.weight.
  static std::shared_ptr<T5> load(const std::filesystem::path& dir, torch::Device device, torch::Dtype dtype = torch::kFloat32);
  // Random weights (tests and benchmarks), seeded.
  static std::shared_ptr<T5> random(const T5Config& cfg, std::uint64_t seed, torch::Device device = torch::kCPU);

  // Error naming feed_forward_proj when it is unsupported.
  T5(const T5Config& cfg, torch::Device device, torch::Dtype dtype);
  ~T5() override;
  const T5Config& config() const { return cfg_; }
  // Encodes the prompts (right-padded, padding masked; each non-empty — T5 inputs normally
  // end with </s>), then feeds decoder_start_token_id: next_logits [B, V] predict the first
  // target token.
  std::unique_ptr<DecoderState> start(const std::vector<TokenIds>& prompts, torch::Tensor& next_logits) override;
  torch::Device device() const override { return device_; }
  std::int64_t vocab_size() const override { return cfg_.vocab_size; }
  // Full forward without cache (tests): encoder_ids [B, S] (encoder_mask [B, S] bool, false
  // for right padding; undefined = all valid), decoder_ids [B, T] the decoder inputs, which
  // start with decoder_start_token_id. Returns float32 logits [B, T, V].
  torch::Tensor forward(const torch::Tensor& encoder_ids, const torch::Tensor& decoder_ids,
                        const torch::Tensor& encoder_mask = {});
  torch::nn::Module& module();
  void save(const std::filesystem::path& dir) const;  // config.json + model.safetensors

 private:
  T5Config cfg_;
  torch::Device device_;
  torch::Dtype dtype_;
  std::shared_ptr<T5Model> net_;
};

}  // namespace attune::models
