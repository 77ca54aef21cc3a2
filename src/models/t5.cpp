#include "attune/models/t5.h"

#include <cmath>
#include <fstream>
#include <set>

#include "attune/core/error.h"
#include "attune/models/weights.h"
#include "layers.h"

namespace attune::models {

namespace fs = std::filesystem;
namespace nn = torch::nn;

// ---------------------------------------------------------------- config

namespace {

struct FfnKind {
  bool gated = false;
  std::string act;  // relu | gelu | gelu_new | silu
};

// HF T5Config: "gated-<act>" or "<act>"; "gated-gelu" means gelu_new (T5 v1.1 / Flan).
// Returns an empty act when unsupported.
FfnKind ffn_kind(const std::string& proj) {
  FfnKind k;
  std::string act = proj;
  if (proj.rfind("gated-", 0) == 0) {
    k.gated = true;
    act = proj.substr(6);
  }
  if (proj == "gated-gelu") act = "gelu_new";
  if (act == "swish") act = "silu";
  if (act == "gelu_pytorch_tanh") act = "gelu_new";
  static const std::set<std::string> acts = {"relu", "gelu", "gelu_new", "silu"};
  if (acts.count(act)) k.act = act;
  return k;
}

const char* kUnsupportedFfn = "\" (supported: relu, gated-gelu, gated-silu, gelu, silu, gelu_new, gated-relu)";

}  // namespace

bool T5Config::supports(const ConfigFile& c) {
  static const std::set<std::string> archs = {"T5ForConditionalGeneration", "T5WithLMHeadModel", "T5Model",
                                              "MT5ForConditionalGeneration", "MT5Model",
                                              "UMT5ForConditionalGeneration", "UMT5Model"};
  static const std::set<std::string> types = {"t5", "mt5", "umt5"};
  const auto arch = c.architecture();
  return arch.empty() ? types.count(c.model_type()) > 0 : archs.count(arch) > 0;
}

T5Config T5Config::from(const ConfigFile& c) {
  if (!supports(c))
    throw Error(c.source() + ": unsupported architecture \"" + c.architecture() + "\" (model_type \"" + c.model_type() +
                "\") for a T5 encoder-decoder LM");
  T5Config k;
  const auto arch = c.architecture();
  k.model_type = c.model_type();
  if (k.model_type.empty()) k.model_type = arch.rfind("UMT5", 0) == 0 ? "umt5" : arch.rfind("MT5", 0) == 0 ? "mt5" : "t5";
  k.vocab_size = c.integer("vocab_size");
  k.d_model = c.integer("d_model");
  k.d_kv = c.integer("d_kv");
  k.d_ff = c.integer("d_ff");
  k.num_layers = c.integer("num_layers");
  k.num_decoder_layers = c.integer("num_decoder_layers", k.num_layers);
  k.num_heads = c.integer("num_heads");
  k.num_buckets = c.integer("relative_attention_num_buckets", 32);
  k.max_distance = c.integer("relative_attention_max_distance", 128);
  k.eps = c.number("layer_norm_epsilon", 1e-6);
  k.feed_forward_proj = c.string("feed_forward_proj", "relu");
  if (ffn_kind(k.feed_forward_proj).act.empty())
    c.fail("feed_forward_proj", "unsupported \"" + k.feed_forward_proj + kUnsupportedFfn);
  k.tie_embeddings = c.boolean("tie_word_embeddings", true);
  k.bias_per_layer = k.model_type == "umt5";
  k.pad_id = c.integer("pad_token_id", 0);
  k.decoder_start_id = c.integer("decoder_start_token_id", k.pad_id);
  if (c.has("eos_token_id")) k.eos_ids = c.integers("eos_token_id");
  const std::initializer_list<std::pair<const char*, std::int64_t>> sizes = {
      {"vocab_size", k.vocab_size}, {"d_model", k.d_model}, {"d_kv", k.d_kv}, {"d_ff", k.d_ff},
      {"num_layers", k.num_layers}, {"num_decoder_layers", k.num_decoder_layers}, {"num_heads", k.num_heads}};
  for (const auto& [key, v] : sizes)
    if (v <= 0) c.fail(key, "must be positive");
  if (k.num_buckets < 4) c.fail("relative_attention_num_buckets", "must be at least 4");
  if (k.max_distance <= k.num_buckets / 4) c.fail("relative_attention_max_distance", "must exceed num_buckets / 4");
  if (k.decoder_start_id < 0 || k.decoder_start_id >= k.vocab_size) c.fail("decoder_start_token_id", "outside the vocabulary");
  return k;
}

torch::Tensor t5_relative_position_bucket(const torch::Tensor& relative_position, bool bidirectional,
                                          std::int64_t num_buckets, std::int64_t max_distance) {
  auto rp = relative_position.to(torch::kInt64);
  auto buckets = torch::zeros_like(rp);
  if (bidirectional) {
    num_buckets /= 2;
    buckets = buckets + (rp > 0).to(torch::kInt64) * num_buckets;
    rp = rp.abs();
  } else {
    rp = (-rp).clamp_min(0);  // keys after the query (never attended) share bucket 0
  }
  const std::int64_t max_exact = num_buckets / 2;
  auto is_small = rp < max_exact;
  // The same float32 operations as HF (log, divide by a double scalar, multiply, truncate),
  // so bucket boundaries agree; rp is clamped to max_exact only to keep log finite where the
  // exact branch is taken anyway.
  auto ratio = rp.clamp_min(max_exact).to(torch::kFloat32) / static_cast<double>(max_exact);
  auto large = torch::log(ratio) / std::log(static_cast<double>(max_distance) / static_cast<double>(max_exact)) *
               static_cast<double>(num_buckets - max_exact);
  auto if_large = (large.to(torch::kInt64) + max_exact).clamp_max(num_buckets - 1);
  return buckets + torch::where(is_small, rp, if_large);
}

// ---------------------------------------------------------------- modules

namespace {

// fp16 overflows in T5's feed-forward; HF clamps every block output to the finite range.
torch::Tensor clamp_fp16(const torch::Tensor& x) {
  if (x.scalar_type() != torch::kFloat16) return x;
  const double m = 65504.0 - (torch::isinf(x).any().item<bool>() ? 1000.0 : 0.0);
  return x.clamp(-m, m);
}

}  // namespace

// T5LayerNorm: RMS-style, cast to the weight's dtype.
inline detail::RMSNorm T5LayerNorm(std::int64_t dim, double eps) { return detail::RMSNorm(dim, eps, /*cast_to_weight=*/true); }

struct T5AttentionImpl : nn::Module {
  T5AttentionImpl(const T5Config& c, bool has_relative_bias) : heads(c.num_heads), dim(c.d_kv) {
    const auto inner = heads * dim;
    q = register_module("q", nn::Linear(nn::LinearOptions(c.d_model, inner).bias(false)));
    k = register_module("k", nn::Linear(nn::LinearOptions(c.d_model, inner).bias(false)));
    v = register_module("v", nn::Linear(nn::LinearOptions(c.d_model, inner).bias(false)));
    o = register_module("o", nn::Linear(nn::LinearOptions(inner, c.d_model).bias(false)));
    if (has_relative_bias) relative_attention_bias = register_module("relative_attention_bias", nn::Embedding(c.num_buckets, heads));
  }
  // [B, L, d_model] -> [B, heads, L, d_kv]
  torch::Tensor split(const torch::Tensor& x) const { return x.view({x.size(0), x.size(1), heads, dim}).transpose(1, 2); }
  // Bucket indices [..., L, T] -> float32 position bias [..., heads, L, T].
  torch::Tensor position_bias(const torch::Tensor& buckets) {
    return relative_attention_bias(buckets).movedim(-1, -3).to(torch::kFloat32);
  }
  // x [B, L, d_model] queries; keys/values [B, heads, T, d_kv]; bias float32, broadcastable to
  // [B, heads, L, T] (position bias plus the additive mask).
  torch::Tensor attend(const torch::Tensor& x, const torch::Tensor& keys, const torch::Tensor& values, const torch::Tensor& bias) {
    const auto B = x.size(0), L = x.size(1);
    // No 1/sqrt(d_kv): T5 folds that scale into the initialisation of q.
    auto scores = torch::matmul(split(q(x)), keys.transpose(-1, -2)).to(torch::kFloat32) + bias;
    auto p = torch::softmax(scores, -1).to(x.scalar_type());
    return o(torch::matmul(p, values).transpose(1, 2).reshape({B, L, heads * dim}));
  }
  std::int64_t heads, dim;
  nn::Linear q{nullptr}, k{nullptr}, v{nullptr}, o{nullptr};
  nn::Embedding relative_attention_bias{nullptr};
};
TORCH_MODULE(T5Attention);

// "DenseReluDense" whatever the activation: wi, wo or (gated) wi_0, wi_1, wo.
struct T5DenseImpl : nn::Module {
  explicit T5DenseImpl(const T5Config& c) {
    auto kind = ffn_kind(c.feed_forward_proj);
    gated = kind.gated;
    act = kind.act;
    auto lin = [&](std::int64_t in, std::int64_t out) { return nn::Linear(nn::LinearOptions(in, out).bias(false)); };
    if (gated) {
      wi_0 = register_module("wi_0", lin(c.d_model, c.d_ff));
      wi_1 = register_module("wi_1", lin(c.d_model, c.d_ff));
    } else {
      wi = register_module("wi", lin(c.d_model, c.d_ff));
    }
    wo = register_module("wo", lin(c.d_ff, c.d_model));
  }
  torch::Tensor activation(const torch::Tensor& x) const {
    if (act == "relu") return torch::relu(x);
    if (act == "gelu") return torch::gelu(x);
    if (act == "gelu_new") return torch::gelu(x, "tanh");
    return torch::silu(x);
  }
  torch::Tensor forward(const torch::Tensor& x) {
    if (gated) return wo(activation(wi_0(x)) * wi_1(x));
    return wo(activation(wi(x)));
  }
  bool gated = false;
  std::string act;
  nn::Linear wi{nullptr}, wi_0{nullptr}, wi_1{nullptr}, wo{nullptr};
};
TORCH_MODULE(T5Dense);

// One residual sub-layer: layer_norm then SelfAttention / EncDecAttention / DenseReluDense.
struct T5LayerImpl : nn::Module {
  enum Kind { kSelf, kCross, kFeedForward };
  T5LayerImpl(const T5Config& c, Kind kind, bool has_relative_bias) {
    if (kind == kSelf) attention = register_module("SelfAttention", T5Attention(c, has_relative_bias));
    if (kind == kCross) attention = register_module("EncDecAttention", T5Attention(c, false));
    if (kind == kFeedForward) dense = register_module("DenseReluDense", T5Dense(c));
    layer_norm = register_module("layer_norm", T5LayerNorm(c.d_model, c.eps));
  }
  T5Attention attention{nullptr};
  T5Dense dense{nullptr};
  detail::RMSNorm layer_norm{nullptr};
};
TORCH_MODULE(T5Layer);

struct T5BlockImpl : nn::Module {
  T5BlockImpl(const T5Config& c, bool decoder, bool has_relative_bias) {
    layer = register_module("layer", nn::ModuleList());
    self = T5Layer(c, T5LayerImpl::kSelf, has_relative_bias);
    layer->push_back(self);
    if (decoder) {
      cross = T5Layer(c, T5LayerImpl::kCross, false);
      layer->push_back(cross);
    }
    ff = T5Layer(c, T5LayerImpl::kFeedForward, false);
    layer->push_back(ff);
  }
  nn::ModuleList layer{nullptr};
  T5Layer self{nullptr}, cross{nullptr}, ff{nullptr};
};
TORCH_MODULE(T5Block);

struct T5StackImpl : nn::Module {
  T5StackImpl(const T5Config& c, bool decoder) {
    block = register_module("block", nn::ModuleList());
    const auto n = decoder ? c.num_decoder_layers : c.num_layers;
    for (std::int64_t i = 0; i < n; ++i) {
      auto b = T5Block(c, decoder, i == 0 || c.bias_per_layer);
      block->push_back(b);
      blocks.push_back(b);
    }
    final_layer_norm = register_module("final_layer_norm", T5LayerNorm(c.d_model, c.eps));
  }
  nn::ModuleList block{nullptr};
  std::vector<T5Block> blocks;
  detail::RMSNorm final_layer_norm{nullptr};
};
TORCH_MODULE(T5Stack);

class T5Model : public nn::Module {
 public:
  explicit T5Model(const T5Config& c) : cfg(c) {
    shared = register_module("shared", nn::Embedding(c.vocab_size, c.d_model));
    encoder = register_module("encoder", T5Stack(c, false));
    decoder = register_module("decoder", T5Stack(c, true));
    if (!c.tie_embeddings) lm_head = register_module("lm_head", nn::Linear(nn::LinearOptions(c.d_model, c.vocab_size).bias(false)));
  }

