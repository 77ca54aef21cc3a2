#pragma once
// The options of the one training loop (train::fit) every learner runs on: schedule,
// micro-batches, clipping, checkpoints, resume and progress. Torch-free. Each method's
// options struct embeds one (`RopgOptions::fit`, ...) with the method's own defaults.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "attune/core/device.h"

namespace attune::train {

// How a KD / listwise target is made from a query's utilities before softmax(. / T):
// None, the papers' (the raw utilities: on [0, 1] utilities at T = 1 the largest
// probability ratio is e, about 1.3 when they differ by 0.25), or ZScore, per query
// (u - mean) / std over its candidates, so a query whose utilities differ by 0.02 gets
// as sharp a target as one whose differ by 0.5 (a query with all-equal utilities gets a
// uniform one). train/objectives.h normalize_targets applies it.
enum class TargetNormalization { None, ZScore };
TargetNormalization parse_target_normalization(const std::string& s);  // "none" | "zscore"
std::string to_string(TargetNormalization n);

struct FitOptions {
  // The trained model folder (its checkpoint in out/checkpoint). It must be new or empty,
  // unless `resume` continues the run in it; a run holds out/.attune.lock while it writes.
  std::filesystem::path out;
  // Model folders the run reads (the --init encoder): `out` may be none of them, nor lie
  // inside one, since training would overwrite the weights it starts from.
  std::vector<std::filesystem::path> inputs;
  std::size_t epochs = 10;            // passes over the training items
  std::size_t batch_size = 64;        // items per optimiser step (the effective batch)
  std::size_t micro_batch = 8;        // items per forward/backward (gradient accumulation), <= batch_size
  double lr = 1e-5;                   // peak learning rate (0: learning switched off, a control run)
  // Linear warmup to lr, then linear decay to 0 at the last step: `warmup` is a fraction of
  // all steps in [0, 1); warmup_steps, when set, is the exact number of steps instead.
  double warmup = 0.05;
  std::optional<std::size_t> warmup_steps;
  double clip = 1.0;                  // gradient-norm clip (0 = none)
  std::uint64_t seed = 0;             // every random draw of the run (recorded with it)
  Device device = Device::Kind::Cpu;  // where the model trains
  std::size_t checkpoint_every = 50;  // optimiser steps between checkpoints (0 = epoch ends only)
  bool resume = false;                // continue the run checkpointed in `out`
  bool quiet = false;                 // no progress lines on stderr
  std::size_t log_every = 10;         // steps between progress lines
  std::string data_description;       // recorded in attune_train.json
  // With a dev set, the starting model competes as epoch 0: an epoch is kept only when it
  // beats the start on dev, so a run never ships a model worse on dev than the one it
  // began with (kept epoch 0 = the start). false: the best trained epoch, as the papers.
  bool keep_start = true;
  std::size_t stop_after = 0;         // testing: return after this many steps of this run (0 = run to the end)

  // UsageError naming the field and its value ("fit.lr = -1: must be positive").
  void validate() const;
};

}  // namespace attune::train
