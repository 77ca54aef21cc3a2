// PURPLE's trainer (003 §3): REINFORCE on a Plackett-Luce policy over the record encoder's
// propensities, rewarded by the frozen language model inside the loop.
#include "attune/train/purple.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <numeric>

#include "attune/core/error.h"
#include "attune/models/bert.h"
#include "attune/models/config.h"
#include "attune/models/purple_net.h"
#include "attune/models/token_batches.h"
#include "attune/models/weights.h"
#include "attune/retrieval/spec.h"
#include "attune/text/subword.h"
#include "checkpoint.h"
#include "fit.h"

namespace attune::train {

namespace fs = std::filesystem;
using models::batches::Tokens;

double plackett_luce_log_prob(std::span<const double> w, std::span<const std::size_t> order) {
  double total = 0;
  for (double x : w) total += x;
  double lp = 0, taken = 0;
  for (auto i : order) {
    lp += std::log(w[i]) - std::log(total - taken);
    taken += w[i];
  }
  return lp;
}

std::vector<std::size_t> plackett_luce_sample(std::span<const double> w, std::size_t k, Rng& rng) {
  std::vector<double> lw(w.size());
  for (std::size_t i = 0; i < w.size(); ++i) lw[i] = std::log(w[i]);
  return plackett_luce_sample_log(lw, k, rng);
}

std::vector<std::size_t> plackett_luce_sample_log(std::span<const double> lw, std::size_t k, Rng& rng) {
  // Gumbel-top-K: the K largest of log w_i + G_i, G_i standard Gumbel, are a Plackett-Luce
  // draw without replacement in order (Yellott 1977).
  std::vector<std::pair<double, std::size_t>> keys;
  keys.reserve(lw.size());
  for (std::size_t i = 0; i < lw.size(); ++i) {
    double u = rng.uniform();
    if (u <= 0) u = std::numeric_limits<double>::min();
    keys.emplace_back(lw[i] - std::log(-std::log(u)), i);
  }
  const std::size_t K = std::min(k, lw.size());
  std::partial_sort(keys.begin(), keys.begin() + static_cast<std::ptrdiff_t>(K), keys.end(),
                    [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); });
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < K; ++i) out.push_back(keys[i].second);
  return out;
}

std::vector<std::size_t> top_k_order(std::span<const double> w, std::size_t k) {
  std::vector<std::size_t> idx(w.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) { return w[a] > w[b]; });
  idx.resize(std::min(k, idx.size()));
  return idx;
}

std::vector<double> zscore(std::span<const double> r) {
  std::vector<double> z(r.size(), 0.0);
  if (r.size() < 2) return z;
  double mean = 0;
  for (double x : r) mean += x;
  mean /= static_cast<double>(r.size());
  double var = 0;
  for (double x : r) var += (x - mean) * (x - mean);
  const double sd = std::sqrt(var / static_cast<double>(r.size()));
  if (!(sd > 1e-12)) return z;
  for (std::size_t i = 0; i < r.size(); ++i) z[i] = (r[i] - mean) / sd;
  return z;
}

void PurpleOptions::validate() const {
  {
    FitOptions f = fit;
    f.inputs.push_back(init);
    f.validate();
  }
  if (init.empty()) throw FieldError<UsageError>("init", "PURPLE needs a frozen encoder to read records with (a model folder)");
  if (k == 0) throw FieldError<UsageError>("purple_k", "k = 0: PURPLE selects at least one record");
  if (samples < 2)
    throw FieldError<UsageError>("purple_samples", "samples = " + std::to_string(samples) +
                                                       ": REINFORCE with z-scored rewards needs at least 2 profiles per example");
  if (top_l < 2) throw FieldError<UsageError>("top_l", "top_l = " + std::to_string(top_l) + ": PURPLE needs at least 2 candidates");
  if (heads == 0) throw FieldError<UsageError>("purple_heads", "heads = 0: must be positive");
  if (!cross_attention && !record_transformer)
    throw FieldError<UsageError>("purple_cross_attention",
                                 "without cross-attention the query reaches the records only through the record Transformer: "
                                 "a pointwise model without cross-attention would never read the query");
  if (record_transformer && layers == 0)
    throw FieldError<UsageError>("purple_layers", "layers = 0: the record Transformer needs at least one layer (or train it pointwise)");
  if (initial_prior && !(std::isfinite(prior_weight) && prior_weight > 0))
    throw FieldError<UsageError>("purple_prior_weight", "prior weight = " + std::to_string(prior_weight) +
                                                            ": the initial prior's starting weight must be a positive number");
}

