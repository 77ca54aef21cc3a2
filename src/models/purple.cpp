// PURPLE's record encoder (training and inference) and its inference facade.
#include "attune/models/purple.h"

#include <algorithm>
#include <cmath>

#include "attune/core/error.h"
#include "attune/models/config.h"
#include "attune/models/purple_net.h"
#include "attune/models/weights.h"
#include "attune/text/subword.h"

namespace attune::models {

nlohmann::json PurpleConfig::to_json() const {
  nlohmann::json j = {{"hidden", hidden},
                      {"heads", heads},
                      {"layers", layers},
                      {"cross_attention", cross_attention},
                      {"record_transformer", record_transformer},
                      {"max_length", max_length},
                      {"k", k}};
  if (prior_weight) j["initial_prior"] = {{"weight", *prior_weight}, {"weight_start", prior_weight_start}, {"theta", prior_theta}};
  return j;
}

PurpleConfig PurpleConfig::from_json(const nlohmann::json& j, const std::string& file) {
  PurpleConfig c;
  try {
    c.hidden = j.at("hidden").get<std::int64_t>();
    c.heads = j.at("heads").get<std::int64_t>();
    c.layers = j.at("layers").get<std::int64_t>();
    c.cross_attention = j.at("cross_attention").get<bool>();
    c.record_transformer = j.at("record_transformer").get<bool>();
    c.max_length = j.at("max_length").get<std::size_t>();
    c.k = j.at("k").get<std::size_t>();
    if (j.contains("initial_prior")) {
      const auto& p = j.at("initial_prior");
      c.prior_weight = p.at("weight").get<double>();
      c.prior_weight_start = p.at("weight_start").get<double>();
      c.prior_theta = p.at("theta").get<double>();
      if (!std::isfinite(*c.prior_weight) || !std::isfinite(c.prior_weight_start) || !std::isfinite(c.prior_theta))
        throw Error(file + ": initial_prior holds a number that is not finite");
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error(file + ": " + e.what());
  }
  try {
    c.validate();
  } catch (const UsageError& e) {
    throw Error(file + ": " + e.what());
  }
  return c;
}

void PurpleConfig::validate() const {
  if (hidden <= 0) throw FieldError<UsageError>("hidden", "hidden = " + std::to_string(hidden) + ": must be positive");
  if (heads <= 0 || hidden % heads != 0)
    throw FieldError<UsageError>("purple_heads", "heads = " + std::to_string(heads) + ": must divide the encoder's hidden size " +
                                                     std::to_string(hidden));
  if (record_transformer && layers <= 0)
    throw FieldError<UsageError>("purple_layers", "layers = " + std::to_string(layers) +
                                                      ": the record Transformer needs at least one layer (or train it pointwise)");
  if (!cross_attention && !record_transformer)
    throw FieldError<UsageError>("purple_cross_attention",
                                 "without cross-attention the query reaches the records only through the record Transformer: "
                                 "a pointwise model without cross-attention would never read the query");
  if (max_length < 2) throw FieldError<UsageError>("max_length", "max_length = " + std::to_string(max_length) + ": must be at least 2");
  if (k == 0) throw FieldError<UsageError>("purple_k", "k = 0: PURPLE selects at least one record");
}

PurpleHeadImpl::PurpleHeadImpl(const PurpleConfig& c) : cfg(c) {
  cfg.validate();
  const auto H = cfg.hidden;
  if (cfg.cross_attention) {
    cross = register_module("cross", torch::nn::MultiheadAttention(torch::nn::MultiheadAttentionOptions(H, cfg.heads)));
    cross_norm = register_module("cross_norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({H})));
  }
  if (cfg.record_transformer) {
    auto layer = torch::nn::TransformerEncoderLayer(
        torch::nn::TransformerEncoderLayerOptions(H, cfg.heads).dim_feedforward(4 * H).dropout(0.1));
    mixer = register_module("mixer", torch::nn::TransformerEncoder(torch::nn::TransformerEncoderOptions(layer, cfg.layers)));
  }
  mlp1 = register_module("mlp1", torch::nn::Linear(H, H));
  mlp2 = register_module("mlp2", torch::nn::Linear(H, 1));
}

torch::Tensor masked_mean(const torch::Tensor& states, const torch::Tensor& mask) {
  const auto m = mask.to(states.dtype()).unsqueeze(2);
  return (states * m).sum(1) / m.sum(1).clamp_min(1.0);
}

torch::Tensor PurpleHeadImpl::forward(const torch::Tensor& query, const torch::Tensor& query_mask, const torch::Tensor& records,
                                      const torch::Tensor& record_mask) {
  const auto R = records.size(0);
  torch::Tensor pooled;
  if (cfg.cross_attention) {
    // Sequence-first for MultiheadAttention: each record is one batch row whose tokens ask
    // the query's tokens; the query's padding is masked out.
    const auto q = records.transpose(0, 1);                          // [Tr, R, H]
    const auto kv = query.unsqueeze(1).expand({-1, R, -1});          // [Tq, R, H]
    const auto pad = (query_mask == 0).unsqueeze(0).expand({R, -1});  // [R, Tq], true = ignore
    auto attended = std::get<0>(cross->forward(q, kv, kv, pad, /*need_weights=*/false));
    pooled = masked_mean(cross_norm->forward(records + attended.transpose(0, 1)), record_mask);
  } else {
    pooled = masked_mean(records, record_mask);
  }
  torch::Tensor h = pooled;  // [R, H]
  if (cfg.record_transformer) {
    // The records as one set (no positional encoding); without cross-attention the query's
    // pooled vector is one more member, dropped from the output.
    auto set = cfg.cross_attention ? pooled : torch::cat({masked_mean(query.unsqueeze(0), query_mask.unsqueeze(0)), pooled}, 0);
    auto mixed = mixer->forward(set.unsqueeze(1)).squeeze(1);
    h = cfg.cross_attention ? mixed : mixed.slice(0, 1);
  }
  return torch::sigmoid(mlp2->forward(torch::gelu(mlp1->forward(h)))).squeeze(1);
}

std::pair<torch::Tensor, torch::Tensor> PurpleNet::encode(const std::vector<const batches::Tokens*>& rows) {
  if (rows.size() < 2) throw Error("PURPLE: a query needs at least one record to score");
  torch::NoGradGuard ng;  // the encoder is frozen (003 §3)
  auto [ids, mask] = batches::pad_rows(rows, pad, device);
  // Kept in half precision, in training and inference alike: a trainer holds them across
  // epochs in half the memory, and what the head reads does not depend on whether they
  // were kept.
  return {bert->forward(ids, torch::zeros_like(ids), mask).to(torch::kHalf), mask};
}

torch::Tensor PurpleNet::score(const torch::Tensor& half_states, const torch::Tensor& mask) {
  const auto states = half_states.to(torch::kFloat);
  const auto R = states.size(0) - 1;
  return head->forward(states[0], mask[0], states.slice(0, 1, 1 + R), mask.slice(0, 1, 1 + R));
}

torch::Tensor PurpleNet::forward(const std::vector<const batches::Tokens*>& rows) {
  auto [states, mask] = encode(rows);
  return score(states, mask);
}

struct PurpleModel::Impl {
  PurpleNet net;
  std::shared_ptr<const text::SubwordTokenizer> tok;
  std::string dir;
  std::size_t max_length = 128, k = 5;
  std::optional<double> prior_weight;
};

PurpleModel::PurpleModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PurpleModel::~PurpleModel() = default;

std::shared_ptr<const PurpleModel> PurpleModel::load(const std::filesystem::path& dir, const Device& device) {
  const auto file = dir / kPurpleConfigFile;
  if (!std::filesystem::exists(file)) throw Error(file.string() + ": no such file (not a PURPLE model folder)");
  const auto cfg = PurpleConfig::from_json(read_json_file(file), file.string());
  auto impl = std::make_unique<Impl>();
  impl->dir = dir.string();
  impl->max_length = cfg.max_length;
  impl->k = cfg.k;
  impl->prior_weight = cfg.prior_weight;
  impl->net.device = to_torch(device);
  impl->net.bert = load_bert(dir, impl->net.device).model;
  impl->net.bert->eval();
  if (impl->net.bert->cfg.hidden_size != cfg.hidden)
    throw Error(file.string() + ": hidden = " + std::to_string(cfg.hidden) + " but the encoder's hidden size is " +
                std::to_string(impl->net.bert->cfg.hidden_size));
  impl->net.head = PurpleHead(cfg);
  {
    torch::NoGradGuard g;
    load_module(*impl->net.head, WeightSet::open_file(dir / kPurpleHeadFile));
  }
  impl->net.head->to(impl->net.device);
  impl->net.head->eval();
  impl->tok = text::SubwordTokenizer::load(dir);
  impl->net.pad = impl->tok->pad_id().value_or(0);
  return std::make_shared<const PurpleModel>(std::move(impl));
}

std::vector<float> PurpleModel::propensities(std::string_view query, std::span<const std::string> records) const {
  if (records.empty()) return {};
  torch::NoGradGuard ng;
  std::vector<std::string> texts{std::string(query)};
  texts.insert(texts.end(), records.begin(), records.end());
  const auto rows = batches::tokenize(*impl_->tok, texts, impl_->max_length);
  std::vector<const batches::Tokens*> ptrs;
  for (const auto& r : rows) ptrs.push_back(&r);
  auto p = const_cast<PurpleNet&>(impl_->net).forward(ptrs).to(torch::kCPU, torch::kFloat32).contiguous();
  return std::vector<float>(p.data_ptr<float>(), p.data_ptr<float>() + p.numel());
}

std::size_t PurpleModel::k() const { return impl_->k; }
std::optional<double> PurpleModel::initial_prior_weight() const { return impl_->prior_weight; }
std::string PurpleModel::id() const { return "purple:" + impl_->dir; }

}  // namespace attune::models
