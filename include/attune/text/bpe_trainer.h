#pragma once
// Byte-level BPE training (GPT-2 / Hugging Face `tokenizers` BpeTrainer): texts are split
// by the GPT-2 pre-tokenizer regex, every byte becomes one of 256 symbols, and the most
// frequent adjacent pair is merged until the vocabulary is full. The result is written as a
// tokenizer.json that SubwordTokenizer (and Hugging Face `tokenizers`) load with the same
// ids. No torch.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace attune::text {

struct BpeTrainOptions {
  // The whole vocabulary: special tokens, reserved tokens, the 256 byte symbols and the
  // merges. Training stops earlier when no pair occurs min_frequency times.
  std::size_t vocab_size = 8192;
  std::size_t min_frequency = 2;
  // Ids 0, 1, 2, ... in this order; bos, eos and pad name three of them (pad may be "").
  std::vector<std::string> special_tokens = {"<s>", "</s>", "<pad>"};
  std::string bos = "<s>", eos = "</s>", pad = "<pad>";
  // "<|reserved_0|>", ...: special tokens kept free for later use (agent ids, tools), after
  // special_tokens.
  std::size_t reserved = 0;
  std::size_t model_max_length = 512;  // tokenizer_config.json's
  bool add_bos = true;                 // the post-processor puts bos before every text

  // UsageError naming the field: a vocabulary too small for the specials and the bytes, a
  // repeated or empty special token, bos/eos/pad not among them.
  void validate() const;
};

struct BpeModel {
  std::vector<std::string> vocab;  // id -> token (byte-level symbols, or a special token)
  std::vector<std::pair<std::string, std::string>> merges;  // in rank order
  std::size_t specials = 0;        // ids [0, specials) are special tokens
};

class BpeTrainer {
 public:
  explicit BpeTrainer(BpeTrainOptions o);
  // Pre-tokenizes and counts the words of one text (special tokens in it are plain text).
  void add_text(std::string_view text);
  std::size_t texts() const { return texts_; }
  std::size_t distinct_words() const { return counts_.size(); }
  // Learns the merges: the pair with the highest count first, ties to the pair whose
  // symbols come first by id (deterministic: the same texts give the same model whatever
  // the order they were added in). progress(merges done, merges wanted) every so often.
  BpeModel train(const std::function<void(std::size_t, std::size_t)>& progress = {}) const;

 private:
  BpeTrainOptions o_;
  std::unordered_map<std::string, std::uint64_t> counts_;
  std::size_t texts_ = 0;
};

// tokenizer.json for `m` (BPE, ByteLevel pre-tokenizer without prefix space and ByteLevel
// decoder, special tokens as added tokens, bos prepended when o.add_bos).
std::string bpe_tokenizer_json(const BpeModel& m, const BpeTrainOptions& o);
// Writes tokenizer.json, tokenizer_config.json and special_tokens_map.json into `dir`
// (created; files replaced atomically).
void write_bpe_tokenizer(const std::filesystem::path& dir, const BpeModel& m, const BpeTrainOptions& o);

}  // namespace attune::text
