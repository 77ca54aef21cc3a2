#include "attune/text/tokenizer.h"

#include <string>
#include <vector>

#include "attune/core/error.h"
#include "attune/core/strings.h"

namespace attune::text {

std::size_t WhitespaceTokenizer::count(std::string_view text) const {
  return split_whitespace(text).size() + special_tokens();
}

std::string WhitespaceTokenizer::truncate(std::string_view text, std::size_t max_tokens) const {
  // The special tokens take their place in the budget first, as with HF truncation.
  if (max_tokens <= special_tokens()) return {};
  std::vector<std::string> tokens = split_whitespace(text);
  const std::size_t keep = max_tokens - special_tokens();
  if (tokens.size() > keep) tokens.resize(keep);
  return join(tokens, " ");
}

std::unique_ptr<Tokenizer> make_tokenizer(std::string_view spec) {
  if (spec == "whitespace") return std::make_unique<WhitespaceTokenizer>(true);
  if (spec == "whitespace-noeos") return std::make_unique<WhitespaceTokenizer>(false);
  throw UsageError("unknown tokenizer \"" + std::string(spec) +
                   "\" (expected \"whitespace\" or \"whitespace-noeos\")");
}

}  // namespace attune::text
