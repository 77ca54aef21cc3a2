#pragma once
// Hugging Face-compatible subword tokenizers: the `tokenizers` pipeline (added tokens ->
// normalizer -> pre-tokenizer -> model -> post-processor; decoder) read from tokenizer.json,
// plus BERT vocab.txt folders and sentencepiece spiece.model files. Models: WordPiece, BPE
// (byte fallback, byte-level), Unigram, WordLevel. No torch, no sentencepiece library.
//
// Approximated: the "Precompiled" normalizer (sentencepiece's charsmap) is applied as NFKC.
// Not reproduced: BPE dropout (encoding is deterministic), tokenizer.json's own "truncation"
// and "padding" sections (use BatchOptions), offset trimming of ByteLevel(trim_offsets).
// Input that is not valid UTF-8 is read with U+FFFD in place of each bad byte.
//
// A loaded tokenizer is immutable: share one `const SubwordTokenizer` between threads freely.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "attune/text/tokenizer.h"

namespace attune::text {

class SubwordTokenizer final : public Tokenizer {
 public:
  struct Encoding {
    std::vector<std::int32_t> ids;       // token ids, special tokens included when asked for
    std::vector<std::int32_t> type_ids;  // segment per token: 0 for a single text; for a pair
                                         // what the post-processor says (BERT: 0 for [CLS] a
                                         // [SEP], 1 for b [SEP])
    // Per token, [begin, end) byte offsets into the text it came from (the first or the
    // second text of a pair); (0, 0) for special tokens added by the post-processor.
    std::vector<std::pair<std::size_t, std::size_t>> offsets;
  };

  struct BatchOptions {
    std::size_t max_length = 0;         // rows longer than this (specials included) are truncated; 0 = never
    bool pad_to_longest = true;         // cols = longest row; false: cols = max_length (longest when 0)
    bool add_special_tokens = true;
    // Pairs: HF "longest_first" by default (the shorter text stays whole when the longer one
    // can absorb the cut, else each gets half the budget); true = "only_second".
    bool truncate_second_only = false;
  };

  struct Batch {
    std::size_t rows = 0, cols = 0;
    // Row-major rows x cols. Padding: ids = pad_id() (0 when there is none), type id 0, mask 0;
    // mask is 1 on real tokens (specials included).
    std::vector<std::int32_t> ids, type_ids, mask;
  };

  // `path` is a model folder (tokenizer.json, else vocab.txt, else spiece.model /
  // tokenizer.model) or one of those files. tokenizer_config.json and special_tokens_map.json
  // beside it give the special tokens and model_max_length. attune::Error naming the file and
  // the thing at fault when the path is missing or a file is malformed or unsupported.
  static std::shared_ptr<const SubwordTokenizer> load(const std::filesystem::path& path);
  // A tokenizer.json text; `source_name` names it in errors and in name() ("hf:" + it).
  static std::shared_ptr<const SubwordTokenizer> from_json(std::string_view json, std::string source_name);

  // HF `tokenizer(text, add_special_tokens=...)`, no truncation.
  Encoding encode(std::string_view text, bool add_special_tokens = true) const;
  Encoding encode_pair(std::string_view a, std::string_view b, bool add_special_tokens = true) const;
  // HF `decode`: ids not in the vocabulary are skipped; specials too when asked.
  std::string decode(std::span<const std::int32_t> ids, bool skip_special_tokens = true) const;

  // Encodes, truncates (single texts keep their first tokens; pairs follow
  // opts.truncate_second_only) and pads. A max_length below the number of special tokens
  // keeps the specials only.
  Batch encode_batch(std::span<const std::string> texts, const BatchOptions& opts) const;
  Batch encode_batch(std::span<const std::pair<std::string, std::string>> pairs, const BatchOptions& opts) const;

  std::optional<std::int32_t> token_to_id(std::string_view token) const;  // added tokens first
  std::string id_to_token(std::int32_t id) const;                         // "" when unknown
  std::size_t vocab_size() const;  // largest id + 1, added tokens included
  std::optional<std::int32_t> bos_id() const;
  std::optional<std::int32_t> eos_id() const;
  std::optional<std::int32_t> pad_id() const;
  std::optional<std::int32_t> unk_id() const;
  std::optional<std::int32_t> cls_id() const;
  std::optional<std::int32_t> sep_id() const;
  std::optional<std::int32_t> mask_id() const;
  std::size_t model_max_length() const;  // tokenizer_config.json's; 0 when unknown/unbounded
  // Number of special tokens the post-processor adds to a single text / a pair.
  std::size_t num_special_tokens(bool pair = false) const;

  // Tokenizer: count = encode(text, true).ids.size(); truncate = decode (skipping specials)
  // of the longest token prefix that fits max_tokens with the specials; name = "hf:" + source.
  std::size_t count(std::string_view text) const override;
  std::string truncate(std::string_view text, std::size_t max_tokens) const override;
  std::size_t special_tokens() const override { return num_special_tokens(false); }
  std::string name() const override;

  // Internal: built by load() / from_json().
  struct Impl;
  explicit SubwordTokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}

 private:
  std::shared_ptr<const Impl> impl_;  // copies share it
};

}  // namespace attune::text
