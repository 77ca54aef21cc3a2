#include "attune/models/bert.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "attune/core/error.h"
#include "attune/core/parallel.h"
#include "attune/models/attention_kernel.h"
#include "attune/models/bert_native.h"
#include "attune/models/config.h"
#include "attune/models/runtime.h"
#include "attune/models/weights.h"

namespace attune::models {

namespace fs = std::filesystem;
namespace nn = torch::nn;

// ---------------------------------------------------------------- config

BertConfig BertConfig::from(const ConfigFile& c) {
  const std::string type = c.model_type(), arch = c.architecture();
  if (type != "bert" && !(type.empty() && arch.rfind("Bert", 0) == 0))
    c.fail("model_type", "unsupported model_type \"" + type + "\" for a BERT-family encoder (expected \"bert\")");
  BertConfig k;
  k.vocab_size = c.integer("vocab_size");
  k.hidden_size = c.integer("hidden_size");
  k.num_layers = c.integer("num_hidden_layers");
  k.num_heads = c.integer("num_attention_heads");
  k.intermediate_size = c.integer("intermediate_size");
  k.max_positions = c.integer("max_position_embeddings", 512);
  k.type_vocab_size = c.integer("type_vocab_size", 2);
  k.layer_norm_eps = c.number("layer_norm_eps", 1e-12);
  k.hidden_act = c.string("hidden_act", "gelu");
  k.pad_token_id = c.integer("pad_token_id", 0);
  if (arch == "BertForSequenceClassification") {
    k.num_labels = c.integer("num_labels", 0);
    if (k.num_labels == 0 && c.has("id2label")) k.num_labels = static_cast<std::int64_t>(c.json()["id2label"].size());
    if (k.num_labels == 0) k.num_labels = 2;  // transformers' default
  }
  if (k.hidden_act != "gelu" && k.hidden_act != "gelu_new" && k.hidden_act != "gelu_pytorch_tanh" && k.hidden_act != "relu")
    c.fail("hidden_act", "unsupported activation \"" + k.hidden_act + "\" (gelu, gelu_new, gelu_pytorch_tanh, relu)");
  const std::string pos = c.string("position_embedding_type", "absolute");
  if (pos != "absolute") c.fail("position_embedding_type", "unsupported \"" + pos + "\" (only absolute)");
  if (k.num_heads <= 0 || k.hidden_size <= 0 || k.hidden_size % k.num_heads)
    c.fail("num_attention_heads", "must be positive and divide hidden_size");
  if (k.num_layers < 0 || k.vocab_size <= 0 || k.intermediate_size <= 0 || k.max_positions <= 0 || k.type_vocab_size <= 0)
    c.fail("num_hidden_layers", "vocab_size, intermediate_size, max_position_embeddings, type_vocab_size must be positive");
  return k;
}

nlohmann::json BertConfig::to_json() const {
  return {{"architectures", {"BertModel"}},
          {"model_type", "bert"},
          {"vocab_size", vocab_size},
          {"hidden_size", hidden_size},
          {"num_hidden_layers", num_layers},
          {"num_attention_heads", num_heads},
          {"intermediate_size", intermediate_size},
          {"hidden_act", hidden_act},
          {"hidden_dropout_prob", 0.1},
          {"attention_probs_dropout_prob", 0.1},
          {"max_position_embeddings", max_positions},
          {"type_vocab_size", type_vocab_size},
          {"initializer_range", 0.02},
          {"layer_norm_eps", layer_norm_eps},
          {"pad_token_id", pad_token_id},
          {"position_embedding_type", "absolute"},
          {"torch_dtype", "float32"}};
}

// ---------------------------------------------------------------- modules

struct BertEmbeddingsImpl : nn::Module {
  explicit BertEmbeddingsImpl(const BertConfig& c) {
    word_embeddings = register_module("word_embeddings", nn::Embedding(c.vocab_size, c.hidden_size));
    position_embeddings = register_module("position_embeddings", nn::Embedding(c.max_positions, c.hidden_size));
    token_type_embeddings = register_module("token_type_embeddings", nn::Embedding(c.type_vocab_size, c.hidden_size));
    LayerNorm = register_module("LayerNorm", nn::LayerNorm(nn::LayerNormOptions({c.hidden_size}).eps(c.layer_norm_eps)));
  }
  torch::Tensor forward(const torch::Tensor& ids, const torch::Tensor& type_ids) {
    auto pos = torch::arange(ids.size(1), torch::TensorOptions().dtype(torch::kInt64).device(ids.device())).unsqueeze(0);
    return LayerNorm(word_embeddings(ids) + position_embeddings(pos) + token_type_embeddings(type_ids));
  }
  nn::Embedding word_embeddings{nullptr}, position_embeddings{nullptr}, token_type_embeddings{nullptr};
  nn::LayerNorm LayerNorm{nullptr};
};

struct SelfAttentionImpl : nn::Module {
  explicit SelfAttentionImpl(const BertConfig& c) {
    query = register_module("query", nn::Linear(c.hidden_size, c.hidden_size));
    key = register_module("key", nn::Linear(c.hidden_size, c.hidden_size));
    value = register_module("value", nn::Linear(c.hidden_size, c.hidden_size));
  }
  nn::Linear query{nullptr}, key{nullptr}, value{nullptr};
};
TORCH_MODULE(SelfAttention);

// dense + LayerNorm, the shape of both attention.output and output.
struct DenseNormImpl : nn::Module {
  DenseNormImpl(std::int64_t in, std::int64_t out, double eps) {
    dense = register_module("dense", nn::Linear(in, out));
    LayerNorm = register_module("LayerNorm", nn::LayerNorm(nn::LayerNormOptions({out}).eps(eps)));
  }
  // Post-LN residual: LayerNorm(dense(x) + residual).
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& residual) { return LayerNorm(dense(x) + residual); }
  nn::Linear dense{nullptr};
  nn::LayerNorm LayerNorm{nullptr};
};
TORCH_MODULE(DenseNorm);

