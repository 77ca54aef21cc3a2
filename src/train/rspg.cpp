// RSPG-Pre / RSPG-Post selector trainer (000 §5) and the trained selector's inference.
#include "attune/train/rspg.h"

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
using detail::Tokens;

namespace {

constexpr const char* kHeadFile = "selector_head.safetensors";

// The selector's network: encoder, then first-token vector -> linear -> scalar.
struct Net {
  models::BertModel bert{nullptr};
  torch::nn::Linear head{nullptr};
  std::int64_t pad = 0;
  torch::Device device{torch::kCPU};

  torch::Tensor forward(const std::vector<const Tokens*>& rows) {
    auto [ids, mask] = detail::pad_rows(rows, pad, device);
    // Type ids: 0 up to and including the first [SEP], 1 after it (pairs), as BERT pairs.
    auto hidden = bert->forward(ids, torch::zeros_like(ids), mask);
    return head->forward(hidden.select(1, 0)).squeeze(1);
  }
  std::vector<torch::Tensor> parameters() {
    auto p = bert->parameters();
    for (auto& t : head->parameters()) p.push_back(t);
    return p;
  }
};

// Pre: the prompt; Post: [CLS] prompt [SEP] output [SEP], truncated longest-first.
std::vector<Tokens> encode(const text::SubwordTokenizer& tok, const std::vector<std::string>& prompts,
                           const std::vector<std::string>& outputs, RspgVariant v, std::size_t max_length) {
  if (v == RspgVariant::Pre) return detail::tokenize(tok, prompts, max_length);
  std::vector<std::pair<std::string, std::string>> pairs;
  for (std::size_t i = 0; i < prompts.size(); ++i) pairs.emplace_back(prompts[i], outputs.at(i));
  text::SubwordTokenizer::BatchOptions bo;
  bo.max_length = max_length;
  std::vector<Tokens> out;
  for (std::size_t c0 = 0; c0 < pairs.size(); c0 += 256) {
    const auto span = std::span<const std::pair<std::string, std::string>>(pairs).subspan(c0, std::min<std::size_t>(256, pairs.size() - c0));
    const auto b = tok.encode_batch(span, bo);
    for (std::size_t r = 0; r < b.rows; ++r) {
      Tokens t;
      for (std::size_t j = 0; j < b.cols && b.mask[r * b.cols + j]; ++j) t.push_back(b.ids[r * b.cols + j]);
      out.push_back(std::move(t));
    }
  }
  return out;
}

struct Tokenized {
  std::vector<Tokens> texts;
  std::vector<double> utility;
};

std::vector<Tokenized> tokenize_examples(const text::SubwordTokenizer& tok, const std::vector<RspgExample>& ex,
                                         RspgVariant v, std::size_t R, std::size_t max_length) {
  std::vector<std::string> prompts, outputs;
  for (const auto& e : ex) {
    if (e.prompts.size() != R || e.utility.size() != R || (v == RspgVariant::Post && e.outputs.size() != R))
      throw Error("RSPG example " + e.id + ": expected " + std::to_string(R) + " prompts, utilities" +
                  (v == RspgVariant::Post ? " and outputs" : "") + " (one per pool retriever)");
    prompts.insert(prompts.end(), e.prompts.begin(), e.prompts.end());
    if (v == RspgVariant::Post) outputs.insert(outputs.end(), e.outputs.begin(), e.outputs.end());
  }
  auto t = encode(tok, prompts, outputs, v, max_length);
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
std::pair<double, double> evaluate(Net& net, const std::vector<Tokenized>& ex) {
  if (ex.empty()) return {0, 0};
  torch::NoGradGuard ng;
  double success = 0, utility = 0;
  for (std::size_t lo = 0; lo < ex.size(); lo += 8) {
    std::vector<std::size_t> idx;
    for (std::size_t i = lo; i < std::min(ex.size(), lo + 8); ++i) idx.push_back(i);
    auto [s, u] = score_batch(net, ex, idx);
    auto pick = s.argmax(1, true);
    auto chosen = u.gather(1, pick).squeeze(1);
    auto best = std::get<0>(u.max(1));
    success += (chosen >= best - 1e-9).sum().item<double>();
    utility += chosen.sum().item<double>();
  }
  return {success / static_cast<double>(ex.size()), utility / static_cast<double>(ex.size())};
}

nlohmann::json signature(const RspgOptions& o, std::size_t n) {
  return {{"variant", rspg_variant_name(o.variant)}, {"init", o.init.string()}, {"pool", o.pool}, {"k", o.k},
          {"prompt_max_length", o.prompt_max_length}, {"max_length", o.max_length}, {"epochs", o.epochs},
          {"batch_size", o.batch_size}, {"micro_batch", o.micro_batch}, {"lr", o.lr}, {"warmup", o.warmup},
          {"clip", o.clip}, {"temperature", o.temperature}, {"seed", o.seed}, {"train_examples", n}};
}

nlohmann::json epochs_json(const std::vector<RspgEpoch>& e) {
  auto a = nlohmann::json::array();
  for (const auto& x : e)
    a.push_back({{"epoch", x.epoch}, {"loss", x.loss}, {"dev_success", x.dev_success}, {"dev_utility", x.dev_utility}});
  return a;
}

}  // namespace

RspgResult train_rspg(const std::vector<RspgExample>& train, const std::vector<RspgExample>& dev, const RspgOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  if (o.out.empty()) throw UsageError("train needs an output folder (--out DIR)");
  if (o.init.empty()) throw UsageError("RSPG needs an encoder to start from (--init MODEL_DIR)");
  if (o.pool.size() < 2) throw UsageError("RSPG needs a pool of at least 2 retrievers");
  if (o.epochs == 0 || o.batch_size == 0 || o.micro_batch == 0) throw UsageError("--epochs, --batch-size and --micro-batch must be positive");
  if (!(o.lr > 0) || !(o.temperature > 0)) throw UsageError("--lr and the target temperature must be positive");
  if (!(o.warmup >= 0 && o.warmup < 1)) throw UsageError("--warmup must be a fraction in [0, 1)");
  if (train.empty()) throw Error("RSPG has no training example");
  const std::size_t R = o.pool.size();
  const nlohmann::json sig = signature(o, train.size());
  Checkpointer ckpt(o.out);
  ckpt.prepare(o.resume);

  Net net;
  net.device = models::parse_device(o.device);
  torch::manual_seed(o.seed);
  net.bert = models::load_bert(o.init, net.device).model;
  net.head = torch::nn::Linear(net.bert->cfg.hidden_size, 1);
  {
    torch::NoGradGuard g;
    net.head->weight.normal_(0, 0.02);
    net.head->bias.zero_();
  }
  net.head->to(net.device);
  const auto tok = text::SubwordTokenizer::load(o.init);
  net.pad = tok->pad_id().value_or(0);
  const auto spec = models::read_pooling_spec(o.init);
  const std::size_t max_length = std::min(o.max_length, detail::length_cap(net.bert->cfg.max_positions, 0, tok->model_max_length()));
  const auto tr = tokenize_examples(*tok, train, o.variant, R, max_length);
  const auto dv = tokenize_examples(*tok, dev, o.variant, R, max_length);

  std::vector<torch::Tensor> decay, no_decay;
  for (auto& p : net.parameters()) (p.dim() >= 2 ? decay : no_decay).push_back(p);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, std::make_unique<torch::optim::AdamWOptions>(torch::optim::AdamWOptions(o.lr).weight_decay(0.01)));
  groups.emplace_back(no_decay, std::make_unique<torch::optim::AdamWOptions>(torch::optim::AdamWOptions(o.lr).weight_decay(0.0)));
  torch::optim::AdamW optimizer(std::move(groups), torch::optim::AdamWOptions(o.lr));