namespace {

struct PurpleTokenized {
  std::string id;
  std::vector<Tokens> rows;  // [query, records...]
  std::vector<double> prior; // with the initial prior: initial_prior_z(initial_scores), per record
  // The frozen encoder's states of `rows`, kept across epochs within the cache budget.
  torch::Tensor states, mask;
};

std::vector<PurpleTokenized> tokenize(const text::SubwordTokenizer& tok, const std::vector<PurpleExample>& ex, std::size_t max_length) {
  std::vector<std::string> texts;
  for (const auto& e : ex) {
    texts.push_back(e.query);
    texts.insert(texts.end(), e.records.begin(), e.records.end());
  }
  auto rows = models::batches::tokenize(tok, texts, max_length);
  std::vector<PurpleTokenized> out(ex.size());
  std::size_t at = 0;
  for (std::size_t i = 0; i < ex.size(); ++i) {
    out[i].id = ex[i].id;
    if (!ex[i].initial_scores.empty()) out[i].prior = retrieval::initial_prior_z(ex[i].initial_scores);
    for (std::size_t r = 0; r <= ex[i].records.size(); ++r) out[i].rows.push_back(std::move(rows[at++]));
  }
  return out;
}

std::vector<double> checked(const ProfileReward& reward, std::span<const ProfileRequest> reqs,
                            const std::vector<PurpleTokenized>& ex) {
  auto r = reward(reqs);
  if (r.size() != reqs.size())
    throw Error("PURPLE: the reward gave " + std::to_string(r.size()) + " values for " + std::to_string(reqs.size()) + " profiles");
  for (std::size_t i = 0; i < r.size(); ++i)
    if (!std::isfinite(r[i]))
      throw Error("PURPLE: reward log p(y | x, P) = " + std::to_string(r[i]) + " for example " + ex[reqs[i].example].id +
                  ": PURPLE's rewards need finite log-probabilities");
  return r;
}

class PurpleLearner final : public DevSelectedLearner {
 public:
  PurpleLearner(const std::vector<PurpleExample>& train, const std::vector<PurpleExample>& dev, const ProfileReward& train_reward,
                const ProfileReward& dev_reward, const PurpleOptions& o)
      : DevSelectedLearner(o.fit, {"dev_reward"}), o_(o), train_reward_(train_reward), dev_reward_(dev_reward) {
    net_.device = models::to_torch(o.fit.device);
    torch::manual_seed(o.fit.seed);
    net_.bert = models::load_bert(o.init, net_.device).model;
    net_.bert->eval();
    for (auto& p : net_.bert->parameters()) p.set_requires_grad(false);
    cfg_.hidden = net_.bert->cfg.hidden_size;
    cfg_.heads = static_cast<std::int64_t>(o.heads);
    cfg_.layers = static_cast<std::int64_t>(o.layers);
    cfg_.cross_attention = o.cross_attention;
    cfg_.record_transformer = o.record_transformer;
    cfg_.k = o.k;
    const auto tok = text::SubwordTokenizer::load(o.init);
    net_.pad = tok->pad_id().value_or(0);
    cfg_.max_length = std::min(o.max_length, models::batches::length_cap(net_.bert->cfg.max_positions, 0, tok->model_max_length()));
    net_.head = models::PurpleHead(cfg_);  // validates (heads must divide hidden)
    if (o.initial_prior) {
      // The last layer starts at zero: every propensity is 1/2, so the untrained order is
      // the prior's, the first stage's own.
      torch::NoGradGuard g;
      net_.head->mlp2->weight.zero_();
      net_.head->mlp2->bias.zero_();
      prior_start_ = o.prior_weight;
      theta_ = torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat64).requires_grad(true));
    }
    net_.head->to(net_.device);
    tr_ = tokenize(*tok, train, cfg_.max_length);
    dv_ = tokenize(*tok, dev, cfg_.max_length);
    auto params = net_.head->parameters();
    if (o.initial_prior) params.push_back(theta_);
    optimizer_ = std::make_unique<torch::optim::Adam>(params, torch::optim::AdamOptions(o.fit.lr).betas({0.9, 0.999}));
    sig_ = {{"method", "purple"}, {"init", o.init.string()}, {"k", o.k}, {"samples", o.samples}, {"heads", o.heads},
            {"layers", o.layers}, {"cross_attention", o.cross_attention}, {"record_transformer", o.record_transformer},
            {"max_length", cfg_.max_length}, {"initial", o.initial_retriever}, {"top_l", o.top_l},
            {"epochs", o.fit.epochs}, {"batch_size", o.fit.batch_size}, {"micro_batch", o.fit.micro_batch},
            {"lr", o.fit.lr}, {"warmup", o.fit.warmup}, {"clip", o.fit.clip}, {"seed", o.fit.seed},
            {"train_examples", train.size()}};  // state_cache_mb changes no result: not in the signature
    if (o.initial_prior) sig_["initial_prior"] = {{"weight_start", prior_start_}};
    const auto spec = models::read_pooling_spec(o.init);
    save_.tokenizer_dir = o.init;
    save_.pooling = spec.pooling;
    save_.normalize = spec.normalize;
  }

  std::string name() const override { return "purple"; }
  std::size_t size() const override { return tr_.size(); }
  std::vector<std::size_t> order(std::size_t epoch) const override { return epoch_order(o_.fit.seed, "purple-epoch-", epoch, tr_.size()); }
  std::vector<torch::Tensor> parameters() override {
    auto p = net_.head->parameters();
    if (theta_.defined()) p.push_back(theta_);
    return p;
  }
  double prior_weight() const { return theta_.defined() ? prior_start_ + theta_.item<double>() : 0.0; }
  double prior_start() const { return prior_start_; }
  torch::optim::Optimizer& optimizer() override { return *optimizer_; }
  void train_mode(bool on) override { net_.head->train(on); }  // the encoder stays frozen, in eval mode

  torch::Tensor loss(const MicroBatch& mb) override {
    struct Item {
      std::size_t i = 0;                        // the example
      torch::Tensor f;                          // propensities [R]
      std::vector<std::vector<std::size_t>> p;  // M profiles
    };
    std::vector<Item> items;
    std::vector<ProfileRequest> reqs;
    for (auto i : mb.items) {
      Item it;
      it.f = forward(tr_[i]);
      const auto w = theta_.defined() ? std::vector<double>() : weights(it.f);
      const auto lw = theta_.defined() ? log_weights(it.f, tr_[i]) : std::vector<double>();
      for (std::size_t m = 0; m < o_.samples; ++m) {
        Rng rng(derive_seed(o_.fit.seed, "purple-profile-" + std::to_string(mb.epoch) + "-" + tr_[i].id + "-" + std::to_string(m)));
        it.p.push_back(theta_.defined() ? plackett_luce_sample_log(lw, o_.k, rng) : plackett_luce_sample(w, o_.k, rng));
        reqs.push_back({i, it.p.back()});
      }
      it.i = i;
      items.push_back(std::move(it));
    }
    const auto r = checked(train_reward_, reqs, tr_);
    calls_ += reqs.size();
    std::vector<torch::Tensor> per_item;
    for (std::size_t j = 0; j < items.size(); ++j) {
      const auto z = zscore(std::span<const double>(r).subspan(j * o_.samples, o_.samples));
      if (theta_.defined()) {
        per_item.push_back(prior_loss(items[j].f, tr_[items[j].i], items[j].p, z));
        continue;
      }
      const auto f = items[j].f.clamp_min(1e-6);
      const auto total = f.sum();
      torch::Tensor acc = f.sum() * 0.0;  // in the graph even when every reward ties (z = 0)
      for (std::size_t m = 0; m < o_.samples; ++m) {
        if (z[m] == 0) continue;
        const auto idx = torch::tensor(std::vector<std::int64_t>(items[j].p[m].begin(), items[j].p[m].end()), torch::kInt64).to(f.device());
        const auto fk = f.index_select(0, idx);
        const auto before = fk.cumsum(0) - fk;
        const auto logp = (fk.log() - (total - before).clamp_min(1e-12).log()).sum();
        acc = acc - z[m] * logp;
      }
      per_item.push_back(acc / static_cast<double>(o_.samples));
    }
    return torch::stack(per_item).mean();
  }

  std::optional<DevValue> dev() override {
    if (dv_.empty()) return std::nullopt;
    std::vector<ProfileRequest> reqs;
    {
      torch::NoGradGuard ng;
      for (std::size_t i = 0; i < dv_.size(); ++i) {
        const auto f = forward(dv_[i]);
        reqs.push_back({i, top_k_order(theta_.defined() ? log_weights(f, dv_[i]) : weights(f), o_.k)});
      }
    }
    const auto r = checked(dev_reward_, reqs, dv_);
    const double mean = std::accumulate(r.begin(), r.end(), 0.0) / static_cast<double>(r.size());
    return DevValue{mean, {{"dev_reward", mean}}, " dev reward " + std::to_string(mean)};
  }
  nlohmann::json signature() const override { return sig_; }

  void save(const fs::path& dir, const FitState& st) override {
    auto so = save_;
    so.attune_metadata = metadata(st, st.step);
    models::save_bert(net_.bert, dir, so);
    models::save_module(*net_.head, dir / models::kPurpleHeadFile);
    auto cfg = cfg_;
    if (theta_.defined()) {
      cfg.prior_weight = prior_weight();
      cfg.prior_weight_start = prior_start_;
      cfg.prior_theta = theta_.item<double>();
    }
    models::write_json_file(dir / models::kPurpleConfigFile, cfg.to_json());
  }
  void load(const fs::path& dir) override {
    torch::NoGradGuard g;
    models::load_module(*net_.head, models::WeightSet::open_file(dir / models::kPurpleHeadFile));
    if (theta_.defined()) {
      const auto file = dir / models::kPurpleConfigFile;
      const auto cfg = models::PurpleConfig::from_json(models::read_json_file(file), file.string());
      if (!cfg.prior_weight) throw Error(file.string() + ": no initial_prior entry, but this run trains with the initial prior");
      theta_.fill_(cfg.prior_theta);
    }
  }
  void save_kept(const FitState& st) override {
    save(o_.fit.out, st);
    nlohmann::json extra = nlohmann::json::object();
    if (!o_.initial_retriever.empty()) extra["rerank"] = {{"initial", o_.initial_retriever}, {"top_l", o_.top_l}};
    write_model_marker(o_.fit.out, "purple", "purple", extra);
  }

  std::size_t calls() const { return calls_; }

 private:
  std::size_t dev_size() const override { return dv_.size(); }

  // The propensities of one example; its encoder states come from the cache when kept.
  torch::Tensor forward(PurpleTokenized& t) {
    if (t.states.defined()) return net_.score(t.states, t.mask);
    std::vector<const Tokens*> rows;
    for (const auto& r : t.rows) rows.push_back(&r);
    auto [states, mask] = net_.encode(rows);
    const auto bytes = static_cast<std::size_t>(states.numel()) * states.element_size();
    if (cached_bytes_ + bytes <= o_.state_cache_mb * (std::size_t{1} << 20)) {
      cached_bytes_ += bytes;
      t.states = states;
      t.mask = mask;
    }
    return net_.score(states, mask);
  }
  static std::vector<double> weights(const torch::Tensor& f) {
    auto c = f.detach().to(torch::kCPU, torch::kFloat64).clamp_min(1e-6).contiguous();
    return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
  }
  // With the initial prior: the Plackett-Luce log-weights log f + w z, in double, as the
  // folder's rerank(...) computes them at retrieval time.
  std::vector<double> log_weights(const torch::Tensor& f, const PurpleTokenized& t) const {
    auto lw = weights(f);
    const double w = prior_weight();
    for (std::size_t i = 0; i < lw.size(); ++i) lw[i] = std::log(lw[i]) + w * t.prior[i];
    return lw;
  }
  // -1/M sum_m z_m log pi(P_m) under Plackett-Luce over the log-weights log f + (w0 + theta) z:
  // log pi = sum_k lw[o_k] - logsumexp(lw over the records not yet drawn).
  torch::Tensor prior_loss(const torch::Tensor& f, const PurpleTokenized& t, const std::vector<std::vector<std::size_t>>& profiles,
                           const std::vector<double>& z) {
    const auto R = f.size(0);
    const auto zt = torch::tensor(t.prior, torch::kFloat64).to(f.device());
    const auto lw = f.clamp_min(1e-6).log().to(torch::kFloat64) + (prior_start_ + theta_.to(f.device())) * zt;  // [R]
    torch::Tensor acc = lw.sum() * 0.0;
    for (std::size_t m = 0; m < profiles.size(); ++m) {
      if (z[m] == 0) continue;
      const auto& p = profiles[m];
      const auto K = static_cast<std::int64_t>(p.size());
      // taken[k][r]: record r was drawn before step k.
      auto taken = torch::zeros({K, R}, torch::kBool);
      auto ta = taken.accessor<bool, 2>();
      for (std::int64_t k = 1; k < K; ++k)
        for (std::int64_t j = 0; j < k; ++j) ta[k][static_cast<std::int64_t>(p[static_cast<std::size_t>(j)])] = true;
      const auto idx = torch::tensor(std::vector<std::int64_t>(p.begin(), p.end()), torch::kInt64).to(f.device());
      const auto rest = lw.unsqueeze(0).expand({K, R}).masked_fill(taken.to(f.device()), -std::numeric_limits<double>::infinity());
      const auto logp = (lw.index_select(0, idx) - torch::logsumexp(rest, 1)).sum();
      acc = acc - z[m] * logp;
    }
    return (acc / static_cast<double>(profiles.size())).to(torch::kFloat);
  }

  const PurpleOptions& o_;
  const ProfileReward& train_reward_;
  const ProfileReward& dev_reward_;
  models::PurpleNet net_;
  models::PurpleConfig cfg_;
  std::vector<PurpleTokenized> tr_, dv_;
  std::unique_ptr<torch::optim::Adam> optimizer_;
  nlohmann::json sig_;
  models::SaveBertOptions save_;
  std::size_t calls_ = 0;
  std::size_t cached_bytes_ = 0;
  double prior_start_ = 0;
  torch::Tensor theta_;  // the learned offset of the prior's weight (undefined without the prior)
};

}  // namespace

