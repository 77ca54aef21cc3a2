// IUM's reranker trainer (002 §4, Eq. 4): pointwise binary cross-entropy over per-document
// feedback, agent tokens in the input, unk replacement.
#include "attune/train/ium.h"

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "attune/core/error.h"
#include "attune/core/rng.h"
#include "attune/models/bert.h"
#include "attune/models/config.h"
#include "attune/models/ium_net.h"
#include "attune/models/weights.h"
#include "attune/text/subword.h"
#include "checkpoint.h"
#include "fit.h"

namespace attune::train {

namespace fs = std::filesystem;
using models::batches::Tokens;

void IumOptions::validate() const {
  {
    FitOptions f = fit;
    f.inputs.push_back(init);
    f.validate();
  }
  if (init.empty()) throw FieldError<UsageError>("init", "IUM needs an encoder to start from (a model folder)");
  if (!(unk_fraction >= 0 && unk_fraction <= 1))
    throw FieldError<UsageError>("unk_fraction", "unk_fraction = " + std::to_string(unk_fraction) + ": must be in [0, 1]");
  if (!(positive_weight >= 0) || !std::isfinite(positive_weight))
    throw FieldError<UsageError>("positive_weight", "positive_weight = " + std::to_string(positive_weight) + ": must be finite and >= 0 (0 = balanced)");
  if (max_length < 5) throw FieldError<UsageError>("max_length", "max_length = " + std::to_string(max_length) + ": must be at least 5");
}

namespace {

// The slope a of the weighted logistic regression y ~ sigmoid(a z + b) (useful sample i weighs
// `pos_weight[i]`), by Newton's method, with a ridge of 1 on a (a standard normal prior), so
// labels that z separates give a large finite weight, not an unbounded one; 0 when z does not vary.
double logistic_slope(const std::vector<double>& z, const std::vector<double>& y, const std::vector<double>& pos_weight) {
  double a = 0, b = 0;
  for (int it = 0; it < 50; ++it) {
    double ga = a, gb = 0, haa = 1, hab = 0, hbb = 1e-9;  // the ridge's gradient and curvature
    for (std::size_t i = 0; i < z.size(); ++i) {
      const double w = y[i] > 0 ? pos_weight[i] : 1.0;
      const double p = 1 / (1 + std::exp(-(a * z[i] + b)));
      const double g = w * (p - y[i]), h = w * p * (1 - p);
      ga += g * z[i], gb += g;
      haa += h * z[i] * z[i], hab += h * z[i], hbb += h;
    }
    const double det = haa * hbb - hab * hab;
    if (!(det > 0)) break;
    const double da = (hbb * ga - hab * gb) / det, db = (haa * gb - hab * ga) / det;
    a -= da, b -= db;
    if (std::abs(da) + std::abs(db) < 1e-10) break;
  }
  return std::isfinite(a) ? a : 0.0;
}

struct Rows {
  std::vector<Tokens> rows;
  std::vector<double> label;
  std::vector<double> prior;
  std::vector<std::size_t> group;  // index of the sample's list
};

class IumLearner final : public DevSelectedLearner {
 public:
  IumLearner(const std::vector<IumSample>& train, const std::vector<IumSample>& dev, const IumOptions& o)
      : DevSelectedLearner(o.fit, {"dev_top1", "dev_log_likelihood", "dev_accuracy"}), o_(o) {
    net_ = models::SelectorNet::start(o.init, models::to_torch(o.fit.device), o.fit.seed);
    // An IUM folder as --init (the previous EM iteration) continues with its head too.
    if (fs::exists(o.init / models::kIumHeadFile)) {
      torch::NoGradGuard g;
      models::load_module(*net_.head, models::WeightSet::open_file(o.init / models::kIumHeadFile));
    }
    net_.head->to(net_.device);
    const auto tok = text::SubwordTokenizer::load(o.init);
    net_.pad = tok->pad_id().value_or(0);
    auto tasks = o.tasks, model_names = o.models;
    // (an empty task or model names no agent: it reads [UNK])
    if (tasks.empty())
      for (const auto& s : train)
        if (!s.task.empty() && std::find(tasks.begin(), tasks.end(), s.task) == tasks.end()) tasks.push_back(s.task);
    if (model_names.empty())
      for (const auto& s : train)
        if (!s.model.empty() && std::find(model_names.begin(), model_names.end(), s.model) == model_names.end())
          model_names.push_back(s.model);
    agents_ = models::AgentTokens::make(*tok, tasks, model_names);
    max_length_ = std::min(o.max_length, models::batches::length_cap(net_.bert->cfg.max_positions, 0, tok->model_max_length()));
    tr_ = encode(*tok, train);
    dv_ = encode(*tok, dev, &n_dev_groups_);
    {
      std::size_t pos = 0;
      for (double y : tr_.label) pos += y > 0;
      if (pos == 0) throw Error("IUM: no training sample is useful (every label is 0): nothing to learn to rank up");
      pos_weight_ = o.positive_weight > 0 ? o.positive_weight
                                          : static_cast<double>(tr_.label.size() - pos) / static_cast<double>(pos);
      if (pos_weight_ <= 0) pos_weight_ = 1;  // every sample useful
      sample_pos_weight_.assign(tr_.label.size(), pos_weight_);
      if (o.positive_weight == 0 && o.balance_per_agent) {
        if (train.size() != tr_.label.size()) throw Error("IUM: one encoded row per training sample expected");
        std::map<std::string, std::pair<std::size_t, std::size_t>> counts;  // agent -> (useful, useless)
        const auto key = [&](std::size_t i) { return train[i].task + "|" + train[i].model; };
        for (std::size_t i = 0; i < train.size(); ++i) (tr_.label[i] > 0 ? counts[key(i)].first : counts[key(i)].second)++;
        for (const auto& [agent, c] : counts)
          agent_pos_weight_[agent] = c.first == 0 || c.second == 0 ? 1.0 : static_cast<double>(c.second) / static_cast<double>(c.first);
        for (std::size_t i = 0; i < train.size(); ++i) sample_pos_weight_[i] = agent_pos_weight_[key(i)];
      }
    }
    prior_ = o.initial_prior;
    if (prior_) {
      // w0: the --init folder's own weight when it was trained with the prior (the previous EM
      // iteration), else the weighted logistic fit of the training labels on z alone.
      const auto cfg_file = o.init / models::kIumConfigFile;
      const auto cfg = fs::exists(cfg_file) ? models::read_json_file(cfg_file) : nlohmann::json::object();
      prior_start_ = cfg.contains("initial_prior") ? cfg["initial_prior"].at("weight").get<double>()
                                                   : logistic_slope(tr_.prior, tr_.label, sample_pos_weight_);
      theta_ = torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat32).device(net_.device).requires_grad(true));
    }
    auto params = net_.parameters();
    if (prior_) params.push_back(theta_);
    optimizer_ = std::make_unique<torch::optim::Adam>(params, torch::optim::AdamOptions(o.fit.lr));
    sig_ = {{"method", "ium"}, {"init", o.init.string()}, {"max_length", max_length_}, {"unk_fraction", o.unk_fraction},
            {"tasks", agents_.tasks}, {"models", agents_.models}, {"epochs", o.fit.epochs},
            {"batch_size", o.fit.batch_size}, {"micro_batch", o.fit.micro_batch}, {"lr", o.fit.lr},
            {"warmup", o.fit.warmup}, {"clip", o.fit.clip}, {"seed", o.fit.seed}, {"train_samples", train.size()},
            {"positive_weight", pos_weight_}};
    if (!agent_pos_weight_.empty()) sig_["agent_positive_weights"] = agent_pos_weight_;
    if (prior_) sig_["initial_prior"] = {{"weight_start", prior_start_}};
    const auto spec = models::read_pooling_spec(o.init);
    save_.tokenizer_dir = o.init;
    save_.pooling = spec.pooling;
    save_.normalize = spec.normalize;
  }

