#pragma once
// The checks of the generation options (llm::GenerateOptions) that every verb and backend
// shares; a backend adds its own on top (models::LocalModel::check: its context length).
// Header-only, so that every layer that generates can call it without a new link.
#include <cmath>
#include <cstdio>
#include <string>

#include "attune/core/error.h"
#include "attune/llm/language_model.h"

namespace attune::llm {

// The widest beam search: each beam holds its own copy of the model's cache.
inline constexpr int kMaxBeams = 64;

// FieldError<UsageError> naming the field and its value ("beams = 0: must be between 1 and
// 64"): beams in 1..kMaxBeams, temperature finite and >= 0, top_p in (0, 1].
inline void validate_generate_options(const GenerateOptions& g) {
  const auto bad = [](const std::string& field, const std::string& value, const std::string& why) {
    throw FieldError<UsageError>(field, field + " = " + value + ": " + why);
  };
  const auto number = [](double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%g", v);
    return std::string(buf);
  };
  if (g.beams < 1 || g.beams > kMaxBeams)
    bad("beams", std::to_string(g.beams), "must be between 1 and " + std::to_string(kMaxBeams));
  if (!(g.temperature >= 0) || !std::isfinite(g.temperature))
    bad("temperature", number(g.temperature), "must be a finite number >= 0 (0 = greedy)");
  if (!(g.top_p > 0 && g.top_p <= 1)) bad("top_p", number(g.top_p), "must be in (0, 1]");
}

}  // namespace attune::llm
