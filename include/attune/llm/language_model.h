#pragma once
// A frozen language model: the source of all feedback (ARCHITECTURE.md).
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace attune::llm {

struct Prompt {
  Prompt() = default;
  Prompt(std::string text_, std::string without_documents_ = {})  // NOLINT: {"..."} makes a prompt
      : text(std::move(text_)), without_documents(std::move(without_documents_)) {}
  std::string text;
  // The same prompt without its retrieved documents, for context-aware decoding
  // (GenerateOptions::cad); unused otherwise. A prompt that has no documents leaves it
  // empty or equal to text, and then decodes exactly as without cad.
  std::string without_documents;
};

struct Generation {
  std::string text;
};

struct GenerateOptions {
  std::size_t max_new_tokens = 128;
  // 1 = greedy; > 1 = beam search with that many beams (LaMP: 4).
  int beams = 1;
  // 0 = no sampling; > 0 samples with this temperature and nucleus top_p.
  double temperature = 0;
  double top_p = 1.0;
  std::uint64_t seed = 0;
  // "free" = any text; "copy" = extractive: the answer is a span of the prompt. Greedy, and
  // at each step the most probable token that keeps the answer (its leading whitespace
  // dropped) a substring of the prompt; the end of text is allowed once the answer holds a
  // non-space character. Only local: models implement "copy"; the other backends refuse it.
  std::string decode = "free";
  // Context-aware decoding (Shi et al., 2024, "Trusting Your Evidence"), greedy: each step
  // takes the argmax (or, with decode = copy, the best allowed token) of
  //   (1 + cad) * log p(y | text) - cad * log p(y | without_documents),
  // so tokens that the documents make likelier gain. 0 = off. Every prompt must then carry
  // its without_documents form; one equal to its text (or empty: no documents) decodes
  // with the plain log-probabilities. Only local: models implement it.
  double cad = 0;
  // > 0: no n-gram of this many tokens is generated twice in one answer (the prompt does not
  // count, so copying from the documents stays free); 0 = off. Only local: models implement it.
  int no_repeat_ngram = 0;
  // Canonical text form, part of the cache key.
  std::string canonical() const;
};

struct ScoreRequest {
  std::string prompt;
  std::string target;
};

struct ModelInfo {
  // Identifies the model and everything that changes its answers; keys the feedback cache.
  std::string id;
};

class LanguageModel {
 public:
  virtual ~LanguageModel() = default;
  // One generation per prompt, in order.
  virtual std::vector<Generation> generate(std::span<const Prompt> prompts, const GenerateOptions& opts) = 0;
  // Sum of log p(target tokens | prompt) per request (natural log), in order.
  virtual std::vector<double> score(std::span<const ScoreRequest> requests) = 0;
  virtual ModelInfo info() const = 0;
  // Operational counters (requests, retries, cache hits, ...) as name/value pairs in a
  // stable order, for the verbs' summaries; empty for backends with nothing to report.
  virtual std::vector<std::pair<std::string, double>> counters() const { return {}; }
};

}  // namespace attune::llm
