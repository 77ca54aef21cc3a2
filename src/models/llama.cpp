#include "attune/models/llama.h"

#include <cmath>
#include <fstream>
#include <numbers>

#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>

#include "attune/core/error.h"
#include "attune/models/attention_kernel.h"
#include "attune/models/autocast.h"
#include "attune/models/weights.h"
#include "layers.h"

namespace attune::models {

namespace fs = std::filesystem;
namespace nn = torch::nn;

// ---------------------------------------------------------------- config

bool LlamaConfig::supports(const ConfigFile& c) {
  static const std::set<std::string> archs = {"LlamaForCausalLM", "Qwen2ForCausalLM", "MistralForCausalLM"};
  static const std::set<std::string> types = {"llama", "qwen2", "mistral"};
  return archs.count(c.architecture()) || types.count(c.model_type());
}

LlamaConfig LlamaConfig::from(const ConfigFile& c) {
  if (!supports(c))
    throw Error(c.source() + ": unsupported architecture \"" + c.architecture() + "\" (model_type \"" + c.model_type() +
                "\") for a Llama-family LM");
  LlamaConfig k;
  k.vocab_size = c.integer("vocab_size");
  k.hidden_size = c.integer("hidden_size");
  k.intermediate_size = c.integer("intermediate_size");
  k.num_layers = c.integer("num_hidden_layers");
  k.num_heads = c.integer("num_attention_heads");
  k.num_kv_heads = c.integer("num_key_value_heads", k.num_heads);
  k.head_dim = c.integer("head_dim", k.num_heads ? k.hidden_size / k.num_heads : 0);
  k.max_positions = c.integer("max_position_embeddings", 2048);
  k.rms_eps = c.number("rms_norm_eps", 1e-6);
  k.rope_theta = c.number("rope_theta", 10000.0);
  const bool qwen = c.model_type() == "qwen2" || c.architecture() == "Qwen2ForCausalLM";
  k.attention_bias = c.boolean("attention_bias", qwen);
  k.mlp_bias = c.boolean("mlp_bias", false);
  k.tie_embeddings = c.boolean("tie_word_embeddings", false);
  k.act = c.string("hidden_act", "silu");
  if (k.act != "silu") c.fail("hidden_act", "unsupported activation \"" + k.act + "\" (only silu)");
  if (k.num_heads <= 0 || k.num_kv_heads <= 0 || k.num_heads % k.num_kv_heads)
    c.fail("num_key_value_heads", "must divide num_attention_heads");
  if (k.head_dim % 2) c.fail("head_dim", "must be even for RoPE");
  if (c.has("rope_scaling")) {
    const auto& rs = c.json()["rope_scaling"];
    if (!rs.is_object()) c.fail("rope_scaling", "expected an object");
    std::string type = rs.value("rope_type", rs.value("type", std::string("default")));
    if (type == "default") {
    } else if (type == "linear" || type == "llama3") {
      k.rope_type = type;
      k.rope_factor = rs.value("factor", 1.0);
      k.low_freq_factor = rs.value("low_freq_factor", 1.0);
      k.high_freq_factor = rs.value("high_freq_factor", 4.0);
      k.original_max_positions = rs.value("original_max_position_embeddings", std::int64_t{8192});
    } else {
      c.fail("rope_scaling", "unsupported rope type \"" + type + "\" (supported: default, linear, llama3)");
    }
  }
  k.eos_ids = c.integers("eos_token_id");
  k.bos_id = c.integer("bos_token_id", -1);
  return k;
}

// ---------------------------------------------------------------- fused training kernels

namespace {

// ATTUNE_LM_TRAIN_KERNEL=torch: torch's operators for the training step's attention and
// output layer instead of the fused CPU kernels (for comparison; the same numbers to float32
// rounding, tests/models/test_llama.cpp).
bool fused_train_kernels() {
  const char* k = std::getenv("ATTUNE_LM_TRAIN_KERNEL");
  const std::string v = k ? k : "";
  if (!v.empty() && v != "fused" && v != "torch") throw UsageError("ATTUNE_LM_TRAIN_KERNEL=" + v + ": expected fused or torch");
  return v != "torch";
}

// Causal self-attention over q, k, v [B, L, heads, D] (contiguous float32 on the CPU), one
// (sequence, head) per task on torch's threads (attention_kernel.h). The forward's softmax
// [B, heads, L, round_up(L, 16)] is kept for the backward, as torch's softmax output was.
struct CausalAttention : torch::autograd::Function<CausalAttention> {
  static void each_head(const torch::Tensor& q, const std::function<void(std::int64_t, std::int64_t, const CausalHead&, float*)>& fn) {
    const auto B = q.size(0), L = q.size(1), H = q.size(2), D = q.size(3);
    const CausalHead shape{L, D, H * D, static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)))};
    const auto scratch_floats = causal_attention_scratch_floats(L, D);
    at::parallel_for(0, B * H, 1, [&](std::int64_t lo, std::int64_t hi) {
      std::vector<float> scratch(scratch_floats);
      for (std::int64_t bh = lo; bh < hi; ++bh) fn(bh, (bh / H) * L * H * D + (bh % H) * D, shape, scratch.data());
    });
  }
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v) {
    const auto B = q.size(0), L = q.size(1), H = q.size(2);
    const auto Lp = (L + 15) / 16 * 16;
    auto out = torch::empty_like(q);
    auto p = torch::empty({B, H, L, Lp}, q.options());
    const float *qp = q.data_ptr<float>(), *kp = k.data_ptr<float>(), *vp = v.data_ptr<float>();
    float *op = out.data_ptr<float>(), *pp = p.data_ptr<float>();
    each_head(q, [&](std::int64_t bh, std::int64_t off, const CausalHead& shape, float* scratch) {
      causal_attention_forward(qp + off, kp + off, vp + off, op + off, pp + bh * L * Lp, shape, scratch);
    });
    ctx->save_for_backward({q, k, v, out, p});
    return out;
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx, torch::autograd::tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &q = saved[0], &k = saved[1], &v = saved[2], &out = saved[3], &p = saved[4];
    const auto dout = grads[0].contiguous();
    auto dq = torch::empty_like(q), dk = torch::empty_like(k), dv = torch::empty_like(v);
    const auto L = q.size(1), Lp = p.size(3);
    const float *qp = q.data_ptr<float>(), *kp = k.data_ptr<float>(), *vp = v.data_ptr<float>(), *op = out.data_ptr<float>();
    const float *gp = dout.data_ptr<float>(), *pp = p.data_ptr<float>();
    float *dqp = dq.data_ptr<float>(), *dkp = dk.data_ptr<float>(), *dvp = dv.data_ptr<float>();
    each_head(q, [&](std::int64_t bh, std::int64_t off, const CausalHead& shape, float* scratch) {
      causal_attention_backward(qp + off, kp + off, vp + off, op + off, gp + off, pp + bh * L * Lp, dqp + off, dkp + off, dvp + off,
                                shape, scratch);
    });
    return {dq, dk, dv};
  }
};

}  // namespace

