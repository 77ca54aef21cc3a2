#pragma once
// The `reference` reader: a deterministic, dependency-free baseline language model that
// reads only the prompt text, like a real LLM. It makes every pipeline run anywhere in
// seconds and makes tests exact; it is a baseline and a test double, never the headline.
//
// Model. Tokens are ROUGE tokens (text::rouge_tokens). With V the background vocabulary
// (the task's training outputs: N_bg tokens), P the word types of the prompt and UNK one
// symbol for every other word, and c(w) the prompt's counts over L tokens:
//   p(w | prompt) = lambda * c(w) / L + (1 - lambda) * p_bg(w),  w in V + P + {UNK}
//   p_bg(w)       = (n_bg(w) + 1) / (N_bg + |V + P| + 1)          (add-one smoothing)
// An output ends with probability e = 1 / (1 + mean training-output length) after each
// token, so
//   score(prompt, target) = sum_i log((1 - e) p(w_i | prompt)) + log e
// is a true log-probability: summed over all sequences of symbols it is 1.
// generate(): with labels, the label with the highest score; otherwise the candidate span
// of the prompt (each double-quoted span, each sentence, and the first 12 words after the
// prompt's last ": ") with the highest mean per-token log p(w) under the model of the rest
// of the prompt (the prompt's counts minus the span's), ties to the earliest candidate.
// Options of generate() other than max_new_tokens (which caps the words returned) do not
// change the answer: the reader is deterministic.
#include <string>
#include <unordered_map>
#include <vector>

#include "attune/llm/language_model.h"

namespace attune::llm {

struct ReferenceOptions {
  double lambda = 0.5;          // weight of the prompt model vs the background
  std::size_t input_words = 12; // length of the "first words of the input" candidate
};

class ReferenceReader final : public LanguageModel {
 public:
  // background: the task's training outputs; labels: the task's label list (may be empty).
  ReferenceReader(const std::vector<std::string>& background, std::vector<std::string> labels,
                  ReferenceOptions opts = {});
  std::vector<Generation> generate(std::span<const Prompt> prompts, const GenerateOptions& opts) override;
  std::vector<double> score(std::span<const ScoreRequest> requests) override;
  ModelInfo info() const override { return {id_}; }

  // One-prompt forms (thread-safe: the reader is immutable after construction).
  std::string generate_one(const std::string& prompt, std::size_t max_new_tokens = 128) const;
  double score_one(const std::string& prompt, const std::string& target) const;
  // Candidate spans generate() chooses from (exposed for tests).
  std::vector<std::string> candidates(const std::string& prompt) const;

 private:
  using Counts = std::unordered_map<std::string, double>;
  // |V + P| for a prompt with these counts.
  double types_with(const Counts& prompt) const;
  // log p(w | prompt) for a prompt with counts `prompt` over `prompt_len` tokens and
  // |V + P| = types.
  double log_p(const std::string& w, const Counts& prompt, double prompt_len, double types) const;
  std::vector<std::string> labels_;
  ReferenceOptions opts_;
  std::unordered_map<std::string, double> bg_;
  double bg_total_ = 0, bg_types_ = 0, end_prob_ = 0.5;
  std::string id_;
};

}  // namespace attune::llm