  std::string name() const override { return "ium"; }
  std::size_t size() const override { return tr_.rows.size(); }
  std::vector<std::size_t> order(std::size_t epoch) const override { return epoch_order(o_.fit.seed, "ium-epoch-", epoch, size()); }
  std::vector<torch::Tensor> parameters() override {
    auto p = net_.parameters();
    if (prior_) p.push_back(theta_);
    return p;
  }
  torch::optim::Optimizer& optimizer() override { return *optimizer_; }
  void train_mode(bool on) override { net_.bert->train(on); }

  torch::Tensor loss(const MicroBatch& mb) override {
    std::vector<Tokens> rows;
    std::vector<double> y, pw;
    std::vector<double> z;
    for (auto i : mb.items) {
      Tokens t = tr_.rows[i];
      z.push_back(tr_.prior[i]);
      // 002: tid and mid read [UNK] for a share of the samples (drawn per epoch and sample).
      Rng rng(derive_seed(o_.fit.seed, "ium-unk-" + std::to_string(mb.epoch) + "-" + std::to_string(i)));
      if (rng.uniform() < o_.unk_fraction) t[1] = t[2] = agents_.unk;
      rows.push_back(std::move(t));
      y.push_back(tr_.label[i]);
      pw.push_back(sample_pos_weight_[i]);
    }
    std::vector<const Tokens*> ptrs;
    for (const auto& r : rows) ptrs.push_back(&r);
    const auto logits = with_prior(net_.forward(ptrs), z);
    const auto target = torch::tensor(y, torch::kFloat32).to(logits.device());
    // Useful samples weigh their positive weight; the mean over the micro-batch's weights
    // keeps the loss's scale that of plain cross-entropy.
    const auto w = 1 + (torch::tensor(pw, torch::kFloat32).to(logits.device()) - 1) * target;
    return (torch::binary_cross_entropy_with_logits(logits, target, {}, {}, at::Reduction::None) * w).sum() / w.sum();
  }

