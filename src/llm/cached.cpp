#include "attune/llm/cached.h"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string_view>

#include "attune/core/error.h"
#include "attune/core/sha256.h"

namespace attune::llm {

std::vector<Generation> CachedModel::generate(std::span<const Prompt> prompts, const GenerateOptions& opts) {
  const std::string model = inner_.info().id, options = opts.canonical();
  std::vector<store::CacheKey> keys;
  keys.reserve(prompts.size());
  for (const auto& p : prompts) {
    // Context-aware decoding's answer depends on the prompt without documents too.
    if (opts.cad != 0 && !p.without_documents.empty() && p.without_documents != p.text)
      keys.push_back({model, "generate", p.text, options + ";without_documents=" + Sha256().add(p.without_documents).hex()});
    else
      keys.push_back({model, "generate", p.text, options});
  }
  auto cached = cache_.cache_get(keys);
  std::vector<Generation> out(prompts.size());
  std::vector<Prompt> missing;
  std::vector<std::size_t> where;
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    if (cached[i]) {
      out[i].text = *cached[i];
    } else {
      missing.push_back(prompts[i]);
      where.push_back(i);
    }
  }
  hits_ += prompts.size() - missing.size();
  if (missing.empty()) return out;
  misses_ += missing.size();
  auto fresh = inner_.generate(missing, opts);
  if (fresh.size() != missing.size()) throw Error("language model " + model + " returned a wrong number of generations");
  std::vector<std::pair<store::CacheKey, std::string>> entries;
  for (std::size_t j = 0; j < missing.size(); ++j) {
    out[where[j]] = fresh[j];
    entries.emplace_back(keys[where[j]], fresh[j].text);
  }
  cache_.cache_put(entries);
  return out;
}

std::vector<double> CachedModel::score(std::span<const ScoreRequest> requests) {
  const std::string model = inner_.info().id;
  std::vector<store::CacheKey> keys;
  keys.reserve(requests.size());
  for (const auto& r : requests) keys.push_back({model, "score", r.prompt, r.target});
  auto cached = cache_.cache_get(keys);
  std::vector<double> out(requests.size());
  // What the cache lacks, each distinct (prompt, target) once: a repeated request in one
  // call (PURPLE draws the same profile more than once) costs one model call.
  std::vector<ScoreRequest> missing;
  std::vector<std::vector<std::size_t>> where;
  std::map<std::pair<std::string_view, std::string_view>, std::size_t> first;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    if (cached[i]) {
      out[i] = std::strtod(cached[i]->c_str(), nullptr);
      continue;
    }
    const auto [it, fresh] = first.try_emplace({requests[i].prompt, requests[i].target}, missing.size());
    if (fresh) {
      missing.push_back(requests[i]);
      where.emplace_back();
    }
    where[it->second].push_back(i);
  }
  hits_ += requests.size() - missing.size();
  if (missing.empty()) return out;
  misses_ += missing.size();
  auto fresh = inner_.score(missing);
  if (fresh.size() != missing.size()) throw Error("language model " + model + " returned a wrong number of scores");
  std::vector<std::pair<store::CacheKey, std::string>> entries;
  for (std::size_t j = 0; j < missing.size(); ++j) {
    for (auto i : where[j]) out[i] = fresh[j];
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.17g", fresh[j]);  // round-trips exactly
    entries.emplace_back(keys[where[j].front()], buf);
  }
  cache_.cache_put(entries);
  return out;
}

}  // namespace attune::llm
