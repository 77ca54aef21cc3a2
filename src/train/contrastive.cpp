#include "attune/train/contrastive.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <sstream>

#include "attune/core/error.h"
#include "attune/core/machine.h"
#include "attune/models/config.h"
#include "attune/core/parallel.h"
#include "attune/models/bert.h"
#include "attune/models/runtime.h"
#include "attune/models/weights.h"
#include "attune/text/subword.h"
#include "attune/train/pretrain.h"
#include "fit.h"

namespace attune::train {

namespace fs = std::filesystem;

// ---------------------------------------------------------------- objective

torch::Tensor info_nce(const torch::Tensor& q, const torch::Tensor& k, double temperature, bool symmetric) {
  TORCH_CHECK(q.dim() == 2 && q.sizes() == k.sizes(), "info_nce: q and k must be [B, D] of the same shape");
  TORCH_CHECK(temperature > 0, "info_nce: temperature must be positive");
  auto logits = torch::matmul(q, k.t()) / temperature;
  auto labels = torch::arange(q.size(0), torch::TensorOptions().dtype(torch::kInt64).device(q.device()));
  auto loss = torch::nn::functional::cross_entropy(logits, labels);
  if (symmetric) loss = 0.5 * (loss + torch::nn::functional::cross_entropy(logits.t(), labels));
  return loss;
}

Crop random_crop(std::size_t n, Rng& rng, const CropOptions& o) {
  if (n == 0) return {};
  const double ratio = o.ratio_min + (o.ratio_max - o.ratio_min) * rng.uniform();
  std::size_t len = static_cast<std::size_t>(std::floor(static_cast<double>(n) * ratio));
  len = std::max(len, o.min_tokens);
  len = std::min(len, n);
  if (o.max_tokens > 0) len = std::min(len, o.max_tokens);
  len = std::max<std::size_t>(len, 1);
  const std::size_t begin = rng.below(n - len + 1);
  return {begin, begin + len};
}

// ---------------------------------------------------------------- pretraining

namespace {

// Contriever pretraining on the shared loop: one epoch of `steps` steps whose items are
// the batch slots (steps x batch_size, in order); each step draws its own batch of
// distinct texts and their two crops from Rng(seed, step), so a resumed run draws the same.
class PretrainLearner final : public Learner {
 public:
  PretrainLearner(const std::vector<std::string>& texts, const PretrainOptions& o) : o_(o) {
    const auto tok = text::SubwordTokenizer::load(o.tokenizer);
    const auto cls = tok->cls_id(), sep = tok->sep_id();
    if (!cls || !sep) throw Error(o.tokenizer.string() + ": the tokenizer has no [CLS]/[SEP] tokens (a BERT vocabulary is needed)");
    cls_ = *cls;
    sep_ = *sep;
    pad_ = tok->pad_id().value_or(0);
    crop_.ratio_min = o.ratio_min;
    crop_.ratio_max = o.ratio_max;
    crop_.min_tokens = 4;
    crop_.max_tokens = o.max_length - 2;
    // Tokenize once, without specials; crops get [CLS] ... [SEP] around them.
    tokens_.resize(texts.size());
    parallel_for(texts.size(), 0, [&](std::size_t i) { tokens_[i] = tok->encode(texts[i], false).ids; });
    std::erase_if(tokens_, [&](const auto& t) { return t.size() < 2 * crop_.min_tokens; });
    if (tokens_.size() < o.fit.batch_size)
      throw Error("pretraining needs at least batch_size (" + std::to_string(o.fit.batch_size) + ") texts of 8+ tokens, and " +
                  std::to_string(tokens_.size()) + " remain");

    const std::size_t intermediate = o.intermediate ? o.intermediate : 4 * o.hidden;
    models::BertConfig cfg;
    cfg.vocab_size = static_cast<std::int64_t>(tok->vocab_size());
    cfg.hidden_size = static_cast<std::int64_t>(o.hidden);
    cfg.num_layers = static_cast<std::int64_t>(o.layers);
    cfg.num_heads = static_cast<std::int64_t>(o.heads);
    cfg.intermediate_size = static_cast<std::int64_t>(intermediate);
    cfg.max_positions = static_cast<std::int64_t>(o.max_length);
    cfg.pad_token_id = pad_;
    device_ = models::to_torch(o.fit.device);
    torch::manual_seed(o.fit.seed);
    model_ = models::BertModel(cfg, /*with_pooler=*/false);
    model_->init_weights();
    model_->to(device_);
    model_->train();
    // AdamW; no decay on biases and LayerNorm weights (as BERT's recipe).
    std::vector<torch::Tensor> decay, no_decay;
    for (auto& p : model_->parameters()) (p.dim() >= 2 ? decay : no_decay).push_back(p);
    std::vector<torch::optim::OptimizerParamGroup> groups;
    groups.emplace_back(decay, std::make_unique<torch::optim::AdamWOptions>(torch::optim::AdamWOptions(o.fit.lr).weight_decay(o.weight_decay)));
    groups.emplace_back(no_decay, std::make_unique<torch::optim::AdamWOptions>(torch::optim::AdamWOptions(o.fit.lr).weight_decay(0.0)));
    optimizer_ = std::make_unique<torch::optim::AdamW>(std::move(groups), torch::optim::AdamWOptions(o.fit.lr));

    sig_ = {{"hidden", o.hidden}, {"layers", o.layers}, {"heads", o.heads}, {"intermediate", intermediate},
            {"max_length", o.max_length}, {"steps", o.steps}, {"batch_size", o.fit.batch_size}, {"lr", o.fit.lr},
            {"weight_decay", o.weight_decay}, {"warmup", o.fit.warmup_steps.value_or(0)}, {"temperature", o.temperature},
            {"normalize", o.normalize}, {"ratio_min", o.ratio_min}, {"ratio_max", o.ratio_max}, {"seed", o.fit.seed}};
    if (o.fit.clip != 1.0) sig_["clip"] = o.fit.clip;  // absent = 1, as runs before the option was recorded
    save_.tokenizer_dir = o.tokenizer;
    save_.pooling = models::Pooling::Mean;
    save_.normalize = o.normalize;
    save_.max_seq_length = o.max_length;
  }