  // tokens [B, S] int64, valid [B, S] bool (false = right padding). Returns [B, S, d_model].
  torch::Tensor encode(const torch::Tensor& tokens, const torch::Tensor& valid) {
    const auto S = tokens.size(1);
    auto pos = torch::arange(S, torch::TensorOptions().dtype(torch::kInt64).device(tokens.device()));
    auto buckets = t5_relative_position_bucket(pos.view({1, S}) - pos.view({S, 1}), true, cfg.num_buckets, cfg.max_distance);
    auto mask = key_mask(valid);
    auto x = shared(tokens);
    torch::Tensor bias;
    for (auto& blk : encoder->blocks) {
      auto& sa = blk->self->attention;
      if (sa->relative_attention_bias) bias = sa->position_bias(buckets).unsqueeze(0) + mask;  // [B, H, S, S]
      auto h = blk->self->layer_norm(x);
      x = clamp_fp16(x + sa->attend(h, sa->split(sa->k(h)), sa->split(sa->v(h)), bias));
      x = clamp_fp16(x + blk->ff->dense(blk->ff->layer_norm(x)));
    }
    return encoder->final_layer_norm(x);
  }

  // Decoder inputs tokens [B, L]; buckets [B, L, T] of the new queries against all T keys so
  // far; self_mask [B, 1, L, T] and cross_mask [B, 1, 1, S] additive float32. Self-attention
  // caches kc/vc [B, H, T0, D] per block (undefined when empty) grow in place; ck/cv are the
  // cross-attention keys/values of the encoder output. Returns the normed output [B, L, d_model].
  torch::Tensor decode(const torch::Tensor& tokens, const torch::Tensor& buckets, const torch::Tensor& self_mask,
                       const torch::Tensor& cross_mask, std::vector<torch::Tensor>& kc, std::vector<torch::Tensor>& vc,
                       const std::vector<torch::Tensor>& ck, const std::vector<torch::Tensor>& cv) {
    auto x = shared(tokens);
    torch::Tensor bias;
    for (std::size_t i = 0; i < decoder->blocks.size(); ++i) {
      auto& blk = decoder->blocks[i];
      auto& sa = blk->self->attention;
      if (sa->relative_attention_bias) bias = sa->position_bias(buckets) + self_mask;  // [B, H, L, T]
      auto h = blk->self->layer_norm(x);
      auto k = sa->split(sa->k(h)), v = sa->split(sa->v(h));
      kc[i] = kc[i].defined() ? torch::cat({kc[i], k}, 2) : k;
      vc[i] = vc[i].defined() ? torch::cat({vc[i], v}, 2) : v;
      x = clamp_fp16(x + sa->attend(h, kc[i], vc[i], bias));
      x = clamp_fp16(x + blk->cross->attention->attend(blk->cross->layer_norm(x), ck[i], cv[i], cross_mask));
      x = clamp_fp16(x + blk->ff->dense(blk->ff->layer_norm(x)));
    }
    return decoder->final_layer_norm(x);
  }

