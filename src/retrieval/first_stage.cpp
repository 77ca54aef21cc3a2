#include "attune/retrieval/first_stage.h"

#include <map>
#include <mutex>

#include "attune/core/error.h"
#include "attune/retrieval/spec.h"

namespace attune::retrieval {
namespace {

std::mutex& registry_mu() {
  static std::mutex mu;
  return mu;
}
std::map<std::string, FirstStageFactory, std::less<>>& stage_registry() {
  static std::map<std::string, FirstStageFactory, std::less<>> r;
  return r;
}

// The factory for spec "PREFIX:ARG" (ARG not empty, no composite syntax), and ARG; null otherwise.
std::pair<FirstStageFactory, std::string_view> lookup(std::string_view spec) {
  while (!spec.empty() && (spec.front() == ' ' || spec.front() == '\t')) spec.remove_prefix(1);
  while (!spec.empty() && (spec.back() == ' ' || spec.back() == '\t')) spec.remove_suffix(1);
  const auto colon = spec.find(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == spec.size()) return {};
  if (spec.find_first_of(",() \t") != std::string_view::npos) return {};
  std::lock_guard lock(registry_mu());
  const auto it = stage_registry().find(spec.substr(0, colon));
  if (it == stage_registry().end()) return {};
  return {it->second, spec.substr(colon + 1)};
}

}  // namespace

void register_first_stage(std::string prefix, FirstStageFactory factory) {
  if (prefix.empty() || prefix.find(':') != std::string::npos)
    throw UsageError("first stage kind \"" + prefix + "\": a prefix is a non-empty name without ':'");
  std::lock_guard lock(registry_mu());
  stage_registry()[std::move(prefix)] = std::move(factory);
}

std::unique_ptr<CorpusFirstStage> make_first_stage(std::string_view spec, const std::vector<std::string>& texts,
                                                   store::BlobStore* cache, const StageCancelled& cancelled) {
  const auto [factory, arg] = lookup(spec);
  if (!factory) return nullptr;
  return factory(arg, texts, cache, cancelled);
}

bool has_first_stage(std::string_view spec) { return static_cast<bool>(lookup(spec).first); }

namespace {
std::string stage_of(const RetrieverSpec& s) {
  if (s.kind == RetrieverSpec::Kind::Rerank) return s.children.empty() ? std::string() : stage_of(s.children[0]);
  if (s.kind != RetrieverSpec::Kind::Registered) return {};
  std::string own = s.prefix + ":" + s.arg;
  return has_first_stage(own) ? own : std::string();
}
}  // namespace

std::string first_stage_spec(std::string_view spec) { return stage_of(parse_retriever_spec(spec)); }

}  // namespace attune::retrieval
