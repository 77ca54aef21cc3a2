#pragma once
// Crash-safe checkpoints shared by the trainers: OUT/checkpoint is always whole. A new one
// is written to OUT/checkpoint.new, its state.json last (the mark of a whole checkpoint),
// then swapped in; a process killed at any point leaves a checkpoint to resume from.
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

namespace attune::train {

class Checkpointer {
 public:
  explicit Checkpointer(std::filesystem::path out) : out_(std::move(out)) {}
  // Without resume: UsageError when OUT already holds a run. With resume: finishes an
  // interrupted swap, and UsageError when there is no checkpoint.
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

// OUT/attune_model.json {"kind": "dense" | "cross" | "selector", "method": ...}: what makes
// a trained folder usable as a plain retriever spec (retrieval::make_retriever).
void write_model_marker(const std::filesystem::path& out, const std::string& kind, const std::string& method);

// "1h02m", "3m05s", "4.2s".
std::string format_duration(double seconds);

}  // namespace attune::train