// ---------------------------------------------------------------- modules

using detail::RMSNorm;

struct AttentionImpl : nn::Module {
  AttentionImpl(const LlamaConfig& c) : heads(c.num_heads), kv_heads(c.num_kv_heads), dim(c.head_dim) {
    q_proj = register_module("q_proj", nn::Linear(nn::LinearOptions(c.hidden_size, heads * dim).bias(c.attention_bias)));
    k_proj = register_module("k_proj", nn::Linear(nn::LinearOptions(c.hidden_size, kv_heads * dim).bias(c.attention_bias)));
    v_proj = register_module("v_proj", nn::Linear(nn::LinearOptions(c.hidden_size, kv_heads * dim).bias(c.attention_bias)));
    o_proj = register_module("o_proj", nn::Linear(nn::LinearOptions(heads * dim, c.hidden_size).bias(false)));
  }
  static torch::Tensor rotate_half(const torch::Tensor& x) {
    auto h = x.size(-1) / 2;
    return torch::cat({-x.narrow(-1, h, h), x.narrow(-1, 0, h)}, -1);
  }
  // x [B, L, H]; cos/sin [B, 1, L, D]; mask [B, 1, L, T] additive; cache k/v [B, KV, T0, D]
  // (undefined when empty), updated in place.
  // causal: the mask is the plain causal one over these L positions (training's full rows),
  // which lets a CPU float32 step take the fused kernel (CausalAttention).
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                        const torch::Tensor& mask, torch::Tensor& k_cache, torch::Tensor& v_cache, bool causal = false) {
    const auto B = x.size(0), L = x.size(1);
    if (causal && !k_cache.defined() && x.is_cpu() && x.scalar_type() == torch::kFloat32 && heads == kv_heads &&
        !cpu_autocast_enabled() && fused_train_kernels()) {
      auto q = q_proj(x).view({B, L, heads, dim});
      auto k = k_proj(x).view({B, L, kv_heads, dim});
      auto v = v_proj(x).view({B, L, kv_heads, dim});
      const auto c = cos.transpose(1, 2), s = sin.transpose(1, 2);  // [B, L, 1, D]
      q = q * c + rotate_half(q) * s;
      k = k * c + rotate_half(k) * s;
      auto out = CausalAttention::apply(q.contiguous(), k.contiguous(), v.contiguous());
      return o_proj(out.view({B, L, heads * dim}));
    }
    auto q = q_proj(x).view({B, L, heads, dim}).transpose(1, 2);
    auto k = k_proj(x).view({B, L, kv_heads, dim}).transpose(1, 2);
    auto v = v_proj(x).view({B, L, kv_heads, dim}).transpose(1, 2);
    q = q * cos + rotate_half(q) * sin;
    k = k * cos + rotate_half(k) * sin;
    k_cache = k_cache.defined() ? torch::cat({k_cache, k}, 2) : k;
    v_cache = v_cache.defined() ? torch::cat({v_cache, v}, 2) : v;
    auto kk = k_cache, vv = v_cache;
    if (heads != kv_heads) {  // grouped-query attention: each kv head serves heads/kv_heads query heads
      kk = kk.repeat_interleave(heads / kv_heads, 1);
      vv = vv.repeat_interleave(heads / kv_heads, 1);
    }
    auto scores = torch::matmul(q, kk.transpose(-1, -2)).to(torch::kFloat32) * (1.0 / std::sqrt(static_cast<double>(dim)));
    auto p = torch::softmax(scores + mask, -1).to(x.scalar_type());
    auto out = torch::matmul(p, vv).transpose(1, 2).reshape({B, L, heads * dim});
    return o_proj(out);
  }
  std::int64_t heads, kv_heads, dim;
  nn::Linear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, o_proj{nullptr};
};
TORCH_MODULE(Attention);

