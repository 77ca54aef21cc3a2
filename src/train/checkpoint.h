#pragma once
// What the trainers share (internal): crash-safe checkpoints, the learning-rate schedule,
// the epoch order and progress lines. Checkpoints: OUT/checkpoint is always whole. A new one
// is written to OUT/checkpoint.new, its state.json last (the mark of a whole checkpoint),
// then swapped in; a process killed at any point leaves a checkpoint to resume from.
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace attune::train {

// Exclusive hold of a training output folder for one process: OUT/.attune.lock, locked
// with flock (released by the kernel when the process dies, so a killed run never leaves
// a stale lock). Creates OUT. UsageError (field "out") when another process holds it.
class OutputLock {
 public:
  explicit OutputLock(const std::filesystem::path& out);
  ~OutputLock();
  OutputLock(const OutputLock&) = delete;
  OutputLock& operator=(const OutputLock&) = delete;
  static constexpr const char* kFile = ".attune.lock";

 private:
  int fd_ = -1;
};

class Checkpointer {
 public:
  explicit Checkpointer(std::filesystem::path out) : out_(std::move(out)) {}
  // Without resume: UsageError when OUT already holds a run, or is not a folder, or holds
  // anything else (training never writes over files it did not make). With resume:
  // finishes an interrupted swap, and UsageError when there is no checkpoint.
  void prepare(bool resume) const;
  // state.json of the checkpoint; UsageError naming the option when its "options" differ
  // from `signature` (a resumed run must use the same options).
  nlohmann::json load_state(const nlohmann::json& signature) const;
  // fill(dir) writes the model files into dir; then state.json; then the swap.
  void write(const std::function<void(const std::filesystem::path&)>& fill, const nlohmann::json& state) const;
  std::filesystem::path dir() const { return out_ / "checkpoint"; }

 private:
  std::filesystem::path out_;
};

// OUT/attune_model.json {"kind": "dense" | "cross" | "selector", "method": ..., + extra}:
// what makes a trained folder usable as a plain retriever spec (retrieval::make_retriever).
// Written with "complete": false; a folder whose run has not finished is refused as a
// retriever spec (retrieval/spec.h) until mark_model_complete.
void write_model_marker(const std::filesystem::path& out, const std::string& kind, const std::string& method,
                        const nlohmann::json& extra = nlohmann::json::object());
// Sets "complete": true in OUT/attune_model.json (when there is one): the run finished.
void mark_model_complete(const std::filesystem::path& out);

// "1h02m", "3m05s", "4.2s".
std::string format_duration(double seconds);

// The trainers' learning rate at 0-based `step`: linear warmup to `lr` over `warmup`
// steps, then linear decay to 0 at `total`.
double warmup_linear_lr(double lr, std::size_t step, std::size_t total, std::size_t warmup);

// The example order of one epoch: a Fisher-Yates shuffle of 0..n-1 drawn from
// Rng(derive_seed(seed, key + epoch)), so a resumed run draws the same order.
std::vector<std::size_t> epoch_order(std::uint64_t seed, const std::string& key, std::size_t epoch, std::size_t n);

// The per-step and per-epoch bookkeeping the trainers share: every step's loss of the whole
// run, the running mean of the current epoch, and the kept epoch's dev value.
class EpochTracker {
 public:
  explicit EpochTracker(std::size_t per_epoch) : per_epoch_(per_epoch) {}
  // From a checkpoint's state.json ("losses", "best_dev"; a missing or null best_dev, as
  // JSON writes -inf, is "none yet"): rebuilds the partly done epoch's loss sum.
  void restore(const nlohmann::json& state);
  // One optimiser step's loss; true when it ends an epoch.
  bool add(double loss);
  // The mean loss of the epoch just ended; the next epoch starts from zero.
  double end_epoch();
  // Whether the epoch with this dev value becomes the kept one: better than every earlier
  // one (ties keep the earlier), or always when there is no dev set.
  bool keep(bool has_dev, double dev_value);
  // What restore() reads, for the checkpoint's state.json.
  nlohmann::json state() const;
  const std::vector<double>& losses() const { return losses_; }
  std::size_t steps() const { return losses_.size(); }

 private:
  std::size_t per_epoch_;
  std::vector<double> losses_;
  double acc_ = 0;
  std::size_t n_ = 0;
  bool has_best_ = false;
  double best_ = 0;
};

// Progress lines on stderr, "train: NAME epoch e/E step s/S loss L lr X T s/step ETA D",
// every `every` steps and at the last; the loss is the mean since the previous line.
class StepLog {
 public:
  StepLog(std::string name, std::size_t epochs, std::size_t total, std::size_t every, bool quiet);
  void add(std::size_t epoch, std::size_t done, double loss, double lr);

 private:
  std::string name_;
  std::size_t epochs_, total_, every_;
  bool quiet_;
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
  std::size_t since_ = 0;
  double acc_ = 0;
};

}  // namespace attune::train
