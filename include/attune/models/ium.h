#pragma once
// IUM's reranker (002 §4; METHODS.md §5) for inference (torch-free facade over
// models/ium_net.h): p(R = 1 | x, d) = sigmoid(Enc(tid; mid; x; d)_CLS . W), where tid and
// mid are reserved tokens naming the agent's task and its language model.
//
// Agent tokens (002 does not publish how): the encoder's vocabulary must hold BERT's
// reserved "[unusedN]" tokens; the i-th task of the folder's ium.json is "[unused<i>]", the
// j-th model "[unused<500 + j>]", and a task or model the folder was not trained with reads
// the tokenizer's unknown token ("[UNK]"), as the training's unk replacement taught it.
// The input is [CLS] tid mid x [SEP] d [SEP], x and d truncated longest-first.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "attune/core/device.h"

namespace attune::models {

// The files an IUM folder adds to its encoder's: the head and {tasks, models, max_length}.
inline constexpr const char* kIumHeadFile = "ium_head.safetensors";
inline constexpr const char* kIumConfigFile = "ium.json";
// The first stage's candidates the reranker reorders: rerank(bm25,100,ium:...) (002: BM25's top 100).
inline constexpr std::size_t kIumInitialDepth = 100;

class IumModel {
 public:
  // The encoder, ium.json and ium_head.safetensors of `dir` on `device`. Error naming the
  // file when a part is missing or malformed.
  static std::shared_ptr<const IumModel> load(const std::filesystem::path& dir, const Device& device);
  ~IumModel();
  // p(R = 1 | x, d) for each document, for the agent (task, model). Thread-safe.
  std::vector<float> score(std::string_view task, std::string_view model, std::string_view query,
                           std::span<const std::string> docs) const;
  // The same as logits, Enc(...)_CLS . W before the sigmoid.
  std::vector<float> logits(std::string_view task, std::string_view model, std::string_view query,
                            std::span<const std::string> docs) const;
  // A folder trained with the initial order as a prior (train --ium-initial-prior learned):
  // the weight w of the first stage's z-score added to the logit (ium.json "initial_prior").
  std::optional<double> initial_prior_weight() const;
  // The tasks and models the folder has tokens for (the rest read [UNK]).
  const std::vector<std::string>& tasks() const;
  const std::vector<std::string>& models() const;
  std::string id() const;  // "ium:" + the folder

  struct Impl;
  explicit IumModel(std::unique_ptr<Impl> impl);

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace attune::models
