#pragma once
// The one training loop (internal): train::fit owns the learning-rate schedule, the epoch
// order, micro-batches and gradient accumulation, clipping, the divergence check, epoch
// bookkeeping with dev selection, crash-safe checkpoints and resume, and progress lines.
// Each method supplies a Learner: its parameters and optimiser, the loss of a micro-batch,
// its dev value, what it saves and what it records. (faiss IndexIVF::train -> train_encoder;
// ggml_opt_epoch.)
#include <torch/torch.h>

#include <cstddef>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "attune/train/fit_options.h"
#include "checkpoint.h"

namespace attune::train {

// A dev evaluation: `value` decides which epoch is kept (higher is better); `values` are
// recorded in the epoch's entry ({"dev_top1": ..., ...}) and `line` is appended to the
// epoch's progress line.
struct DevValue {
  double value = 0;
  nlohmann::json values = nlohmann::json::object();
  std::string line;
};

// One finished epoch: its mean training loss and, with a dev set, its dev values.
struct EpochRecord {
  std::size_t epoch = 0;  // 1-based
  double loss = 0;
  std::optional<DevValue> dev;
  // dev->values[key]; 0 without a dev set.
  double dev_value(const std::string& key) const { return dev ? dev->values.value(key, 0.0) : 0.0; }
};

// What the loop knows of the run so far (passed to the learner's hooks).
struct FitState {
  std::size_t step = 0, total_steps = 0, per_epoch = 0;
  std::vector<EpochRecord> epochs;  // of the whole run (resumed ones included)
  std::size_t best_epoch = 0;       // the kept epoch (0 = the start, or none yet)
  EpochTracker track{1};            // every step's loss of the whole run (track.losses())
  nlohmann::json epochs_json() const;  // [{"epoch", "loss", dev values...}, ...]
};

// One micro-batch of one optimiser step.
struct MicroBatch {
  std::size_t step = 0, epoch = 0;    // 0-based
  std::span<const std::size_t> items; // indices into the learner's training items
};

class Learner {
 public:
  virtual ~Learner() = default;
  // Progress lines: "train: NAME epoch e/E step s/S ...".
  virtual std::string name() const = 0;
  // Training items per epoch (examples, lists, ...); at least 1.
  virtual std::size_t size() const = 0;
  // The items' order in epoch `epoch` (0-based): a permutation of 0..size()-1, drawn from the
  // run's seed so that a resumed run draws the same (epoch_order); empty = 0..size()-1.
  virtual std::vector<std::size_t> order(std::size_t epoch) const = 0;
  // The trained parameters (clipped together) and the optimiser over them, made by the
  // learner with `lr` as its initial learning rate; the loop sets each step's rate.
  virtual std::vector<torch::Tensor> parameters() = 0;
  virtual torch::optim::Optimizer& optimizer() = 0;
  virtual void train_mode(bool on) = 0;
  // The mean loss of a micro-batch; the loop weights it by the micro-batch's share of the step.
  virtual torch::Tensor loss(const MicroBatch& mb) = 0;
  // Dev evaluation (no gradient, in eval mode): before training and after every epoch.
  // nullopt: no dev set (every epoch is kept, so the last one is).
  virtual std::optional<DevValue> dev() { return std::nullopt; }
  // Whether epochs compete on dev (ROPG, RSPG): then save_kept() writes the kept epoch's model
  // to `out` as soon as it is kept. Otherwise the learner saves its model in finish().
  virtual bool keeps_best_epoch() const { return false; }
  virtual void save_kept(const FitState& state) {}
  // The options a resumed run must share with the run it continues (checkpoint "options").
  virtual nlohmann::json signature() const = 0;
  // The model's own files (weights, heads, config) into `dir`; `state` for its metadata.
  virtual void save(const std::filesystem::path& dir, const FitState& state) = 0;
  // Loads the weights save() wrote into `dir` (a checkpoint).
  virtual void load(const std::filesystem::path& dir) = 0;
  // The learner's own entries in a checkpoint's state.json, and their restore on resume.
  virtual nlohmann::json checkpoint_state() const { return nlohmann::json::object(); }
  virtual void restore(const nlohmann::json& state) {}
  // Before the first step of a new run (not on resume), after the initial dev evaluation.
  virtual void start(const std::optional<DevValue>& initial_dev) {}
  // A progress line of the learner's own at an epoch end, replacing the default
  // "train: epoch E loss L<dev line>< (kept)>"; nullopt = the default, "" = no line.
  virtual std::optional<std::string> epoch_line(const EpochRecord& e, bool kept) const { return std::nullopt; }
  // The whole run is done (not called when stop_after ended it early): write the final
  // model or its final metadata into `out`.
  virtual void finish(const FitState& state, double seconds) = 0;
};

// A learner whose epochs compete on a dev set (ROPG, RSPG): the kept epoch is the one with
// the best dev value. It records the initial model's dev values as "init_<key>" for each
// dev key ("dev_top1" -> "init_dev_top1"; 0 without a dev set) in checkpoints and in
// attune_train.json, whose common entries it writes; finish() rewrites that file with the
// whole run's history.
class DevSelectedLearner : public Learner {
 public:
  bool keeps_best_epoch() const override { return true; }
  void start(const std::optional<DevValue>& initial) override;
  nlohmann::json checkpoint_state() const override { return initial_; }
  void restore(const nlohmann::json& state) override;
  void finish(const FitState& state, double seconds) override;
  // The initial model's dev value of `key` ("dev_top1"); 0 without a dev set.
  double initial(const std::string& key) const { return initial_.value("init_" + key, 0.0); }

