#pragma once
// The tokenizer a prompt budget is counted in (LAMP.md: phi_p's budget is in the target
// LLM's tokens): whitespace tokens, or the target model's own subword tokenizer
// (text/subword.h, loaded from tokenizer.json / vocab.txt / spiece.model).
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace attune::text {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Number of tokens the model sees for `text`, special tokens included (a T5-style
  // tokenizer appends </s>, so "" counts 1).
  virtual std::size_t count(std::string_view text) const = 0;
  // HF `tokenizer(text, max_length=n, truncation=True)` then decode without special
  // tokens: the text of the longest token prefix whose count (specials included) is at
  // most n. n below the number of special tokens gives "".
  virtual std::string truncate(std::string_view text, std::size_t max_tokens) const = 0;
  // Number of special tokens count() adds to any text.
  virtual std::size_t special_tokens() const = 0;
  virtual std::string name() const = 0;
};

// Tokens = Python str.split(); decode = join with one space. With eos = true one
// end-of-sequence token is counted, like T5.
class WhitespaceTokenizer final : public Tokenizer {
 public:
  explicit WhitespaceTokenizer(bool eos = true) : eos_(eos) {}
  std::size_t count(std::string_view text) const override;
  std::string truncate(std::string_view text, std::size_t max_tokens) const override;
  std::size_t special_tokens() const override { return eos_ ? 1 : 0; }
  std::string name() const override { return eos_ ? "whitespace+eos" : "whitespace"; }

 private:
  bool eos_;
};

// "whitespace" (default, counts EOS), "whitespace-noeos", or a subword tokenizer: "hf:PATH",
// a model folder, or a tokenizer.json / vocab.txt / *.model file. UsageError naming the spec
// for anything else or a path that does not exist.
std::unique_ptr<Tokenizer> make_tokenizer(std::string_view spec);

}  // namespace attune::text
