#pragma once
// Hand-checkable tokenizers for the budget tests. Both count one end-of-sequence token,
// like T5, so count("") == 1 and truncate(text, n) keeps n - 1 pieces.
#include <string>
#include <string_view>
#include <vector>

#include "attune/text/tokenizer.h"

namespace attune::tasks::testing {

// Tokens = words separated by ASCII spaces; decode = join with one space.
class WordTokenizer final : public text::Tokenizer {
 public:
  std::size_t count(std::string_view s) const override { return words(s).size() + 1; }
  std::string truncate(std::string_view s, std::size_t n) const override {
    const auto w = words(s);
    std::string out;
    for (std::size_t i = 0; i + 1 < n && i < w.size(); ++i) {
      if (i) out += ' ';
      out += w[i];
    }
    return out;
  }
  std::size_t special_tokens() const override { return 1; }
  std::string name() const override { return "test-words+eos"; }

 private:
  static std::vector<std::string> words(std::string_view s) {
    std::vector<std::string> out;
    std::string cur;
    for (char c : s) {
      if (c == ' ' || c == '\n' || c == '\t') {
        if (!cur.empty()) out.push_back(cur);
        cur.clear();
      } else {
        cur += c;
      }
    }
    if (!cur.empty()) out.push_back(cur);
    return out;
  }
};

// Tokens = bytes; decode = the byte prefix.
class CharTokenizer final : public text::Tokenizer {
 public:
  std::size_t count(std::string_view s) const override { return s.size() + 1; }
  std::string truncate(std::string_view s, std::size_t n) const override {
    return std::string(s.substr(0, n == 0 ? 0 : n - 1));
  }
  std::size_t special_tokens() const override { return 1; }
  std::string name() const override { return "test-chars+eos"; }
};

}  // namespace attune::tasks::testing
