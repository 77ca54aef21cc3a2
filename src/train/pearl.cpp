// Pearl's cross-encoder trainer (001 §3): BERT + pooler + 1-output classifier, trained with
// the scale-calibrated KL (Eq. 2-3) on lists [positive, negatives].
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <numeric>

#include "attune/core/error.h"
#include "attune/core/machine.h"
#include "attune/core/rng.h"
#include "attune/models/bert.h"
#include "attune/models/config.h"
#include "attune/models/token_batches.h"
#include "attune/models/runtime.h"
#include "attune/models/weights.h"
#include "attune/text/subword.h"
#include "attune/train/objectives.h"
#include "attune/train/pearl.h"
#include "checkpoint.h"
#include "fit.h"

namespace attune::train {

namespace fs = std::filesystem;
namespace detail = models::batches;

namespace {

// One tokenised (query, doc) pair.
struct Pair {
  std::vector<std::int64_t> ids, types;
};

std::vector<Pair> tokenize_pairs(const text::SubwordTokenizer& tok, const std::vector<std::pair<std::string, std::string>>& pairs,
                                 std::size_t max_length) {
  text::SubwordTokenizer::BatchOptions bo;
  bo.max_length = max_length;
  std::vector<Pair> out;
  out.reserve(pairs.size());
  constexpr std::size_t kChunk = 512;
  for (std::size_t c0 = 0; c0 < pairs.size(); c0 += kChunk) {
    const auto span = std::span<const std::pair<std::string, std::string>>(pairs).subspan(c0, std::min(kChunk, pairs.size() - c0));
    const auto b = tok.encode_batch(span, bo);
    for (std::size_t r = 0; r < b.rows; ++r) {
      Pair p;
      for (std::size_t j = 0; j < b.cols && b.mask[r * b.cols + j]; ++j) {
        p.ids.push_back(b.ids[r * b.cols + j]);
        p.types.push_back(b.type_ids[r * b.cols + j]);
      }
      out.push_back(std::move(p));
    }
  }
  return out;
}

struct Model {
  models::BertModel bert{nullptr};
  torch::nn::Linear classifier{nullptr};
  std::int64_t pad = 0;
  torch::Device device{torch::kCPU};

