// ROPG-RL / ROPG-KD trainer (000 §4) over a BERT-family bi-encoder.
#include "attune/train/ropg.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>
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
#include "attune/models/weights.h"
#include "attune/retrieval/spec.h"
#include "attune/text/subword.h"
#include "attune/train/objectives.h"
#include "checkpoint.h"
#include "fit.h"

namespace attune::train {

namespace fs = std::filesystem;

InitialPrior parse_initial_prior(const std::string& s) {
  if (s == "none") return InitialPrior::None;
  if (s == "learned") return InitialPrior::Learned;
  throw UsageError("unknown initial prior \"" + s + "\" (expected learned or none)");
}
std::string to_string(InitialPrior p) { return p == InitialPrior::Learned ? "learned" : "none"; }

RopgObjective parse_ropg_objective(const std::string& s) {
  if (s == "ropg-rl" || s == "rl") return RopgObjective::RL;
  if (s == "ropg-kd" || s == "kd") return RopgObjective::KD;
  if (s == "luf") return RopgObjective::LUF;
  throw UsageError("unknown ROPG objective \"" + s + "\" (expected ropg-rl, ropg-kd or luf)");
}

namespace {

namespace detail = models::batches;
using detail::Tokens;
using detail::pad_rows;
using detail::tokenize;

struct Tokenized {
  Tokens query;
  std::vector<Tokens> docs;
  std::vector<double> utility;
  std::vector<double> prior;  // InitialPrior::Learned: initial_prior_z(initial_score)
  std::vector<std::int8_t> judgement;  // LUF
  std::vector<std::uint64_t> doc_keys;  // a hash of each document's text: the same document in two queries' lists
};

std::vector<Tokenized> tokenize_examples(const text::SubwordTokenizer& tok, const std::vector<RopgExample>& ex,
                                         const RopgOptions& o) {
  std::vector<std::string> queries, docs;
  for (const auto& e : ex) {
    if (e.docs.size() != e.utility.size())
      throw Error("ROPG example " + e.id + ": " + std::to_string(e.docs.size()) + " documents but " +
                  std::to_string(e.utility.size()) + " utilities");
    if (o.objective == RopgObjective::LUF && e.judgement.size() != e.docs.size())
      throw Error("ROPG example " + e.id + ": LUF needs the judged label of each of its " + std::to_string(e.docs.size()) +
                  " documents, but it has " + std::to_string(e.judgement.size()) + " (run attune judge on them)");
    for (auto j : e.judgement)
      if (j < -1 || j > 2) throw Error("ROPG example " + e.id + ": a judged label must be -1, 0, 1 or 2");
    if (o.initial_prior == InitialPrior::Learned && e.initial_score.size() != e.docs.size())
      throw Error("ROPG example " + e.id + ": the learned initial prior needs the initial retriever's score of each of its " +
                  std::to_string(e.docs.size()) + " documents, but it has " + std::to_string(e.initial_score.size()));
    queries.push_back(e.query);
    docs.insert(docs.end(), e.docs.begin(), e.docs.end());
  }
  auto qt = tokenize(tok, queries, o.query_max_length), dt = tokenize(tok, docs, o.doc_max_length);
  std::vector<Tokenized> out(ex.size());
  std::size_t at = 0;
  for (std::size_t i = 0; i < ex.size(); ++i) {
    out[i].query = std::move(qt[i]);
    for (std::size_t j = 0; j < ex[i].docs.size(); ++j) {
      out[i].docs.push_back(std::move(dt[at++]));
      out[i].doc_keys.push_back(std::hash<std::string>{}(ex[i].docs[j]));
    }
    out[i].utility = ex[i].utility;
    out[i].judgement = ex[i].judgement;
    if (o.initial_prior == InitialPrior::Learned) out[i].prior = retrieval::initial_prior_z(ex[i].initial_score);
  }
  return out;
}

struct Model {
  models::BertModel bert{nullptr};
  models::PoolingSpec spec;
  std::int64_t pad = 0;
  double tau = 1;  // policy temperature: pi = softmax(score / tau)
  // InitialPrior::Learned: score += (w0 + kPriorStep theta) z (prior_start = w0; theta a
  // parameter at 0 to begin with). kPriorStep 1: Adam moves w by about lr a step. At 10
  // (planted:first, commit_subject, 2,500 queries) KD pulled w from 1 to 0.2 in two epochs as
  // the encoder fitted the training queries, and dev fell after epoch 2; at 1 w went from 1
  // to 0.80 and dev rose every epoch (docs/RESULTS.md).
  static constexpr double kPriorStep = 1;
  bool prior = false;
  double prior_start = 0;
  torch::Tensor theta = torch::zeros({}, torch::requires_grad());
  torch::Device device{torch::kCPU};

  double prior_weight() const { return prior ? prior_start + kPriorStep * theta.item<double>() : 0.0; }