struct AttentionBlockImpl : nn::Module {
  explicit AttentionBlockImpl(const BertConfig& c) {
    self = register_module("self", SelfAttention(c));
    output = register_module("output", DenseNorm(c.hidden_size, c.hidden_size, c.layer_norm_eps));
  }
  SelfAttention self{nullptr};
  DenseNorm output{nullptr};
};
TORCH_MODULE(AttentionBlock);

struct IntermediateImpl : nn::Module {
  explicit IntermediateImpl(const BertConfig& c) { dense = register_module("dense", nn::Linear(c.hidden_size, c.intermediate_size)); }
  nn::Linear dense{nullptr};
};
TORCH_MODULE(Intermediate);

// The fused CPU kernel (attention_kernel.h) serves inference: float32 on the CPU with no
// gradient to carry. Training, CUDA and half precision take the torch ops.
static bool fused_attention_applies(const torch::Tensor& qkv) {
  return qkv.device().is_cpu() && qkv.scalar_type() == torch::kFloat32 && !qkv.requires_grad();
}

// qkv [B, L, 3H] (q already scaled), key_bias [B, L] additive -> context [B, L, H]. The
// (sequence, head) pairs are shared out in contiguous chunks over torch's thread count, on
// attune's own threads: at::parallel_for is a header template whose OpenMP pragma is
// compiled into the caller, and attune is not built with -fopenmp, so there it would run
// serially.
static torch::Tensor fused_self_attention(const torch::Tensor& qkv, std::int64_t heads, std::int64_t head_dim, const torch::Tensor& key_bias) {
  const auto in = qkv.contiguous();
  const auto bias = key_bias.to(torch::kFloat32).contiguous();
  const std::int64_t B = in.size(0), L = in.size(1), H = heads * head_dim, tasks = B * heads;
  auto out = torch::empty({B, L, H}, in.options());
  const float* src = in.data_ptr<float>();
  const float* mask = bias.data_ptr<float>();
  float* dst = out.data_ptr<float>();
  const AttentionHead shape{L, head_dim, 3 * H, H};
  const std::size_t threads = std::max<std::size_t>(1, torch_threads());
  const std::int64_t chunks = std::min<std::int64_t>(tasks, static_cast<std::int64_t>(4 * threads));
  parallel_for(static_cast<std::size_t>(chunks), threads, [&](std::size_t chunk) {
    std::vector<float> scratch(attention_scratch_floats(shape));
    const std::int64_t c = static_cast<std::int64_t>(chunk);
    for (std::int64_t t = tasks * c / chunks; t < tasks * (c + 1) / chunks; ++t) {
      const std::int64_t b = t / heads, h = t % heads;
      const float* q = src + b * L * 3 * H + h * head_dim;
      attention_head(q, q + H, q + 2 * H, mask + b * L, dst + b * L * H + h * head_dim, shape, scratch.data());
    }
  });
  return out;
}