  std::vector<torch::Tensor> parameters() const {
    auto p = bert->parameters();
    for (auto& x : classifier->parameters()) p.push_back(x);
    return p;
  }
  void train(bool on) {
    bert->train(on);
    classifier->train(on);
  }
  // Scores [n] of the pairs.
  torch::Tensor score(const std::vector<const Pair*>& rows) {
    std::size_t L = 1;
    for (auto* r : rows) L = std::max(L, r->ids.size());
    const auto n = static_cast<std::int64_t>(rows.size());
    auto ids = torch::full({n, static_cast<std::int64_t>(L)}, pad, torch::kInt64);
    auto types = torch::zeros_like(ids), mask = torch::zeros_like(ids);
    auto ia = ids.accessor<std::int64_t, 2>(), ta = types.accessor<std::int64_t, 2>(), ma = mask.accessor<std::int64_t, 2>();
    for (std::int64_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j < rows[static_cast<std::size_t>(i)]->ids.size(); ++j) {
        const auto jj = static_cast<std::int64_t>(j);
        ia[i][jj] = rows[static_cast<std::size_t>(i)]->ids[j];
        ta[i][jj] = rows[static_cast<std::size_t>(i)]->types[j];
        ma[i][jj] = 1;
      }
    auto hidden = bert->forward(ids.to(device), types.to(device), mask.to(device));
    return classifier->forward(bert->pool(hidden)).squeeze(1);
  }
};

// The training lists, tokenised: pairs[i] of list l, labels.
struct TList {
  std::vector<std::size_t> pairs;  // indices into the pair table
  std::vector<double> label;
};

// Mean label of the top-scored candidate over `reqs` (pairs of request r: offsets[r]...).
double top1(Model& m, const std::vector<Pair>& pairs, const std::vector<std::size_t>& offsets,
            const std::vector<PearlRequest>& reqs) {
  if (reqs.empty()) return 0;
  torch::NoGradGuard ng;
  double sum = 0;
  for (std::size_t r = 0; r < reqs.size(); ++r) {
    std::vector<const Pair*> rows;
    for (std::size_t j = 0; j < reqs[r].docs.size(); ++j) rows.push_back(&pairs[offsets[r] + j]);
    if (rows.empty()) continue;
    const auto best = m.score(rows).argmax().item<std::int64_t>();
    sum += reqs[r].label[static_cast<std::size_t>(best)];
  }
  return sum / static_cast<double>(reqs.size());
}

// Pearl on the shared loop: the cross-encoder with its classifier, the calibrated KL over
// a micro-batch of lists; no dev selection (the last epoch is the model).
class PearlLearner final : public Learner {
 public:
  PearlLearner(const std::vector<PearlRequest>& train, const std::vector<PearlRequest>& eval_in, const PearlOptions& o,
               PearlResult& res)
      : o_(o), res_(res), eval_(eval_in) {
    const auto lists = pearl_lists(train, o.sampling);
    if (lists.empty()) throw Error("Pearl has no training list: no kept request with at least 2 candidate documents");
    {
      std::vector<std::size_t> kept;
      for (const auto& l : lists) kept.push_back(l.request);
      kept.erase(std::unique(kept.begin(), kept.end()), kept.end());
      res.kept_requests = kept.size();
    }
    res.lists = lists.size();
    std::vector<double> pos;
    for (const auto& l : lists) pos.push_back(train[l.request].label[l.docs[0]]);
    y0_ = res.y0 = std::isnan(o.y0) ? percentile(pos, o.y0_percentile) : o.y0;
    label_stats_ = label_statistics(train, pos);
    sig_ = {{"init", o.init.string()}, {"keep_fraction", o.sampling.keep_fraction}, {"positives", o.sampling.positives},
            {"negatives", o.sampling.negatives}, {"epochs", o.fit.epochs}, {"batch_size", o.fit.batch_size},
            {"micro_batch", o.fit.micro_batch}, {"lr", o.fit.lr}, {"warmup", o.fit.warmup}, {"clip", o.fit.clip},
            {"max_length", o.max_length}, {"tau", o.tau}, {"anchor", o.anchor}, {"y0", y0_},
            {"y0_given", !std::isnan(o.y0)}, {"y0_percentile", std::isnan(o.y0) ? nlohmann::json(o.y0_percentile) : nlohmann::json()},
            {"optimizer", "adamw(weight_decay=0.01)"}, {"seed", o.fit.seed}, {"train_requests", train.size()}};
    prepare_out(o.fit);  // a bad output folder fails before the model loads

    m_.device = models::to_torch(o.fit.device);
    const auto tok = text::SubwordTokenizer::load(o.init);
    m_.pad = tok->pad_id().value_or(0);
    std::size_t max_length = 0;
    {
      // The encoder, with a pooler and a 1-output classifier: loaded when the folder has them,
      // else initialised like BERT (normal(0, 0.02), zero bias) from the seed.
      auto loaded = models::load_bert(o.init, torch::kCPU);
      const auto cfg = loaded.model->cfg;
      torch::manual_seed(o.fit.seed);
      m_.bert = models::BertModel(cfg, /*with_pooler=*/true);
      m_.classifier = torch::nn::Linear(cfg.hidden_size, 1);
      torch::NoGradGuard g;
      for (auto& p : m_.bert->named_parameters())
        if (p.key().rfind("pooler.", 0) == 0) {
          if (p.key().find("bias") != std::string::npos) p.value().zero_();
          else p.value().normal_(0, 0.02);
        }
      m_.classifier->weight.normal_(0, 0.02);
      m_.classifier->bias.zero_();
      const auto weights = models::WeightSet::open(o.init);
      models::LoadOptions lo;
      lo.prefixes = {"", "bert."};
      lo.optional = {"pooler.dense.weight", "pooler.dense.bias"};
      models::load_module(*m_.bert, weights, lo);
      m_.bert->to(m_.device);
      m_.classifier->to(m_.device);
      const auto spec = models::read_pooling_spec(o.init);
      max_length = std::min(o.max_length, detail::length_cap(cfg.max_positions, spec.max_seq_length, tok->model_max_length()));
    }

    // Tokenise every pair once: the training requests' candidates, then the eval requests'.
    std::vector<std::pair<std::string, std::string>> texts;
    std::vector<std::size_t> offsets;
    for (const auto& r : train) {
      offsets.push_back(texts.size());
      for (const auto& d : r.docs) texts.emplace_back(r.query, d);
    }
    for (const auto& r : eval_in) {
      if (r.docs.size() != r.label.size()) throw Error("Pearl eval request " + r.id + ": documents and labels differ in number");
      eval_offsets_.push_back(texts.size());
      for (const auto& d : r.docs) texts.emplace_back(r.query, d);
    }
    pairs_ = tokenize_pairs(*tok, texts, max_length);
    for (const auto& l : lists) {
      TList t;
      for (auto d : l.docs) {
        t.pairs.push_back(offsets[l.request] + d);
        t.label.push_back(train[l.request].label[d]);
      }
      tl_.push_back(std::move(t));
    }
    optimizer_ = std::make_unique<torch::optim::AdamW>(m_.parameters(), torch::optim::AdamWOptions(o.fit.lr).weight_decay(0.01));
    save_.tokenizer_dir = o.init;
    save_.pooling = models::Pooling::Cls;
    save_.max_seq_length = max_length;
    save_.classifier = m_.classifier;
  }

