#pragma once
// Private pieces of the subword tokenizer (subword.h): the aligned string that flows through
// the pipeline, Unicode helpers, the PCRE2 wrapper, and the component interfaces
// (normalizer -> pre-tokenizer -> model -> post-processor; decoder), each built from its
// tokenizer.json object. Mirrors the Hugging Face `tokenizers` pipeline.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace attune::text::detail {

using json = nlohmann::json;
using Range = std::pair<std::uint32_t, std::uint32_t>;

// j[key] when it is a string / a boolean, else dflt (tokenizer.json leaves many keys out
// or null).
inline std::string opt_string(const json& j, const char* key, const std::string& dflt) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : dflt;
}
inline bool opt_bool(const json& j, const char* key, bool dflt) {
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() ? it->get<bool>() : dflt;
}

// ---------------------------------------------------------------------------------------
// Aligned string: the text being tokenized plus, for every byte of it, the [begin, end) byte
// range of the original input character it came from (HF's NormalizedString). Always valid
// UTF-8.
struct NStr {
  std::string s;
  std::vector<Range> align;  // align.size() == s.size()

  void append(std::string_view bytes, Range r) {
    s.append(bytes);
    align.insert(align.end(), bytes.size(), r);
  }
  void append_cp(std::uint32_t cp, Range r);
  NStr slice(std::size_t b, std::size_t e) const;
  // Original offsets of the normalized byte range [b, e) (e > b).
  Range original(std::size_t b, std::size_t e) const { return {align[b].first, align[e - 1].second}; }
  bool empty() const { return s.empty(); }
};

// The input as an aligned string whose offsets start at `base`; invalid UTF-8 bytes become
// U+FFFD (aligned to the byte they replace).
NStr make_nstr(std::string_view text, std::size_t base = 0);

// ---------------------------------------------------------------------------------------
// Unicode helpers (ICU properties; the predicates match Rust's char methods that HF uses).
void append_utf8(std::string& out, std::uint32_t cp);
std::size_t decode_cp(std::string_view s, std::size_t i, std::uint32_t& cp);  // valid UTF-8 only
bool is_whitespace(std::uint32_t cp);    // Rust char::is_whitespace (White_Space)
bool is_other(std::uint32_t cp);         // general category C* (Cc, Cf, Cs, Co, Cn)
bool is_mark(std::uint32_t cp);          // general category M* (combining marks)
bool is_bert_punct(std::uint32_t cp);    // ASCII punctuation or category P*
bool is_numeric(std::uint32_t cp);       // general category N*
bool is_alphanumeric(std::uint32_t cp);  // Alphabetic or N*
bool is_cjk(std::uint32_t cp);           // BERT's _is_chinese_char blocks
// Full lowercase mapping of one code point (Rust char::to_lowercase), appended as UTF-8.
void append_lower(std::string& out, std::uint32_t cp);
// Rust String::from_utf8_lossy: each maximal invalid subsequence becomes one U+FFFD.
std::string utf8_lossy(std::string_view bytes);
// GPT-2's bytes_to_unicode table: byte -> code point, and the reverse (-1 when not a byte).
const std::uint32_t* byte_to_unicode();
int unicode_to_byte(std::uint32_t cp);
// HF ByteLevel(add_prefix_space=false, use_regex=true) pre-tokenization: the GPT-2 regex
// pieces of `text` (invalid UTF-8 read as U+FFFD), each byte mapped by bytes_to_unicode
// and written as UTF-8. What a byte-level BPE model sees, and what its trainer counts.
std::vector<std::string> byte_level_words(std::string_view text);

// ---------------------------------------------------------------------------------------
// PCRE2 regex (UTF + UCP), compiled once, JIT when available; const matching is thread-safe.
class Regex {
 public:
  // `where` names the file and component for the error message on a bad pattern.
  Regex(std::string_view pattern, const std::string& where);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;
  // Every non-overlapping match in s as [begin, end), left to right; zero-length matches
  // included (they split a piece, like HF's onig find_iter).
  std::vector<std::pair<std::size_t, std::size_t>> find_all(std::string_view s) const;
  static std::string escape(std::string_view literal);

 private:
  void* code_ = nullptr;  // pcre2_code_8*
  bool jit_ = false;
};