struct MlpImpl : nn::Module {
  MlpImpl(const LlamaConfig& c) {
    gate_proj = register_module("gate_proj", nn::Linear(nn::LinearOptions(c.hidden_size, c.intermediate_size).bias(c.mlp_bias)));
    up_proj = register_module("up_proj", nn::Linear(nn::LinearOptions(c.hidden_size, c.intermediate_size).bias(c.mlp_bias)));
    down_proj = register_module("down_proj", nn::Linear(nn::LinearOptions(c.intermediate_size, c.hidden_size).bias(c.mlp_bias)));
  }
  torch::Tensor forward(const torch::Tensor& x) { return down_proj(torch::silu(gate_proj(x)) * up_proj(x)); }
  nn::Linear gate_proj{nullptr}, up_proj{nullptr}, down_proj{nullptr};
};
TORCH_MODULE(Mlp);

struct DecoderLayerImpl : nn::Module {
  DecoderLayerImpl(const LlamaConfig& c) {
    self_attn = register_module("self_attn", Attention(c));
    mlp = register_module("mlp", Mlp(c));
    input_layernorm = register_module("input_layernorm", RMSNorm(c.hidden_size, c.rms_eps));
    post_attention_layernorm = register_module("post_attention_layernorm", RMSNorm(c.hidden_size, c.rms_eps));
  }
  Attention self_attn{nullptr};
  Mlp mlp{nullptr};
  RMSNorm input_layernorm{nullptr}, post_attention_layernorm{nullptr};
};
TORCH_MODULE(DecoderLayer);

struct InnerImpl : nn::Module {
  InnerImpl(const LlamaConfig& c) {
    embed_tokens = register_module("embed_tokens", nn::Embedding(c.vocab_size, c.hidden_size));
    layers = register_module("layers", nn::ModuleList());
    for (std::int64_t i = 0; i < c.num_layers; ++i) {
      auto l = DecoderLayer(c);
      layers->push_back(l);
      decoder_layers.push_back(l);
    }
    norm = register_module("norm", RMSNorm(c.hidden_size, c.rms_eps));
  }
  nn::Embedding embed_tokens{nullptr};
  nn::ModuleList layers{nullptr};
  std::vector<DecoderLayer> decoder_layers;
  RMSNorm norm{nullptr};
};
TORCH_MODULE(Inner);