  // The rows' embeddings [n, H], in their order, in length groups (batches::by_length).
  torch::Tensor embed(const std::vector<const Tokens*>& rows) {
    return models::batches::by_length(rows, models::batches::kLengthGroup, device,
                                      [&](const std::vector<const Tokens*>& g) { return embed_padded(g); });
  }
  torch::Tensor embed_padded(const std::vector<const Tokens*>& rows) {
    auto [ids, mask] = pad_rows(rows, pad, device);
    auto hidden = bert->forward(ids, torch::zeros_like(ids), mask);
    return models::pool_embeddings(hidden, mask, spec.pooling, spec.normalize);
  }

  // scores [b, l], mask [b, l] (bool), utilities [b, l] for examples `idx` of `ex`.
  struct Batch {
    torch::Tensor scores, mask, utility;
    torch::Tensor judgement;  // [b, l] int8: LUF's labels (-1 on padding and unjudged); empty otherwise
  };
  // Every query against every document of the batch: scores [b, N] (N = all candidates of
  // the batch, concatenated), mask [b, N] (its own judged candidates, and the first copy of
  // every other document), positive [b, N] (its own answer-containing candidates).
  struct InBatch {
    torch::Tensor scores, mask, positive;
  };
  Batch score(const std::vector<Tokenized>& ex, const std::vector<std::size_t>& idx, InBatch* in_batch = nullptr) {
    std::vector<const Tokens*> q, d;
    std::size_t l = 0;
    for (auto i : idx) {
      q.push_back(&ex[i].query);
      for (const auto& t : ex[i].docs) d.push_back(&t);
      l = std::max(l, ex[i].docs.size());
    }
    auto qe = embed(q), de = embed(d);
    const auto b = static_cast<std::int64_t>(idx.size()), L = static_cast<std::int64_t>(l);
    // Scatter each example's documents into its row; padding slots point at row 0 and are masked.
    std::vector<std::int64_t> gather(static_cast<std::size_t>(b * L), 0);
    auto mask = torch::zeros({b, L}, torch::kBool);
    auto util = torch::zeros({b, L}, torch::kFloat64);
    auto ma = mask.accessor<bool, 2>();
    auto ua = util.accessor<double, 2>();
    auto z = torch::zeros({b, L}, torch::kFloat32);
    auto za = z.accessor<float, 2>();
    const bool judged = !ex[idx.front()].judgement.empty();
    auto jt = torch::full({b, L}, -1, torch::kInt8);
    auto ja = jt.accessor<std::int8_t, 2>();
    std::int64_t at = 0;
    for (std::int64_t r = 0; r < b; ++r) {
      const auto& e = ex[idx[static_cast<std::size_t>(r)]];
      for (std::size_t j = 0; j < e.docs.size(); ++j) {
        gather[static_cast<std::size_t>(r * L + static_cast<std::int64_t>(j))] = at++;
        ma[r][static_cast<std::int64_t>(j)] = true;
        ua[r][static_cast<std::int64_t>(j)] = e.utility[j];
        if (prior) za[r][static_cast<std::int64_t>(j)] = static_cast<float>(e.prior[j]);
        if (judged) {
          ja[r][static_cast<std::int64_t>(j)] = e.judgement[j];
          if (e.judgement[j] < 0) ma[r][static_cast<std::int64_t>(j)] = false;  // not judged: left out
        }
      }
    }
    auto g = torch::tensor(gather, torch::kInt64).to(device);
    auto docs = de.index_select(0, g).view({b, L, -1});
    auto scores = torch::bmm(docs, qe.unsqueeze(2)).squeeze(2) / tau;
    if (prior) scores = scores + (prior_start + kPriorStep * theta) * z.to(device);
    if (in_batch) {
      const auto N = static_cast<std::int64_t>(d.size());
      auto m = torch::zeros({b, N}, torch::kBool), pz = torch::zeros({b, N}, torch::kBool);
      auto zz = torch::zeros({b, N}, torch::kFloat32);
      auto mA = m.accessor<bool, 2>(), pA = pz.accessor<bool, 2>();
      auto zA = zz.accessor<float, 2>();
      std::vector<std::int64_t> start(static_cast<std::size_t>(b) + 1, 0);
      for (std::int64_t r = 0; r < b; ++r)
        start[static_cast<std::size_t>(r) + 1] =
            start[static_cast<std::size_t>(r)] + static_cast<std::int64_t>(ex[idx[static_cast<std::size_t>(r)]].docs.size());
      for (std::int64_t r = 0; r < b; ++r) {
        const auto& e = ex[idx[static_cast<std::size_t>(r)]];
        std::unordered_set<std::uint64_t> seen(e.doc_keys.begin(), e.doc_keys.end());
        for (std::size_t j = 0; j < e.docs.size(); ++j) {
          const auto col = start[static_cast<std::size_t>(r)] + static_cast<std::int64_t>(j);
          mA[r][col] = !judged || e.judgement[j] >= 0;
          pA[r][col] = judged && e.judgement[j] == 2;
          if (prior) zA[r][col] = static_cast<float>(e.prior[j]);
        }
        for (std::int64_t r2 = 0; r2 < b; ++r2) {
          if (r2 == r) continue;
          const auto& o = ex[idx[static_cast<std::size_t>(r2)]];
          for (std::size_t j = 0; j < o.docs.size(); ++j)
            if (seen.insert(o.doc_keys[j]).second) mA[r][start[static_cast<std::size_t>(r2)] + static_cast<std::int64_t>(j)] = true;
        }
      }
      auto all = torch::mm(qe, de.t()) / tau;
      if (prior) all = all + (prior_start + kPriorStep * theta) * zz.to(device);
      *in_batch = {all, m.to(device), pz.to(device)};
    }
    return {scores, mask.to(device), util.to(device), judged ? jt.to(device) : torch::Tensor()};
  }
};

// Mean u(argmax pi), mean E_pi[u] and the oracle mean max_d u(d) over `ex` (no gradient).
struct DevScores {
  double top1 = 0, expected = 0, oracle = 0;
};
DevScores evaluate(Model& m, const std::vector<Tokenized>& ex, std::size_t chunk) {
  DevScores d;
  if (ex.empty()) return d;
  torch::NoGradGuard ng;
  for (std::size_t lo = 0; lo < ex.size(); lo += chunk) {
    std::vector<std::size_t> idx;
    for (std::size_t i = lo; i < std::min(ex.size(), lo + chunk); ++i) idx.push_back(i);
    auto b = m.score(ex, idx);
    auto p = masked_softmax(b.scores.to(torch::kFloat64), b.mask);
    d.expected += (p * b.utility).sum().item<double>();
    auto best = b.scores.masked_fill(~b.mask, -std::numeric_limits<float>::infinity()).argmax(1, true);
    d.top1 += b.utility.gather(1, best).sum().item<double>();
    d.oracle += b.utility.masked_fill(~b.mask, -std::numeric_limits<double>::infinity()).amax(1).sum().item<double>();
  }
  const auto n = static_cast<double>(ex.size());
  return {d.top1 / n, d.expected / n, d.oracle / n};
}

// InitialPrior::Learned: w0 from a grid, on the first (up to) 512 training examples before
// training: the smallest weight whose mean top-1 utility is within one paired standard
// error of the best weight's (a weight that only wins by noise would make the initial order
// the encoder has to overcome). Returns the weight and a line saying what it chose.
std::pair<double, std::string> choose_prior_start(Model& m, const std::vector<Tokenized>& ex) {
  static constexpr double kGrid[] = {0, 0.25, 0.5, 1, 2, 4, 8, 16, 32, 64};
  torch::NoGradGuard ng;
  const std::size_t n = std::min<std::size_t>(ex.size(), 512);
  std::vector<torch::Tensor> enc, z, util, mask;
  const bool was = m.prior;
  m.prior = false;
  for (std::size_t lo = 0; lo < n; lo += 32) {
    std::vector<std::size_t> idx;
    for (std::size_t i = lo; i < std::min(n, lo + 32); ++i) idx.push_back(i);
    auto b = m.score(ex, idx);
    const auto L = b.scores.size(1);
    auto zz = torch::zeros({static_cast<std::int64_t>(idx.size()), L}, torch::kFloat64);
    auto za = zz.accessor<double, 2>();
    for (std::size_t r = 0; r < idx.size(); ++r)
      for (std::size_t j = 0; j < ex[idx[r]].prior.size(); ++j)
        za[static_cast<std::int64_t>(r)][static_cast<std::int64_t>(j)] = ex[idx[r]].prior[j];
    enc.push_back(b.scores.to(torch::kCPU, torch::kFloat64));
    z.push_back(zz);
    util.push_back(b.utility.to(torch::kCPU));
    mask.push_back(b.mask.to(torch::kCPU));
  }
  m.prior = was;
  std::vector<torch::Tensor> top1;  // per weight: [n] top-1 utilities
  std::vector<double> mean;
  std::string line = "train: initial-prior weight on " + std::to_string(n) + " training queries (mean top-1 utility):";
  for (double w : kGrid) {
    std::vector<torch::Tensor> parts;
    for (std::size_t c = 0; c < enc.size(); ++c) {
      auto s = enc[c] + w * z[c];
      auto best = s.masked_fill(~mask[c], -std::numeric_limits<double>::infinity()).argmax(1, true);
      parts.push_back(util[c].gather(1, best).squeeze(1));
    }
    top1.push_back(torch::cat(parts));
    mean.push_back(top1.back().mean().item<double>());
    char buf[64];
    std::snprintf(buf, sizeof buf, " %g:%.4f", w, mean.back());
    line += buf;
  }
  const std::size_t best = static_cast<std::size_t>(std::max_element(mean.begin(), mean.end()) - mean.begin());
  std::size_t pick = best;
  for (std::size_t g = 0; g < best; ++g) {
    const auto d = top1[best] - top1[g];
    const double se = n > 1 ? d.std().item<double>() / std::sqrt(static_cast<double>(n)) : 0.0;
    if (d.mean().item<double>() <= se) {
      pick = g;
      break;
    }
  }
  char buf[96];
  std::snprintf(buf, sizeof buf, "; starts at %g (best %g; the smallest within one standard error)", kGrid[pick], kGrid[best]);
  return {kGrid[pick], line + buf};
}

std::string objective_name(RopgObjective o) {
  return o == RopgObjective::RL ? "ropg-rl" : o == RopgObjective::KD ? "ropg-kd" : "luf";
}

}  // namespace

std::optional<double> encoder_temperature(const fs::path& dir) {
  const fs::path file = dir / "attune_train.json";
  if (!fs::exists(file)) return std::nullopt;
  const auto j = models::read_json_file(file);
  if (!j.contains("options") || !j["options"].is_object()) return std::nullopt;
  const auto& o = j["options"];
  // Only the runs whose number is the encoder's similarity scale: pretrain-encoder's InfoNCE
  // temperature, a ROPG run's policy temperature (an RSPG or Pearl folder's "temperature"
  // is a target's, not the encoder's).
  const std::string method = j.value("method", ""), objective = j.value("objective", "");
  const char* key = method.rfind("ropg", 0) == 0             ? "policy_temperature"
                    : objective == "contriever-infonce"       ? "temperature"
                                                              : nullptr;
  if (key && o.contains(key)) {
    if (!o[key].is_number() || !(o[key].get<double>() > 0) || !std::isfinite(o[key].get<double>()))
      throw Error(file.string() + ": options." + key + " = " + o[key].dump() + ": expected a positive number");
    return o[key].get<double>();
  }
  return std::nullopt;
}

double resolve_policy_temperature(const RopgOptions& o) {
  if (o.policy_temperature) return *o.policy_temperature;
  return encoder_temperature(o.init).value_or(1.0);
}

namespace {

// ROPG on the shared loop: the bi-encoder, the KD or REINFORCE loss over a micro-batch of
// queries, dev top-1 utility as the kept epoch's criterion.
class RopgLearner final : public DevSelectedLearner {
 public:
  RopgLearner(const std::vector<RopgExample>& train, const std::vector<RopgExample>& dev, const RopgOptions& o)
      : DevSelectedLearner(o.fit, {"dev_top1", "dev_expected", "dev_oracle"}), o_(o) {
    m_.device = models::to_torch(o.fit.device);
    torch::manual_seed(o.fit.seed);
    m_.bert = models::load_bert(o.init, m_.device).model;
    m_.spec = models::read_pooling_spec(o.init);
    const auto tok = text::SubwordTokenizer::load(o.init);
    m_.pad = tok->pad_id().value_or(0);
    m_.tau = resolve_policy_temperature(o);
    // Never longer than the model's positions (or its declared max_seq_length).
    RopgOptions lengths = o;
    const std::size_t cap = detail::length_cap(m_.bert->cfg.max_positions, m_.spec.max_seq_length, tok->model_max_length());
    lengths.query_max_length = std::min(o.query_max_length, cap);
    lengths.doc_max_length = std::min(o.doc_max_length, cap);
    if (o.freeze_word_embeddings) {  // kept as loaded: no gradient, not in the optimiser (parameters())
      auto params = m_.bert->named_parameters();
      auto* w = params.find(kWordEmbeddings);
      if (!w) throw Error(o.init.string() + ": no " + kWordEmbeddings + " to freeze");
      w->set_requires_grad(false);
    }
    tr_ = tokenize_examples(*tok, train, lengths);
    dv_ = tokenize_examples(*tok, dev, lengths);
    if (o.initial_prior == InitialPrior::Learned) {
      m_.theta = m_.theta.to(m_.device).detach().set_requires_grad(true);
      // On resume the weight comes back from the checkpoint (load), so the grid is skipped.
      if (!o.fit.resume) {
        auto [w, line] = choose_prior_start(m_, tr_);
        m_.prior_start = w;
        if (!o.fit.quiet) std::fprintf(stderr, "%s\n", line.c_str());
      }
      m_.prior = true;
    }
    optimizer_ = std::make_unique<torch::optim::Adam>(parameters(), torch::optim::AdamOptions(o.fit.lr));
    sig_ = {{"objective", objective_name(o.objective)}, {"double_softmax", o.double_softmax},
            {"target_temperature", o.target_temperature},
            {"target_normalization", to_string(o.target_normalization)}, {"policy_temperature", m_.tau}, {"skip_flat", o.skip_flat},
            {"document_fields", o.document_fields}, {"kd_target", to_string(o.kd_target)},
            {"initial_prior", to_string(o.initial_prior)},
            {"init", o.init.string()}, {"epochs", o.fit.epochs},
            {"batch_size", o.fit.batch_size}, {"micro_batch", o.fit.micro_batch}, {"lr", o.fit.lr},
            {"warmup", o.fit.warmup}, {"clip", o.fit.clip}, {"query_max_length", o.query_max_length},
            {"doc_max_length", o.doc_max_length}, {"seed", o.fit.seed}, {"train_examples", train.size()}};
    // Recorded when on only, so that a run checkpointed before they existed still resumes.
    if (o.fits_policy_scale()) sig_["policy_scale"] = "fitted";
    if (o.freeze_word_embeddings) sig_["freeze_word_embeddings"] = true;
    if (o.rerank) sig_["rerank"] = {{"initial", o.rerank->initial}, {"top_l", o.rerank->top_l}};
    if (o.objective == RopgObjective::LUF)
      sig_["luf"] = {{"lambda_strict", o.luf.lambda_strict}, {"lambda_flaccid", o.luf.lambda_flaccid},
                     {"lambda_hard", o.luf.lambda_hard}, {"gamma", o.luf.gamma}, {"in_batch", o.luf.in_batch},
                     {"relevance_batches", o.luf.relevance_batches}};
    save_.tokenizer_dir = o.init;
    save_.pooling = m_.spec.pooling;
    save_.normalize = m_.spec.normalize;
    save_.max_seq_length = m_.spec.max_seq_length;
  }

