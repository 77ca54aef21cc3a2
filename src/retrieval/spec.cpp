#include "attune/retrieval/spec.h"

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "attune/core/error.h"
#include "spec_error.h"

namespace attune::retrieval {
namespace {

using Kind = RetrieverSpec::Kind;

std::string_view trim(std::string_view s) {
  const auto ws = " \t\r\n";
  const auto b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

std::atomic<bool>& incomplete_flag() {
  static std::atomic<bool> allowed{false};
  return allowed;
}

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
  if (j.contains("complete") && !j["complete"].is_boolean())
    throw Error(marker.string() + ": \"complete\" must be true or false");
  if (!j.value("complete", true) && !incomplete_models_allowed()) {
    std::string progress;
    try {
      std::ifstream tin(dir / "attune_train.json");
      const auto t = nlohmann::json::parse(tin);
      if (t.contains("steps") && t.contains("total_steps"))
        progress = " (step " + t["steps"].dump() + " of " + t["total_steps"].dump() + ")";
    } catch (const std::exception&) {
    }
    throw UsageError("retriever spec \"" + std::string(spec) + "\" is a training run that did not finish" + progress +
                     ": finish it with attune train --resume --out " + std::string(spec) +
                     ", or pass --allow-incomplete to use the epoch it has kept so far");
  }
  if (j.contains("rerank")) {
    const auto& r = j["rerank"];
    if (!r.is_object() || !r.contains("initial") || !r["initial"].is_string() || !r.contains("top_l") ||
        !r["top_l"].is_number_unsigned() || r["top_l"].get<std::size_t>() == 0)
      throw Error(marker.string() + ": expected \"rerank\": {\"initial\": SPEC, \"top_l\": N > 0}");
  }
  return j;
}

RetrieverSpec word(Kind kind) {
  RetrieverSpec s;
  s.kind = kind;
  return s;
}

RetrieverSpec registered(std::string prefix, std::string arg) {
  RetrieverSpec s = word(Kind::Registered);
  s.prefix = std::move(prefix);
  s.arg = std::move(arg);
  return s;
}

RetrieverSpec rerank(RetrieverSpec initial, std::size_t depth, RetrieverSpec reranker) {
  RetrieverSpec s = word(Kind::Rerank);
  s.children.push_back(std::move(initial));
  s.children.push_back(std::move(reranker));
  s.depth = depth;
  return s;
}

// "rrf(A,B,...)" (trimmed) -> its lists.
RetrieverSpec parse_rrf(std::string_view spec) {
  std::vector<std::string> parts;
  try {
    parts = split_specs(spec.substr(4, spec.size() - 5));
  } catch (const UsageError& e) {
    throw UsageError("bad retriever spec \"" + std::string(spec) + "\": " + e.what());
  }
  if (parts.empty()) throw UsageError("retriever spec \"" + std::string(spec) + "\" fuses no lists");
  RetrieverSpec s = word(Kind::Rrf);
  for (const auto& p : parts) s.children.push_back(parse_retriever_spec(p));
  return s;
}

// "rerank(A,L,R)" (trimmed) -> {A, L, R}.
RetrieverSpec parse_rerank(std::string_view spec) {
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
  const auto depth_text = trim(parts[1]);
  std::size_t depth = 0, used = 0;
  try {
    depth = std::stoul(std::string(depth_text), &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (depth_text.empty() || used != depth_text.size() || depth_text.front() == '-' || depth == 0)
    throw bad("L = \"" + std::string(depth_text) + "\" is not a positive whole number");
  if (trim(parts[0]).empty() || trim(parts[2]).empty()) throw bad("an empty stage");
  auto initial = parse_retriever_spec(parts[0]);
  return rerank(std::move(initial), depth, parse_retriever_spec(parts[2]));
}

// A trained folder (`marker` its attune_model.json): K:DIR, or rerank(A,L,K:DIR).
RetrieverSpec parse_folder(std::string_view dir, const nlohmann::json& marker) {
  RetrieverSpec own = registered(marker["kind"].get<std::string>(), std::string(dir));
  RetrieverSpec s = !marker.contains("rerank")
                        ? std::move(own)
                        : rerank(parse_retriever_spec(marker["rerank"]["initial"].get<std::string>()),
                                 marker["rerank"]["top_l"].get<std::size_t>(), std::move(own));
  s.folder = std::string(dir);
  return s;
}

// PREFIX of PREFIX:ARG: not empty, none of the grammar's white space, ',', '(' or ')'.
bool valid_prefix(std::string_view prefix) {
  return !prefix.empty() && prefix.find_first_of(" \t\r\n,()") == std::string_view::npos;
}

}  // namespace

UsageError unknown_spec_error(std::string_view spec) {
  return UsageError("unknown retriever spec \"" + std::string(spec) +
                    "\" (expected none, random, recency, bm25, rrf(spec,spec,...), rerank(spec,L,spec) or a registered KIND:ARG such as dense:DIR)");
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

std::string first_repeated_spec(const std::vector<std::string>& specs) {
  std::vector<std::string> seen;
  for (const auto& s : specs) {
    std::string key(trim(s));
    try {
      key = to_string(parse_retriever_spec(s));
    } catch (const std::exception&) {
      // unknown or malformed: compared as written (make_retriever reports it later)
    }
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) return s;
    seen.push_back(std::move(key));
  }
  return "";
}

RetrieverSpec parse_retriever_spec(std::string_view spec_in) {
  const std::string_view spec = trim(spec_in);
  if (spec == "none") return word(Kind::None);
  if (spec == "random") return word(Kind::Random);
  if (spec == "recency") return word(Kind::Recency);
  if (spec == "bm25") return word(Kind::Bm25);
  if (spec.starts_with("rrf(") && spec.ends_with(')')) return parse_rrf(spec);
  if (spec.starts_with("rerank(") && spec.ends_with(')')) return parse_rerank(spec);
  if (const auto marker = read_model_marker(spec); !marker.is_null()) return parse_folder(spec, marker);
  if (const auto colon = spec.find(':'); colon != std::string_view::npos && valid_prefix(spec.substr(0, colon)))
    return registered(std::string(spec.substr(0, colon)), std::string(trim(spec.substr(colon + 1))));
  throw unknown_spec_error(spec_in);
}

std::string to_string(const RetrieverSpec& spec) {
  if (!spec.folder.empty()) return spec.folder;
  switch (spec.kind) {
    case Kind::None: return "none";
    case Kind::Random: return "random";
    case Kind::Recency: return "recency";
    case Kind::Bm25: return "bm25";
    case Kind::Rrf: {
      std::string s = "rrf(";
      for (std::size_t i = 0; i < spec.children.size(); ++i) s += (i ? "," : "") + to_string(spec.children[i]);
      return s + ")";
    }
    case Kind::Rerank:
      return "rerank(" + to_string(spec.children.at(0)) + "," + std::to_string(spec.depth) + "," +
             to_string(spec.children.at(1)) + ")";
    case Kind::Registered: return spec.prefix + ":" + spec.arg;
  }
  return "";
}

std::string trained_model_kind(const RetrieverSpec& spec) {
  if (spec.folder.empty()) return "";
  return spec.kind == Kind::Rerank ? spec.children.at(1).prefix : spec.prefix;
}

std::vector<std::string> dense_dirs(const RetrieverSpec& spec) {
  if (spec.kind == Kind::Registered && spec.prefix == "dense") return {spec.arg};
  std::vector<std::string> out;
  if (spec.kind == Kind::Rrf)
    for (const auto& part : spec.children)
      for (auto& dir : dense_dirs(part)) out.push_back(std::move(dir));
  return out;
}

const RetrieverSpec& first_stage(const RetrieverSpec& spec) {
  return spec.kind == Kind::Rerank ? first_stage(spec.children.at(0)) : spec;
}

// The string forms of retriever.h, over the tree.

std::string trained_model_kind(std::string_view spec) { return trained_model_kind(parse_retriever_spec(spec)); }

std::string expand_spec(std::string_view spec) {
  RetrieverSpec s = parse_retriever_spec(spec);
  if (s.folder.empty()) return std::string(trim(spec));
  s.folder.clear();
  return to_string(s);
}

std::string rerank_initial(std::string_view spec) {
  const RetrieverSpec s = parse_retriever_spec(spec);
  // Textual, as before the tree: a Pearl folder is not "rerank(...)" until expanded.
  return s.kind == Kind::Rerank && s.folder.empty() ? to_string(s.children.at(0)) : "";
}

void allow_incomplete_models(bool allow) { incomplete_flag() = allow; }
bool incomplete_models_allowed() { return incomplete_flag(); }

}  // namespace attune::retrieval
