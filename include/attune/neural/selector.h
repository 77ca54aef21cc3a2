#pragma once
// A trained RSPG selector (000 §5), for inference: a folder written by `attune train
// --method rspg-pre|rspg-post` (attune_model.json {"kind": "selector"}, selector.json
// {variant, pool, k, prompt_max_length, max_length}, the encoder and its head). It scores
// one input's prompts, one per retriever of its pool; eval takes the argmax.
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "attune/models/selector.h"

namespace attune::neural {

class Selector {
 public:
  // Error naming selector.json when it is missing or malformed.
  static std::shared_ptr<const Selector> load(const std::filesystem::path& dir, const Device& device = {});
  // One score per pool member; `query`: the input x the prompts were built for; `outputs`
  // (the LLM's output for each prompt) only for Post.
  std::vector<float> score(std::string_view query, std::span<const std::string> prompts,
                           std::span<const std::string> outputs) const {
    return model_->score(query, prompts, outputs);
  }
  models::SelectorInput input() const { return input_; }  // what it reads (selector.json "input")
  const std::string& variant() const { return variant_; }  // "rspg-pre" | "rspg-post"
  const std::vector<std::string>& pool() const { return pool_; }  // retriever specs, in score order
  std::size_t k() const { return k_; }                            // documents per prompt it was trained on
  std::size_t prompt_max_length() const { return prompt_max_length_; }  // the prompts' budget then

 private:
  std::shared_ptr<const models::SelectorModel> model_;
  std::string variant_;
  std::vector<std::string> pool_;
  std::size_t k_ = 4, prompt_max_length_ = 256;
  models::SelectorInput input_ = models::SelectorInput::Prompt;
};

}  // namespace attune::neural