  std::string name() const override { return objective_name(o_.objective); }
  std::size_t size() const override { return tr_.size(); }
  std::vector<std::size_t> order(std::size_t epoch) const override {
    auto base = epoch_order(o_.fit.seed, "ropg-epoch-", epoch, tr_.size());
    if (o_.objective != RopgObjective::LUF || !o_.luf.relevance_batches) return base;
    return relevance_batches(base, o_.fit.micro_batch);
  }
  std::vector<std::size_t> relevance_batches(const std::vector<std::size_t>& base, std::size_t group) const {
    std::vector<std::vector<std::uint64_t>> rel(tr_.size());
    for (std::size_t i = 0; i < tr_.size(); ++i)
      for (std::size_t j = 0; j < tr_[i].docs.size(); ++j)
        if (!tr_[i].judgement.empty() && tr_[i].judgement[j] >= 1) rel[i].push_back(tr_[i].doc_keys[j]);
    return relevance_guided_order(rel, base, group);
  }
  std::vector<torch::Tensor> parameters() override {
    std::vector<torch::Tensor> p;
    for (const auto& kv : m_.bert->named_parameters())
      if (!(o_.freeze_word_embeddings && kv.key() == kWordEmbeddings)) p.push_back(kv.value());
    if (m_.prior) p.push_back(m_.theta);
    return p;
  }
  double prior_start() const { return m_.prior_start; }
  double prior_weight() const { return m_.prior_weight(); }
  torch::optim::Optimizer& optimizer() override { return *optimizer_; }
  void train_mode(bool on) override { m_.bert->train(on); }