  const std::size_t N = tr.size(), B = o.batch_size, per_epoch = (N + B - 1) / B, total = per_epoch * o.epochs;
  const std::size_t warmup = static_cast<std::size_t>(std::ceil(o.warmup * static_cast<double>(total)));
  auto lr_at = [&](std::size_t s) { return warmup_linear_lr(o.lr, s, total, warmup); };

  RspgResult res;
  res.total_steps = total;
  std::size_t start = 0;
  EpochTracker track(per_epoch);
  if (o.resume) {
    const auto state = ckpt.load_state(sig);
    start = state.at("step").get<std::size_t>();
    track.restore(state);
    for (const auto& x : state.value("epochs", nlohmann::json::array()))
      res.epochs.push_back({x.at("epoch").get<std::size_t>(), x.at("loss").get<double>(), x.at("dev_success").get<double>(),
                            x.at("dev_utility").get<double>()});
    res.best_epoch = state.value("best_epoch", std::size_t{0});
    res.init_dev_success = state.value("init_dev_success", 0.0);
    res.init_dev_utility = state.value("init_dev_utility", 0.0);
    torch::NoGradGuard g;
    models::load_module(*net.bert, models::WeightSet::open(ckpt.dir()));
    models::load_module(*net.head, models::WeightSet::open_file(ckpt.dir() / kHeadFile));
    torch::load(optimizer, (ckpt.dir() / "optimizer.pt").string());
    if (!o.quiet) std::fprintf(stderr, "train: resuming %s at step %zu/%zu\n", o.out.c_str(), start, total);
  } else {
    net.bert->eval();
    std::tie(res.init_dev_success, res.init_dev_utility) = evaluate(net, dv);
    if (!o.quiet && !dv.empty())
      std::fprintf(stderr, "train: untrained selector on %zu dev examples: success %.4f, utility %.4f\n", dv.size(),
                   res.init_dev_success, res.init_dev_utility);
  }
  net.bert->train();

