// ROPG-RL / ROPG-KD trainer (000 §4) over a BERT-family bi-encoder.
#include "attune/train/ropg.h"

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
#include "batching.h"
#include "checkpoint.h"

namespace attune::train {

namespace fs = std::filesystem;

RopgObjective parse_ropg_objective(const std::string& s) {
  if (s == "ropg-rl" || s == "rl") return RopgObjective::RL;
  if (s == "ropg-kd" || s == "kd") return RopgObjective::KD;
  throw UsageError("unknown ROPG objective \"" + s + "\" (expected ropg-rl or ropg-kd)");
}

namespace {

using detail::Tokens;
using detail::pad_rows;
using detail::tokenize;

struct Tokenized {
  Tokens query;
  std::vector<Tokens> docs;
  std::vector<double> utility;
};

std::vector<Tokenized> tokenize_examples(const text::SubwordTokenizer& tok, const std::vector<RopgExample>& ex,
                                         const RopgOptions& o) {
  std::vector<std::string> queries, docs;
  for (const auto& e : ex) {
    if (e.docs.size() != e.utility.size())
      throw Error("ROPG example " + e.id + ": " + std::to_string(e.docs.size()) + " documents but " +
                  std::to_string(e.utility.size()) + " utilities");
    queries.push_back(e.query);
    docs.insert(docs.end(), e.docs.begin(), e.docs.end());
  }
  auto qt = tokenize(tok, queries, o.query_max_length), dt = tokenize(tok, docs, o.doc_max_length);
  std::vector<Tokenized> out(ex.size());
  std::size_t at = 0;
  for (std::size_t i = 0; i < ex.size(); ++i) {
    out[i].query = std::move(qt[i]);
    for (std::size_t j = 0; j < ex[i].docs.size(); ++j) out[i].docs.push_back(std::move(dt[at++]));
    out[i].utility = ex[i].utility;
  }
  return out;
}

struct Model {
  models::BertModel bert{nullptr};
  models::PoolingSpec spec;
  std::int64_t pad = 0;
  torch::Device device{torch::kCPU};

  torch::Tensor embed(const std::vector<const Tokens*>& rows) {
    auto [ids, mask] = pad_rows(rows, pad, device);
    auto hidden = bert->forward(ids, torch::zeros_like(ids), mask);
    return models::pool_embeddings(hidden, mask, spec.pooling, spec.normalize);
  }

