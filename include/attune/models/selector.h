#pragma once
// A trained selector network for inference (torch-free facade over models/selector_net.h):
// scores one input's texts, one per retriever of its pool.
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "attune/core/device.h"

namespace attune::models {

class SelectorModel {
 public:
  // The encoder and selector_head.safetensors of `dir` on `device`; `pairs`: inputs are (prompt, output) pairs (RSPG-Post); inputs are cut to
  // max_length tokens. Error naming the file when a part is missing or malformed.
  static std::shared_ptr<const SelectorModel> load(const std::filesystem::path& dir, const Device& device, bool pairs,
                                                   std::size_t max_length);
  ~SelectorModel();
  // One score per prompt (higher = the better choice); `outputs`: one per prompt when
  // pairs, else ignored. Thread-safe.
  std::vector<float> score(std::span<const std::string> prompts, std::span<const std::string> outputs) const;

  struct Impl;
  explicit SelectorModel(std::unique_ptr<Impl> impl);

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace attune::models