  models::SaveBertOptions save;
  save.tokenizer_dir = o.init;
  save.pooling = spec.pooling;
  save.normalize = spec.normalize;
  auto metadata = [&](std::size_t step) {
    return nlohmann::json{{"method", rspg_variant_name(o.variant)}, {"data", o.data_description}, {"seed", o.seed},
                          {"torch_threads", models::torch_threads()},
                          {"options", sig}, {"steps", step}, {"total_steps", total}, {"epochs", epochs_json(res.epochs)},
                          {"best_epoch", res.best_epoch}, {"init_dev_success", res.init_dev_success},
                          {"init_dev_utility", res.init_dev_utility}, {"dev_examples", dv.size()}, {"device", o.device}};
  };
  auto write_net = [&](const fs::path& dir, std::size_t step) {
    auto so = save;
    so.attune_metadata = metadata(step);
    models::save_bert(net.bert, dir, so);
    models::save_module(*net.head, dir / kHeadFile);
  };
  auto save_model = [&](std::size_t step) {
    write_net(o.out, step);
    models::write_json_file(o.out / "selector.json", {{"variant", rspg_variant_name(o.variant)}, {"pool", o.pool}, {"k", o.k},
                                                      {"prompt_max_length", o.prompt_max_length}, {"max_length", max_length}});
    write_model_marker(o.out, "selector", rspg_variant_name(o.variant));
  };

