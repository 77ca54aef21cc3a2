#pragma once
// Lexical tokenizers the metrics and the lexical retrievers are defined over.
#include <string>
#include <string_view>
#include <vector>

namespace attune::text {

// rank_bm25 / LaMP reference tokenization: Python str.split() (no lowercasing,
// no punctuation stripping).
std::vector<std::string> bm25_tokens(std::string_view s);
// The same tokens as views into s.
std::vector<std::string_view> bm25_token_views(std::string_view s);
// The same into out (cleared first; its capacity reused: a query path that keeps one buffer).
void bm25_token_views_into(std::string_view s, std::vector<std::string_view>& out);

// rouge_score's tokenizer without stemming: Python lower(), every run of characters
// outside [a-z0-9] becomes a space, split, keep tokens matching ^[a-z0-9]+$. Non-ASCII
// letters are separators (after Unicode lowercasing, e.g. U+212A KELVIN SIGN -> "k").
std::vector<std::string> rouge_tokens(std::string_view s);

// SQuAD answer normalisation: lowercase, drop ASCII punctuation, drop the articles
// a/an/the, collapse whitespace.
std::string squad_normalize(std::string_view s);

// The corpus search analyzer: ASCII-lowercase, split on every byte that is not an ASCII
// letter or digit; bytes >= 0x80 (non-ASCII UTF-8) stay inside tokens.
std::vector<std::string> analyzer_tokens(std::string_view s);

}  // namespace attune::text
