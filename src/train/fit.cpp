#include "fit.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "attune/core/error.h"
#include "attune/core/machine.h"
#include "attune/models/config.h"
#include "attune/models/runtime.h"
#include "checkpoint.h"

namespace attune::train {

namespace fs = std::filesystem;

nlohmann::json FitState::epochs_json() const {
  auto a = nlohmann::json::array();
  for (const auto& e : epochs) {
    nlohmann::json j = {{"epoch", e.epoch}, {"loss", e.loss}};
    if (e.dev) j.update(e.dev->values);
    a.push_back(std::move(j));
  }
  return a;
}

namespace {

// The epochs of a checkpoint's state.json (what FitState::epochs_json wrote): dev values
// are the entries besides "epoch" and "loss".
std::vector<EpochRecord> epochs_from(const nlohmann::json& a) {
  std::vector<EpochRecord> out;
  for (const auto& x : a) {
    EpochRecord e{x.at("epoch").get<std::size_t>(), x.at("loss").get<double>(), std::nullopt};
    DevValue d;
    for (const auto& [key, value] : x.items())
      if (key != "epoch" && key != "loss") d.values[key] = value;
    if (!d.values.empty()) e.dev = std::move(d);
    out.push_back(std::move(e));
  }
  return out;
}

std::string default_epoch_line(const EpochRecord& e, bool kept) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "train: epoch %zu loss %.5f", e.epoch, e.loss);
  return std::string(buf) + (e.dev ? e.dev->line : "") + (kept ? " (kept)" : "");
}

}  // namespace

DevSelectedLearner::DevSelectedLearner(const FitOptions& fit, std::vector<std::string> dev_keys)
    : fit_(fit), keys_(std::move(dev_keys)), initial_(nlohmann::json::object()) {
  for (const auto& k : keys_) initial_["init_" + k] = 0.0;
}

void DevSelectedLearner::start(const std::optional<DevValue>& d) {
  if (!d) return;
  for (const auto& k : keys_) initial_["init_" + k] = d->values.at(k).get<double>();
  if (!fit_.quiet) std::fprintf(stderr, "train: the initial model on %zu dev examples:%s\n", dev_size(), d->line.c_str());
}

void DevSelectedLearner::restore(const nlohmann::json& state) {
  for (const auto& k : keys_) initial_["init_" + k] = state.value("init_" + k, 0.0);
}

nlohmann::json DevSelectedLearner::metadata(const FitState& st, std::size_t step) const {
  nlohmann::json m = {{"method", name()}, {"data", fit_.data_description}, {"seed", fit_.seed},
                      {"torch_threads", models::torch_threads()}, {"options", signature()}, {"steps", step},
                      {"total_steps", st.total_steps}, {"epochs", st.epochs_json()}, {"best_epoch", st.best_epoch},
                      {"dev_examples", dev_size()}, {"device", fit_.device.str()},
                      {"machine", this_machine().to_json()}};
  m.update(initial_);
  return m;
}

void DevSelectedLearner::finish(const FitState& st, double seconds) {
  // Rewrite the kept model's metadata with the whole run's history.
  auto md = metadata(st, st.total_steps);
  md["seconds_this_run"] = seconds;
  models::write_json_file(fit_.out / "attune_train.json", md);
  if (!fit_.quiet)
    std::fprintf(stderr, "train: wrote %s (epoch %zu of %zu kept)\n", fit_.out.c_str(), st.best_epoch, fit_.epochs);
}

void prepare_out(const FitOptions& o) { Checkpointer(o.out).prepare(o.resume); }