  // scores [b, l], mask [b, l] (bool), utilities [b, l] for examples `idx` of `ex`.
  struct Batch {
    torch::Tensor scores, mask, utility;
  };
  Batch score(const std::vector<Tokenized>& ex, const std::vector<std::size_t>& idx) {
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
    std::int64_t at = 0;
    for (std::int64_t r = 0; r < b; ++r) {
      const auto& e = ex[idx[static_cast<std::size_t>(r)]];
      for (std::size_t j = 0; j < e.docs.size(); ++j) {
        gather[static_cast<std::size_t>(r * L + static_cast<std::int64_t>(j))] = at++;
        ma[r][static_cast<std::int64_t>(j)] = true;
        ua[r][static_cast<std::int64_t>(j)] = e.utility[j];
      }
    }
    auto g = torch::tensor(gather, torch::kInt64).to(device);
    auto docs = de.index_select(0, g).view({b, L, -1});
    auto scores = torch::bmm(docs, qe.unsqueeze(2)).squeeze(2);
    return {scores, mask.to(device), util.to(device)};
  }
};

// Mean u(argmax pi) and mean E_pi[u] over `ex` (no gradient).
std::pair<double, double> evaluate(Model& m, const std::vector<Tokenized>& ex, std::size_t chunk) {
  if (ex.empty()) return {0, 0};
  torch::NoGradGuard ng;
  double top1 = 0, expected = 0;
  for (std::size_t lo = 0; lo < ex.size(); lo += chunk) {
    std::vector<std::size_t> idx;
    for (std::size_t i = lo; i < std::min(ex.size(), lo + chunk); ++i) idx.push_back(i);
    auto b = m.score(ex, idx);
    auto p = masked_softmax(b.scores.to(torch::kFloat64), b.mask);
    expected += (p * b.utility).sum().item<double>();
    auto best = b.scores.masked_fill(~b.mask, -std::numeric_limits<float>::infinity()).argmax(1, true);
    top1 += b.utility.gather(1, best).sum().item<double>();
  }
  return {top1 / static_cast<double>(ex.size()), expected / static_cast<double>(ex.size())};
}

nlohmann::json signature(const RopgOptions& o, std::size_t n_train) {
  return {{"objective", o.objective == RopgObjective::RL ? "ropg-rl" : "ropg-kd"},
          {"double_softmax", o.double_softmax}, {"target_temperature", o.target_temperature},
          {"init", o.init.string()}, {"epochs", o.epochs},
          {"batch_size", o.batch_size}, {"micro_batch", o.micro_batch}, {"lr", o.lr}, {"warmup", o.warmup},
          {"clip", o.clip}, {"query_max_length", o.query_max_length}, {"doc_max_length", o.doc_max_length},
          {"seed", o.seed}, {"train_examples", n_train}};
}

nlohmann::json epochs_json(const std::vector<RopgEpoch>& e) {
  auto a = nlohmann::json::array();
  for (const auto& x : e)
    a.push_back({{"epoch", x.epoch}, {"loss", x.loss}, {"dev_top1", x.dev_top1}, {"dev_expected", x.dev_expected}});
  return a;
}

std::vector<RopgEpoch> epochs_from(const nlohmann::json& a) {
  std::vector<RopgEpoch> out;
  for (const auto& x : a)
    out.push_back({x.at("epoch").get<std::size_t>(), x.at("loss").get<double>(), x.at("dev_top1").get<double>(),
                   x.at("dev_expected").get<double>()});
  return out;
}

}  // namespace

RopgResult train_ropg(const std::vector<RopgExample>& train_in, const std::vector<RopgExample>& dev_in, const RopgOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  if (o.out.empty()) throw UsageError("train needs an output folder (--out DIR)");
  if (o.init.empty()) throw UsageError("ROPG needs an encoder to start from (--init MODEL_DIR, e.g. one made by attune pretrain-encoder)");
  if (o.epochs == 0) throw UsageError("--epochs must be positive");
  if (o.batch_size == 0 || o.micro_batch == 0) throw UsageError("--batch-size and --micro-batch must be positive");
  if (!(o.lr > 0)) throw UsageError("--lr must be positive");
  if (!(o.target_temperature > 0) || !std::isfinite(o.target_temperature))
    throw UsageError("--target-temperature must be a positive number");
  if (!(o.warmup >= 0 && o.warmup < 1)) throw UsageError("--warmup must be a fraction in [0, 1)");
  if (o.query_max_length < 3 || o.doc_max_length < 3) throw UsageError("--max-length must be at least 3");
  std::vector<RopgExample> train;
  for (const auto& e : train_in)
    if (e.docs.size() >= 2) train.push_back(e);
  if (train.empty()) throw Error("ROPG has no training example with at least 2 candidate documents");
  std::vector<RopgExample> dev;
  for (const auto& e : dev_in)
    if (!e.docs.empty()) dev.push_back(e);

  const nlohmann::json sig = signature(o, train.size());
  Checkpointer ckpt(o.out);
  ckpt.prepare(o.resume);

  Model m;
  m.device = models::parse_device(o.device);
  torch::manual_seed(o.seed);
  auto loaded = models::load_bert(o.init, m.device);
  m.bert = loaded.model;
  m.spec = models::read_pooling_spec(o.init);
  const auto tok = text::SubwordTokenizer::load(o.init);
  m.pad = tok->pad_id().value_or(0);
  // Never longer than the model's positions (or its declared max_seq_length).
  RopgOptions lengths = o;
  const std::size_t cap = detail::length_cap(m.bert->cfg.max_positions, m.spec.max_seq_length, tok->model_max_length());
  lengths.query_max_length = std::min(o.query_max_length, cap);
  lengths.doc_max_length = std::min(o.doc_max_length, cap);
  const auto tr = tokenize_examples(*tok, train, lengths), dv = tokenize_examples(*tok, dev, lengths);

  torch::optim::Adam optimizer(m.bert->parameters(), torch::optim::AdamOptions(o.lr));
  const std::size_t N = tr.size(), B = o.batch_size;
  const std::size_t per_epoch = (N + B - 1) / B, total = per_epoch * o.epochs;
  const std::size_t warmup = static_cast<std::size_t>(std::ceil(o.warmup * static_cast<double>(total)));
  auto lr_at = [&](std::size_t s) { return warmup_linear_lr(o.lr, s, total, warmup); };

  RopgResult res;
  res.total_steps = total;
  std::size_t start = 0;
  EpochTracker track(per_epoch);
  if (o.resume) {
    const auto state = ckpt.load_state(sig);
    start = state.at("step").get<std::size_t>();
    track.restore(state);
    res.epochs = epochs_from(state.value("epochs", nlohmann::json::array()));
    res.best_epoch = state.value("best_epoch", std::size_t{0});
    res.init_dev_top1 = state.value("init_dev_top1", 0.0);
    res.init_dev_expected = state.value("init_dev_expected", 0.0);
    torch::NoGradGuard g;
    models::load_module(*m.bert, models::WeightSet::open(ckpt.dir()));
    torch::load(optimizer, (ckpt.dir() / "optimizer.pt").string());
    if (!o.quiet) std::fprintf(stderr, "train: resuming %s at step %zu/%zu\n", o.out.c_str(), start, total);
  } else {
    m.bert->eval();
    auto [t1, ex] = evaluate(m, dv, 32);
    res.init_dev_top1 = t1;
    res.init_dev_expected = ex;
    if (!o.quiet && !dv.empty())
      std::fprintf(stderr, "train: initial encoder on %zu dev examples: top-1 utility %.4f, expected utility %.4f\n",
                   dv.size(), t1, ex);
  }
  m.bert->train();

  models::SaveBertOptions save;
  save.tokenizer_dir = o.init;
  save.pooling = m.spec.pooling;
  save.normalize = m.spec.normalize;
  save.max_seq_length = m.spec.max_seq_length;
  auto metadata = [&](std::size_t step) {
    return nlohmann::json{{"method", sig["objective"]}, {"data", o.data_description}, {"seed", o.seed},
                          {"torch_threads", models::torch_threads()},
                          {"options", sig}, {"steps", step}, {"total_steps", total}, {"epochs", epochs_json(res.epochs)},
                          {"best_epoch", res.best_epoch}, {"init_dev_top1", res.init_dev_top1},
                          {"init_dev_expected", res.init_dev_expected}, {"dev_examples", dv.size()},
                          {"device", o.device}};
  };
  auto write_checkpoint = [&](std::size_t step) {
    auto so = save;
    so.attune_metadata = metadata(step);
    auto state = track.state();
    state.update({{"step", step}, {"options", sig}, {"epochs", epochs_json(res.epochs)}, {"best_epoch", res.best_epoch},
                  {"init_dev_top1", res.init_dev_top1}, {"init_dev_expected", res.init_dev_expected}});
    ckpt.write([&](const fs::path& dir) {
      models::save_bert(m.bert, dir, so);
      torch::save(optimizer, (dir / "optimizer.pt").string());
    }, state);
  };
  auto save_model = [&](std::size_t step) {
    auto so = save;
    so.attune_metadata = metadata(step);
    models::save_bert(m.bert, o.out, so);
    write_model_marker(o.out, "dense", sig["objective"].get<std::string>());
  };

  std::vector<std::size_t> perm;
  StepLog log(sig["objective"].get<std::string>(), o.epochs, total, o.log_every, o.quiet);

  for (std::size_t s = start; s < total; ++s) {
    const std::size_t epoch = s / per_epoch, in_epoch = s % per_epoch;
    if (s == start || in_epoch == 0) perm = epoch_order(o.seed, "ropg-epoch-", epoch, N);  // once per epoch
    const std::size_t lo = in_epoch * B, hi = std::min(N, lo + B);
    const double lr = lr_at(s);
    for (auto& g : optimizer.param_groups()) static_cast<torch::optim::AdamOptions&>(g.options()).lr(lr);
    optimizer.zero_grad();
    double step_loss = 0;
    for (std::size_t mlo = lo; mlo < hi; mlo += o.micro_batch) {
      std::vector<std::size_t> idx(perm.begin() + static_cast<std::ptrdiff_t>(mlo),
                                   perm.begin() + static_cast<std::ptrdiff_t>(std::min(hi, mlo + o.micro_batch)));
      auto b = m.score(tr, idx);
      torch::Tensor loss;
      if (o.objective == RopgObjective::KD) {
        loss = ropg_kd_loss(b.scores, b.utility.to(b.scores.dtype()), b.mask, o.double_softmax, o.target_temperature);
      } else {
        // One action per example from pi (detached), seeded by (seed, epoch, example).
        auto p = masked_softmax(b.scores.detach().to(torch::kCPU, torch::kFloat64), b.mask.to(torch::kCPU)).contiguous();
        auto pa = p.accessor<double, 2>();
        auto u_cpu = b.utility.to(torch::kCPU);
        auto ua = u_cpu.accessor<double, 2>();
        std::vector<std::int64_t> actions;
        std::vector<double> rewards;
        for (std::size_t r = 0; r < idx.size(); ++r) {
          Rng rng(derive_seed(o.seed, "ropg-rl-" + std::to_string(epoch) + "-" + std::to_string(idx[r])));
          const double u = rng.uniform();
          double c = 0;
          std::int64_t a = 0;
          const auto n = static_cast<std::int64_t>(tr[idx[r]].docs.size());
          for (; a < n - 1; ++a) {
            c += pa[static_cast<std::int64_t>(r)][a];
            if (u < c) break;
          }
          actions.push_back(a);
          rewards.push_back(ua[static_cast<std::int64_t>(r)][a] - ua[static_cast<std::int64_t>(r)][0]);
        }
        loss = reinforce_loss(b.scores, b.mask, torch::tensor(actions, torch::kInt64).to(m.device),
                              torch::tensor(rewards, torch::kFloat64).to(m.device));
      }
      const double w = static_cast<double>(idx.size()) / static_cast<double>(hi - lo);
      (loss * w).backward();
      step_loss += loss.item<double>() * w;
    }
    if (o.clip > 0) torch::nn::utils::clip_grad_norm_(m.bert->parameters(), o.clip);
    optimizer.step();
    if (!std::isfinite(step_loss)) throw Error("training diverged at step " + std::to_string(s + 1) + ": lower --lr");
    res.losses.push_back(step_loss);
    const bool epoch_end = track.add(step_loss);
    const std::size_t done = s + 1;
    log.add(epoch, done, step_loss, lr);
    if (epoch_end) {
      m.bert->eval();
      auto [t1, ex] = evaluate(m, dv, 32);
      m.bert->train();
      RopgEpoch e{epoch + 1, track.end_epoch(), t1, ex};
      res.epochs.push_back(e);
      // The kept model: best dev top-1 utility (ties: the earlier epoch); the last without dev.
      const bool better = track.keep(!dv.empty(), t1);
      if (better) {
        res.best_epoch = e.epoch;
        save_model(done);
      }
      if (!o.quiet)
        std::fprintf(stderr, "train: epoch %zu loss %.5f%s%s\n", e.epoch, e.loss,
                     dv.empty() ? "" : (" dev top-1 utility " + std::to_string(t1) + " expected " + std::to_string(ex)).c_str(),
                     better ? " (kept)" : "");
    }
    const bool stop = o.stop_after && done - start >= o.stop_after;
    if (epoch_end || (o.checkpoint_every && done % o.checkpoint_every == 0) || done == total || stop) write_checkpoint(done);
    if (stop) break;
  }
  res.steps_done = start + res.losses.size();
  if (res.steps_done == total) {
    // Rewrite the kept model's metadata with the whole run's history.
    auto md = metadata(total);
    md["seconds_this_run"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    models::write_json_file(o.out / "attune_train.json", md);
    if (!o.quiet)
      std::fprintf(stderr, "train: wrote %s (epoch %zu of %zu kept)\n", o.out.c_str(), res.best_epoch, o.epochs);
  }
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

}  // namespace attune::train