  torch::Tensor loss(const MicroBatch& mb) override {
    const std::vector<std::size_t> idx(mb.items.begin(), mb.items.end());
    Model::InBatch ib;
    const bool in_batch = o_.objective == RopgObjective::LUF && o_.luf.in_batch && o_.luf.lambda_strict > 0;
    auto b = m_.score(tr_, idx, in_batch ? &ib : nullptr);
    if (o_.objective == RopgObjective::LUF) {
      const auto& w = o_.luf;
      const auto pos = b.judgement == 2, rel = b.judgement == 1, neg = b.judgement == 0;
      // 1 / (1 + rank): candidates are in the initial retriever's order.
      const auto L = b.scores.size(1);
      const auto ranks = torch::arange(L, torch::TensorOptions().dtype(torch::kFloat64).device(b.scores.device()));
      const auto weights = (1.0 / (1.0 + ranks)).unsqueeze(0).expand_as(b.scores);
      auto loss = torch::zeros({}, b.scores.options());
      if (w.lambda_strict > 0)
        loss = loss + w.lambda_strict * (in_batch ? luf_strict_loss(ib.scores, ib.positive, ib.mask)
                                                  : luf_strict_loss(b.scores, pos, b.mask));
      if (w.lambda_flaccid > 0) loss = loss + w.lambda_flaccid * luf_flaccid_loss(b.scores, b.utility, rel);
      if (w.lambda_hard > 0) loss = loss + w.lambda_hard * luf_hard_negative_loss(b.scores, pos, neg, weights, w.gamma);
      return loss;
    }
    if (o_.objective == RopgObjective::KD) {
      const bool fit = o_.fits_policy_scale();
      double c = 1;
      auto loss = ropg_kd_loss(b.scores, normalize_targets(b.utility, b.mask, o_.target_normalization).to(b.scores.dtype()),
                               b.mask, o_.double_softmax, o_.target_temperature, fit, &c);
      if (fit) scale_sum_ += c, ++scale_n_;
      return loss;
    }
    // One action per example from pi (detached), seeded by (seed, epoch, example).
    auto p = masked_softmax(b.scores.detach().to(torch::kCPU, torch::kFloat64), b.mask.to(torch::kCPU)).contiguous();
    auto pa = p.accessor<double, 2>();
    auto u_cpu = b.utility.to(torch::kCPU);
    auto ua = u_cpu.accessor<double, 2>();
    std::vector<std::int64_t> actions;
    std::vector<double> rewards;
    for (std::size_t r = 0; r < idx.size(); ++r) {
      Rng rng(derive_seed(o_.fit.seed, "ropg-rl-" + std::to_string(mb.epoch) + "-" + std::to_string(idx[r])));
      const double u = rng.uniform();
      double c = 0;
      std::int64_t a = 0;
      const auto n = static_cast<std::int64_t>(tr_[idx[r]].docs.size());
      for (; a < n - 1; ++a) {
        c += pa[static_cast<std::int64_t>(r)][a];
        if (u < c) break;
      }
      actions.push_back(a);
      rewards.push_back(ua[static_cast<std::int64_t>(r)][a] - ua[static_cast<std::int64_t>(r)][0]);
    }
    return reinforce_loss(b.scores, b.mask, torch::tensor(actions, torch::kInt64).to(m_.device),
                          torch::tensor(rewards, torch::kFloat64).to(m_.device));
  }