  torch::Tensor logits(torch::Tensor h) {
    if (!lm_head) return torch::matmul(h * std::pow(static_cast<double>(cfg.d_model), -0.5), shared->weight.t()).to(torch::kFloat32);
    return lm_head(h).to(torch::kFloat32);
  }

  // valid [B, T] bool -> additive [B, 1, 1, T] float32.
  static torch::Tensor key_mask(const torch::Tensor& valid);

  T5Config cfg;
  nn::Embedding shared{nullptr};
  T5Stack encoder{nullptr}, decoder{nullptr};
  nn::Linear lm_head{nullptr};
};

namespace {
constexpr float kMasked = -1e30f;  // finite, so a fully masked row stays NaN-free
}  // namespace

torch::Tensor T5Model::key_mask(const torch::Tensor& valid) {
  return torch::zeros(valid.sizes(), torch::TensorOptions().dtype(torch::kFloat32).device(valid.device()))
      .masked_fill(valid.logical_not(), kMasked)
      .view({valid.size(0), 1, 1, valid.size(1)});
}

// ---------------------------------------------------------------- decoding state

namespace {

class T5State final : public DecoderState {
 public:
  // enc [B, S, d_model] the encoder output, enc_valid [B, S] its padding mask.
  T5State(T5Model& net, const torch::Tensor& enc, const torch::Tensor& enc_valid)
      : net_(net), k_(net.decoder->blocks.size()), v_(net.decoder->blocks.size()) {
    for (auto& blk : net.decoder->blocks) {
      auto& ca = blk->cross->attention;
      ck_.push_back(ca->split(ca->k(enc)));
      cv_.push_back(ca->split(ca->v(enc)));
    }
    cross_mask_ = T5Model::key_mask(enc_valid);
    const auto B = enc.size(0);
    auto i64 = torch::TensorOptions().dtype(torch::kInt64).device(enc.device());
    key_valid_ = torch::zeros({B, 0}, torch::TensorOptions().dtype(torch::kBool).device(enc.device()));
    key_pos_ = torch::zeros({B, 0}, i64);
    next_pos_ = torch::zeros({B}, i64);
  }