  std::string name() const override { return "pearl"; }
  std::size_t size() const override { return tl_.size(); }
  std::vector<std::size_t> order(std::size_t epoch) const override {
    return epoch_order(o_.fit.seed, "pearl-epoch-", epoch, tl_.size());
  }
  std::vector<torch::Tensor> parameters() override { return m_.parameters(); }
  torch::optim::Optimizer& optimizer() override { return *optimizer_; }
  void train_mode(bool on) override { m_.train(on); }

  torch::Tensor loss(const MicroBatch& mb) override {
    std::vector<const Pair*> rows;
    std::size_t L = 0;
    for (auto i : mb.items) {
      for (auto p : tl_[i].pairs) rows.push_back(&pairs_[p]);
      L = std::max(L, tl_[i].pairs.size());
    }
    auto flat = m_.score(rows);
    const auto b = static_cast<std::int64_t>(mb.items.size()), LL = static_cast<std::int64_t>(L);
    std::vector<std::int64_t> gather(static_cast<std::size_t>(b * LL), 0);
    auto mask = torch::zeros({b, LL}, torch::kBool);
    auto lab = torch::zeros({b, LL}, torch::kFloat64);
    auto ma = mask.accessor<bool, 2>();
    auto la = lab.accessor<double, 2>();
    std::int64_t at = 0;
    for (std::int64_t r = 0; r < b; ++r) {
      const auto& t = tl_[mb.items[static_cast<std::size_t>(r)]];
      for (std::size_t j = 0; j < t.pairs.size(); ++j) {
        const auto jj = static_cast<std::int64_t>(j);
        gather[static_cast<std::size_t>(r * LL + jj)] = at++;
        ma[r][jj] = true;
        la[r][jj] = t.label[j];
      }
    }
    auto scores = flat.index_select(0, torch::tensor(gather, torch::kInt64).to(m_.device)).view({b, LL});
    return calibrated_kl_loss(scores, lab.to(m_.device, scores.scalar_type()), mask.to(m_.device), y0_, o_.tau, o_.anchor);
  }

  nlohmann::json signature() const override { return sig_; }
  void start(const std::optional<DevValue>&) override {
    res_.eval_top1_before = top1(m_, pairs_, eval_offsets_, eval_);
    if (!o_.fit.quiet)
      std::fprintf(stderr, "train: pearl %zu of %zu requests kept, %zu lists, y0 %.4f (labels: mean %.4f, std %.4f, %.1f%% positive)\n",
                   res_.kept_requests, res_.requests, tl_.size(), y0_, label_stats_["mean"].get<double>(),
                   label_stats_["std"].get<double>(), 100 * label_stats_["positive_fraction"].get<double>());
  }
  nlohmann::json checkpoint_state() const override { return {{"eval_top1_before", res_.eval_top1_before}}; }
  void restore(const nlohmann::json& state) override { res_.eval_top1_before = state.value("eval_top1_before", 0.0); }
  std::optional<std::string> epoch_line(const EpochRecord& e, bool) const override {
    char buf[64];
    std::snprintf(buf, sizeof buf, "train: pearl epoch %zu loss %.5f", e.epoch, e.loss);
    return buf;
  }

