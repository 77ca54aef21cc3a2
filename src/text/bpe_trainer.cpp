// Byte-level BPE training (bpe_trainer.h).
#include "attune/text/bpe_trainer.h"

#include <algorithm>
#include <queue>
#include <set>
#include <nlohmann/json.hpp>

#include "attune/core/error.h"
#include "attune/core/file.h"
#include "subword_impl.h"

namespace attune::text {

namespace {

using json = nlohmann::json;

constexpr std::uint64_t pair_key(std::uint32_t a, std::uint32_t b) { return (static_cast<std::uint64_t>(a) << 32) | b; }

// The special tokens in id order: special_tokens, then the reserved ones.
std::vector<std::string> all_specials(const BpeTrainOptions& o) {
  std::vector<std::string> v = o.special_tokens;
  for (std::size_t i = 0; i < o.reserved; ++i) v.push_back("<|reserved_" + std::to_string(i) + "|>");
  return v;
}

}  // namespace

void BpeTrainOptions::validate() const {
  const auto specials = all_specials(*this);
  std::set<std::string> seen;
  for (const auto& s : specials) {
    if (s.empty()) throw FieldError<UsageError>("special_tokens", "special_tokens: an empty token");
    if (!seen.insert(s).second) throw FieldError<UsageError>("special_tokens", "special_tokens: \"" + s + "\" is listed twice");
  }
  if (vocab_size < specials.size() + 256 + 1)
    throw FieldError<UsageError>("vocab_size", "vocab_size = " + std::to_string(vocab_size) + ": must exceed the " +
                                                   std::to_string(specials.size()) + " special tokens and the 256 byte symbols");
  if (min_frequency == 0) throw FieldError<UsageError>("min_frequency", "min_frequency = 0: must be at least 1");
  for (const auto& [field, name] : {std::pair<const char*, const std::string*>{"bos", &bos}, {"eos", &eos}, {"pad", &pad}}) {
    if (name->empty() && std::string(field) == "pad") continue;
    if (!seen.count(*name))
      throw FieldError<UsageError>(field, std::string(field) + " = \"" + *name + "\": not one of the special tokens");
  }
  if (add_bos && bos.empty()) throw FieldError<UsageError>("bos", "add_bos needs a bos token");
}

BpeTrainer::BpeTrainer(BpeTrainOptions o) : o_(std::move(o)) { o_.validate(); }

void BpeTrainer::add_text(std::string_view text) {
  ++texts_;
  for (auto& w : detail::byte_level_words(text)) ++counts_[std::move(w)];
}

BpeModel BpeTrainer::train(const std::function<void(std::size_t, std::size_t)>& progress) const {
  BpeModel m;
  m.vocab = all_specials(o_);
  m.specials = m.vocab.size();
  // Symbols: the 256 bytes (as bytes_to_unicode writes them), then one per merge.
  const std::uint32_t* table = detail::byte_to_unicode();
  std::vector<std::string> sym;
  for (int b = 0; b < 256; ++b) {
    std::string t;
    detail::append_utf8(t, table[b]);
    sym.push_back(std::move(t));
  }
  // Words in byte order of their text, so the result does not depend on the order the
  // texts came in.
  std::vector<std::pair<std::string, std::uint64_t>> sorted(counts_.begin(), counts_.end());
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::vector<std::uint32_t>> words(sorted.size());
  std::vector<std::uint64_t> count(sorted.size());
  for (std::size_t w = 0; w < sorted.size(); ++w) {
    const std::string& s = sorted[w].first;
    count[w] = sorted[w].second;
    for (std::size_t i = 0; i < s.size();) {
      std::uint32_t cp = 0;
      i += detail::decode_cp(s, i, cp);
      const int b = detail::unicode_to_byte(cp);
      if (b < 0) throw Error("BPE trainer: a pre-tokenized word holds a code point that is not a byte symbol");
      words[w].push_back(static_cast<std::uint32_t>(b));
    }
  }
  std::unordered_map<std::uint64_t, std::int64_t> pair_count;
  std::unordered_map<std::uint64_t, std::vector<std::uint32_t>> where;
  for (std::size_t w = 0; w < words.size(); ++w)
    for (std::size_t i = 0; i + 1 < words[w].size(); ++i) {
      const auto k = pair_key(words[w][i], words[w][i + 1]);
      pair_count[k] += static_cast<std::int64_t>(count[w]);
      auto& v = where[k];
      if (v.empty() || v.back() != w) v.push_back(static_cast<std::uint32_t>(w));
    }
  // Highest count first; ties: the smaller (a, b).
  using Entry = std::pair<std::int64_t, std::uint64_t>;
  const auto worse = [](const Entry& x, const Entry& y) { return x.first != y.first ? x.first < y.first : x.second > y.second; };
  std::priority_queue<Entry, std::vector<Entry>, decltype(worse)> heap(worse);
  for (const auto& [k, c] : pair_count) heap.push({c, k});

  const std::size_t wanted = o_.vocab_size - m.specials - 256;
  const auto min_count = static_cast<std::int64_t>(o_.min_frequency);
  std::vector<std::uint64_t> touched;
  while (m.merges.size() < wanted && !heap.empty()) {
    const auto [c, k] = heap.top();
    heap.pop();
    const auto it = pair_count.find(k);
    const std::int64_t actual = it == pair_count.end() ? 0 : it->second;
    if (actual != c) {  // stale: its count fell since it was pushed
      if (actual >= min_count && actual > 0) heap.push({actual, k});
      continue;
    }
    if (c < min_count) break;
    const auto a = static_cast<std::uint32_t>(k >> 32), b = static_cast<std::uint32_t>(k & 0xffffffffu);
    const auto n = static_cast<std::uint32_t>(sym.size());
    sym.push_back(sym[a] + sym[b]);
    m.merges.emplace_back(sym[a], sym[b]);
    auto ws = std::move(where[k]);
    where.erase(k);
    touched.clear();
    for (const auto w : ws) {
      auto& s = words[w];
      bool has = false;
      for (std::size_t i = 0; i + 1 < s.size() && !has; ++i) has = s[i] == a && s[i + 1] == b;
      if (!has) continue;
      const auto cw = static_cast<std::int64_t>(count[w]);
      for (std::size_t i = 0; i + 1 < s.size(); ++i) pair_count[pair_key(s[i], s[i + 1])] -= cw;
      std::vector<std::uint32_t> t;
      t.reserve(s.size());
      for (std::size_t i = 0; i < s.size();) {
        if (i + 1 < s.size() && s[i] == a && s[i + 1] == b) {
          t.push_back(n);
          i += 2;
        } else {
          t.push_back(s[i++]);
        }
      }
      s = std::move(t);
      for (std::size_t i = 0; i + 1 < s.size(); ++i) {
        const auto kk = pair_key(s[i], s[i + 1]);
        pair_count[kk] += cw;
        if (s[i] == n || s[i + 1] == n) {
          auto& v = where[kk];
          if (v.empty() || v.back() != w) v.push_back(w);
          touched.push_back(kk);
        }
      }
    }
    pair_count.erase(k);
    std::sort(touched.begin(), touched.end());
    touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
    for (const auto kk : touched) heap.push({pair_count[kk], kk});
    if (progress && (m.merges.size() % 256 == 0 || m.merges.size() == wanted)) progress(m.merges.size(), wanted);
  }
  if (progress) progress(m.merges.size(), wanted);
  for (auto& s : sym) m.vocab.push_back(std::move(s));
  return m;
}

std::string bpe_tokenizer_json(const BpeModel& m, const BpeTrainOptions& o) {
  json added = json::array();
  for (std::size_t i = 0; i < m.specials; ++i)
    added.push_back({{"id", i}, {"content", m.vocab[i]}, {"single_word", false}, {"lstrip", false}, {"rstrip", false},
                     {"normalized", false}, {"special", true}});
  json vocab = json::object();
  for (std::size_t i = 0; i < m.vocab.size(); ++i) vocab[m.vocab[i]] = i;
  json merges = json::array();
  for (const auto& [a, b] : m.merges) merges.push_back(json::array({a, b}));
  json post = nullptr;
  if (o.add_bos) {
    const auto id = std::find(m.vocab.begin(), m.vocab.end(), o.bos) - m.vocab.begin();
    post = {{"type", "TemplateProcessing"},
            {"single", json::array({{{"SpecialToken", {{"id", o.bos}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
            {"pair", json::array({{{"SpecialToken", {{"id", o.bos}, {"type_id", 0}}}},
                                  {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                                  {{"SpecialToken", {{"id", o.bos}, {"type_id", 1}}}},
                                  {{"Sequence", {{"id", "B"}, {"type_id", 1}}}}})},
            {"special_tokens", {{o.bos, {{"id", o.bos}, {"ids", json::array({id})}, {"tokens", json::array({o.bos})}}}}}};
  }
  const json tok = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}}},
      {"post_processor", post},
      {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}}},
      {"model",
       {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr}, {"fuse_unk", false}, {"byte_fallback", false}, {"ignore_merges", false},
        {"vocab", vocab}, {"merges", merges}}}};
  return tok.dump(1) + "\n";
}

void write_bpe_tokenizer(const std::filesystem::path& dir, const BpeModel& m, const BpeTrainOptions& o) {
  std::filesystem::create_directories(dir);
  write_file_atomic(dir / "tokenizer.json", bpe_tokenizer_json(m, o));
  json cfg = {{"tokenizer_class", "PreTrainedTokenizerFast"}, {"model_max_length", o.model_max_length},
              {"bos_token", o.bos}, {"eos_token", o.eos}, {"add_bos_token", o.add_bos}, {"clean_up_tokenization_spaces", false}};
  json map = {{"bos_token", o.bos}, {"eos_token", o.eos}};
  if (!o.pad.empty()) {
    cfg["pad_token"] = o.pad;
    map["pad_token"] = o.pad;
  }
  json extra = json::array();
  for (std::size_t i = 0; i < m.specials; ++i)
    if (m.vocab[i] != o.bos && m.vocab[i] != o.eos && m.vocab[i] != o.pad) extra.push_back(m.vocab[i]);
  if (!extra.empty()) {
    cfg["additional_special_tokens"] = extra;
    map["additional_special_tokens"] = extra;
  }
  write_file_atomic(dir / "tokenizer_config.json", cfg.dump(2) + "\n");
  write_file_atomic(dir / "special_tokens_map.json", map.dump(2) + "\n");
}

}  // namespace attune::text
