#include "attune/retrieval/spec.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "attune/core/error.h"
#include "spec_error.h"

namespace attune::retrieval {
namespace {

// A fusion's numbers: reranker_scale > 0, initial_weight finite. `where` names the source.
void check_fusion(const RetrieverSpec::Fusion& f, const std::string& where) {
  if (!(f.reranker_scale > 0) || !std::isfinite(f.reranker_scale) || !std::isfinite(f.initial_weight))
  {
    char got[80];
    std::snprintf(got, sizeof got, "%g:%g", f.reranker_scale, f.initial_weight);
    throw UsageError(where + ": fuse=S:W needs S a positive number and W a finite one (got " + got + ")");
  }
}


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
    if (r.contains("fusion")) {
      const auto& f = r["fusion"];
      if (!f.is_object() || !f.contains("reranker_scale") || !f["reranker_scale"].is_number() ||
          !f.contains("initial_weight") || !f["initial_weight"].is_number())
        throw Error(marker.string() + ": expected \"fusion\": {\"reranker_scale\": S, \"initial_weight\": W}");
      try {
        check_fusion({f["reranker_scale"].get<double>(), f["initial_weight"].get<double>()}, marker.string());
      } catch (const UsageError& e) {
        throw Error(e.what());
      }
    }
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

RetrieverSpec rerank(RetrieverSpec initial, std::size_t depth, RetrieverSpec reranker,
                     std::optional<RetrieverSpec::Fusion> fusion = std::nullopt) {
  RetrieverSpec s = word(Kind::Rerank);
  s.children.push_back(std::move(initial));
  s.children.push_back(std::move(reranker));
  s.depth = depth;
  s.fusion = fusion;
  return s;
}

// "fuse=S:W" (trimmed) -> {S, W}; nullopt when `part` is not of that form.
std::optional<RetrieverSpec::Fusion> parse_fuse(std::string_view part) {
  part = trim(part);
  if (!part.starts_with("fuse=")) return std::nullopt;
  const std::string body(part.substr(5));
  const auto colon = body.find(':');
  if (colon == std::string::npos) return std::nullopt;
  const auto number = [](const std::string& t, double& v) {
    if (t.empty() || std::isspace(static_cast<unsigned char>(t.front()))) return false;
    char* end = nullptr;
    v = std::strtod(t.c_str(), &end);
    return end == t.c_str() + t.size();
  };
  RetrieverSpec::Fusion f;
  if (!number(body.substr(0, colon), f.reranker_scale) || !number(body.substr(colon + 1), f.initial_weight))
    return std::nullopt;
  return f;
}

std::string format_number(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
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
                      " (expected rerank(INITIAL,L,RERANKER) or rerank(INITIAL,L,RERANKER,fuse=S:W), e.g. rerank(bm25,16,cross:DIR))");
  };
  std::vector<std::string> parts;
  try {
    parts = split_specs(spec.substr(7, spec.size() - 8));
  } catch (const UsageError& e) {
    throw bad(e.what());
  }
  std::optional<RetrieverSpec::Fusion> fusion;
  if (parts.size() == 4) {
    fusion = parse_fuse(parts[3]);
    if (!fusion) throw bad("its fourth part \"" + std::string(trim(parts[3])) + "\" is not fuse=S:W (two numbers)");
    check_fusion(*fusion, "retriever spec \"" + std::string(spec) + "\"");
  } else if (parts.size() != 3) {
    throw bad("it has " + std::to_string(parts.size()) + " parts, not 3");
  }
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
  return rerank(std::move(initial), depth, parse_retriever_spec(parts[2]), fusion);
}

// A trained folder (`marker` its attune_model.json): K:DIR, or rerank(A,L,K:DIR).
RetrieverSpec parse_folder(std::string_view dir, const nlohmann::json& marker) {
  RetrieverSpec own = registered(marker["kind"].get<std::string>(), std::string(dir));
  std::optional<RetrieverSpec::Fusion> fusion;
  if (marker.contains("rerank") && marker["rerank"].contains("fusion")) {
    const auto& f = marker["rerank"]["fusion"];
    fusion = RetrieverSpec::Fusion{f["reranker_scale"].get<double>(), f["initial_weight"].get<double>()};
  }
  RetrieverSpec s = !marker.contains("rerank")
                        ? std::move(own)
                        : rerank(parse_retriever_spec(marker["rerank"]["initial"].get<std::string>()),
                                 marker["rerank"]["top_l"].get<std::size_t>(), std::move(own), fusion);
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

std::vector<double> initial_prior_z(std::span<const double> scores) {
  std::vector<double> z(scores.size(), 0.0);
  if (scores.size() < 2) return z;
  double mean = 0;
  for (double v : scores) mean += v;
  mean /= static_cast<double>(scores.size());
  double var = 0;
  for (double v : scores) var += (v - mean) * (v - mean);
  const double sd = std::sqrt(var / static_cast<double>(scores.size()));
  if (!(sd > 0) || !std::isfinite(sd)) return z;
  for (std::size_t i = 0; i < scores.size(); ++i) z[i] = (scores[i] - mean) / sd;
  return z;
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
             to_string(spec.children.at(1)) +
             (spec.fusion ? ",fuse=" + format_number(spec.fusion->reranker_scale) + ":" +
                                format_number(spec.fusion->initial_weight)
                          : std::string()) +
             ")";
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
