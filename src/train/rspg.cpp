// RSPG-Pre / RSPG-Post selector trainer (000 §5); inference is neural::Selector.
#include "attune/train/rspg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <numeric>

#include "attune/core/error.h"
#include "attune/core/rng.h"
#include "attune/models/bert.h"
#include "attune/models/config.h"
#include "attune/models/token_batches.h"
#include "attune/models/runtime.h"
#include "attune/models/selector_net.h"
#include "attune/models/weights.h"
#include "attune/retrieval/spec.h"
#include "attune/text/subword.h"
#include "attune/train/objectives.h"
#include "checkpoint.h"
#include "fit.h"

namespace attune::train {

namespace fs = std::filesystem;
namespace detail = models::batches;
using detail::Tokens;

namespace {

using Net = models::SelectorNet;

std::vector<Tokens> encode(const text::SubwordTokenizer& tok, const std::vector<std::string>& queries,
                           const std::vector<std::string>& prompts, const std::vector<std::string>& outputs,
                           RspgVariant v, models::SelectorInput input, std::size_t max_length) {
  return models::encode_selector_inputs(tok, queries, prompts, outputs, v == RspgVariant::Post, input, max_length);
}

struct Tokenized {
  std::vector<Tokens> texts;
  std::vector<double> utility;
};

std::vector<Tokenized> tokenize_examples(const text::SubwordTokenizer& tok, const std::vector<RspgExample>& ex,
                                         RspgVariant v, models::SelectorInput input, std::size_t R,
                                         std::size_t max_length) {
  std::vector<std::string> queries, prompts, outputs;
  for (const auto& e : ex) {
    if (e.prompts.size() != R || e.utility.size() != R || (v == RspgVariant::Post && e.outputs.size() != R))
      throw Error("RSPG example " + e.id + ": expected " + std::to_string(R) + " prompts, utilities" +
                  (v == RspgVariant::Post ? " and outputs" : "") + " (one per pool retriever)");
    if (input == models::SelectorInput::QueryFirst && e.query.empty())
      throw Error("RSPG example " + e.id + ": no input x (query), which a query-first selector reads");
    prompts.insert(prompts.end(), e.prompts.begin(), e.prompts.end());
    queries.insert(queries.end(), R, e.query);
    if (v == RspgVariant::Post) outputs.insert(outputs.end(), e.outputs.begin(), e.outputs.end());
  }
  auto t = encode(tok, queries, prompts, outputs, v, input, max_length);
  std::vector<Tokenized> out(ex.size());
  for (std::size_t i = 0; i < ex.size(); ++i) {
    for (std::size_t r = 0; r < R; ++r) out[i].texts.push_back(std::move(t[i * R + r]));
    out[i].utility = ex[i].utility;
  }
  return out;
}

// scores [b, R], utility [b, R].
std::pair<torch::Tensor, torch::Tensor> score_batch(Net& net, const std::vector<Tokenized>& ex, const std::vector<std::size_t>& idx) {
  std::vector<const Tokens*> rows;
  std::vector<double> u;
  for (auto i : idx)
    for (std::size_t r = 0; r < ex[i].texts.size(); ++r) {
      rows.push_back(&ex[i].texts[r]);
      u.push_back(ex[i].utility[r]);
    }
  const auto b = static_cast<std::int64_t>(idx.size());
  auto s = net.forward(rows).view({b, -1});
  return {s, torch::tensor(u, torch::kFloat64).view({b, -1}).to(net.device)};
}

// Success rate (argmax among the best) and mean utility of the argmax over `ex`.
// Dev success, the selected retriever's mean utility and the oracle's (the pool's best per input).
struct DevScores {
  double success = 0, utility = 0, oracle = 0;
};
DevScores evaluate(Net& net, const std::vector<Tokenized>& ex, const torch::Tensor& bias) {
  if (ex.empty()) return {};
  torch::NoGradGuard ng;
  double success = 0, utility = 0, oracle = 0;
  for (std::size_t lo = 0; lo < ex.size(); lo += 8) {
    std::vector<std::size_t> idx;
    for (std::size_t i = lo; i < std::min(ex.size(), lo + 8); ++i) idx.push_back(i);
    auto [s, u] = score_batch(net, ex, idx);
    if (bias.defined()) s = s + bias.to(s.dtype()).unsqueeze(0);
    auto pick = s.argmax(1, true);
    auto chosen = u.gather(1, pick).squeeze(1);
    auto best = std::get<0>(u.max(1));
    success += (chosen >= best - 1e-9).sum().item<double>();
    utility += chosen.sum().item<double>();
    oracle += best.sum().item<double>();
  }
  const auto n = static_cast<double>(ex.size());
  return {success / n, utility / n, oracle / n};
}

// RSPG on the shared loop: the selector network, the listwise KL over each input's pool,
// dev utility of the selected retriever as the kept epoch's criterion.
class RspgLearner final : public DevSelectedLearner {
 public:
  RspgLearner(const std::vector<RspgExample>& train, const std::vector<RspgExample>& dev, const RspgOptions& o)
      : DevSelectedLearner(o.fit, {"dev_success", "dev_utility", "dev_oracle"}), o_(o), R_(o.pool.size()) {
    net_ = models::SelectorNet::start(o.init, models::to_torch(o.fit.device), o.fit.seed);
    net_.head->to(net_.device);
    const auto tok = text::SubwordTokenizer::load(o.init);
    net_.pad = tok->pad_id().value_or(0);
    const auto spec = models::read_pooling_spec(o.init);
    max_length_ = std::min(o.max_length, detail::length_cap(net_.bert->cfg.max_positions, 0, tok->model_max_length()));
    tr_ = tokenize_examples(*tok, train, o.variant, o.input, R_, max_length_);
    dv_ = tokenize_examples(*tok, dev, o.variant, o.input, R_, max_length_);
    if (o.pool_prior) {
      // b_r = mean_i target_ir / T, the targets as the loss reads them (raw or z-scored): its
      // argmax is the member with the best mean utility on the training inputs, the best
      // input-blind choice. The head keeps 000's initialisation (N(0, 0.02)): its untrained
      // scores are small beside a clear gap in b (a member that never helps is not picked),
      // and the encoder gets gradients from the first step. (A head started at zero left the
      // encoder without gradients at lr 1e-5 and learned nothing on commit_subject. The KL
      // loss's own best constant, log mean_i softmax(target_i / T), favours the member most
      // often best instead.)
      torch::NoGradGuard g;
      std::vector<double> u;
      for (const auto& e : tr_) u.insert(u.end(), e.utility.begin(), e.utility.end());
      const auto n = static_cast<std::int64_t>(tr_.size()), r = static_cast<std::int64_t>(R_);
      const auto ut = torch::tensor(u, torch::kFloat64).view({n, r});
      const auto m = torch::ones({n, r}, torch::kBool);
      const auto b = normalize_targets(ut, m, o.target_normalization).mean(0) / o.temperature;
      pool_bias_ = b.to(torch::kFloat32).to(net_.device).set_requires_grad(true);
    }
    // AdamW; no decay on biases and LayerNorm weights.
    std::vector<torch::Tensor> decay, no_decay;
    for (auto& p : net_.parameters()) (p.dim() >= 2 ? decay : no_decay).push_back(p);
    if (pool_bias_.defined()) no_decay.push_back(pool_bias_);
    std::vector<torch::optim::OptimizerParamGroup> groups;
    groups.emplace_back(decay, std::make_unique<torch::optim::AdamWOptions>(torch::optim::AdamWOptions(o.fit.lr).weight_decay(0.01)));
    groups.emplace_back(no_decay, std::make_unique<torch::optim::AdamWOptions>(torch::optim::AdamWOptions(o.fit.lr).weight_decay(0.0)));
    optimizer_ = std::make_unique<torch::optim::AdamW>(std::move(groups), torch::optim::AdamWOptions(o.fit.lr));
    mask_ = torch::ones({1, static_cast<std::int64_t>(R_)}, torch::kBool).to(net_.device);
    sig_ = {{"variant", rspg_variant_name(o.variant)}, {"init", o.init.string()}, {"pool", o.pool}, {"k", o.k},
            {"prompt_max_length", o.prompt_max_length}, {"max_length", o.max_length},
            {"input", models::to_string(o.input)}, {"epochs", o.fit.epochs},
            {"batch_size", o.fit.batch_size}, {"micro_batch", o.fit.micro_batch}, {"lr", o.fit.lr},
            {"warmup", o.fit.warmup}, {"clip", o.fit.clip}, {"temperature", o.temperature},
            {"target_normalization", to_string(o.target_normalization)}, {"seed", o.fit.seed},
            {"train_examples", train.size()}};
    if (o.texts != "prompts") sig_["texts"] = o.texts;  // (absent: the checkpoints of earlier runs still resume)
    if (o.pool_prior) sig_["pool_prior"] = true;
    save_.tokenizer_dir = o.init;
    save_.pooling = spec.pooling;
    save_.normalize = spec.normalize;
  }