  double positive_weight() const { return pos_weight_; }
  const std::map<std::string, double>& agent_positive_weights() const { return agent_pos_weight_; }
  double prior_weight() const { return prior_ ? prior_start_ + theta_.item<double>() : 0.0; }
  // The share of dev lists whose first candidate (the given order) is useful.
  double first_stage_top1() const { return top1(std::vector<double>(dv_.rows.size(), 0.0)); }

  std::optional<DevValue> dev() override {
    if (dv_.rows.empty()) return std::nullopt;
    torch::NoGradGuard ng;
    double ll = 0, correct = 0;
    std::vector<double> score;
    for (std::size_t lo = 0; lo < dv_.rows.size(); lo += 32) {
      std::vector<const Tokens*> ptrs;
      std::vector<double> y, z;
      for (std::size_t i = lo; i < std::min(dv_.rows.size(), lo + 32); ++i) {
        ptrs.push_back(&dv_.rows[i]);
        y.push_back(dv_.label[i]);
        z.push_back(dv_.prior[i]);
      }
      const auto logits = with_prior(net_.forward(ptrs), z).to(torch::kCPU, torch::kFloat64);
      const auto t = torch::tensor(y, torch::kFloat64);
      ll -= torch::binary_cross_entropy_with_logits(logits, t, {}, {}, at::Reduction::Sum).item<double>();
      correct += ((logits >= 0).to(torch::kFloat64) == t).sum().item<double>();
      const auto a = logits.contiguous();
      score.insert(score.end(), a.data_ptr<double>(), a.data_ptr<double>() + a.numel());
    }
    const auto n = static_cast<double>(dv_.rows.size());
    const double t1 = top1(score);
    char line[160];
    std::snprintf(line, sizeof line, " dev top-1 useful %.4f (first stage %.4f), log-likelihood %.4f, accuracy %.4f", t1,
                  first_stage_top1(), ll / n, correct / n);
    // Ranked by top-1 first; on a tie (a coarse share of few lists), by log-likelihood:
    // exp(ll) is in (0, 1], so 1e-6 of it never outweighs one list more in a million.
    return DevValue{t1 + 1e-6 * std::exp(ll / n), {{"dev_top1", t1}, {"dev_log_likelihood", ll / n}, {"dev_accuracy", correct / n}},
                    line};
  }
  nlohmann::json signature() const override { return sig_; }

  void save(const fs::path& dir, const FitState& st) override {
    auto so = save_;
    so.attune_metadata = metadata(st, st.step);
    models::save_bert(net_.bert, dir, so);
    models::save_module(*net_.head, dir / models::kIumHeadFile);
    nlohmann::json cfg = {{"tasks", agents_.tasks}, {"models", agents_.models}, {"max_length", max_length_}};
    if (prior_)
      cfg["initial_prior"] = {{"weight", prior_weight()}, {"weight_start", prior_start_}, {"theta", theta_.item<double>()},
                              {"depth", models::kIumInitialDepth}};
    models::write_json_file(dir / models::kIumConfigFile, cfg);
  }
  void load(const fs::path& dir) override {
    models::load_module(*net_.bert, models::WeightSet::open(dir));
    models::load_module(*net_.head, models::WeightSet::open_file(dir / models::kIumHeadFile));
    if (prior_) {
      torch::NoGradGuard g;
      theta_.fill_(models::read_json_file(dir / models::kIumConfigFile).at("initial_prior").at("theta").get<double>());
    }
  }
  double prior_start() const { return prior_start_; }
  void save_kept(const FitState& st) override {
    save(o_.fit.out, st);
    write_model_marker(o_.fit.out, "ium", "ium");
  }