struct LayerImpl : nn::Module {
  explicit LayerImpl(const BertConfig& c) : heads(c.num_heads), head_dim(c.hidden_size / c.num_heads), act(c.hidden_act) {
    attention = register_module("attention", AttentionBlock(c));
    intermediate = register_module("intermediate", Intermediate(c));
    output = register_module("output", DenseNorm(c.intermediate_size, c.hidden_size, c.layer_norm_eps));
  }
  torch::Tensor activation(const torch::Tensor& x) const {
    if (act == "gelu") return torch::gelu(x);  // erf form, as transformers' "gelu"
    if (act == "relu") return torch::relu(x);
    return torch::gelu(x, "tanh");
  }
  // x [B, L, H]; additive_mask [B, 1, 1, L].
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& additive_mask) {
    const auto B = x.size(0), L = x.size(1);
    auto& sa = attention->self;
    // One fused [3H, H] projection instead of three: a wider matmul runs closer to the
    // BLAS peak (bench/RESULTS.md). The weights stay three HF-named Linear modules.
    // 1/sqrt(d) is folded into the query rows (H*H values) instead of scaling the scores
    // (B*h*L*L values) or a strided q view.
    const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
    auto w = torch::cat({sa->query->weight * scale, sa->key->weight, sa->value->weight}, 0);
    auto b = torch::cat({sa->query->bias * scale, sa->key->bias, sa->value->bias}, 0);
    auto qkv = torch::linear(x, w, b);  // [B, L, 3H]: q | k | v, each head-major
    torch::Tensor ctx;
    if (fused_attention_applies(qkv)) {
      ctx = fused_self_attention(qkv, heads, head_dim, additive_mask.view({B, L}));
    } else {
      auto t = qkv.view({B, L, 3, heads, head_dim}).permute({2, 0, 3, 1, 4});  // [3, B, h, L, d]
      auto scores = torch::matmul(t[0], t[1].transpose(-1, -2)) + additive_mask;
      ctx = torch::matmul(torch::softmax(scores, -1), t[2]).transpose(1, 2).reshape({B, L, heads * head_dim});
    }
    auto h = attention->output(ctx, x);
    return output(activation(intermediate->dense(h)), h);
  }
  std::int64_t heads, head_dim;
  std::string act;
  AttentionBlock attention{nullptr};
  Intermediate intermediate{nullptr};
  DenseNorm output{nullptr};
};
TORCH_MODULE(Layer);

struct BertEncoderImpl : nn::Module {
  explicit BertEncoderImpl(const BertConfig& c) {
    layer = register_module("layer", nn::ModuleList());
    for (std::int64_t i = 0; i < c.num_layers; ++i) {
      layers.push_back(Layer(c));
      layer->push_back(layers.back());
    }
  }
  nn::ModuleList layer{nullptr};
  std::vector<Layer> layers;
};

struct BertPoolerImpl : nn::Module {
  explicit BertPoolerImpl(const BertConfig& c) { dense = register_module("dense", nn::Linear(c.hidden_size, c.hidden_size)); }
  nn::Linear dense{nullptr};
};

BertModelImpl::BertModelImpl(const BertConfig& c, bool with_pooler) : cfg(c) {
  embeddings = register_module("embeddings", std::make_shared<BertEmbeddingsImpl>(c));
  encoder = register_module("encoder", std::make_shared<BertEncoderImpl>(c));
  if (with_pooler) pooler = register_module("pooler", std::make_shared<BertPoolerImpl>(c));
}

torch::Tensor BertModelImpl::forward(const torch::Tensor& ids, const torch::Tensor& type_ids, const torch::Tensor& mask) {
  auto x = embeddings->forward(ids, type_ids);
  // 0 where attended, a large negative on padding keys (HF uses finfo.min; -1e9 underflows
  // softmax to exactly 0 in float32 just the same and cannot overflow when summed).
  auto additive = (1.0 - mask.to(x.scalar_type())).mul(-1e9).view({mask.size(0), 1, 1, mask.size(1)});
  for (auto& l : encoder->layers) x = l->forward(x, additive);
  return x;
}

