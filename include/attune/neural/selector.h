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

#include "attune/core/error.h"
#include "attune/core/types.h"
#include "attune/models/selector.h"

namespace attune::neural {

class Selector {
 public:
  // Error naming selector.json when it is missing or malformed.
  static std::shared_ptr<const Selector> load(const std::filesystem::path& dir, const Device& device = {});
  // One score per pool member; `query`: the input x the prompts were built for; `outputs`
  // (the LLM's output for each prompt) only for Post.
  // A selector trained with the pool prior adds its learned bias per member.
  std::vector<float> score(std::string_view query, std::span<const std::string> prompts,
                           std::span<const std::string> outputs) const {
    auto s = model_->score(query, prompts, outputs);
    if (!pool_bias_.empty()) {
      if (s.size() != pool_bias_.size())
        throw Error("selector: " + std::to_string(s.size()) + " prompts for a pool of " + std::to_string(pool_bias_.size()) +
                    " (its pool_bias has one value per member)");
      for (std::size_t i = 0; i < s.size(); ++i) s[i] += static_cast<float>(pool_bias_[i]);  // in float, as the trainer adds it
    }
    return s;
  }
  const std::vector<double>& pool_bias() const { return pool_bias_; }  // selector.json "pool_bias" (empty: none)
  models::SelectorInput input() const { return input_; }  // what it reads (selector.json "input")
  const std::string& variant() const { return variant_; }  // "rspg-pre" | "rspg-post"
  const std::vector<std::string>& pool() const { return pool_; }  // retriever specs, in score order
  std::size_t k() const { return k_; }                            // documents per prompt it was trained on
  std::size_t prompt_max_length() const { return prompt_max_length_; }  // the prompts' budget then
  // What it was trained to read (selector.json "texts"): "prompts" (the task's, eval builds
  // them) or "documents" (each member's top k documents, one per line: attune serve's).
  const std::string& texts() const { return texts_; }

 private:
  std::shared_ptr<const models::SelectorModel> model_;
  std::string variant_;
  std::vector<double> pool_bias_;
  std::vector<std::string> pool_;
  std::size_t k_ = 4, prompt_max_length_ = 256;
  std::string texts_ = "prompts";
  models::SelectorInput input_ = models::SelectorInput::Prompt;
};

// A selector trained on documents as a retriever (the spec selector:DIR, and a folder whose
// attune_model.json kind is "selector"): each member of its pool ranks the candidates, the
// selector reads the query and each member's top k documents and picks one member, whose
// ranking is the answer (its scores; ties between members to the earlier in the pool). A
// selector trained on the task's prompts, or an RSPG-Post one (it reads the reader's
// outputs), is refused with a UsageError: `attune eval` runs those.
void register_selector_retriever(const Device& device);
// What such a selector reads for one member: the member's first k documents' texts (of
// `ranking` over `candidates`), one per line. The server's learner builds its examples with it.
std::string selector_documents_text(std::span<const Document> candidates, const Ranking& ranking, std::size_t k);

}  // namespace attune::neural