  std::string name() const override { return "pretrain"; }
  std::size_t size() const override { return o_.steps * o_.fit.batch_size; }
  std::vector<std::size_t> order(std::size_t) const override { return {}; }  // the step draws its batch
  std::vector<torch::Tensor> parameters() override { return model_->parameters(); }
  torch::optim::Optimizer& optimizer() override { return *optimizer_; }
  void train_mode(bool on) override { model_->train(on); }

  torch::Tensor loss(const MicroBatch& mb) override {
    // Everything random in a step comes from Rng(seed, step): a resumed run draws the same.
    const std::size_t n = tokens_.size(), B = o_.fit.batch_size;
    Rng rng(derive_seed(o_.fit.seed, "pretrain-step-" + std::to_string(mb.step)));
    perm_.resize(n);
    std::iota(perm_.begin(), perm_.end(), 0);
    for (std::size_t i = 0; i < B; ++i) std::swap(perm_[i], perm_[i + rng.below(n - i)]);  // B distinct texts
    std::vector<std::vector<std::int64_t>> rows(2 * B);
    std::size_t L = 0;
    for (std::size_t i = 0; i < B; ++i) {
      const auto& t = tokens_[perm_[i]];
      for (std::size_t v = 0; v < 2; ++v) {
        const Crop c = random_crop(t.size(), rng, crop_);
        auto& r = rows[v * B + i];
        r.push_back(cls_);
        r.insert(r.end(), t.begin() + static_cast<std::ptrdiff_t>(c.begin), t.begin() + static_cast<std::ptrdiff_t>(c.end));
        r.push_back(sep_);
        L = std::max(L, r.size());
      }
    }
    auto ids = torch::full({static_cast<std::int64_t>(2 * B), static_cast<std::int64_t>(L)}, pad_, torch::kInt64);
    auto mask = torch::zeros_like(ids);
    auto ia = ids.accessor<std::int64_t, 2>(), ma = mask.accessor<std::int64_t, 2>();
    for (std::size_t i = 0; i < rows.size(); ++i)
      for (std::size_t j = 0; j < rows[i].size(); ++j) {
        ia[i][j] = rows[i][j];
        ma[i][j] = 1;
      }
    ids = ids.to(device_);
    mask = mask.to(device_);
    auto hidden = model_->forward(ids, torch::zeros_like(ids), mask);
    auto emb = models::pool_embeddings(hidden, mask, models::Pooling::Mean, o_.normalize);
    return info_nce(emb.narrow(0, 0, B), emb.narrow(0, B, B), o_.temperature, /*symmetric=*/true);
  }

  nlohmann::json signature() const override { return sig_; }
  std::optional<std::string> epoch_line(const EpochRecord&, bool) const override { return ""; }
  void save(const fs::path& dir, const FitState& st) override {
    auto so = save_;
    so.attune_metadata = metadata(st, st.step);
    models::save_bert(model_, dir, so);
  }
  void load(const fs::path& dir) override { models::load_module(*model_, models::WeightSet::open(dir)); }
  void finish(const FitState& st, double seconds) override {
    model_->eval();
    auto so = save_;
    so.attune_metadata = metadata(st, st.step);
    so.attune_metadata["seconds_this_run"] = seconds;
    models::save_bert(model_, o_.fit.out, so);
  }