  std::vector<std::size_t> perm;
  StepLog log(rspg_variant_name(o.variant), o.epochs, total, o.log_every, o.quiet);
  const auto mask = torch::ones({1, static_cast<std::int64_t>(R)}, torch::kBool).to(net.device);
  for (std::size_t s = start; s < total; ++s) {
    const std::size_t epoch = s / per_epoch, in_epoch = s % per_epoch;
    if (s == start || in_epoch == 0) perm = epoch_order(o.seed, "rspg-epoch-", epoch, N);  // once per epoch
    const std::size_t lo = in_epoch * B, hi = std::min(N, lo + B);
    const double lr = lr_at(s);
    for (auto& g : optimizer.param_groups()) static_cast<torch::optim::AdamWOptions&>(g.options()).lr(lr);
    optimizer.zero_grad();
    double step_loss = 0;
    for (std::size_t mlo = lo; mlo < hi; mlo += o.micro_batch) {
      std::vector<std::size_t> idx(perm.begin() + static_cast<std::ptrdiff_t>(mlo),
                                   perm.begin() + static_cast<std::ptrdiff_t>(std::min(hi, mlo + o.micro_batch)));
      auto [sc, u] = score_batch(net, tr, idx);
      auto loss = listwise_kl_loss(sc, u.to(sc.dtype()), mask.expand({static_cast<std::int64_t>(idx.size()), -1}), o.temperature);
      const double w = static_cast<double>(idx.size()) / static_cast<double>(hi - lo);
      (loss * w).backward();
      step_loss += loss.item<double>() * w;
    }
    if (o.clip > 0) torch::nn::utils::clip_grad_norm_(net.parameters(), o.clip);
    optimizer.step();
    if (!std::isfinite(step_loss)) throw Error("training diverged at step " + std::to_string(s + 1) + ": lower --lr");
    res.losses.push_back(step_loss);
    const bool epoch_end = track.add(step_loss);
    const std::size_t done = s + 1;
    log.add(epoch, done, step_loss, lr);
    if (epoch_end) {
      net.bert->eval();
      auto [succ, util] = evaluate(net, dv);
      net.bert->train();
      RspgEpoch e{epoch + 1, track.end_epoch(), succ, util};
      res.epochs.push_back(e);
      const bool better = track.keep(!dv.empty(), util);
      if (better) {
        res.best_epoch = e.epoch;
        save_model(done);
      }
      if (!o.quiet)
        std::fprintf(stderr, "train: epoch %zu loss %.5f%s%s\n", e.epoch, e.loss,
                     dv.empty() ? "" : (" dev success " + std::to_string(succ) + " utility " + std::to_string(util)).c_str(),
                     better ? " (kept)" : "");
    }
    const bool stop = o.stop_after && done - start >= o.stop_after;
    if (epoch_end || (o.checkpoint_every && done % o.checkpoint_every == 0) || done == total || stop) {
      auto state = track.state();
      state.update({{"step", done}, {"options", sig}, {"epochs", epochs_json(res.epochs)}, {"best_epoch", res.best_epoch},
                    {"init_dev_success", res.init_dev_success}, {"init_dev_utility", res.init_dev_utility}});
      ckpt.write([&](const fs::path& dir) {
        write_net(dir, done);
        torch::save(optimizer, (dir / "optimizer.pt").string());
      }, state);
    }
    if (stop) break;
  }
  res.steps_done = start + res.losses.size();
  if (res.steps_done == total) {
    auto md = metadata(total);
    md["seconds_this_run"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    models::write_json_file(o.out / "attune_train.json", md);
    if (!o.quiet) std::fprintf(stderr, "train: wrote %s (epoch %zu of %zu kept)\n", o.out.c_str(), res.best_epoch, o.epochs);
  }
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

// ---------------------------------------------------------------- inference

struct Selector::Impl {
  Net net;
  std::shared_ptr<const text::SubwordTokenizer> tok;
  RspgVariant variant = RspgVariant::Pre;
  std::vector<std::string> pool;
  std::size_t k = 4, prompt_max_length = 256, max_length = 512;
};

Selector::Selector(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Selector::~Selector() = default;

std::shared_ptr<const Selector> Selector::load(const fs::path& dir, const std::string& device) {
  auto impl = std::make_unique<Impl>();
  const auto cfg = models::read_json_file(dir / "selector.json");
  try {
    impl->variant = parse_rspg_variant(cfg.at("variant").get<std::string>());
    impl->pool = cfg.at("pool").get<std::vector<std::string>>();
    impl->k = cfg.at("k").get<std::size_t>();
    impl->prompt_max_length = cfg.at("prompt_max_length").get<std::size_t>();
    impl->max_length = cfg.at("max_length").get<std::size_t>();
  } catch (const nlohmann::json::exception& e) {
    throw Error((dir / "selector.json").string() + ": " + e.what());
  }
  impl->net.device = models::parse_device(device);
  impl->net.bert = models::load_bert(dir, impl->net.device).model;
  impl->net.bert->eval();
  impl->net.head = torch::nn::Linear(impl->net.bert->cfg.hidden_size, 1);
  {
    torch::NoGradGuard g;
    models::load_module(*impl->net.head, models::WeightSet::open_file(dir / kHeadFile));
  }
  impl->net.head->to(impl->net.device);
  impl->tok = text::SubwordTokenizer::load(dir);
  impl->net.pad = impl->tok->pad_id().value_or(0);
  return std::make_shared<const Selector>(std::move(impl));
}

std::vector<float> Selector::score(std::span<const std::string> prompts, std::span<const std::string> outputs) const {
  torch::NoGradGuard ng;
  std::vector<std::string> p(prompts.begin(), prompts.end()), out(outputs.begin(), outputs.end());
  if (impl_->variant == RspgVariant::Post && out.size() != p.size())
    throw Error("an RSPG-Post selector needs one output per prompt");
  auto rows = encode(*impl_->tok, p, out, impl_->variant, impl_->max_length);
  std::vector<const Tokens*> ptrs;
  for (auto& r : rows) ptrs.push_back(&r);
  auto s = const_cast<Net&>(impl_->net).forward(ptrs).to(torch::kCPU, torch::kFloat32).contiguous();
  return std::vector<float>(s.data_ptr<float>(), s.data_ptr<float>() + s.numel());
}

RspgVariant Selector::variant() const { return impl_->variant; }
const std::vector<std::string>& Selector::pool() const { return impl_->pool; }
std::size_t Selector::k() const { return impl_->k; }
std::size_t Selector::prompt_max_length() const { return impl_->prompt_max_length; }

}  // namespace attune::train