class LlamaModel : public nn::Module {
 public:
  explicit LlamaModel(const LlamaConfig& c) : cfg(c) {
    model = register_module("model", Inner(c));
    if (!c.tie_embeddings) lm_head = register_module("lm_head", nn::Linear(nn::LinearOptions(c.hidden_size, c.vocab_size).bias(false)));
    // RoPE inverse frequencies (with linear / llama3 scaling), kept as a plain tensor.
    auto idx = torch::arange(0, c.head_dim, 2, torch::kFloat64) / static_cast<double>(c.head_dim);
    auto inv = 1.0 / torch::pow(c.rope_theta, idx);
    if (cfg.rope_type == "linear") {
      inv = inv / c.rope_factor;
    } else if (cfg.rope_type == "llama3") {
      const double low_wl = c.original_max_positions / c.low_freq_factor, high_wl = c.original_max_positions / c.high_freq_factor;
      auto wavelen = 2 * std::numbers::pi / inv;
      auto scaled = torch::where(wavelen > low_wl, inv / c.rope_factor, inv);
      auto smooth = (c.original_max_positions / wavelen - c.low_freq_factor) / (c.high_freq_factor - c.low_freq_factor);
      auto smoothed = (1 - smooth) * scaled / c.rope_factor + smooth * scaled;
      auto medium = (wavelen >= high_wl).logical_and(wavelen <= low_wl);
      inv = torch::where(medium, smoothed, scaled);
    }
    inv_freq = inv.to(torch::kFloat32);
  }
  // tokens/positions [B, L] int64, mask [B,1,L,T] float32; caches per layer. Returns hidden [B, L, H].
  // causal: mask is the plain causal mask over tokens' own positions (train_hidden).
  torch::Tensor hidden(const torch::Tensor& tokens, const torch::Tensor& positions, const torch::Tensor& mask,
                       std::vector<torch::Tensor>& kc, std::vector<torch::Tensor>& vc, bool causal = false) {
    auto x = model->embed_tokens(tokens);
    auto freqs = positions.to(torch::kFloat32).unsqueeze(-1) * inv_freq.to(tokens.device()).view({1, 1, -1});
    auto emb = torch::cat({freqs, freqs}, -1).unsqueeze(1);  // [B,1,L,D]
    auto cos = emb.cos().to(x.scalar_type()), sin = emb.sin().to(x.scalar_type());
    for (std::size_t i = 0; i < model->decoder_layers.size(); ++i) {
      auto& layer = model->decoder_layers[i];
      x = x + layer->self_attn->forward(layer->input_layernorm(x), cos, sin, mask, kc[i], vc[i], causal);
      x = x + layer->mlp(layer->post_attention_layernorm(x));
    }
    return model->norm(x);
  }
  torch::Tensor logits(const torch::Tensor& h) {
    return (lm_head ? lm_head(h) : torch::matmul(h, model->embed_tokens->weight.t())).to(torch::kFloat32);
  }
  LlamaConfig cfg;
  Inner model{nullptr};
  nn::Linear lm_head{nullptr};
  torch::Tensor inv_freq;
};

// ---------------------------------------------------------------- decoding state

namespace {

class LlamaState final : public DecoderState {
 public:
  LlamaState(LlamaModel& net, torch::Device dev, std::int64_t batch)
      : net_(net), k_(net.cfg.num_layers), v_(net.cfg.num_layers) {
    key_valid_ = torch::zeros({batch, 0}, torch::TensorOptions().dtype(torch::kBool).device(dev));
    next_pos_ = torch::zeros({batch}, torch::TensorOptions().dtype(torch::kInt64).device(dev));
  }
  torch::Tensor step(const torch::Tensor& tokens_in, const torch::Tensor& valid_in) override {
    torch::NoGradGuard g;
    auto dev = key_valid_.device();
    auto tokens = tokens_in.to(dev, torch::kInt64), valid = valid_in.to(dev, torch::kBool);
    const auto L = tokens.size(1);
    auto positions = (next_pos_.unsqueeze(1) + valid.to(torch::kInt64).cumsum(1) - 1).clamp_min(0);
    key_valid_ = torch::cat({key_valid_, valid}, 1);
    auto mask = causal_key_mask(key_valid_, L);
    auto h = net_.hidden(tokens, positions, mask, k_, v_);
    next_pos_ = next_pos_ + valid.to(torch::kInt64).sum(1);
    return net_.logits(h);
  }
  void select(const torch::Tensor& index_in) override {
    auto index = index_in.to(key_valid_.device(), torch::kInt64);
    for (auto& t : k_)
      if (t.defined()) t = t.index_select(0, index);
    for (auto& t : v_)
      if (t.defined()) t = t.index_select(0, index);
    key_valid_ = key_valid_.index_select(0, index);
    next_pos_ = next_pos_.index_select(0, index);
  }

