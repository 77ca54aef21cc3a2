#pragma once
// Torch-free facades over the BERT-family encoder (models/bert.h): a bi-encoder that embeds
// texts and a cross-encoder that scores (query, document) pairs. Both load a Hugging Face /
// sentence-transformers folder (config.json, model.safetensors, tokenizer files,
// 1_Pooling/config.json, modules.json) once and are then immutable: share one
// std::shared_ptr<const ...> between threads and call embed()/score() concurrently.
#include <cstddef>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "attune/core/device.h"

namespace attune::models {

struct EncoderOptions {
  Device device;                // auto: CUDA when present, else the CPU
  std::size_t max_length = 256; // tokens per text (specials included); also capped by the
                                // model's max_position_embeddings and sentence_bert_config.json
  std::size_t batch_size = 32;  // texts per forward pass (sorted by length to cut padding)
  std::string pooling = "auto"; // auto (the folder's 1_Pooling, else mean) | mean | cls
  int normalize = -1;           // -1: as the folder says (modules.json Normalize); 0: no; 1: L2
};

class TextEncoder {
 public:
  // Error naming the file and tensor/key for a missing or malformed config, tokenizer or
  // weight; UsageError for a bad option value.
  static std::shared_ptr<const TextEncoder> load(const std::filesystem::path& dir, const EncoderOptions& opts = {});
  ~TextEncoder();
  // Row-major texts.size() x dim() float32 embeddings, in the order of `texts`. A text's
  // embedding does not depend on the other texts of the call (padding is masked out).
  std::vector<float> embed(std::span<const std::string> texts) const;
  std::size_t dim() const;
  // "dense:" + the folder, for logs and cache keys.
  std::string id() const;

  struct Impl;
  explicit TextEncoder(std::unique_ptr<Impl> impl);

 private:
  std::unique_ptr<Impl> impl_;
};

class CrossEncoder {
 public:
  // A BertForSequenceClassification folder (classifier.{weight,bias}, pooler.dense).
  static std::shared_ptr<const CrossEncoder> load(const std::filesystem::path& dir, const EncoderOptions& opts = {});
  ~CrossEncoder();
  // One relevance score per document, higher = more relevant: the logit when num_labels is
  // 1, else log p(last label). Pairs are encoded as [CLS] query [SEP] doc [SEP], truncated
  // longest-first to max_length.
  std::vector<float> score(std::string_view query, std::span<const std::string> docs) const;
  std::string id() const;

  struct Impl;
  explicit CrossEncoder(std::unique_ptr<Impl> impl);

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace attune::models