 private:
  std::size_t dev_size() const override { return dv_.rows.size(); }

  // Per list, the label of the candidate with the highest score (ties: the earlier one, so
  // all-equal scores give the first stage's pick); the mean over lists.
  double top1(const std::vector<double>& score) const {
    if (dv_.group.empty()) return 0;
    std::vector<std::ptrdiff_t> best(n_dev_groups_, -1);
    for (std::size_t i = 0; i < dv_.rows.size(); ++i) {
      auto& b = best[dv_.group[i]];
      if (b < 0 || score[i] > score[static_cast<std::size_t>(b)]) b = static_cast<std::ptrdiff_t>(i);
    }
    double hits = 0;
    for (auto b : best) hits += dv_.label[static_cast<std::size_t>(b)];
    return hits / static_cast<double>(best.size());
  }

  Rows encode(const text::SubwordTokenizer& tok, const std::vector<IumSample>& s, std::size_t* groups = nullptr) const {
    std::vector<std::int64_t> tids, mids;
    std::vector<std::pair<std::string, std::string>> pairs;
    std::map<std::string, std::size_t> index;
    Rows r;
    for (const auto& x : s) {
      r.group.push_back(index.emplace(x.group, index.size()).first->second);
      if (x.label != 0 && x.label != 1)
        throw FieldError<UsageError>("label", "IUM feedback is 0 or 1 per document, got " + std::to_string(x.label));
      tids.push_back(agents_.task(x.task));
      mids.push_back(agents_.model(x.model));
      pairs.emplace_back(x.query, x.doc);
      r.label.push_back(x.label);
      if (!std::isfinite(x.prior)) throw FieldError<UsageError>("prior", "an IUM sample's prior must be finite, got " + std::to_string(x.prior));
      r.prior.push_back(x.prior);
    }
    r.rows = models::encode_ium_inputs(tok, tids, mids, pairs, max_length_);
    if (groups) *groups = index.size();
    return r;
  }

  // The logits plus w z (initial_prior), z the rows' priors.
  torch::Tensor with_prior(const torch::Tensor& logits, const std::vector<double>& z) const {
    if (!prior_) return logits;
    const auto zt = torch::tensor(z, torch::kFloat32).to(logits.device());
    return logits + (prior_start_ + theta_) * zt;
  }

  const IumOptions& o_;
  bool prior_ = false;
  double prior_start_ = 0;
  torch::Tensor theta_;
  models::IumNet net_;
  models::AgentTokens agents_;
  std::size_t max_length_ = 256;
  Rows tr_, dv_;
  std::size_t n_dev_groups_ = 0;
  double pos_weight_ = 1;
  std::vector<double> sample_pos_weight_;          // per training row: the weight of its label 1
  std::map<std::string, double> agent_pos_weight_;  // balance_per_agent: "task|model" -> weight
  std::unique_ptr<torch::optim::Adam> optimizer_;
  nlohmann::json sig_;
  models::SaveBertOptions save_;
};

}  // namespace

IumResult train_ium(const std::vector<IumSample>& train, const std::vector<IumSample>& dev, const IumOptions& o) {
  o.validate();
  if (train.empty()) throw Error("IUM has no training sample");
  prepare_out(o.fit);
  IumLearner learner(train, dev, o);
  const auto f = fit(learner, o.fit);
  IumResult res;
  fill_result(f, res, [](const EpochRecord& e) {
    return IumEpoch{e.epoch, e.loss, e.dev_value("dev_top1"), e.dev_value("dev_log_likelihood"), e.dev_value("dev_accuracy")};
  });
  res.init_dev_top1 = learner.initial("dev_top1");
  res.first_stage_dev_top1 = learner.first_stage_top1();
  res.positive_weight = learner.positive_weight();
  res.agent_positive_weights = learner.agent_positive_weights();
  if (o.initial_prior) {
    res.prior_weight_start = learner.prior_start();
    res.prior_weight = models::read_json_file(o.fit.out / models::kIumConfigFile).at("initial_prior").at("weight").get<double>();
  }
  res.init_dev_log_likelihood = learner.initial("dev_log_likelihood");
  res.init_dev_accuracy = learner.initial("dev_accuracy");
  return res;
}

}  // namespace attune::train
