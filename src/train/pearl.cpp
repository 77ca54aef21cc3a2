// Pearl's cross-encoder trainer (001 §3): BERT + pooler + 1-output classifier, trained with
// the scale-calibrated KL (Eq. 2-3) on lists [positive, negatives].
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <numeric>

#include "attune/core/error.h"
#include "attune/core/rng.h"
#include "attune/models/bert.h"
#include "attune/models/config.h"
#include "attune/models/runtime.h"
#include "attune/models/weights.h"
#include "attune/text/subword.h"
#include "attune/train/objectives.h"
#include "attune/train/pearl.h"
#include "batching.h"
#include "checkpoint.h"

namespace attune::train {

namespace fs = std::filesystem;

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

nlohmann::json signature(const PearlOptions& o, std::size_t n_train, double y0) {
  return {{"init", o.init.string()}, {"keep_fraction", o.sampling.keep_fraction}, {"positives", o.sampling.positives},
          {"negatives", o.sampling.negatives}, {"epochs", o.epochs}, {"batch_size", o.batch_size},
          {"micro_batch", o.micro_batch}, {"lr", o.lr}, {"warmup", o.warmup}, {"clip", o.clip},
          {"max_length", o.max_length}, {"tau", o.tau}, {"anchor", o.anchor}, {"y0", y0},
          {"y0_given", !std::isnan(o.y0)}, {"y0_percentile", std::isnan(o.y0) ? nlohmann::json(o.y0_percentile) : nlohmann::json()}, {"optimizer", "adamw(weight_decay=0.01)"}, {"seed", o.seed},
          {"train_requests", n_train}};
}

}  // namespace