PurpleResult train_purple(const std::vector<PurpleExample>& train, const std::vector<PurpleExample>& dev,
                          const ProfileReward& train_reward, const ProfileReward& dev_reward, const PurpleOptions& o) {
  o.validate();
  const auto& tr = train;
  const auto& dv = dev;
  if (tr.empty()) throw Error("PURPLE has no training example");
  for (const auto& e : tr)
    if (e.records.size() < 2) throw Error("PURPLE: training example " + e.id + " has fewer than 2 candidate records");
  for (const auto& e : dv)
    if (e.records.empty()) throw Error("PURPLE: dev example " + e.id + " has no candidate record");
  if (o.initial_prior)
    for (const auto* split : {&tr, &dv})
      for (const auto& e : *split)
        if (e.initial_scores.size() != e.records.size())
          throw Error("PURPLE: example " + e.id + " has " + std::to_string(e.initial_scores.size()) + " first-stage scores for " +
                      std::to_string(e.records.size()) + " records; the initial prior needs one per record");
  prepare_out(o.fit);  // a bad output folder fails before the model loads

  PurpleResult res;
  // The first stage's own top K on dev, the bar the selector must clear.
  if (!dv.empty()) {
    std::vector<ProfileRequest> reqs;
    for (std::size_t i = 0; i < dv.size(); ++i) {
      ProfileRequest q{i, {}};
      for (std::size_t j = 0; j < std::min(o.k, dv[i].records.size()); ++j) q.records.push_back(j);
      reqs.push_back(std::move(q));
    }
    const auto r = dev_reward(reqs);
    double sum = 0;
    for (double x : r) sum += x;
    res.first_stage_dev_reward = r.empty() ? 0 : sum / static_cast<double>(r.size());
  }
  PurpleLearner learner(tr, dv, train_reward, dev_reward, o);
  const auto f = fit(learner, o.fit);
  fill_result(f, res, [](const EpochRecord& e) { return PurpleEpoch{e.epoch, e.loss, e.dev_value("dev_reward")}; });
  res.init_dev_reward = learner.initial("dev_reward");
  res.reward_calls = learner.calls();
  if (o.initial_prior) {
    res.prior_weight_start = learner.prior_start();
    res.prior_weight = res.prior_weight_start;
    const auto file = o.fit.out / models::kPurpleConfigFile;  // the kept folder's
    if (fs::exists(file)) {
      const auto cfg = models::PurpleConfig::from_json(models::read_json_file(file), file.string());
      if (cfg.prior_weight) res.prior_weight = *cfg.prior_weight;
    }
  }
  const double kept = res.best_epoch ? res.epochs[res.best_epoch - 1].dev_reward : res.init_dev_reward;
  res.below_first_stage = !dv.empty() && kept < res.first_stage_dev_reward;
  if (f.steps_done == f.state.total_steps) {
    auto meta = models::read_json_file(o.fit.out / "attune_train.json");
    meta["first_stage_dev_reward"] = res.first_stage_dev_reward;
    meta["below_first_stage"] = res.below_first_stage;
    models::write_json_file(o.fit.out / "attune_train.json", meta);
  }
  return res;
}

}  // namespace attune::train