torch::Tensor BertModelImpl::pool(const torch::Tensor& hidden) {
  if (!pooler) throw Error("this BERT has no pooler (pooler.dense) to pool with");
  return torch::tanh(pooler->dense(hidden.select(1, 0)));
}

void BertModelImpl::init_weights(double stddev) {
  torch::NoGradGuard guard;
  for (auto& m : modules(/*include_self=*/false)) {
    if (auto* lin = m->as<nn::Linear>()) {
      lin->weight.normal_(0.0, stddev);
      if (lin->bias.defined()) lin->bias.zero_();
    } else if (auto* emb = m->as<nn::Embedding>()) {
      emb->weight.normal_(0.0, stddev);
    } else if (auto* ln = m->as<nn::LayerNorm>()) {
      ln->weight.fill_(1.0);
      ln->bias.zero_();
    }
  }
  if (cfg.pad_token_id >= 0 && cfg.pad_token_id < cfg.vocab_size) embeddings->word_embeddings->weight[cfg.pad_token_id].zero_();
}

// ---------------------------------------------------------------- native copy

namespace {
std::vector<float> floats_of(const torch::Tensor& t) {
  auto c = t.detach().to(torch::kCPU, torch::kFloat32).contiguous();
  return std::vector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
}
}  // namespace

BertNativeWeights bert_native_weights(const BertModel& model) {
  torch::NoGradGuard guard;
  const BertConfig& c = model->cfg;
  BertNativeWeights w;
  w.hidden = c.hidden_size, w.heads = c.num_heads, w.intermediate = c.intermediate_size;
  w.vocab = c.vocab_size, w.max_positions = c.max_positions, w.type_vocab = c.type_vocab_size;
  w.eps = static_cast<float>(c.layer_norm_eps);
  w.activation = c.hidden_act == "gelu"   ? BertNativeWeights::Activation::Gelu
                 : c.hidden_act == "relu" ? BertNativeWeights::Activation::Relu
                                          : BertNativeWeights::Activation::GeluTanh;
  const auto& e = *model->embeddings;
  w.word = floats_of(e.word_embeddings->weight);
  w.position = floats_of(e.position_embeddings->weight);
  w.token_type = floats_of(e.token_type_embeddings->weight);
  w.ln_gamma = floats_of(e.LayerNorm->weight);
  w.ln_beta = floats_of(e.LayerNorm->bias);
  for (const auto& l : model->encoder->layers) {
    const auto& sa = l->attention->self;
    // The same fused, pre-scaled projection as LayerImpl::forward.
    const double scale = 1.0 / std::sqrt(static_cast<double>(l->head_dim));
    BertNativeLayer n;
    n.w_qkv = floats_of(torch::cat({sa->query->weight * scale, sa->key->weight, sa->value->weight}, 0));
    n.b_qkv = floats_of(torch::cat({sa->query->bias * scale, sa->key->bias, sa->value->bias}, 0));
    n.w_attn_out = floats_of(l->attention->output->dense->weight);
    n.b_attn_out = floats_of(l->attention->output->dense->bias);
    n.ln1_gamma = floats_of(l->attention->output->LayerNorm->weight);
    n.ln1_beta = floats_of(l->attention->output->LayerNorm->bias);
    n.w_inter = floats_of(l->intermediate->dense->weight);
    n.b_inter = floats_of(l->intermediate->dense->bias);
    n.w_out = floats_of(l->output->dense->weight);
    n.b_out = floats_of(l->output->dense->bias);
    n.ln2_gamma = floats_of(l->output->LayerNorm->weight);
    n.ln2_beta = floats_of(l->output->LayerNorm->bias);
    w.layers.push_back(std::move(n));
  }
  if (model->pooler) {
    w.pool_w = floats_of(model->pooler->dense->weight);
    w.pool_b = floats_of(model->pooler->dense->bias);
  }
  return w;
}

// ---------------------------------------------------------------- pooling

Pooling parse_pooling(const std::string& s) {
  if (s == "mean") return Pooling::Mean;
  if (s == "cls") return Pooling::Cls;
  if (s == "auto" || s.empty()) return Pooling::Auto;
  throw UsageError("pooling \"" + s + "\": expected mean, cls or auto");
}

