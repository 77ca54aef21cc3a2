#pragma once
// llama2.c's tokenizer file (tok512.bin, tokenizer.bin): int32 max_token_length, then per
// token a float32 score, an int32 length and the piece's bytes. Used to decode the output
// of a raw llama2.c checkpoint; encoding goes through text::SubwordTokenizer.
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

namespace attune::models {

class Llama2cVocab {
 public:
  static Llama2cVocab load(const std::filesystem::path& file);
  std::size_t size() const { return pieces_.size(); }
  const std::string& piece(std::int32_t id) const { return pieces_.at(static_cast<std::size_t>(id)); }
  float score(std::int32_t id) const { return scores_.at(static_cast<std::size_t>(id)); }
  // llama2.c's decode: "<0xNN>" pieces become bytes, a leading space after BOS (id 1) is
  // dropped, BOS/EOS themselves print nothing.
  std::string decode(std::span<const std::int32_t> ids) const;

 private:
  std::vector<std::string> pieces_;
  std::vector<float> scores_;
};

}  // namespace attune::models
