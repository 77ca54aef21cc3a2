#include "attune/retrieval/retriever.h"

#include <map>
#include <mutex>

#include "attune/core/error.h"
#include "attune/retrieval/candidates.h"
#include "attune/retrieval/spec.h"
#include "baselines.h"
#include "spec_error.h"

namespace attune::retrieval {
namespace {

struct Registry {
  std::mutex mu;
  std::map<std::string, RetrieverFactory, std::less<>> kinds;
};

Registry& registry() {
  static Registry r;
  return r;
}

// PREFIX:ARG through the registry.
std::unique_ptr<Retriever> make_registered(const RetrieverSpec& spec, std::uint64_t seed) {
  const std::string text = spec.prefix + ":" + spec.arg;
  RetrieverFactory factory;
  {
    auto& r = registry();
    std::lock_guard lock(r.mu);
    if (auto it = r.kinds.find(spec.prefix); it != r.kinds.end()) factory = it->second;
  }
  if (factory) {
    if (spec.arg.empty()) throw UsageError("retriever spec \"" + text + "\" names no model (" + spec.prefix + ":DIR)");
    return factory(spec.arg, seed);
  }
  if (spec.prefix == "dense" || spec.prefix == "cross" || spec.prefix == "purple" || spec.prefix == "ium")
    throw UsageError("retriever spec \"" + text + "\": " + spec.prefix +
                     " retrievers are not available here (this program did not register the neural retrievers)");
  throw unknown_spec_error(text);
}

}  // namespace

std::string dated_text(const Document& d, std::string_view text) {
  if (!d.date || d.date->empty())
    throw UsageError("document \"" + d.id + "\" has no date, and this retriever reads each document's text with its "
                     "date (a model trained with --document-dates)");
  return std::string(text) + " date: " + *d.date;
}

std::string fielded_text(const Document& d, std::string_view text, const std::vector<std::string>& fields) {
  std::string out(text);
  for (const auto& f : fields) {
    if (f == "date") {
      out = dated_text(d, out);
      continue;
    }
    const auto it = d.fields.find(f);
    if (it == d.fields.end() || it->second.empty())
      throw UsageError("document \"" + d.id + "\" has no field \"" + f + "\", and this retriever reads each document's text " +
                       "with it (a model trained with --document-fields " + f + ")");
    out += " " + f + ": " + it->second;
  }
  return out;
}

void register_retriever_kind(std::string prefix, RetrieverFactory factory) {
  if (prefix.empty() || prefix.find(':') != std::string::npos || !factory)
    throw UsageError("retriever kind \"" + prefix + "\": expected a non-empty prefix without ':' and a factory");
  auto& r = registry();
  std::lock_guard lock(r.mu);
  r.kinds[std::move(prefix)] = std::move(factory);
}

Ranking Retriever::rank(const Query& q, std::span<const Document> candidates,
                        std::size_t k) const {
  for (const auto& d : candidates) {
    if (!d.owner.empty() && d.owner != q.user) {
      throw PrivacyError("retriever " + name() + ": document \"" + d.id +
                         "\" belongs to user \"" + d.owner + "\", not to the query's user \"" +
                         q.user + "\" (query \"" + q.id + "\")");
    }
  }
  Ranking r = do_rank(q, candidates, k);
  if (k != 0 && r.size() > k) {
    r.indices.resize(k);
    r.ids.resize(k);
    r.scores.resize(k);
  }
  return r;
}

std::unique_ptr<Retriever> make_retriever(const RetrieverSpec& spec, std::uint64_t seed, bool corpus) {
  using Kind = RetrieverSpec::Kind;
  switch (spec.kind) {
    case Kind::None: return std::make_unique<NoneRetriever>();
    case Kind::Random: return std::make_unique<RandomRetriever>(seed);
    case Kind::Recency: return std::make_unique<RecencyRetriever>();
    case Kind::Bm25:
      if (corpus) return std::make_unique<FirstStageRetriever>();
      return std::make_unique<Bm25Retriever>();
    case Kind::Rrf: {
      std::vector<std::unique_ptr<Retriever>> subs;
      for (const auto& part : spec.children) subs.push_back(make_retriever(part, seed, corpus));
      return std::make_unique<RrfRetriever>(std::move(subs));
    }
    case Kind::Rerank: {
      auto initial = make_retriever(spec.children.at(0), seed, corpus);
      return std::make_unique<RerankRetriever>(std::move(initial), spec.depth,
                                               make_retriever(spec.children.at(1), seed, corpus), spec.fusion);
    }
    case Kind::Registered: return make_registered(spec, seed);
  }
  throw unknown_spec_error(to_string(spec));
}

std::unique_ptr<Retriever> make_retriever(std::string_view spec, std::uint64_t seed, bool corpus) {
  return make_retriever(parse_retriever_spec(spec), seed, corpus);
}

}  // namespace attune::retrieval
