#include "attune/retrieval/retriever.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include <map>
#include <mutex>

#include "attune/core/error.h"
#include "attune/retrieval/candidates.h"
#include "baselines.h"

namespace attune::retrieval {
namespace {

std::string_view trim(std::string_view s) {
  const auto ws = " \t\r\n";
  const auto b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

struct Registry {
  std::mutex mu;
  std::map<std::string, RetrieverFactory, std::less<>> kinds;
};

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

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

std::vector<std::string> split_specs(std::string_view list) {
  std::vector<std::string> out;
  if (trim(list).empty()) return out;
  int depth = 0;
  std::size_t start = 0;
  auto piece = [&](std::size_t end) {
    auto p = trim(list.substr(start, end - start));
    if (p.empty()) {
      throw UsageError("empty retriever spec in \"" + std::string(list) + "\"");
    }
    out.emplace_back(p);
  };
  for (std::size_t i = 0; i < list.size(); ++i) {
    const char ch = list[i];
    if (ch == '(') {
      ++depth;
    } else if (ch == ')') {
      if (--depth < 0) throw UsageError("unbalanced ')' in retriever specs \"" + std::string(list) + "\"");
    } else if (ch == ',' && depth == 0) {
      piece(i);
      start = i + 1;
    }
  }
  if (depth != 0) throw UsageError("unbalanced '(' in retriever specs \"" + std::string(list) + "\"");
  piece(list.size());
  return out;
}

namespace {

// attune_model.json of a folder written by `attune train`; null when `spec` is not a folder.
nlohmann::json read_model_marker(std::string_view spec) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path dir{std::string(spec)};
  if (spec.empty() || !fs::is_directory(dir, ec)) return nullptr;
  const fs::path marker = dir / "attune_model.json";
  if (!fs::exists(marker, ec))
    throw UsageError("retriever spec \"" + std::string(spec) + "\" is a folder but not a model trained by attune (no attune_model.json); "
                     "for a Hugging Face encoder write dense:" + std::string(spec) + " or cross:" + std::string(spec));
  std::ifstream in(marker);
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("kind") || !j["kind"].is_string() || j["kind"].get<std::string>().empty())
    throw Error(marker.string() + ": expected {\"kind\": \"dense\" | \"cross\" | ..., \"method\": ...}");
  if (j.contains("rerank")) {
    const auto& r = j["rerank"];
    if (!r.is_object() || !r.contains("initial") || !r["initial"].is_string() || !r.contains("top_l") ||
        !r["top_l"].is_number_unsigned() || r["top_l"].get<std::size_t>() == 0)
      throw Error(marker.string() + ": expected \"rerank\": {\"initial\": SPEC, \"top_l\": N > 0}");
  }
  return j;
}

// "rerank(A,L,R)" -> {A, L, R}; UsageError when malformed.
struct RerankSpec {
  std::string initial;
  std::size_t depth = 0;
  std::string reranker;
};

RerankSpec parse_rerank(std::string_view spec) {
  const auto bad = [&](const std::string& why) {
    return UsageError("bad retriever spec \"" + std::string(spec) + "\": " + why +
                      " (expected rerank(INITIAL,L,RERANKER), e.g. rerank(bm25,16,cross:DIR))");
  };
  std::vector<std::string> parts;
  try {
    parts = split_specs(spec.substr(7, spec.size() - 8));
  } catch (const UsageError& e) {
    throw bad(e.what());
  }
  if (parts.size() != 3) throw bad("it has " + std::to_string(parts.size()) + " parts, not 3");
  RerankSpec r{std::string(trim(parts[0])), 0, std::string(trim(parts[2]))};
  const auto depth = trim(parts[1]);
  std::size_t used = 0;
  try {
    r.depth = std::stoul(std::string(depth), &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (depth.empty() || used != depth.size() || depth.front() == '-' || r.depth == 0)
    throw bad("L = \"" + std::string(depth) + "\" is not a positive whole number");
  if (r.initial.empty() || r.reranker.empty()) throw bad("an empty stage");
  return r;
}

}  // namespace

std::string trained_model_kind(std::string_view spec) {
  const auto j = read_model_marker(spec);
  return j.is_null() ? "" : j["kind"].get<std::string>();
}

std::string expand_spec(std::string_view spec_in) {
  const std::string_view spec = trim(spec_in);
  const auto j = read_model_marker(spec);
  if (j.is_null()) return std::string(spec);
  const std::string own = j["kind"].get<std::string>() + ":" + std::string(spec);
  if (!j.contains("rerank")) return own;
  return "rerank(" + j["rerank"]["initial"].get<std::string>() + "," + std::to_string(j["rerank"]["top_l"].get<std::size_t>()) +
         "," + own + ")";
}

std::string rerank_initial(std::string_view spec_in) {
  const std::string_view spec = trim(spec_in);
  if (!(spec.starts_with("rerank(") && spec.ends_with(')'))) return "";
  return parse_rerank(spec).initial;
}

std::unique_ptr<Retriever> make_retriever(std::string_view spec_in, std::uint64_t seed, bool corpus) {
  const std::string_view spec = trim(spec_in);
  if (spec == "none") return std::make_unique<NoneRetriever>();
  if (spec == "random") return std::make_unique<RandomRetriever>(seed);
  if (spec == "recency") return std::make_unique<RecencyRetriever>();
  if (spec == "bm25") {
    if (corpus) return std::make_unique<FirstStageRetriever>();
    return std::make_unique<Bm25Retriever>();
  }
  if (spec.starts_with("rrf(") && spec.ends_with(')')) {
    const auto inner = spec.substr(4, spec.size() - 5);
    std::vector<std::string> parts;
    try {
      parts = split_specs(inner);
    } catch (const UsageError& e) {
      throw UsageError("bad retriever spec \"" + std::string(spec) + "\": " + e.what());
    }
    if (parts.empty()) throw UsageError("retriever spec \"" + std::string(spec) + "\" fuses no lists");
    std::vector<std::unique_ptr<Retriever>> subs;
    for (const auto& p : parts) subs.push_back(make_retriever(p, seed, corpus));
    return std::make_unique<RrfRetriever>(std::move(subs));
  }
  if (spec.starts_with("rerank(") && spec.ends_with(')')) {
    const auto r = parse_rerank(spec);
    return std::make_unique<RerankRetriever>(make_retriever(r.initial, seed, corpus), r.depth,
                                             make_retriever(r.reranker, seed, corpus));
  }
  if (!trained_model_kind(spec).empty()) return make_retriever(expand_spec(spec), seed, corpus);
  if (const auto colon = spec.find(':'); colon != std::string_view::npos) {
    const auto prefix = spec.substr(0, colon), arg = spec.substr(colon + 1);
    RetrieverFactory factory;
    {
      auto& r = registry();
      std::lock_guard lock(r.mu);
      if (auto it = r.kinds.find(prefix); it != r.kinds.end()) factory = it->second;
    }
    if (factory) {
      if (trim(arg).empty()) throw UsageError("retriever spec \"" + std::string(spec) + "\" names no model (" + std::string(prefix) + ":DIR)");
      return factory(trim(arg), seed);
    }
    if (prefix == "dense" || prefix == "cross")
      throw UsageError("retriever spec \"" + std::string(spec) + "\": " + std::string(prefix) +
                       " retrievers are not available here (this program did not register the neural retrievers)");
  }
  throw UsageError("unknown retriever spec \"" + std::string(spec_in) +
                   "\" (expected none, random, recency, bm25, rrf(spec,spec,...), rerank(spec,L,spec) or a registered KIND:ARG such as dense:DIR)");
}

}  // namespace attune::retrieval