 private:
  LlamaModel& net_;
  std::vector<torch::Tensor> k_, v_;
  torch::Tensor key_valid_, next_pos_;
};
}  // namespace

// ---------------------------------------------------------------- Llama

Llama::Llama(const LlamaConfig& cfg, torch::Device device, torch::Dtype dtype)
    : cfg_(cfg), device_(device), dtype_(dtype), net_(std::make_shared<LlamaModel>(cfg)) {}
Llama::~Llama() = default;

torch::nn::Module& Llama::module() { return *net_; }

std::shared_ptr<Llama> Llama::load(const fs::path& dir, torch::Device device, torch::Dtype dtype) {
  const auto file = ConfigFile::load(dir);
  auto cfg = LlamaConfig::from(file);
  auto weights = WeightSet::open(dir);
  {  // sizes against the weights before anything is allocated
    const ConfigCheck chk(file, weights);
    chk.at_least(cfg.head_dim, "head_dim");
    chk.at_least(cfg.max_positions, "max_position_embeddings");
    chk.tensor("model.embed_tokens.weight", {{cfg.vocab_size, "vocab_size"}, {cfg.hidden_size, "hidden_size"}});
    chk.layers("model.layers.{}.self_attn.q_proj.weight", cfg.num_layers, "num_hidden_layers");
    chk.tensor("model.layers.0.self_attn.q_proj.weight",
               {{cfg.num_heads * cfg.head_dim, "num_attention_heads x head_dim"}, {cfg.hidden_size, "hidden_size"}});
    chk.tensor("model.layers.0.self_attn.k_proj.weight",
               {{cfg.num_kv_heads * cfg.head_dim, "num_key_value_heads x head_dim"}, {cfg.hidden_size, "hidden_size"}});
    chk.tensor("model.layers.0.mlp.gate_proj.weight",
               {{cfg.intermediate_size, "intermediate_size"}, {cfg.hidden_size, "hidden_size"}});
    if (!cfg.tie_embeddings && weights.contains("lm_head.weight"))
      chk.tensor("lm_head.weight", {{cfg.vocab_size, "vocab_size"}, {cfg.hidden_size, "hidden_size"}});
  }
  auto m = std::make_shared<Llama>(cfg, device, dtype);
  LoadOptions lo;
  if (cfg.tie_embeddings) lo.optional.insert("lm_head.weight");
  load_module(*m->net_, weights, lo);
  m->net_->to(device, dtype);
  m->net_->eval();
  return m;
}

std::shared_ptr<Llama> Llama::random(const LlamaConfig& cfg, std::uint64_t seed, torch::Device device) {
  torch::manual_seed(seed);
  auto m = std::make_shared<Llama>(cfg, device, torch::kFloat32);
  torch::NoGradGuard g;
  for (auto& p : m->net_->parameters()) {
    if (p.dim() >= 2) p.normal_(0, 0.2);
    else p.uniform_(0.5, 1.5);  // norms
  }
  m->net_->to(device);
  m->net_->eval();
  return m;
}