  torch::Tensor step(const torch::Tensor& tokens_in, const torch::Tensor& valid_in) override {
    torch::NoGradGuard g;
    auto dev = key_valid_.device();
    auto tokens = tokens_in.to(dev, torch::kInt64), valid = valid_in.to(dev, torch::kBool);
    const auto L = tokens.size(1);
    // Per-row positions: padding earlier in a row does not shift its later tokens.
    auto positions = (next_pos_.unsqueeze(1) + valid.to(torch::kInt64).cumsum(1) - 1).clamp_min(0);
    key_valid_ = torch::cat({key_valid_, valid}, 1);
    key_pos_ = torch::cat({key_pos_, positions}, 1);
    auto mask = causal_key_mask(key_valid_, L);
    auto rel = key_pos_.unsqueeze(1) - positions.unsqueeze(2);  // memory - query, [B, L, T]
    auto buckets = t5_relative_position_bucket(rel, false, net_.cfg.num_buckets, net_.cfg.max_distance);
    auto h = net_.decode(tokens, buckets, mask, cross_mask_, k_, v_, ck_, cv_);
    next_pos_ = next_pos_ + valid.to(torch::kInt64).sum(1);
    return net_.logits(h);
  }

  void select(const torch::Tensor& index_in) override {
    auto index = index_in.to(key_valid_.device(), torch::kInt64);
    for (auto* list : {&k_, &v_, &ck_, &cv_})
      for (auto& t : *list)
        if (t.defined()) t = t.index_select(0, index);
    cross_mask_ = cross_mask_.index_select(0, index);
    key_valid_ = key_valid_.index_select(0, index);
    key_pos_ = key_pos_.index_select(0, index);
    next_pos_ = next_pos_.index_select(0, index);
  }

