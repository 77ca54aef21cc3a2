#include "attune/text/tokenizer.h"

#include <filesystem>
#include <string>
#include <vector>

#include "attune/core/error.h"
#include "attune/core/strings.h"
#include "attune/text/subword.h"

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
  // A Hugging Face tokenizer: "hf:PATH", a model folder, or a tokenizer.json / vocab.txt /
  // spiece.model file.
  namespace fs = std::filesystem;
  const bool hf = starts_with(spec, "hf:");
  const std::string path(hf ? spec.substr(3) : spec);
  const std::string ext = fs::path(path).extension().string();
  std::error_code ec;
  if (!path.empty() && (hf || ext == ".json" || ext == ".txt" || ext == ".model" || fs::is_directory(path, ec))) {
    if (!fs::exists(path, ec)) throw UsageError("tokenizer \"" + path + "\" does not exist");
    // The copy shares the loaded tokenizer's immutable state.
    return std::make_unique<SubwordTokenizer>(*SubwordTokenizer::load(path));
  }
  throw UsageError("unknown tokenizer \"" + std::string(spec) +
                   "\" (expected \"whitespace\", \"whitespace-noeos\", or a tokenizer folder or "
                   "tokenizer.json / vocab.txt / spiece.model file, optionally as hf:PATH)");
}

}  // namespace attune::text