std::shared_ptr<Llama> Llama::load_llama2c(const fs::path& bin, torch::Device device) {
  std::ifstream in(bin, std::ios::binary);
  if (!in) throw Error(bin.string() + ": cannot open");
  std::int32_t h[7];
  in.read(reinterpret_cast<char*>(h), sizeof h);
  if (!in) throw Error(bin.string() + ": truncated header (expected 7 int32 fields)");
  LlamaConfig c;
  c.hidden_size = h[0];
  c.intermediate_size = h[1];
  c.num_layers = h[2];
  c.num_heads = h[3];
  c.num_kv_heads = h[4];
  const bool shared = h[5] > 0;
  c.vocab_size = std::abs(h[5]);
  c.max_positions = h[6];
  if (c.hidden_size <= 0 || c.num_layers <= 0 || c.num_heads <= 0 || c.num_kv_heads <= 0 || c.hidden_size % c.num_heads ||
      c.num_heads % c.num_kv_heads || c.max_positions <= 0)
    throw Error(bin.string() + ": implausible header");
  c.head_dim = c.hidden_size / c.num_heads;
  c.rms_eps = 1e-5;
  c.tie_embeddings = shared;
  c.eos_ids = {2};
  c.bos_id = 1;
  auto read = [&](std::vector<std::int64_t> shape, const char* what) {
    auto t = torch::empty(shape, torch::kFloat32);
    in.read(reinterpret_cast<char*>(t.data_ptr<float>()), static_cast<std::streamsize>(t.numel() * 4));
    if (!in) throw Error(bin.string() + ": truncated while reading " + what);
    return t;
  };
  const auto D = c.hidden_size, Hd = c.intermediate_size, NL = c.num_layers, hs = c.head_dim;
  auto emb = read({c.vocab_size, D}, "token_embedding_table");
  auto rms_att = read({NL, D}, "rms_att_weight");
  auto wq = read({NL, c.num_heads * hs, D}, "wq");
  auto wk = read({NL, c.num_kv_heads * hs, D}, "wk");
  auto wv = read({NL, c.num_kv_heads * hs, D}, "wv");
  auto wo = read({NL, D, c.num_heads * hs}, "wo");
  auto rms_ffn = read({NL, D}, "rms_ffn_weight");
  auto w1 = read({NL, Hd, D}, "w1");
  auto w2 = read({NL, D, Hd}, "w2");
  auto w3 = read({NL, Hd, D}, "w3");
  auto rms_final = read({D}, "rms_final_weight");
  read({c.max_positions, hs / 2}, "freq_cis_real");
  read({c.max_positions, hs / 2}, "freq_cis_imag");
  torch::Tensor wcls;
  if (!shared) wcls = read({c.vocab_size, D}, "wcls");
  // llama2.c rotates interleaved pairs; HF rotates halves. Permute q/k rows per head so
  // that (2i, 2i+1) become (i, i + hs/2), as HF's convert_llama_weights_to_hf does.
  auto permute = [&](const torch::Tensor& w, std::int64_t heads) {
    return w.view({heads, hs / 2, 2, D}).transpose(1, 2).reshape({heads * hs, D});
  };
  auto m = std::make_shared<Llama>(c, device, torch::kFloat32);
  torch::NoGradGuard g;
  auto& net = *m->net_;
  net.model->embed_tokens->weight.copy_(emb);
  for (std::int64_t i = 0; i < NL; ++i) {
    auto& l = net.model->decoder_layers[static_cast<std::size_t>(i)];
    l->input_layernorm->weight.copy_(rms_att[i]);
    l->self_attn->q_proj->weight.copy_(permute(wq[i], c.num_heads));
    l->self_attn->k_proj->weight.copy_(permute(wk[i], c.num_kv_heads));
    l->self_attn->v_proj->weight.copy_(wv[i]);
    l->self_attn->o_proj->weight.copy_(wo[i]);
    l->post_attention_layernorm->weight.copy_(rms_ffn[i]);
    l->mlp->gate_proj->weight.copy_(w1[i]);
    l->mlp->down_proj->weight.copy_(w2[i]);
    l->mlp->up_proj->weight.copy_(w3[i]);
  }
  net.model->norm->weight.copy_(rms_final);
  if (!shared) net.lm_head->weight.copy_(wcls);
  net.to(device);
  net.eval();
  return m;
}

std::unique_ptr<DecoderState> Llama::start(const std::vector<TokenIds>& prompts, torch::Tensor& next_logits) {
  torch::NoGradGuard g;
  if (prompts.empty()) throw Error("Llama::start: no prompts");
  std::size_t P = 0;
  for (auto& p : prompts) {
    if (p.empty()) throw Error("Llama::start: empty prompt (a causal LM needs at least one token, e.g. BOS)");
    P = std::max(P, p.size());
  }
  const auto B = static_cast<std::int64_t>(prompts.size());
  auto tokens = torch::zeros({B, static_cast<std::int64_t>(P)}, torch::kInt64);
  auto valid = torch::zeros({B, static_cast<std::int64_t>(P)}, torch::kBool);
  auto ta = tokens.accessor<std::int64_t, 2>();
  auto va = valid.accessor<bool, 2>();
  for (std::int64_t b = 0; b < B; ++b) {
    const auto& p = prompts[static_cast<std::size_t>(b)];
    const std::size_t off = P - p.size();  // left padding: every row ends at column P-1
    for (std::size_t i = 0; i < p.size(); ++i) {
      if (p[i] < 0 || p[i] >= cfg_.vocab_size) throw Error("token id " + std::to_string(p[i]) + " outside the vocabulary");
      ta[b][static_cast<std::int64_t>(off + i)] = p[i];
      va[b][static_cast<std::int64_t>(off + i)] = true;
    }
  }
  auto state = std::make_unique<LlamaState>(*net_, device_, B);
  auto logits = state->step(tokens.to(device_), valid.to(device_));
  next_logits = logits.select(1, static_cast<std::int64_t>(P) - 1);
  return state;
}