PearlResult train_pearl(const std::vector<PearlRequest>& train, const std::vector<PearlRequest>& eval_in, const PearlOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  if (o.out.empty()) throw UsageError("train needs an output folder (--out DIR)");
  if (o.init.empty()) throw UsageError("Pearl needs an encoder to start from (--init MODEL_DIR, e.g. one made by attune pretrain-encoder)");
  if (o.epochs == 0) throw UsageError("--epochs must be positive");
  if (o.batch_size == 0 || o.micro_batch == 0) throw UsageError("--batch-size and --micro-batch must be positive");
  if (!(o.lr > 0)) throw UsageError("--lr must be positive");
  if (!(o.warmup >= 0 && o.warmup < 1)) throw UsageError("--warmup must be a fraction in [0, 1)");
  if (!(o.tau > 0)) throw UsageError("--pearl-tau must be positive");
  if (o.max_length < 3) throw UsageError("--pearl-max-length must be at least 3");
  if (!(o.sampling.keep_fraction > 0 && o.sampling.keep_fraction <= 1)) throw UsageError("--pearl-keep must be in (0, 1]");

  PearlResult res;
  res.requests = train.size();
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
  const double y0 = std::isnan(o.y0) ? percentile(pos, o.y0_percentile) : o.y0;
  res.y0 = y0;
  // Label statistics over every (request, candidate) pair of the training data.
  nlohmann::json label_stats;
  {
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
    label_stats = {{"count", count}, {"mean", mean},
                   {"std", count ? std::sqrt(std::max(0.0, sq / static_cast<double>(count) - mean * mean)) : 0.0},
                   {"positive_fraction", count ? positive / static_cast<double>(count) : 0.0},
                   {"positives_median", median(pos)}};
  }

  const nlohmann::json sig = signature(o, train.size(), y0);
  Checkpointer ckpt(o.out);
  ckpt.prepare(o.resume);

  Model m;
  m.device = models::parse_device(o.device);
  const auto tok = text::SubwordTokenizer::load(o.init);
  m.pad = tok->pad_id().value_or(0);
  std::size_t max_length = 0;
  {
    // The encoder, with a pooler and a 1-output classifier: loaded when the folder has them,
    // else initialised like BERT (normal(0, 0.02), zero bias) from the seed.
    auto loaded = models::load_bert(o.init, torch::kCPU);
    const auto cfg = loaded.model->cfg;
    torch::manual_seed(o.seed);
    m.bert = models::BertModel(cfg, /*with_pooler=*/true);
    m.classifier = torch::nn::Linear(cfg.hidden_size, 1);
    torch::NoGradGuard g;
    for (auto& p : m.bert->named_parameters())
      if (p.key().rfind("pooler.", 0) == 0) {
        if (p.key().find("bias") != std::string::npos) p.value().zero_();
        else p.value().normal_(0, 0.02);
      }
    m.classifier->weight.normal_(0, 0.02);
    m.classifier->bias.zero_();
    const auto weights = models::WeightSet::open(o.init);
    models::LoadOptions lo;
    lo.prefixes = {"", "bert."};
    lo.optional = {"pooler.dense.weight", "pooler.dense.bias"};
    models::load_module(*m.bert, weights, lo);
    m.bert->to(m.device);
    m.classifier->to(m.device);
    const auto spec = models::read_pooling_spec(o.init);
    max_length = std::min(o.max_length, detail::length_cap(cfg.max_positions, spec.max_seq_length, tok->model_max_length()));
  }

  // Tokenise every pair once: the training requests' candidates, then the eval requests'.
  std::vector<std::pair<std::string, std::string>> texts;
  std::vector<std::size_t> offsets, eval_offsets;
  for (const auto& r : train) {
    offsets.push_back(texts.size());
    for (const auto& d : r.docs) texts.emplace_back(r.query, d);
  }
  for (const auto& r : eval_in) {
    if (r.docs.size() != r.label.size()) throw Error("Pearl eval request " + r.id + ": documents and labels differ in number");
    eval_offsets.push_back(texts.size());
    for (const auto& d : r.docs) texts.emplace_back(r.query, d);
  }
  const auto pairs = tokenize_pairs(*tok, texts, max_length);
  std::vector<TList> tl;
  for (const auto& l : lists) {
    TList t;
    for (auto d : l.docs) {
      t.pairs.push_back(offsets[l.request] + d);
      t.label.push_back(train[l.request].label[d]);
    }
    tl.push_back(std::move(t));
  }

  auto params = m.parameters();
  torch::optim::AdamW optimizer(params, torch::optim::AdamWOptions(o.lr).weight_decay(0.01));
  const std::size_t N = tl.size(), B = o.batch_size;
  const std::size_t per_epoch = (N + B - 1) / B, total = per_epoch * o.epochs;
  const std::size_t warmup = static_cast<std::size_t>(std::ceil(o.warmup * static_cast<double>(total)));
  auto lr_at = [&](std::size_t s) { return warmup_linear_lr(o.lr, s, total, warmup); };
  res.total_steps = total;

  std::size_t start = 0;
  EpochTracker track(per_epoch);
  if (o.resume) {
    const auto state = ckpt.load_state(sig);
    start = state.at("step").get<std::size_t>();
    track.restore(state);
    res.epoch_loss = state.value("epoch_loss", std::vector<double>{});
    res.eval_top1_before = state.value("eval_top1_before", 0.0);
    torch::NoGradGuard g;
    const auto w = models::WeightSet::open(ckpt.dir());
    models::LoadOptions lo;
    lo.prefixes = {"bert."};
    models::load_module(*m.bert, w, lo);
    models::load_module(*m.classifier, w, models::LoadOptions{{}, {"classifier."}});
    torch::load(optimizer, (ckpt.dir() / "optimizer.pt").string());
    if (!o.quiet) std::fprintf(stderr, "train: resuming %s at step %zu/%zu\n", o.out.c_str(), start, total);
  } else {
    m.train(false);
    res.eval_top1_before = top1(m, pairs, eval_offsets, eval_in);
    if (!o.quiet)
      std::fprintf(stderr, "train: pearl %zu of %zu requests kept, %zu lists, y0 %.4f (labels: mean %.4f, std %.4f, %.1f%% positive)\n",
                   res.kept_requests, train.size(), N, y0, label_stats["mean"].get<double>(), label_stats["std"].get<double>(),
                   100 * label_stats["positive_fraction"].get<double>());
  }
  m.train(true);

  models::SaveBertOptions save;
  save.tokenizer_dir = o.init;
  save.pooling = models::Pooling::Cls;
  save.max_seq_length = max_length;
  save.classifier = m.classifier;
  auto metadata = [&](std::size_t step) {
    return nlohmann::json{{"method", "pearl"}, {"data", o.data_description}, {"seed", o.seed},
                          {"torch_threads", models::torch_threads()}, {"options", sig},
                          {"y0", y0}, {"labels", label_stats}, {"requests", res.requests},
                          {"kept_requests", res.kept_requests}, {"lists", N}, {"steps", step}, {"total_steps", total},
                          {"epochs", res.epoch_loss}, {"eval_top1_before", res.eval_top1_before}, {"device", o.device}};
  };
  auto write_checkpoint = [&](std::size_t step) {
    auto so = save;
    so.attune_metadata = metadata(step);
    auto state = track.state();
    state.update({{"step", step}, {"options", sig}, {"epoch_loss", res.epoch_loss}, {"eval_top1_before", res.eval_top1_before}});
    ckpt.write([&](const fs::path& dir) {
      models::save_bert(m.bert, dir, so);
      torch::save(optimizer, (dir / "optimizer.pt").string());
    }, state);
  };

  std::vector<std::size_t> perm;
  StepLog log("pearl", o.epochs, total, o.log_every, o.quiet);
  for (std::size_t s = start; s < total; ++s) {
    const std::size_t epoch = s / per_epoch, in_epoch = s % per_epoch;
    if (s == start || in_epoch == 0) perm = epoch_order(o.seed, "pearl-epoch-", epoch, N);  // once per epoch
    const std::size_t lo = in_epoch * B, hi = std::min(N, lo + B);
    const double lr = lr_at(s);
    for (auto& g : optimizer.param_groups()) static_cast<torch::optim::AdamWOptions&>(g.options()).lr(lr);
    optimizer.zero_grad();
    double step_loss = 0;
    for (std::size_t mlo = lo; mlo < hi; mlo += o.micro_batch) {
      const std::size_t mhi = std::min(hi, mlo + o.micro_batch);
      std::vector<const Pair*> rows;
      std::size_t L = 0;
      for (std::size_t i = mlo; i < mhi; ++i) {
        for (auto p : tl[perm[i]].pairs) rows.push_back(&pairs[p]);
        L = std::max(L, tl[perm[i]].pairs.size());
      }
      auto flat = m.score(rows);
      const auto b = static_cast<std::int64_t>(mhi - mlo), LL = static_cast<std::int64_t>(L);
      std::vector<std::int64_t> gather(static_cast<std::size_t>(b * LL), 0);
      auto mask = torch::zeros({b, LL}, torch::kBool);
      auto lab = torch::zeros({b, LL}, torch::kFloat64);
      auto ma = mask.accessor<bool, 2>();
      auto la = lab.accessor<double, 2>();
      std::int64_t at = 0;
      for (std::int64_t r = 0; r < b; ++r) {
        const auto& t = tl[perm[mlo + static_cast<std::size_t>(r)]];
        for (std::size_t j = 0; j < t.pairs.size(); ++j) {
          const auto jj = static_cast<std::int64_t>(j);
          gather[static_cast<std::size_t>(r * LL + jj)] = at++;
          ma[r][jj] = true;
          la[r][jj] = t.label[j];
        }
      }
      auto scores = flat.index_select(0, torch::tensor(gather, torch::kInt64).to(m.device)).view({b, LL});
      auto loss = calibrated_kl_loss(scores, lab.to(m.device, scores.scalar_type()), mask.to(m.device), y0, o.tau, o.anchor);
      const double w = static_cast<double>(mhi - mlo) / static_cast<double>(hi - lo);
      (loss * w).backward();
      step_loss += loss.item<double>() * w;
    }
    if (o.clip > 0) torch::nn::utils::clip_grad_norm_(params, o.clip);
    optimizer.step();
    if (!std::isfinite(step_loss)) throw Error("training diverged at step " + std::to_string(s + 1) + ": lower --lr");
    res.losses.push_back(step_loss);
    const bool epoch_end = track.add(step_loss);
    const std::size_t done = s + 1;
    log.add(epoch, done, step_loss, lr);
    if (epoch_end) {
      res.epoch_loss.push_back(track.end_epoch());
      if (!o.quiet) std::fprintf(stderr, "train: pearl epoch %zu loss %.5f\n", res.epoch_loss.size(), res.epoch_loss.back());
    }
    const bool stop = o.stop_after && done - start >= o.stop_after;
    if (epoch_end || (o.checkpoint_every && done % o.checkpoint_every == 0) || done == total || stop) write_checkpoint(done);
    if (stop) break;
  }
  res.steps_done = start + res.losses.size();
  if (res.steps_done == total) {
    m.train(false);
    res.eval_top1_after = top1(m, pairs, eval_offsets, eval_in);
    auto so = save;
    so.attune_metadata = metadata(total);
    so.attune_metadata["eval_top1_after"] = res.eval_top1_after;
    so.attune_metadata["seconds_this_run"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    models::save_bert(m.bert, o.out, so);
    nlohmann::json rerank = nlohmann::json::object();
    if (!o.initial_retriever.empty() && o.top_l > 0)
      rerank["rerank"] = {{"initial", o.initial_retriever}, {"top_l", o.top_l}};
    write_model_marker(o.out, "cross", "pearl", rerank);
    if (!o.quiet) std::fprintf(stderr, "train: wrote %s (cross-encoder, %zu epochs)\n", o.out.c_str(), o.epochs);
  }
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

}  // namespace attune::train
