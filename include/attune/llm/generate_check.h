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
// The longest n-gram no_repeat_ngram may name.
inline constexpr int kMaxNoRepeatNgram = 64;

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
  if (g.decode != "free" && g.decode != "copy")
    bad("decode", "'" + g.decode + "'", "expected free (any text) or copy (the answer is a span of the prompt)");
  if (g.decode == "copy" && g.beams != 1)
    bad("decode", "copy", "is greedy: it cannot be combined with beams = " + std::to_string(g.beams));
  if (g.decode == "copy" && g.temperature > 0)
    bad("decode", "copy", "is greedy: it cannot be combined with sampling (temperature = " + number(g.temperature) + ")");
  if (!(g.cad >= 0 && g.cad <= 100))
    bad("cad", number(g.cad), "must be a number from 0 (off) to 100 (context-aware decoding's weight on the documents)");
  if (g.cad > 0 && g.beams != 1)
    bad("cad", number(g.cad), "context-aware decoding is greedy: it cannot be combined with beams = " + std::to_string(g.beams));
  if (g.cad > 0 && g.temperature > 0)
    bad("cad", number(g.cad),
        "context-aware decoding is greedy: it cannot be combined with sampling (temperature = " + number(g.temperature) + ")");
  if (g.no_repeat_ngram < 0 || g.no_repeat_ngram > kMaxNoRepeatNgram)
    bad("no_repeat_ngram", std::to_string(g.no_repeat_ngram),
        "must be between 0 (off) and " + std::to_string(kMaxNoRepeatNgram) + " (tokens in an n-gram generated at most once)");
}

// A backend that only generates freely refuses decode = copy instead of ignoring it (the
// answers would not be the spans the caller asked for).
// The same for context-aware decoding (cad > 0) and no_repeat_ngram > 0.
inline void refuse_constrained_decoding(const GenerateOptions& g, const std::string& backend) {
  if (g.decode != "free")
    throw FieldError<UsageError>("decode", "decode = " + g.decode + " is implemented for local: models only; " + backend +
                                               " generates freely (use --decode free)");
  if (g.cad != 0)
    throw FieldError<UsageError>("cad", "cad (context-aware decoding) is implemented for local: models only; " + backend +
                                            " cannot decode with it (use --cad 0)");
  if (g.no_repeat_ngram != 0)
    throw FieldError<UsageError>("no_repeat_ngram", "no_repeat_ngram is implemented for local: models only; " + backend +
                                                        " cannot decode with it (use --no-repeat-ngram 0)");
}

}  // namespace attune::llm
