#pragma once
// Llama-family decoder-only LMs (Llama 1-3, Qwen2, SmolLM, Mistral configs): RoPE (theta,
// linear and llama3 scaling), grouped-query attention, RMSNorm, SwiGLU, tied embeddings.
// Module names mirror Hugging Face's LlamaForCausalLM, so weights load by name. Includes
// torch.
#include <torch/torch.h>

#include <filesystem>
#include <memory>

#include "attune/models/config.h"
#include "attune/models/decoding.h"

namespace attune::models {

struct LlamaConfig {
  std::int64_t vocab_size = 0, hidden_size = 0, intermediate_size = 0, num_layers = 0;
  std::int64_t num_heads = 0, num_kv_heads = 0, head_dim = 0, max_positions = 2048;
  double rms_eps = 1e-6, rope_theta = 10000.0;
  // rope_scaling: "" (none), "linear" (positions / factor), "llama3" (per-frequency).
  std::string rope_type;
  double rope_factor = 1.0, low_freq_factor = 1.0, high_freq_factor = 4.0;
  std::int64_t original_max_positions = 8192;
  bool attention_bias = false;  // q/k/v biases (Qwen2: true)
  bool mlp_bias = false;
  bool tie_embeddings = false;
  std::string act = "silu";
  std::vector<std::int64_t> eos_ids;
  std::int64_t bos_id = -1;
  // Error naming the file and key for a missing field or an unsupported architecture.
  static LlamaConfig from(const ConfigFile& c);
  // Architectures this class loads.
  static bool supports(const ConfigFile& c);
};

class LlamaModel;  // the torch module (llama.cpp)

// Weights loaded once and shared read-only; each generate/score call makes its own state.
class Llama final : public Decoder {
 public:
  // dir: a Hugging Face folder (config.json + safetensors).
  static std::shared_ptr<Llama> load(const std::filesystem::path& dir, torch::Device device, torch::Dtype dtype = torch::kFloat32);
  // llama2.c's v0 checkpoint (7 int32 header fields, float32 tensors; shared classifier when
  // vocab_size > 0), with q/k rows permuted to the rotate-half RoPE convention.
  static std::shared_ptr<Llama> load_llama2c(const std::filesystem::path& bin, torch::Device device);
  // Random weights (tests and benchmarks), seeded.
  static std::shared_ptr<Llama> random(const LlamaConfig& cfg, std::uint64_t seed, torch::Device device = torch::kCPU);

  Llama(const LlamaConfig& cfg, torch::Device device, torch::Dtype dtype);
  ~Llama() override;
  const LlamaConfig& config() const { return cfg_; }
  std::unique_ptr<DecoderState> start(const std::vector<TokenIds>& prompts, torch::Tensor& next_logits) override;
  torch::Device device() const override { return device_; }
  std::int64_t vocab_size() const override { return cfg_.vocab_size; }
  // Full forward without cache: logits [B, L, V] for right-padded tokens (tests).
  torch::Tensor forward(const torch::Tensor& tokens);
  // Training forward: logits [B, L, V] (float32) of causal attention over `tokens` [B, L]
  // (every position valid), with gradients; the module's train/eval mode is the caller's.
  torch::Tensor forward_train(const torch::Tensor& tokens);
  // The summed next-token cross-entropy of the training forward over `tokens` [B, L], with
  // gradients: `targets` [N] are the tokens wanted at positions `at` (int64 indices into the
  // flattened B * L positions), or with `at` undefined at every position (N = B * L).
  // - Only those positions are projected onto the vocabulary: a reader's prompt positions
  //   carry no loss, and the projection is most of a small model's step.
  // - The projection and its loss go in blocks of `block_rows` rows (0: as many as keep a
  //   block's float32 logits near 16 MB). One [B, L, V] tensor (134 MB at 16 x 256 x 8,192)
  //   and its gradients are above glibc's largest mmap threshold (32 MiB), so they were mapped
  //   and faulted in afresh every step; blocks are served again from the heap.
  torch::Tensor train_loss_sum(const torch::Tensor& tokens, const torch::Tensor& targets, const torch::Tensor& at = {},
                               std::int64_t block_rows = 0);
  torch::nn::Module& module();
  void save(const std::filesystem::path& dir) const;  // config.json + model.safetensors

 private:
  LlamaConfig cfg_;
  torch::Device device_;
  torch::Dtype dtype_;
  std::shared_ptr<LlamaModel> net_;
};

}  // namespace attune::models
