#pragma once
// The `local:MODEL_DIR` language model: a Hugging Face folder (config.json, safetensors,
// tokenizer files) run in-process with libtorch. Torch-free header.
#include <cstddef>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "attune/llm/language_model.h"

#include "attune/core/device.h"

namespace attune::models {

struct LocalOptions {
  Device device;                 // auto: CUDA when present, else the CPU
  std::string dtype = "float32"; // float32 | float16 | bfloat16 (fp32 on CPU: bf16 is ~3x slower on one without avx512_bf16)
  std::size_t batch_size = 16;   // prompts per forward pass (generate) / rows per pass (score)
  bool share_prefix = true;      // score: requests with the same prompt read it once
};

struct LocalStats {
  std::size_t prompts = 0, prompt_tokens = 0, generated_tokens = 0, scored_tokens = 0, truncated = 0;
};

// Semantics (documented in docs/cli.md):
//  generate: prompt = tokenizer(prompt) with its special tokens (BOS for Llama 2, </s> for
//    T5); an empty causal prompt is just BOS. Stops at any EOS id of config.json or the
//    tokenizer, or after max_new_tokens; the text is decoded without special tokens.
//  score: sum of natural-log probabilities of the target's tokens, the target tokenized on
//    its own without special tokens for a causal LM (so "time" after "Once upon a" is scored
//    as the tokenizer's word-initial "▁time"), and with them for T5 (labels end in </s>, as
//    in training). A reader folder (`train-lm --stage reader`) holds attune_reader.json
//    {"answer_prefix": "\n", "eos_after_answer": true}: it was trained to answer with the
//    prefix, the answer and EOS, so its score of a target is that of prefix + target (one
//    text, tokenized as in training) followed by EOS. Scoring the bare target instead would
//    charge every answer the improbable first token (about -40 nats for reader75g).
//  Prompts longer than the model's context keep their last tokens (causal; BOS kept) or
//    their first (T5); each is counted in stats().truncated.
// Calls are serialised (one forward at a time; torch uses every core within one).
// The reader folder's answer format (above), and the prefix `train-lm --stage reader` trains.
inline constexpr const char* kReaderFile = "attune_reader.json";
inline constexpr const char* kReaderAnswerPrefix = "\n";
// What `train-lm --answer-prefix` accepts: a newline, then at most 8 characters, none a
// control character (e.g. "\n\"": the answer opens with a quote, as the documents' titles do).
inline bool valid_answer_prefix(std::string_view p) {
  if (p.empty() || p[0] != '\n' || p.size() > 9) return false;
  for (std::size_t i = 1; i < p.size(); ++i)
    if (static_cast<unsigned char>(p[i]) < 0x20 || p[i] == 0x7f) return false;
  return true;
}
// A generation of a reader whose answer prefix is `prefix`, without that prefix: leading
// whitespace, then the prefix's characters after its newline when the text starts with them.
// With the default prefix ("\n") the text comes back as it is.
inline std::string strip_answer_prefix(std::string_view text, std::string_view prefix) {
  if (prefix.size() <= 1) return std::string(text);
  const auto visible = prefix.substr(1);
  std::size_t i = 0;
  while (i < text.size() && (text[i] == ' ' || text[i] == '\n' || text[i] == '\t' || text[i] == '\r')) ++i;
  if (text.substr(i, visible.size()) != visible) return std::string(text);
  return std::string(text.substr(i + visible.size()));
}

class LocalModel final : public llm::LanguageModel {
 public:
  static std::unique_ptr<LocalModel> load(const std::filesystem::path& dir, const LocalOptions& opts = {});
  ~LocalModel() override;
  std::vector<llm::Generation> generate(std::span<const llm::Prompt> prompts, const llm::GenerateOptions& opts) override;
  // llm::validate_generate_options, then a causal model refuses max_new_tokens at or past its
  // context (max_position_embeddings; a one-token prompt leaves max_positions - 1): a
  // FieldError<UsageError> naming max_new_tokens and the limit. generate() calls it first,
  // so generate() with no prompts checks the options and does nothing else.
  void check(const llm::GenerateOptions& opts) const;
  std::vector<double> score(std::span<const llm::ScoreRequest> requests) override;
  // "local:<folder name>@<content hash>": the hash covers config.json, the tokenizer files
  // and the weights' headers, sizes and first/last MiB, so a changed model misses the cache.
  llm::ModelInfo info() const override;
  LocalStats stats() const;
  std::string device() const;

 private:
  struct Impl;
  explicit LocalModel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace attune::models