  void save(const fs::path& dir, const FitState& st) override {
    auto so = save_;
    so.attune_metadata = metadata(st, st.step);
    models::save_bert(m_.bert, dir, so);
  }
  void load(const fs::path& dir) override {
    const auto w = models::WeightSet::open(dir);
    models::LoadOptions lo;
    lo.prefixes = {"bert."};
    models::load_module(*m_.bert, w, lo);
    models::load_module(*m_.classifier, w, models::LoadOptions{{}, {"classifier."}});
  }
  void finish(const FitState& st, double seconds) override {
    m_.train(false);
    res_.eval_top1_after = top1(m_, pairs_, eval_offsets_, eval_);
    auto so = save_;
    so.attune_metadata = metadata(st, st.total_steps);
    so.attune_metadata["eval_top1_after"] = res_.eval_top1_after;
    so.attune_metadata["seconds_this_run"] = seconds;
    models::save_bert(m_.bert, o_.fit.out, so);
    nlohmann::json rerank = nlohmann::json::object();
    if (!o_.initial_retriever.empty() && o_.top_l > 0)
      rerank["rerank"] = {{"initial", o_.initial_retriever}, {"top_l", o_.top_l}};
    write_model_marker(o_.fit.out, "cross", "pearl", rerank);
    if (!o_.fit.quiet) std::fprintf(stderr, "train: wrote %s (cross-encoder, %zu epochs)\n", o_.fit.out.c_str(), o_.fit.epochs);
  }

 private:
  // Over every (request, candidate) pair of the training data; `pos`: the lists' positives.
  static nlohmann::json label_statistics(const std::vector<PearlRequest>& train, const std::vector<double>& pos) {
    double sum = 0, sq = 0, positive = 0;
    std::size_t count = 0;
    for (const auto& r : train)
      for (double y : r.label) {
        sum += y;
        sq += y * y;
        positive += y > 0;
        ++count;
      }
    const double mean = count ? sum / static_cast<double>(count) : 0;
    return {{"count", count}, {"mean", mean},
            {"std", count ? std::sqrt(std::max(0.0, sq / static_cast<double>(count) - mean * mean)) : 0.0},
            {"positive_fraction", count ? positive / static_cast<double>(count) : 0.0},
            {"positives_median", median(pos)}};
  }

  // "epochs" has the shape of every other trainer's ({epoch, loss} objects), so that
  // `attune report` draws Pearl's curve beside the others.
  nlohmann::json metadata(const FitState& st, std::size_t step) const {
    return {{"method", "pearl"}, {"data", o_.fit.data_description}, {"seed", o_.fit.seed},
            {"torch_threads", models::torch_threads()}, {"options", sig_},
            {"y0", y0_}, {"labels", label_stats_}, {"requests", res_.requests},
            {"kept_requests", res_.kept_requests}, {"lists", tl_.size()}, {"steps", step}, {"total_steps", st.total_steps},
            {"epochs", st.epochs_json()}, {"eval_top1_before", res_.eval_top1_before}, {"device", o_.fit.device.str()},
            {"machine", this_machine().to_json()}};
  }

  const PearlOptions& o_;
  PearlResult& res_;
  const std::vector<PearlRequest>& eval_;
  Model m_;
  double y0_ = 0;
  nlohmann::json label_stats_, sig_;
  std::vector<Pair> pairs_;
  std::vector<std::size_t> eval_offsets_;
  std::vector<TList> tl_;
  std::unique_ptr<torch::optim::AdamW> optimizer_;
  models::SaveBertOptions save_;
};

}  // namespace

void PearlOptions::validate() const {
  {
    FitOptions f = fit;  // out may not be the folder the run reads
    f.inputs.push_back(init);
    f.validate();
  }
  if (init.empty())
    throw FieldError<UsageError>("init", "Pearl needs an encoder to start from (a model folder, e.g. one made by attune pretrain-encoder)");
  if (!(tau > 0) || !std::isfinite(tau)) throw FieldError<UsageError>("pearl_tau", "tau = " + std::to_string(tau) + ": must be a positive number");
  if (max_length < 3)
    throw FieldError<UsageError>("pearl_max_length", "max_length = " + std::to_string(max_length) + ": must be at least 3 tokens");
  if (!(sampling.keep_fraction > 0 && sampling.keep_fraction <= 1))
    throw FieldError<UsageError>("pearl_keep", "sampling.keep_fraction = " + std::to_string(sampling.keep_fraction) + ": must be in (0, 1]");
}

PearlResult train_pearl(const std::vector<PearlRequest>& train, const std::vector<PearlRequest>& eval_in, const PearlOptions& o) {
  o.validate();

  PearlResult res;
  res.requests = train.size();
  PearlLearner learner(train, eval_in, o, res);
  const auto f = fit(learner, o.fit);
  res.total_steps = f.state.total_steps;
  res.steps_done = f.steps_done;
  for (const auto& e : f.state.epochs) res.epoch_loss.push_back(e.loss);
  res.losses = f.losses;
  res.seconds = f.seconds;
  return res;
}

}  // namespace attune::train