 private:
  T5Model& net_;
  std::vector<torch::Tensor> k_, v_, ck_, cv_;
  torch::Tensor cross_mask_, key_valid_, key_pos_, next_pos_;
};

}  // namespace

// ---------------------------------------------------------------- T5

T5::T5(const T5Config& cfg, torch::Device device, torch::Dtype dtype) : cfg_(cfg), device_(device), dtype_(dtype) {
  if (ffn_kind(cfg.feed_forward_proj).act.empty())
    throw Error("T5: unsupported feed_forward_proj \"" + cfg.feed_forward_proj + kUnsupportedFfn);
  net_ = std::make_shared<T5Model>(cfg);
}
T5::~T5() = default;

torch::nn::Module& T5::module() { return *net_; }

std::shared_ptr<T5> T5::load(const fs::path& dir, torch::Device device, torch::Dtype dtype) {
  const auto file = ConfigFile::load(dir);
  auto cfg = T5Config::from(file);
  auto weights = WeightSet::open(dir);
  {  // sizes against the weights before anything is allocated
    const ConfigCheck chk(file, weights);
    std::string shared = "shared.weight";
    for (const char* alias : {"encoder.embed_tokens.weight", "decoder.embed_tokens.weight"})
      if (!weights.contains(shared) && weights.contains(alias)) shared = alias;
    chk.tensor(shared, {{cfg.vocab_size, "vocab_size"}, {cfg.d_model, "d_model"}});
    chk.layers("encoder.block.{}.layer.0.SelfAttention.q.weight", cfg.num_layers, "num_layers");
    chk.layers("decoder.block.{}.layer.0.SelfAttention.q.weight", cfg.num_decoder_layers, "num_decoder_layers");
    chk.tensor("encoder.block.0.layer.0.SelfAttention.q.weight",
               {{cfg.num_heads * cfg.d_kv, "num_heads x d_kv"}, {cfg.d_model, "d_model"}});
    chk.tensor("encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight",
               {{cfg.num_buckets, "relative_attention_num_buckets"}, {cfg.num_heads, "num_heads"}});
    chk.tensor(cfg.feed_forward_proj.rfind("gated-", 0) == 0 ? "encoder.block.0.layer.1.DenseReluDense.wi_0.weight"
                                                               : "encoder.block.0.layer.1.DenseReluDense.wi.weight",
               {{cfg.d_ff, "d_ff"}, {cfg.d_model, "d_model"}});
  }
  auto m = std::make_shared<T5>(cfg, device, dtype);
  LoadOptions lo;
  lo.optional.insert("shared.weight");  // may be stored under an embed_tokens alias only
  load_module(*m->net_, weights, lo);
  if (!weights.contains("shared.weight")) {
    std::string alias;
    for (const char* name : {"encoder.embed_tokens.weight", "decoder.embed_tokens.weight"})
      if (weights.contains(name)) {
        alias = name;
        break;
      }
    if (alias.empty())
      throw Error(weights.source().string() + ": missing tensor \"shared.weight\" (nor encoder.embed_tokens.weight or decoder.embed_tokens.weight)");
    const auto& view = weights.get(alias);
    auto& dst = m->net_->shared->weight;
    if (c10::IntArrayRef(view.shape) != dst.sizes())
      throw Error(weights.source().string() + ": tensor \"" + alias + "\" has shape " + c10::str(c10::IntArrayRef(view.shape)) +
                  " but the model (from config.json) expects " + c10::str(dst.sizes()));
    torch::NoGradGuard g;
    dst.copy_(to_tensor(view, dst.scalar_type()));
  }
  m->net_->to(device, dtype);
  m->net_->eval();
  return m;
}

std::shared_ptr<T5> T5::random(const T5Config& cfg, std::uint64_t seed, torch::Device device) {
  torch::manual_seed(seed);
  auto m = std::make_shared<T5>(cfg, device, torch::kFloat32);
  torch::NoGradGuard g;
  for (auto& p : m->net_->named_parameters()) {
    if (p.key().find("relative_attention_bias") != std::string::npos) p.value().normal_(0, 1.0);  // visible position effects
    else if (p.value().dim() >= 2) p.value().normal_(0, 0.2);
    else p.value().uniform_(0.5, 1.5);  // norms
  }
  m->net_->to(device);
  m->net_->eval();
  return m;
}

std::unique_ptr<DecoderState> T5::start(const std::vector<TokenIds>& prompts, torch::Tensor& next_logits) {
  torch::NoGradGuard g;
  if (prompts.empty()) throw Error("T5::start: no prompts");
  std::size_t S = 0;
  for (auto& p : prompts) {
    if (p.empty()) throw Error("T5::start: empty prompt (T5 inputs normally end with </s>)");
    S = std::max(S, p.size());
  }
  const auto B = static_cast<std::int64_t>(prompts.size());
  auto tokens = torch::full({B, static_cast<std::int64_t>(S)}, cfg_.pad_id, torch::kInt64);
  auto valid = torch::zeros({B, static_cast<std::int64_t>(S)}, torch::kBool);
  auto ta = tokens.accessor<std::int64_t, 2>();
  auto va = valid.accessor<bool, 2>();
  for (std::int64_t b = 0; b < B; ++b) {
    const auto& p = prompts[static_cast<std::size_t>(b)];
    for (std::size_t i = 0; i < p.size(); ++i) {  // right padding: relative positions need no shift
      if (p[i] < 0 || p[i] >= cfg_.vocab_size) throw Error("token id " + std::to_string(p[i]) + " outside the vocabulary");
      ta[b][static_cast<std::int64_t>(i)] = p[i];
      va[b][static_cast<std::int64_t>(i)] = true;
    }
  }
  tokens = tokens.to(device_);
  valid = valid.to(device_);
  auto state = std::make_unique<T5State>(*net_, net_->encode(tokens, valid), valid);
  auto first = torch::full({B, 1}, cfg_.decoder_start_id, torch::TensorOptions().dtype(torch::kInt64).device(device_));
  next_logits = state->step(first, torch::ones({B, 1}, torch::TensorOptions().dtype(torch::kBool).device(device_))).select(1, 0);
  return state;
}

torch::Tensor T5::forward(const torch::Tensor& encoder_ids, const torch::Tensor& decoder_ids, const torch::Tensor& encoder_mask) {
  torch::NoGradGuard g;
  auto enc_ids = encoder_ids.to(device_, torch::kInt64);
  auto enc_valid = encoder_mask.defined() ? encoder_mask.to(device_, torch::kBool)
                                          : torch::ones(enc_ids.sizes(), torch::TensorOptions().dtype(torch::kBool).device(device_));
  T5State s(*net_, net_->encode(enc_ids, enc_valid), enc_valid);
  auto dec = decoder_ids.to(device_, torch::kInt64);
  return s.step(dec, torch::ones(dec.sizes(), torch::TensorOptions().dtype(torch::kBool).device(device_)));
}

void T5::save(const fs::path& dir) const {
  fs::create_directories(dir);
  const std::string arch = cfg_.model_type == "umt5" ? "UMT5ForConditionalGeneration"
                           : cfg_.model_type == "mt5" ? "MT5ForConditionalGeneration"
                                                      : "T5ForConditionalGeneration";
  nlohmann::json j = {{"architectures", {arch}},
                      {"model_type", cfg_.model_type},
                      {"vocab_size", cfg_.vocab_size},
                      {"d_model", cfg_.d_model},
                      {"d_kv", cfg_.d_kv},
                      {"d_ff", cfg_.d_ff},
                      {"num_layers", cfg_.num_layers},
                      {"num_decoder_layers", cfg_.num_decoder_layers},
                      {"num_heads", cfg_.num_heads},
                      {"relative_attention_num_buckets", cfg_.num_buckets},
                      {"relative_attention_max_distance", cfg_.max_distance},
                      {"layer_norm_epsilon", cfg_.eps},
                      {"feed_forward_proj", cfg_.feed_forward_proj},
                      {"tie_word_embeddings", cfg_.tie_embeddings},
                      {"is_encoder_decoder", true},
                      {"pad_token_id", cfg_.pad_id},
                      {"decoder_start_token_id", cfg_.decoder_start_id},
                      {"torch_dtype", "float32"}};
  if (!cfg_.eos_ids.empty()) j["eos_token_id"] = cfg_.eos_ids.size() == 1 ? nlohmann::json(cfg_.eos_ids[0]) : nlohmann::json(cfg_.eos_ids);
  {
    std::ofstream out(dir / "config.json");
    out << j.dump(2) << "\n";
  }
  save_module(*net_, dir / "model.safetensors", {{"format", "pt"}});
}

}  // namespace attune::models