  std::size_t texts() const { return tokens_.size(); }

 private:
  nlohmann::json metadata(const FitState& st, std::size_t step) const {
    const auto& losses = st.track.losses();
    nlohmann::json m = {{"objective", "contriever-infonce"}, {"data", o_.fit.data_description}, {"texts", tokens_.size()},
                        {"tokenizer", o_.tokenizer.string()}, {"seed", o_.fit.seed}, {"torch_threads", models::torch_threads()},
                        {"steps", step}, {"options", sig_}, {"loss", losses.empty() ? 0.0 : losses.back()},
                        {"device", o_.fit.device.str()}, {"machine", this_machine().to_json()}};
    const std::size_t tail = std::min<std::size_t>(losses.size(), std::max<std::size_t>(1, o_.fit.log_every));
    if (tail) m["loss_last_mean"] = std::accumulate(losses.end() - tail, losses.end(), 0.0) / static_cast<double>(tail);
    return m;
  }

  const PretrainOptions& o_;
  std::vector<std::vector<std::int32_t>> tokens_;
  std::vector<std::size_t> perm_;
  CropOptions crop_;
  std::int64_t cls_ = 0, sep_ = 0, pad_ = 0;
  torch::Device device_{torch::kCPU};
  models::BertModel model_{nullptr};
  std::unique_ptr<torch::optim::AdamW> optimizer_;
  nlohmann::json sig_;
  models::SaveBertOptions save_;
};

// The loop's options for a pretraining run: one epoch of `steps` steps, each one whole
// batch (in-batch negatives cannot be split into micro-batches).
FitOptions loop_options(const PretrainOptions& o) {
  FitOptions f = o.fit;
  f.epochs = 1;
  f.micro_batch = f.batch_size;
  f.warmup_steps = o.fit.warmup_steps.value_or(0) ? *o.fit.warmup_steps : std::max<std::size_t>(1, o.steps / 10);
  return f;
}

}  // namespace

void prepare_pretrain_out(const PretrainOptions& o) { prepare_out(o.fit); }

void PretrainOptions::validate() const {
  {
    FitOptions f = loop_options(*this);  // the loop's options: micro_batch and epochs are the run's own
    f.inputs.push_back(tokenizer);        // out may not be the folder the run reads
    f.validate();
  }
  auto bad = [](const std::string& field, const std::string& what) { throw FieldError<UsageError>(field, what); };
  if (steps == 0) bad("steps", "steps = 0: must be positive");
  if (fit.batch_size < 2) bad("fit.batch_size", "fit.batch_size = " + std::to_string(fit.batch_size) + ": must be at least 2 (in-batch negatives)");
  if (hidden == 0 || heads == 0 || hidden % heads)
    bad("heads", "heads = " + std::to_string(heads) + " must divide hidden = " + std::to_string(hidden));
  if (max_length < 4) bad("max_length", "max_length = " + std::to_string(max_length) + ": must be at least 4");
  if (!(temperature > 0) || !std::isfinite(temperature)) bad("temperature", "temperature = " + std::to_string(temperature) + ": must be positive");
  if (!(ratio_min > 0 && ratio_min <= ratio_max && ratio_max <= 1))
    bad("ratio_min", "crop ratios must satisfy 0 < ratio_min <= ratio_max <= 1 (they are " + std::to_string(ratio_min) +
                         " and " + std::to_string(ratio_max) + ")");
}

PretrainResult pretrain_encoder(const std::vector<std::string>& texts, const PretrainOptions& o) {
  o.validate();
  prepare_pretrain_out(o);

  PretrainLearner learner(texts, o);
  const auto f = fit(learner, loop_options(o));
  PretrainResult res;
  res.texts = learner.texts();
  res.steps_done = f.steps_done;
  res.losses = f.losses;
  const std::size_t w = std::min<std::size_t>(res.losses.size(), std::max<std::size_t>(1, o.fit.log_every));
  if (w) {
    res.first_loss = std::accumulate(res.losses.begin(), res.losses.begin() + w, 0.0) / static_cast<double>(w);
    res.last_loss = std::accumulate(res.losses.end() - w, res.losses.end(), 0.0) / static_cast<double>(w);
  }
  if (res.steps_done == o.steps && !o.fit.quiet)
    std::fprintf(stderr, "pretrain: wrote %s (%zu steps, last loss %.4f)\n", o.fit.out.c_str(), res.steps_done, res.last_loss);
  res.seconds = f.seconds;
  return res;
}

}  // namespace attune::train