const char* pooling_name(Pooling p) {
  switch (p) {
    case Pooling::Mean: return "mean";
    case Pooling::Cls: return "cls";
    case Pooling::Auto: return "auto";
  }
  return "auto";
}

torch::Tensor pool_embeddings(const torch::Tensor& hidden, const torch::Tensor& mask, Pooling pooling, bool normalize) {
  torch::Tensor e;
  if (pooling == Pooling::Cls) {
    e = hidden.select(1, 0);
  } else {
    auto m = mask.to(hidden.scalar_type()).unsqueeze(-1);
    e = (hidden * m).sum(1) / m.sum(1).clamp_min(1e-9);
  }
  if (normalize) e = e / e.norm(2, -1, true).clamp_min(1e-12);  // sentence-transformers' Normalize
  return e;
}

namespace {


}  // namespace

PoolingSpec read_pooling_spec(const fs::path& dir) {
  PoolingSpec spec;
  fs::path pooling_dir = dir / "1_Pooling";
  const fs::path modules = dir / "modules.json";
  if (fs::exists(modules)) {
    auto j = read_json_file(modules);
    if (!j.is_array()) throw Error(modules.string() + ": expected an array of modules");
    for (const auto& m : j) {
      const std::string type = m.value("type", std::string());
      if (type.find("Normalize") != std::string::npos) spec.normalize = true;
      if (type.find("models.Pooling") != std::string::npos && m.contains("path") && m["path"].is_string())
        pooling_dir = dir / m["path"].get<std::string>();
    }
  }
  const fs::path pc = pooling_dir / "config.json";
  if (fs::exists(pc)) {
    auto j = read_json_file(pc);
    auto flag = [&](const char* k) { return j.contains(k) && j[k].is_boolean() && j[k].get<bool>(); };
    for (const char* bad : {"pooling_mode_max_tokens", "pooling_mode_mean_sqrt_len_tokens", "pooling_mode_weightedmean_tokens",
                            "pooling_mode_lasttoken"})
      if (flag(bad)) throw Error(pc.string() + ": field \"" + bad + "\": unsupported pooling mode (mean and cls are)");
    if (flag("pooling_mode_cls_token") && flag("pooling_mode_mean_tokens"))
      throw Error(pc.string() + ": concatenated cls + mean pooling is unsupported");
    if (flag("pooling_mode_cls_token")) spec.pooling = Pooling::Cls;
    else spec.pooling = Pooling::Mean;
  }
  const fs::path sb = dir / "sentence_bert_config.json";
  if (fs::exists(sb)) {
    auto j = read_json_file(sb);
    if (j.contains("max_seq_length") && j["max_seq_length"].is_number_integer() && j["max_seq_length"].get<std::int64_t>() > 0)
      spec.max_seq_length = j["max_seq_length"].get<std::size_t>();
  }
  return spec;
}

// ---------------------------------------------------------------- load / save

