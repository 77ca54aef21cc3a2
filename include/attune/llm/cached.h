#pragma once
// A LanguageModel that answers from the store's LLM cache and asks the wrapped model only
// for what is missing, writing each batch of new answers in one transaction. A repeated
// run asks the model nothing; a killed run loses at most the batch in flight.
// Thread-safe when the wrapped model is.
#include <atomic>
#include <cstddef>

#include "attune/llm/language_model.h"
#include "attune/store/llm_cache.h"

namespace attune::llm {

class CachedModel final : public LanguageModel {
 public:
  CachedModel(LanguageModel& inner, store::LlmCache& cache) : inner_(inner), cache_(cache) {}
  std::vector<Generation> generate(std::span<const Prompt> prompts, const GenerateOptions& opts) override;
  std::vector<double> score(std::span<const ScoreRequest> requests) override;
  ModelInfo info() const override { return inner_.info(); }
  // The wrapped model's counters, then cache_hits and cache_misses.
  std::vector<std::pair<std::string, double>> counters() const override {
    auto c = inner_.counters();
    c.emplace_back("cache_hits", static_cast<double>(hits_));
    c.emplace_back("cache_misses", static_cast<double>(misses_));
    return c;
  }

  std::size_t hits() const { return hits_; }
  std::size_t misses() const { return misses_; }

 private:
  LanguageModel& inner_;
  store::LlmCache& cache_;
  std::atomic<std::size_t> hits_{0}, misses_{0};
};

}  // namespace attune::llm