  std::string name() const override { return rspg_variant_name(o_.variant); }
  std::size_t size() const override { return tr_.size(); }
  std::vector<std::size_t> order(std::size_t epoch) const override {
    return epoch_order(o_.fit.seed, "rspg-epoch-", epoch, tr_.size());
  }
  std::vector<torch::Tensor> parameters() override {
    auto p = net_.parameters();
    if (pool_bias_.defined()) p.push_back(pool_bias_);
    return p;
  }
  torch::optim::Optimizer& optimizer() override { return *optimizer_; }
  void train_mode(bool on) override { net_.bert->train(on); }

  torch::Tensor loss(const MicroBatch& mb) override {
    const std::vector<std::size_t> idx(mb.items.begin(), mb.items.end());
    auto [sc, u] = score_batch(net_, tr_, idx);
    if (pool_bias_.defined()) sc = sc + pool_bias_.unsqueeze(0);
    const auto m = mask_.expand({static_cast<std::int64_t>(idx.size()), -1});
    return listwise_kl_loss(sc, normalize_targets(u.to(sc.dtype()), m, o_.target_normalization), m, o_.temperature);
  }

  std::optional<DevValue> dev() override {
    if (dv_.empty()) return std::nullopt;
    const auto d = evaluate(net_, dv_, pool_bias_);
    return DevValue{d.utility, {{"dev_success", d.success}, {"dev_utility", d.utility}, {"dev_oracle", d.oracle}},
                    " dev success " + std::to_string(d.success) + " utility " + std::to_string(d.utility) + " (oracle " +
                        std::to_string(d.oracle) + ")"};
  }
  nlohmann::json signature() const override { return sig_; }