  std::optional<DevValue> dev() override {
    if (dv_.empty()) return std::nullopt;
    const auto d = evaluate(m_, dv_, 32);
    DevValue v{d.top1, {{"dev_top1", d.top1}, {"dev_expected", d.expected}, {"dev_oracle", d.oracle}},
               " dev top-1 utility " + std::to_string(d.top1) + " expected " + std::to_string(d.expected) +
                   " (oracle " + std::to_string(d.oracle) + ")"};
    if (scale_n_ > 0) {  // the epoch's fitted policy scale: how much broader (< 1) its targets were than pi
      const double c = scale_sum_ / static_cast<double>(scale_n_);
      v.values["policy_scale"] = c;
      v.line += "; policy scale " + std::to_string(c);
      scale_sum_ = 0;
      scale_n_ = 0;
    }
    return v;
  }
  nlohmann::json signature() const override { return sig_; }

  void save(const fs::path& dir, const FitState& st) override {
    auto so = save_;
    so.attune_metadata = metadata(st, st.step);
    if (m_.prior) {
      so.attune_metadata["initial_prior"] = {{"weight_start", m_.prior_start}, {"theta", m_.theta.item<double>()},
                                             {"weight", m_.prior_weight()}};
    }
    models::save_bert(m_.bert, dir, so);
  }
  void load(const fs::path& dir) override {
    models::load_module(*m_.bert, models::WeightSet::open(dir));
    if (!m_.prior) return;
    const auto j = models::read_json_file(dir / "attune_train.json");
    if (!j.contains("initial_prior"))
      throw Error((dir / "attune_train.json").string() + ": no \"initial_prior\" entry (the run was not trained with --initial-prior learned)");
    m_.prior_start = j["initial_prior"].at("weight_start").get<double>();
    torch::NoGradGuard ng;
    m_.theta.fill_(j["initial_prior"].at("theta").get<double>());
  }
  void finish(const FitState& st, double seconds) override {
    // The base rewrites attune_train.json from scratch: keep the kept epoch's prior entry.
    nlohmann::json prior;
    if (m_.prior) prior = models::read_json_file(o_.fit.out / "attune_train.json").value("initial_prior", nlohmann::json());
    DevSelectedLearner::finish(st, seconds);
    if (!prior.is_null()) {
      auto j = models::read_json_file(o_.fit.out / "attune_train.json");
      j["initial_prior"] = prior;
      models::write_json_file(o_.fit.out / "attune_train.json", j);
    }
  }
  void save_kept(const FitState& st) override {
    save(o_.fit.out, st);
    nlohmann::json extra = nlohmann::json::object();
    if (o_.rerank) {
      extra["rerank"] = {{"initial", o_.rerank->initial}, {"top_l", o_.rerank->top_l}};
      if (m_.prior && m_.prior_weight() != 0)
        extra["rerank"]["fusion"] = {{"reranker_scale", 1.0 / m_.tau}, {"initial_weight", m_.prior_weight()}};
    }
    if (!o_.document_fields.empty()) extra["document_fields"] = o_.document_fields;
    // (a date-only folder also says so the way folders did before document_fields)
    if (o_.document_fields == std::vector<std::string>{"date"}) extra["document_dates"] = true;
    write_model_marker(o_.fit.out, "dense", name(), extra);
  }