LoadedBert load_bert(const fs::path& dir, const torch::Device& device, bool classifier) {
  const auto cfgf = ConfigFile::load(dir);
  BertConfig cfg = BertConfig::from(cfgf);
  const WeightSet weights = WeightSet::open(dir);
  // BertForSequenceClassification and BertForMaskedLM store the encoder under "bert.".
  std::string prefix;
  if (weights.contains("embeddings.word_embeddings.weight")) prefix = "";
  else if (weights.contains("bert.embeddings.word_embeddings.weight")) prefix = "bert.";
  else throw Error(weights.source().string() + ": missing tensor \"embeddings.word_embeddings.weight\" (also tried \"bert.\")");
  const bool with_pooler = weights.contains(prefix + "pooler.dense.weight");
  {  // sizes against the weights before anything is allocated
    const ConfigCheck chk(cfgf, weights, prefix);
    chk.tensor("embeddings.word_embeddings.weight", {{cfg.vocab_size, "vocab_size"}, {cfg.hidden_size, "hidden_size"}});
    chk.tensor("embeddings.position_embeddings.weight",
               {{cfg.max_positions, "max_position_embeddings"}, {cfg.hidden_size, "hidden_size"}});
    chk.tensor("embeddings.token_type_embeddings.weight",
               {{cfg.type_vocab_size, "type_vocab_size"}, {cfg.hidden_size, "hidden_size"}});
    chk.layers("encoder.layer.{}.attention.self.query.weight", cfg.num_layers, "num_hidden_layers");
    chk.tensor("encoder.layer.0.intermediate.dense.weight",
               {{cfg.intermediate_size, "intermediate_size"}, {cfg.hidden_size, "hidden_size"}});
    if (classifier && cfg.num_labels > 0 && weights.contains("classifier.weight"))
      ConfigCheck(cfgf, weights).tensor("classifier.weight", {{cfg.num_labels, "num_labels"}, {cfg.hidden_size, "hidden_size"}});
  }
  LoadedBert out;
  out.model = BertModel(cfg, with_pooler);
  LoadOptions lo;
  lo.prefixes = {prefix};
  load_module(*out.model, weights, lo);
  if (classifier) {
    if (cfg.num_labels <= 0)
      throw Error(cfgf.source() + ": a cross-encoder needs a BertForSequenceClassification (architectures) with num_labels");
    out.classifier = nn::Linear(cfg.hidden_size, cfg.num_labels);
    load_module(*out.classifier, weights, LoadOptions{{}, {"classifier."}});
    if (!with_pooler) throw Error(weights.source().string() + ": missing tensor \"" + prefix + "pooler.dense.weight\" (the classifier reads the pooler)");
    out.classifier->to(device);
    out.classifier->eval();
  }
  out.model->to(device);
  out.model->eval();
  return out;
}

void save_bert(const BertModel& model, const fs::path& dir, const SaveBertOptions& opts) {
  fs::create_directories(dir);
  if (opts.classifier) {
    if (!model->has_pooler()) throw Error("save_bert: a sequence classifier needs the model's pooler");
    auto cfg = model->cfg.to_json();
    cfg["architectures"] = {"BertForSequenceClassification"};
    cfg["num_labels"] = opts.classifier->weight.size(0);
    write_json_file(dir / "config.json", cfg);
    nn::Module whole;  // HF's layout: bert.* and classifier.*
    whole.register_module("bert", model.ptr());
    whole.register_module("classifier", opts.classifier.ptr());
    save_module(whole, dir / "model.safetensors", {{"format", "pt"}});
  } else {
    write_json_file(dir / "config.json", model->cfg.to_json());
    save_module(*model, dir / "model.safetensors", {{"format", "pt"}});
  }
  if (!opts.tokenizer_dir.empty())
    for (const char* f : {"tokenizer.json", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json"}) {
      const fs::path src = opts.tokenizer_dir / f;
      if (fs::exists(src)) fs::copy_file(src, dir / f, fs::copy_options::overwrite_existing);
    }
  const Pooling p = opts.pooling == Pooling::Cls ? Pooling::Cls : Pooling::Mean;
  fs::create_directories(dir / "1_Pooling");
  write_json_file(dir / "1_Pooling" / "config.json", {{"word_embedding_dimension", model->cfg.hidden_size},
                                                 {"pooling_mode_cls_token", p == Pooling::Cls},
                                                 {"pooling_mode_mean_tokens", p == Pooling::Mean},
                                                 {"pooling_mode_max_tokens", false},
                                                 {"pooling_mode_mean_sqrt_len_tokens", false}});
  nlohmann::json modules = nlohmann::json::array();
  modules.push_back({{"idx", 0}, {"name", "0"}, {"path", ""}, {"type", "sentence_transformers.models.Transformer"}});
  modules.push_back({{"idx", 1}, {"name", "1"}, {"path", "1_Pooling"}, {"type", "sentence_transformers.models.Pooling"}});
  if (opts.normalize)
    modules.push_back({{"idx", 2}, {"name", "2"}, {"path", "2_Normalize"}, {"type", "sentence_transformers.models.Normalize"}});
  write_json_file(dir / "modules.json", modules);
  if (opts.normalize) fs::create_directories(dir / "2_Normalize");
  if (opts.max_seq_length > 0)
    write_json_file(dir / "sentence_bert_config.json", {{"max_seq_length", opts.max_seq_length}, {"do_lower_case", false}});
  if (!opts.attune_metadata.is_null()) write_json_file(dir / "attune_train.json", opts.attune_metadata);
}

}  // namespace attune::models