torch::Tensor Llama::forward(const torch::Tensor& tokens) {
  torch::NoGradGuard g;
  LlamaState s(*net_, device_, tokens.size(0));
  return s.step(tokens.to(device_), torch::ones(tokens.sizes(), torch::kBool).to(device_));
}

namespace {
torch::Tensor train_hidden(LlamaModel& net, const torch::Tensor& tokens_in, torch::Device device, std::int64_t num_layers) {
  auto tokens = tokens_in.to(device, torch::kInt64);
  const auto B = tokens.size(0), L = tokens.size(1);
  auto positions = torch::arange(L, torch::TensorOptions().dtype(torch::kInt64).device(device)).unsqueeze(0).expand({B, L});
  auto mask = causal_key_mask(torch::ones({B, L}, torch::TensorOptions().dtype(torch::kBool).device(device)), L);
  std::vector<torch::Tensor> kc(static_cast<std::size_t>(num_layers)), vc(static_cast<std::size_t>(num_layers));
  return net.hidden(tokens, positions, mask, kc, vc, /*causal=*/true);
}

// The output layer and its cross-entropy as one autograd function (CPU float32): each
// block's logits h W^T go through one row pass (softmax_xent_rows: the loss, and the softmax
// kept in place of the logits), and the backward pass needs no elementwise pass over the
// logits but the one-hot's subtraction: the gradient is (softmax - one-hot) g, whose products
// with W and h give h's and W's gradients, W's accumulated in one tensor across the blocks.
// torch's log_softmax + nll_loss made three passes over the [N, V] logits forward and
// backward and a W gradient per block (bench/RESULTS.md).
struct LinearCrossEntropy : torch::autograd::Function<LinearCrossEntropy> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& h, const torch::Tensor& w,
                               const torch::Tensor& targets, std::int64_t block_rows) {
    const auto N = h.size(0), V = w.size(0);
    const auto hc = h.contiguous();
    const auto t = targets.contiguous();
    std::vector<torch::Tensor> probs;
    auto loss = torch::empty({N}, h.options());
    const auto* tp = t.data_ptr<std::int64_t>();
    for (std::int64_t lo = 0; lo < N; lo += block_rows) {
      const auto n = std::min(block_rows, N - lo);
      auto p = torch::mm(hc.narrow(0, lo, n), w.t());  // [n, V], contiguous
      float* pp = p.data_ptr<float>();
      float* lp = loss.data_ptr<float>() + lo;
      at::parallel_for(0, n, 8, [&](std::int64_t r0, std::int64_t r1) {
        softmax_xent_rows(pp + r0 * V, r1 - r0, V, tp + lo + r0, lp + r0);
      });
      probs.push_back(std::move(p));
    }
    ctx->save_for_backward({hc, w, t});
    ctx->saved_data["probs"] = probs;
    ctx->saved_data["block"] = block_rows;
    return loss.sum();
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx, torch::autograd::tensor_list grads) {
    if (ctx->saved_data.count("used"))
      throw Error("Llama::train_loss_sum: the fused loss's backward ran twice (its softmax is overwritten by the first)");
    ctx->saved_data["used"] = true;
    const auto saved = ctx->get_saved_variables();
    const auto &h = saved[0], &w = saved[1], &t = saved[2];
    auto probs = ctx->saved_data["probs"].toTensorVector();
    const auto block = ctx->saved_data["block"].toInt();
    const double g = grads[0].item<double>();
    const bool want_h = ctx->needs_input_grad(0), want_w = ctx->needs_input_grad(1);
    torch::Tensor gh = want_h ? torch::empty_like(h) : torch::Tensor(), gw;
    const auto* tp = t.data_ptr<std::int64_t>();
    for (std::size_t b = 0; b < probs.size(); ++b) {
      auto& p = probs[b];  // softmax -> (softmax - one-hot) g, in place
      const auto lo = static_cast<std::int64_t>(b) * block, n = p.size(0), V = p.size(1);
      float* pp = p.data_ptr<float>();
      for (std::int64_t r = 0; r < n; ++r) pp[r * V + tp[lo + r]] -= 1.0f;
      if (want_h) {
        auto out = gh.narrow(0, lo, n);
        torch::mm_out(out, p, w);
        out.mul_(g);
      }
      if (want_w) {
        const auto hb = h.narrow(0, lo, n);
        gw = gw.defined() ? gw.addmm_(p.t(), hb, 1.0, g) : torch::mm(p.t(), hb).mul_(g);
      }
      p = torch::Tensor();  // freed as soon as used
    }
    return {gh, gw, torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor Llama::forward_train(const torch::Tensor& tokens) {
  return net_->logits(train_hidden(*net_, tokens, device_, cfg_.num_layers));
}

torch::Tensor Llama::train_loss_sum(const torch::Tensor& tokens, const torch::Tensor& targets, const torch::Tensor& at,
                                    std::int64_t block_rows) {
  auto h = train_hidden(*net_, tokens, device_, cfg_.num_layers);
  h = h.reshape({-1, h.size(-1)});
  if (at.defined()) h = h.index_select(0, at.to(device_, torch::kInt64));
  const auto want = targets.to(device_, torch::kInt64).reshape({-1});
  if (want.size(0) != h.size(0))
    throw Error("train_loss_sum: " + std::to_string(want.size(0)) + " targets for " + std::to_string(h.size(0)) + " positions");
  if (block_rows <= 0) block_rows = std::max<std::int64_t>(1, (std::int64_t{16} << 20) / (4 * std::max<std::int64_t>(1, cfg_.vocab_size)));
  const auto& w = net_->lm_head ? net_->lm_head->weight : net_->model->embed_tokens->weight;
  if (h.size(0) > 0 && h.is_cpu() && h.scalar_type() == torch::kFloat32 && w.scalar_type() == torch::kFloat32 &&
      !cpu_autocast_enabled() && fused_train_kernels()) {
    const auto V = cfg_.vocab_size;
    if (want.numel() && (want.min().item<std::int64_t>() < 0 || want.max().item<std::int64_t>() >= V))
      throw Error("train_loss_sum: a target token outside the vocabulary of " + std::to_string(V));
    return LinearCrossEntropy::apply(h, w, want, block_rows);
  }
  const auto sum = torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum);
  const auto hs = h.split(block_rows), ws = want.split(block_rows);
  torch::Tensor total;
  for (std::size_t i = 0; i < hs.size(); ++i) {
    auto part = torch::nn::functional::cross_entropy(net_->logits(hs[i]), ws[i], sum);
    total = total.defined() ? total + part : part;
  }
  return total.defined() ? total : torch::zeros({}, h.options().dtype(torch::kFloat32));
}

void Llama::save(const fs::path& dir) const {
  fs::create_directories(dir);
  nlohmann::json j = {{"architectures", {"LlamaForCausalLM"}},
                      {"model_type", "llama"},
                      {"vocab_size", cfg_.vocab_size},
                      {"hidden_size", cfg_.hidden_size},
                      {"intermediate_size", cfg_.intermediate_size},
                      {"num_hidden_layers", cfg_.num_layers},
                      {"num_attention_heads", cfg_.num_heads},
                      {"num_key_value_heads", cfg_.num_kv_heads},
                      {"head_dim", cfg_.head_dim},
                      {"max_position_embeddings", cfg_.max_positions},
                      {"rms_norm_eps", cfg_.rms_eps},
                      {"rope_theta", cfg_.rope_theta},
                      {"attention_bias", cfg_.attention_bias},
                      {"mlp_bias", cfg_.mlp_bias},
                      {"tie_word_embeddings", cfg_.tie_embeddings},
                      {"hidden_act", cfg_.act},
                      {"torch_dtype", "float32"}};
  if (!cfg_.eos_ids.empty()) j["eos_token_id"] = cfg_.eos_ids.size() == 1 ? nlohmann::json(cfg_.eos_ids[0]) : nlohmann::json(cfg_.eos_ids);
  if (cfg_.bos_id >= 0) j["bos_token_id"] = cfg_.bos_id;
  {
    std::ofstream out(dir / "config.json");
    out << j.dump(2) << "\n";
  }
  save_module(*net_, dir / "model.safetensors", {{"format", "pt"}});
}

}  // namespace attune::models