  void save(const fs::path& dir, const FitState& st) override {
    auto so = save_;
    so.attune_metadata = metadata(st, st.step);
    models::save_bert(net_.bert, dir, so);
    models::save_module(*net_.head, dir / models::kSelectorHeadFile);
    if (pool_bias_.defined()) models::write_json_file(dir / kPoolBiasFile, {{"pool_bias", bias()}});
  }
  void load(const fs::path& dir) override {
    models::load_module(*net_.bert, models::WeightSet::open(dir));
    models::load_module(*net_.head, models::WeightSet::open_file(dir / models::kSelectorHeadFile));
    if (pool_bias_.defined()) {
      const auto b = models::read_json_file(dir / kPoolBiasFile).at("pool_bias").get<std::vector<double>>();
      if (b.size() != R_) throw Error((dir / kPoolBiasFile).string() + ": pool_bias has the wrong size");
      torch::NoGradGuard g;
      pool_bias_.copy_(torch::tensor(b, torch::kFloat64).to(torch::kFloat32));
    }
  }
  std::vector<double> bias() const {
    const auto c = pool_bias_.detach().to(torch::kCPU, torch::kFloat64).contiguous();
    return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
  }
  void save_kept(const FitState& st) override {
    const auto& out = o_.fit.out;
    save(out, st);
    nlohmann::json cfg = {{"variant", name()}, {"pool", o_.pool}, {"k", o_.k},
                          {"prompt_max_length", o_.prompt_max_length}, {"max_length", max_length_},
                          {"input", models::to_string(o_.input)}, {"texts", o_.texts}};
    if (pool_bias_.defined()) cfg["pool_bias"] = bias();
    models::write_json_file(out / "selector.json", cfg);
    write_model_marker(out, "selector", name());
  }

 private:
  std::size_t dev_size() const override { return dv_.size(); }

  const RspgOptions& o_;
  const std::size_t R_;
  Net net_;
  std::size_t max_length_ = 0;
  std::vector<Tokenized> tr_, dv_;
  std::unique_ptr<torch::optim::AdamW> optimizer_;
  torch::Tensor mask_;
  torch::Tensor pool_bias_;  // [R], with the pool prior
  static constexpr const char* kPoolBiasFile = "pool_bias.json";
  nlohmann::json sig_;
  models::SaveBertOptions save_;
};

}  // namespace

void RspgOptions::validate() const {
  {
    FitOptions f = fit;  // out may not be the folder the run reads
    f.inputs.push_back(init);
    f.validate();
  }
  if (init.empty()) throw FieldError<UsageError>("init", "RSPG needs an encoder to start from (a model folder)");
  if (pool.size() < 2)
    throw FieldError<UsageError>("pool", "RSPG needs a pool of at least 2 retrievers (pool has " + std::to_string(pool.size()) + ")");
  if (const auto twice = retrieval::first_repeated_spec(pool); !twice.empty())
    throw FieldError<UsageError>("pool", "pool lists \"" + twice + "\" twice: a selector chooses among different retrievers");
  if (texts != "prompts" && texts != "documents")
    throw FieldError<UsageError>("texts", "texts = \"" + texts + "\": expected prompts or documents");
  if (!(temperature > 0) || !std::isfinite(temperature))
    throw FieldError<UsageError>("target_temperature", "temperature = " + std::to_string(temperature) + ": must be a positive number");
}

RspgResult train_rspg(const std::vector<RspgExample>& train, const std::vector<RspgExample>& dev, const RspgOptions& o) {
  o.validate();
  if (train.empty()) throw Error("RSPG has no training example");
  prepare_out(o.fit);  // a bad output folder fails before the model loads

  RspgLearner learner(train, dev, o);
  const auto f = fit(learner, o.fit);
  RspgResult res;
  fill_result(f, res, [](const EpochRecord& e) {
    return RspgEpoch{e.epoch, e.loss, e.dev_value("dev_success"), e.dev_value("dev_utility")};
  });
  res.init_dev_success = learner.initial("dev_success");
  res.init_dev_utility = learner.initial("dev_utility");
  res.dev_oracle = learner.initial("dev_oracle");
  std::vector<const std::vector<double>*> utilities;
  for (const auto& e : train) utilities.push_back(&e.utility);
  record_feedback_spread(o.fit, "retriever", utilities);
  return res;
}

}  // namespace attune::train