FitResult fit(Learner& learner, const FitOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  o.validate();
  const nlohmann::json sig = learner.signature();
  const OutputLock lock(o.out);  // before the checks: two runs on one folder cannot both pass them
  Checkpointer ckpt(o.out);
  ckpt.prepare(o.resume);

  const std::size_t N = learner.size(), B = o.batch_size;
  if (N == 0) throw Error("training " + learner.name() + " has no training item");
  const std::size_t per_epoch = (N + B - 1) / B, total = per_epoch * o.epochs;
  const std::size_t warmup =
      o.warmup_steps ? *o.warmup_steps : static_cast<std::size_t>(std::ceil(o.warmup * static_cast<double>(total)));

  FitResult res;
  FitState& st = res.state;
  st.total_steps = total;
  st.per_epoch = per_epoch;
  st.track = EpochTracker(per_epoch);
  auto& track = st.track;
  auto& optimizer = learner.optimizer();
  std::size_t start = 0;
  if (o.resume) {
    const auto state = ckpt.load_state(sig);
    start = state.at("step").get<std::size_t>();
    track.restore(state);
    st.epochs = epochs_from(state.value("epochs", nlohmann::json::array()));
    st.best_epoch = state.value("best_epoch", std::size_t{0});
    learner.restore(state);
    {
      torch::NoGradGuard g;
      learner.load(ckpt.dir());
    }
    torch::load(optimizer, (ckpt.dir() / "optimizer.pt").string());
    if (!o.quiet) std::fprintf(stderr, "train: resuming %s at step %zu/%zu\n", o.out.c_str(), start, total);
  } else {
    learner.train_mode(false);
    res.initial_dev = learner.dev();
    learner.start(res.initial_dev);
    if (o.keep_start && learner.keeps_best_epoch() && res.initial_dev) {
      // The start is epoch 0 of the dev selection: the folder holds it until an epoch beats it.
      track.keep(true, res.initial_dev->value);
      st.best_epoch = 0;
      learner.save_kept(st);
    }
  }
  learner.train_mode(true);
  st.step = start;

  auto write_checkpoint = [&] {
    auto state = track.state();
    state.update({{"step", st.step}, {"options", sig}, {"epochs", st.epochs_json()}, {"best_epoch", st.best_epoch}});
    state.update(learner.checkpoint_state());
    ckpt.write([&](const fs::path& dir) {
      learner.save(dir, st);
      torch::save(optimizer, (dir / "optimizer.pt").string());
    }, state);
  };

  const auto params = learner.parameters();
  std::vector<std::size_t> perm, in_order;
  StepLog log(learner.name(), o.epochs, total, o.log_every, o.quiet);
  for (std::size_t s = start; s < total; ++s) {
    const std::size_t epoch = s / per_epoch, in_epoch = s % per_epoch;
    if (s == start || in_epoch == 0) perm = learner.order(epoch);  // drawn once per epoch
    const std::size_t lo = in_epoch * B, hi = std::min(N, lo + B);
    if (perm.empty()) {  // the items in their own order
      in_order.resize(hi - lo);
      std::iota(in_order.begin(), in_order.end(), lo);
    }
    const double lr = warmup_linear_lr(o.lr, s, total, warmup);
    for (auto& g : optimizer.param_groups()) g.options().set_lr(lr);
    optimizer.zero_grad();
    double step_loss = 0;
    for (std::size_t mlo = lo; mlo < hi; mlo += o.micro_batch) {
      const std::size_t mhi = std::min(hi, mlo + o.micro_batch);
      const MicroBatch mb{s, epoch,
                          perm.empty() ? std::span<const std::size_t>(in_order).subspan(mlo - lo, mhi - mlo)
                                       : std::span<const std::size_t>(perm).subspan(mlo, mhi - mlo)};
      auto loss = learner.loss(mb);
      const double w = static_cast<double>(mhi - mlo) / static_cast<double>(hi - lo);
      (loss * w).backward();
      step_loss += loss.item<double>() * w;
    }
    if (o.clip > 0) torch::nn::utils::clip_grad_norm_(params, o.clip);
    optimizer.step();
    if (!std::isfinite(step_loss))
      throw Error("training diverged at step " + std::to_string(s + 1) + " (loss " + std::to_string(step_loss) +
                  "): lower the learning rate");
    res.losses.push_back(step_loss);
    const bool epoch_end = track.add(step_loss);
    const std::size_t done = st.step = s + 1;
    log.add(epoch, done, step_loss, lr);
    if (epoch_end) {
      learner.train_mode(false);
      auto dev = learner.dev();
      learner.train_mode(true);
      st.epochs.push_back({epoch + 1, track.end_epoch(), std::move(dev)});
      const auto& e = st.epochs.back();
      // The kept epoch: the best dev value (ties: the earlier epoch); the last without dev.
      const bool kept = learner.keeps_best_epoch() && track.keep(e.dev.has_value(), e.dev ? e.dev->value : 0.0);
      if (kept) {
        st.best_epoch = e.epoch;
        learner.save_kept(st);
      }
      if (!o.quiet) {
        auto line = learner.epoch_line(e, kept);
        if (!line) line = default_epoch_line(e, kept);
        if (!line->empty()) std::fprintf(stderr, "%s\n", line->c_str());
      }
    }
    const bool stop = o.stop_after && done - start >= o.stop_after;
    if (epoch_end || (o.checkpoint_every && done % o.checkpoint_every == 0) || done == total || stop) write_checkpoint();
    if (stop) break;
  }
  res.steps_done = start + res.losses.size();
  if (res.steps_done == total) {
    learner.finish(st, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    mark_model_complete(o.out);
  }
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

void record_feedback_spread(const FitOptions& opts, const std::string& kind,
                            const std::vector<const std::vector<double>*>& utilities) {
  nlohmann::json spread = nlohmann::json::array();
  std::size_t flat = 0;
  for (const auto* u : utilities) {
    if (!u || u->empty()) continue;
    const auto [lo, hi] = std::minmax_element(u->begin(), u->end());
    spread.push_back(*hi - *lo);
    flat += *hi == *lo;
  }
  const auto file = opts.out / "attune_train.json";
  auto j = models::read_json_file(file);
  j["feedback"] = {{"kind", kind}, {"queries", spread.size()}, {"flat", flat}, {"spread", std::move(spread)}};
  models::write_json_file(file, j);
}

}  // namespace attune::train
