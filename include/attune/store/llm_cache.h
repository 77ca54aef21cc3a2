#pragma once
// The LLM call cache role of the store: language-model answers keyed by model, kind, prompt
// and target, so a repeated call asks the model nothing. Implementations may be called from
// several threads; every put is one transaction (all of its entries or none).
#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace attune::store {

// One cached language-model answer. Keyed by (model id, kind, prompt, target-or-options).
struct CacheKey {
  std::string model;   // LanguageModel::info().id
  std::string kind;    // "generate" or "score"
  std::string prompt;
  std::string target;  // score: the target; generate: the options' canonical string
  std::string digest() const;  // 128-bit hash hex of the four parts
};

class LlmCache {
 public:
  virtual ~LlmCache() = default;

  // One answer per key, in order; nullopt for a key never put.
  virtual std::vector<std::optional<std::string>> cache_get(const std::vector<CacheKey>& keys) = 0;
  // Writes the entries in one transaction; an entry replaces the answer of an equal key.
  virtual void cache_put(const std::vector<std::pair<CacheKey, std::string>>& entries) = 0;
  // The number of cached answers, over all models.
  virtual std::size_t cache_size() = 0;
};

}  // namespace attune::store