// Where components report errors: "<file>: ..." (file is the tokenizer source name).
struct Ctx {
  std::string file;
  [[noreturn]] void fail(const std::string& what) const;
  // The "type" of a component object, or `fallback` when absent; Error when not a string.
  std::string type_of(const json& j, const char* kind) const;
};

// ---------------------------------------------------------------------------------------
class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual void apply(NStr& s) const = 0;
};
std::unique_ptr<Normalizer> make_normalizer(const json& j, const Ctx& ctx);  // null -> nullptr

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Splits (and may transform) every piece; empty pieces are dropped.
  virtual void apply(std::vector<NStr>& pieces) const = 0;
};
std::unique_ptr<PreTokenizer> make_pre_tokenizer(const json& j, const Ctx& ctx);

// ---------------------------------------------------------------------------------------
struct StrHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};
using Vocab = std::unordered_map<std::string, std::int32_t, StrHash, std::equal_to<>>;

struct Token {
  std::int32_t id;
  std::uint32_t begin, end;  // byte range in the piece
};

class Model {
 public:
  virtual ~Model() = default;
  virtual void tokenize(std::string_view piece, std::vector<Token>& out) const = 0;
  const Vocab& vocab() const { return vocab_; }
  const std::vector<std::string>& tokens() const { return tokens_; }  // by id ("" = hole)
  std::int32_t unk_id() const { return unk_id_; }                     // -1 when none

 protected:
  void set_vocab(Vocab v);
  std::int32_t lookup(std::string_view s) const {
    auto it = vocab_.find(s);
    return it == vocab_.end() ? -1 : it->second;
  }
  Vocab vocab_;
  std::vector<std::string> tokens_;
  std::int32_t unk_id_ = -1;
};
std::unique_ptr<Model> make_model(const json& j, const Ctx& ctx);

struct WordPieceSpec {
  Vocab vocab;
  std::string unk = "[UNK]", prefix = "##";
  std::size_t max_chars = 100;
};
std::unique_ptr<Model> make_wordpiece(WordPieceSpec spec, const Ctx& ctx);

struct BpeSpec {
  Vocab vocab;
  std::vector<std::pair<std::string, std::string>> merges;  // by rank
  std::string unk;  // "" = none
  std::string prefix, suffix;
  bool fuse_unk = false, byte_fallback = false, ignore_merges = false;
};
std::unique_ptr<Model> make_bpe(BpeSpec spec, const Ctx& ctx);

struct UnigramSpec {
  std::vector<std::pair<std::string, double>> pieces;  // by id
  std::vector<bool> matchable;                         // empty = all (sentencepiece control pieces are not)
  std::int32_t unk_id = -1;
  bool byte_fallback = false;
};
std::unique_ptr<Model> make_unigram(UnigramSpec spec, const Ctx& ctx);

// ---------------------------------------------------------------------------------------
class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual void apply(std::vector<std::string>& tokens) const = 0;  // HF decode_chain
};
std::unique_ptr<Decoder> make_decoder(const json& j, const Ctx& ctx);
// transformers' clean_up_tokenization (" ." -> ".", " n't" -> "n't", ...).
void clean_up_tokenization(std::string& s);

// Encoding under construction; `special` marks tokens added by the post-processor.
struct Enc {
  std::vector<std::int32_t> ids, type_ids;
  std::vector<std::pair<std::size_t, std::size_t>> offsets;
  std::vector<std::uint8_t> special;
  std::size_t size() const { return ids.size(); }
  void push(std::int32_t id, std::int32_t type, std::pair<std::size_t, std::size_t> off, bool sp) {
    ids.push_back(id);
    type_ids.push_back(type);
    offsets.push_back(off);
    special.push_back(sp ? 1 : 0);
  }
  void append(const Enc& o, std::int32_t type);  // type < 0 keeps o's type ids
  void truncate(std::size_t n);
};

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  // HF process_encodings: turns the encodings of the sequences (1 or 2) into the final
  // list (templates merge them into one); the caller concatenates what is left. Without
  // specials a template still assigns its type ids.
  virtual void process(std::vector<Enc>& encs, bool add_special) const = 0;
  virtual std::size_t added_tokens(bool pair) const = 0;
};
std::unique_ptr<PostProcessor> make_post_processor(const json& j, const Ctx& ctx);

}  // namespace attune::text::detail