 private:
  std::size_t dev_size() const override { return dv_.size(); }

  const RopgOptions& o_;
  Model m_;
  std::vector<Tokenized> tr_, dv_;
  std::unique_ptr<torch::optim::Adam> optimizer_;
  nlohmann::json sig_;
  models::SaveBertOptions save_;
  // --freeze-embeddings: the parameter it keeps as loaded (HF BERT's name).
  static constexpr const char* kWordEmbeddings = "embeddings.word_embeddings.weight";
  // The fitted policy scale's mean over the micro-batches since the last dev pass (this
  // process's: a resumed epoch counts the batches after the resume).
  double scale_sum_ = 0;
  std::size_t scale_n_ = 0;
};

}  // namespace

KdTarget parse_kd_target(const std::string& s) {
  if (s == "utility") return KdTarget::Utility;
  if (s == "likelihood") return KdTarget::Likelihood;
  throw FieldError<UsageError>("kd_target", "kd_target = \"" + s + "\": expected utility or likelihood");
}

std::string to_string(KdTarget t) { return t == KdTarget::Likelihood ? "likelihood" : "utility"; }

void RopgOptions::validate() const {
  {
    FitOptions f = fit;  // out may not be the folder the run reads
    f.inputs.push_back(init);
    f.validate();
  }
  if (init.empty())
    throw FieldError<UsageError>("init", "ROPG needs an encoder to start from (a dense model folder, e.g. one made by attune pretrain-encoder)");
  if (!(target_temperature > 0) || !std::isfinite(target_temperature))
    throw FieldError<UsageError>("target_temperature", "target_temperature = " + std::to_string(target_temperature) + ": must be a positive number");
  if (policy_temperature && (!(*policy_temperature > 0) || !std::isfinite(*policy_temperature)))
    throw FieldError<UsageError>("policy_temperature", "policy_temperature = " + std::to_string(*policy_temperature) + ": must be a positive number");
  if (objective == RopgObjective::LUF) {
    for (const auto& [name, v] : {std::pair<const char*, double>{"lambda_strict", luf.lambda_strict},
                                  {"lambda_flaccid", luf.lambda_flaccid}, {"lambda_hard", luf.lambda_hard},
                                  {"gamma", luf.gamma}})
      if (!(v >= 0) || !std::isfinite(v))
        throw FieldError<UsageError>(std::string("luf.") + name, std::string("luf.") + name + " = " + std::to_string(v) +
                                                                     ": must be a number, 0 or more");
    if (luf.lambda_strict + luf.lambda_flaccid + luf.lambda_hard == 0)
      throw FieldError<UsageError>("luf", "LUF's three loss weights are all 0: nothing to learn");
    if (luf.relevance_batches && !luf.in_batch)
      throw FieldError<UsageError>("luf.relevance_batches", "relevance-guided batches group queries so that their documents "
                                                            "are each other's in-batch negatives: they need in_batch");
    if (luf.in_batch && luf.lambda_strict == 0)
      throw FieldError<UsageError>("luf.in_batch", "in-batch negatives enter the strict loss only, whose weight is 0");
  }
  if (fits_policy_scale() && objective != RopgObjective::KD)
    throw FieldError<UsageError>("fit_policy_scale", "a fitted policy scale is ROPG-KD's (it fits pi to the KD target's spread)");
  if (fits_policy_scale() && double_softmax)
    throw FieldError<UsageError>("fit_policy_scale", "a fitted policy scale does not apply to the double softmax (its policy is softmax(softmax(score)))");
  if (kd_target == KdTarget::Likelihood && objective != RopgObjective::KD)
    throw FieldError<UsageError>("kd_target", "kd_target = likelihood: the likelihood target is ROPG-KD's, not ROPG-RL's "
                                              "(whose reward is the task metric's utility)");
  if (initial_prior == InitialPrior::Learned && !rerank)
    throw FieldError<UsageError>("initial_prior", "initial_prior = learned needs the rerank protocol (its prior is the initial retriever's order): use --protocol rerank or --initial-prior none");
  if (rerank && (rerank->initial.empty() || rerank->top_l == 0))
    throw FieldError<UsageError>("rerank", "rerank protocol: needs an initial retriever and top_l > 0");
  if (query_max_length < 3)
    throw FieldError<UsageError>("query_max_length", "query_max_length = " + std::to_string(query_max_length) + ": must be at least 3 tokens");
  if (doc_max_length < 3)
    throw FieldError<UsageError>("doc_max_length", "doc_max_length = " + std::to_string(doc_max_length) + ": must be at least 3 tokens");
}

RopgResult train_ropg(const std::vector<RopgExample>& train_in, const std::vector<RopgExample>& dev_in, const RopgOptions& o) {
  o.validate();
  std::vector<RopgExample> train;
  std::size_t flat = 0;
  // LUF: only judged documents count (an unjudged one is left out of the losses and of dev).
  const auto usable = [&](const RopgExample& e) {
    if (o.objective != RopgObjective::LUF) return e.docs.size();
    return static_cast<std::size_t>(std::count_if(e.judgement.begin(), e.judgement.end(), [](std::int8_t j) { return j >= 0; }));
  };
  std::size_t flat_kept = 0;  // flat examples kept (RL, or KD without skip_flat)
  for (const auto& e : train_in) {
    if (usable(e) < 2) continue;
    const bool same = std::all_of(e.utility.begin(), e.utility.end(), [&](double u) { return u == e.utility.front(); });
    if (same && o.skip_flat && o.objective == RopgObjective::KD) {
      ++flat;
      continue;
    }
    flat_kept += same;
    train.push_back(e);
  }
  // Every reward the same (a reader that never gets a query right, say): RL's advantages are
  // all zero and it would "train" to its start without a word. Refuse, as KD does.
  if (o.objective == RopgObjective::RL && !train.empty() && flat_kept == train.size())
    throw Error("ROPG-RL has no training example with at least 2 candidate documents whose utilities differ (" +
                std::to_string(flat_kept) + " had all equal utilities): every reward is the same, so there is nothing to learn");
  if (train.empty())
    throw Error(std::string("ROPG has no training example with at least 2 ") +
                (o.objective == RopgObjective::LUF ? "judged candidate documents (LUF reads each document's judged label)"
                                                   : "candidate documents") +
                (flat ? " whose utilities differ (" + std::to_string(flat) + " had all equal utilities)" : std::string()));
  if (flat && !o.fit.quiet)
    std::fprintf(stderr, "train: %zu of %zu training queries have candidates of equal utility: left out (KD learns nothing from them)\n",
                 flat, flat + train.size());
  std::vector<RopgExample> dev;
  for (const auto& e : dev_in)
    if (usable(e) > 0) dev.push_back(e);
  prepare_out(o.fit);  // a bad output folder fails before the model loads

  RopgLearner learner(train, dev, o);
  const auto f = fit(learner, o.fit);
  RopgResult res;
  fill_result(f, res, [](const EpochRecord& e) {
    return RopgEpoch{e.epoch, e.loss, e.dev_value("dev_top1"), e.dev_value("dev_expected")};
  });
  res.init_dev_top1 = learner.initial("dev_top1");
  res.init_dev_expected = learner.initial("dev_expected");
  res.dev_oracle = learner.initial("dev_oracle");
  res.policy_temperature = resolve_policy_temperature(o);
  res.initial_weight_start = learner.prior_start();
  if (o.initial_prior == InitialPrior::Learned) {  // the kept epoch's, as its folder records it
    const auto j = models::read_json_file(o.fit.out / "attune_train.json");
    res.initial_weight = j.contains("initial_prior") ? j["initial_prior"].value("weight", 0.0) : learner.prior_weight();
  }
  res.flat_skipped = flat;
  std::vector<const std::vector<double>*> utilities;
  for (const auto& e : train_in)
    if (usable(e) >= 2) utilities.push_back(&e.utility);
  record_feedback_spread(o.fit, o.objective == RopgObjective::LUF ? "judge" : "doc", utilities);
  return res;
}

std::vector<std::size_t> relevance_guided_order(std::vector<std::vector<std::uint64_t>> rel,
                                                const std::vector<std::size_t>& base, std::size_t group) {
  if (group == 0) throw UsageError("relevance_guided_order: a group needs at least one query");
  std::unordered_map<std::uint64_t, std::vector<std::size_t>> postings;  // relevant document -> queries
  for (auto i : base) {
    if (i >= rel.size()) throw UsageError("relevance_guided_order: query " + std::to_string(i) + " has no document list");
    std::sort(rel[i].begin(), rel[i].end());
    rel[i].erase(std::unique(rel[i].begin(), rel[i].end()), rel[i].end());
    for (auto k : rel[i]) postings[k].push_back(i);
  }
  std::vector<std::size_t> pos(rel.size(), SIZE_MAX);
  for (std::size_t p = 0; p < base.size(); ++p) pos[base[p]] = p;
  std::vector<bool> used(rel.size(), false);
  std::vector<std::size_t> out;
  out.reserve(base.size());
  std::size_t next = 0;
  while (out.size() < base.size()) {
    std::unordered_map<std::size_t, std::size_t> overlap;  // candidate -> shared relevant documents with the group
    const auto add = [&](std::size_t q) {
      used[q] = true;
      out.push_back(q);
      overlap.erase(q);
      for (auto k : rel[q])
        for (auto c : postings[k])
          if (!used[c]) ++overlap[c];
    };
    while (used[base[next]]) ++next;
    add(base[next]);
    for (std::size_t n = 1; n < group && out.size() < base.size(); ++n) {
      std::size_t best = SIZE_MAX, best_overlap = 0;
      for (const auto& [c, v] : overlap)
        if (v > best_overlap || (v == best_overlap && pos[c] < pos[best])) best = c, best_overlap = v;
      if (best == SIZE_MAX) {  // no query left shares a document with the group: the next in the order
        while (used[base[next]]) ++next;
        best = base[next];
      }
      add(best);
    }
  }
  return out;
}

}  // namespace attune::train