 protected:
  // `dev_keys`: the entries of every DevValue::values.
  DevSelectedLearner(const FitOptions& fit, std::vector<std::string> dev_keys);
  // attune_train.json at `step`: method, data, seed, options, steps, epochs, kept epoch,
  // initial dev values, dev examples, device.
  nlohmann::json metadata(const FitState& state, std::size_t step) const;
  virtual std::size_t dev_size() const = 0;  // dev examples

 private:
  const FitOptions& fit_;
  std::vector<std::string> keys_;
  nlohmann::json initial_;
};

struct FitResult {
  FitState state;               // epochs and kept epoch of the whole run
  std::size_t steps_done = 0;   // steps of the whole run done (== total_steps when finished)
  std::vector<double> losses;   // per step of this process
  std::optional<DevValue> initial_dev;  // before training (absent on resume)
  double seconds = 0;
};

// What the results of dev-selected methods (RopgResult, RspgResult) take from a fit: steps,
// the kept epoch, this process's losses and the time; their epochs come from `epoch(record)`.
template <class Result, class ToEpoch>
void fill_result(const FitResult& f, Result& r, ToEpoch epoch) {
  r.steps_done = f.steps_done;
  r.total_steps = f.state.total_steps;
  for (const auto& e : f.state.epochs) r.epochs.push_back(epoch(e));
  r.best_epoch = f.state.best_epoch;
  r.losses = f.losses;
  r.seconds = f.seconds;
}

// The output folder's checks fit() starts with, for trainers to run before loading anything:
// UsageError when opts.out holds a run and resume is off, or resume is on without a checkpoint.
void prepare_out(const FitOptions& opts);

// Runs `learner` to the end of opts.epochs (or opts.stop_after steps of this process).
// Validates `opts`; UsageError when out already holds a run (without resume), when a
// resumed run's signature differs, or when there is no checkpoint to resume; Error when
// the loss is not finite ("training diverged at step N").
FitResult fit(Learner& learner, const FitOptions& opts);

// Adds the feedback the run learnt from to its attune_train.json (`attune report` draws it):
// "feedback": {"kind", "queries", "flat", "spread": [per training query, the largest minus
// the smallest utility of its candidates (documents, or a selector's pool members)]}.
void record_feedback_spread(const FitOptions& opts, const std::string& kind,
                            const std::vector<const std::vector<double>*>& utilities);

}  // namespace attune::train
