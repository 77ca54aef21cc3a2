#pragma once
// A trained selector network for inference (torch-free facade over models/selector_net.h):
// scores one input's texts, one per retriever of its pool.
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "attune/core/device.h"

namespace attune::models {

// What the selector reads. QueryFirst (the default since 2026-11-25, issue 14 2.4): the
// input x first, then what the prompt adds, so a prompt longer than the selector's
// max_length loses its documents' tail, never x: Pre [CLS] x [SEP] prompt [SEP]; Post
// [CLS] x [SEP] output + "\n" + prompt [SEP]; both truncated longest-first. Prompt (000's,
// and every selector folder written before): Pre the prompt alone, Post [CLS] prompt [SEP]
// output [SEP]; LaMP prompts put the documents first and x last, so at 256 tokens the
// selector rarely saw x.
enum class SelectorInput { Prompt, QueryFirst };
SelectorInput parse_selector_input(const std::string& s);  // "prompt" | "query-first"
std::string to_string(SelectorInput i);


class SelectorModel {
 public:
  // The encoder and selector_head.safetensors of `dir` on `device`; `pairs`: inputs are (prompt, output) pairs (RSPG-Post); inputs are cut to
  // max_length tokens. Error naming the file when a part is missing or malformed.
  // `input`: what the selector reads (selector_net.h SelectorInput; a folder's selector.json
  // "input", "prompt" when it has none).
  static std::shared_ptr<const SelectorModel> load(const std::filesystem::path& dir, const Device& device, bool pairs,
                                                   SelectorInput input, std::size_t max_length);
  ~SelectorModel();
  // One score per prompt (higher = the better choice); `outputs`: one per prompt when
  // pairs, else ignored. Thread-safe.
  // `query`: the input x the prompts were built for (read by a QueryFirst selector).
  std::vector<float> score(std::string_view query, std::span<const std::string> prompts,
                           std::span<const std::string> outputs) const;

  struct Impl;
  explicit SelectorModel(std::unique_ptr<Impl> impl);

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace attune::models
