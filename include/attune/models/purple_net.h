#pragma once
// PURPLE's record encoder (003 §3; METHODS.md §6), for training and inference: a frozen
// BERT-family encoder gives token states of the query and of each record; each record's
// tokens cross-attend to the query's tokens; a masked mean pools them to one vector per
// record; a Transformer encoder across the records (no positional encoding: the set has no
// order) mixes them; an MLP and a sigmoid give each record a propensity in (0, 1).
// Ablations: without cross-attention the query's pooled vector joins the records as one
// extra token of the record Transformer; without the record Transformer (pointwise) each
// record is scored alone. Includes torch; inference code uses models/purple.h.
#include <torch/torch.h>

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "attune/models/bert.h"
#include "attune/models/token_batches.h"

namespace attune::models {

// The head's weights and its configuration beside the frozen encoder's files.
inline constexpr const char* kPurpleHeadFile = "purple_head.safetensors";
inline constexpr const char* kPurpleConfigFile = "purple.json";

struct PurpleConfig {
  std::int64_t hidden = 0;          // the encoder's hidden size
  std::int64_t heads = 4;           // attention heads of the cross-attention and record layers
  std::int64_t layers = 2;          // record Transformer layers (003: 12; sized to a CPU)
  bool cross_attention = true;      // false: the query is one extra token of the record Transformer
  bool record_transformer = true;   // false: pointwise (each record scored alone)
  std::size_t max_length = 128;     // tokens per query / record text, specials included
  std::size_t k = 5;                // the profile size it was trained to select
  // Trained with the learned initial prior (train::PurpleOptions::initial_prior): the order
  // is log f + prior_weight * z, z the first stage's z-scored scores; prior_weight =
  // prior_weight_start + prior_theta (the learned offset). purple.json "initial_prior".
  std::optional<double> prior_weight;
  double prior_weight_start = 0, prior_theta = 0;

  nlohmann::json to_json() const;
  // Error naming `file` for a missing or malformed entry.
  static PurpleConfig from_json(const nlohmann::json& j, const std::string& file);
  // UsageError naming the field: heads must divide hidden, layers >= 1 with the record
  // Transformer, and a model needs the query somewhere (not both ablations at once).
  void validate() const;
};

struct PurpleHeadImpl : torch::nn::Module {
  explicit PurpleHeadImpl(const PurpleConfig& c);
  // query [Tq, H] and its mask [Tq] (1 = a real token); records [R, Tr, H] and their mask
  // [R, Tr]. Returns the propensities [R] in (0, 1).
  torch::Tensor forward(const torch::Tensor& query, const torch::Tensor& query_mask, const torch::Tensor& records,
                        const torch::Tensor& record_mask);

  PurpleConfig cfg;
  torch::nn::MultiheadAttention cross{nullptr};
  torch::nn::LayerNorm cross_norm{nullptr};
  torch::nn::TransformerEncoder mixer{nullptr};
  torch::nn::Linear mlp1{nullptr}, mlp2{nullptr};
};
TORCH_MODULE(PurpleHead);

// Masked mean over the token axis: states [N, T, H], mask [N, T] -> [N, H].
torch::Tensor masked_mean(const torch::Tensor& states, const torch::Tensor& mask);

// The frozen encoder and the trainable head together.
struct PurpleNet {
  BertModel bert{nullptr};
  PurpleHead head{nullptr};
  std::int64_t pad = 0;
  torch::Device device{torch::kCPU};

  // The frozen encoder's token states of one query's rows (rows[0] the query, rows[1..]
  // its R records), without gradient, in half precision: states [1 + R, L, H] and mask
  // [1 + R, L], L the longest row. A trainer may keep them across epochs: the encoder
  // never changes.
  std::pair<torch::Tensor, torch::Tensor> encode(const std::vector<const batches::Tokens*>& rows);
  // The head over encode()'s states: the propensities [R].
  torch::Tensor score(const torch::Tensor& states, const torch::Tensor& mask);
  // encode, then score.
  torch::Tensor forward(const std::vector<const batches::Tokens*>& rows);
};

}  // namespace attune::models
