// Pre-tokenizers of subword.h: split a normalized piece into words (HF pre_tokenizers).
#include <algorithm>
#include "attune/core/error.h"
#include "subword_impl.h"

namespace attune::text::detail {
namespace {

constexpr const char* kMetaspace = "\xE2\x96\x81";  // ▁
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

enum class Behavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

struct Span {
  std::size_t b, e;
  bool match;
};

// HF Pattern::find_matches: the whole text as alternating non-match / match spans.
std::vector<Span> spans_from_matches(const std::vector<std::pair<std::size_t, std::size_t>>& m, std::size_t len,
                                     bool invert) {
  std::vector<Span> out;
  if (len == 0) return {{0, 0, invert}};
  std::size_t prev = 0;
  for (auto [b, e] : m) {
    if (prev != b) out.push_back({prev, b, invert});
    out.push_back({b, e, !invert});
    prev = e;
  }
  if (prev != len) out.push_back({prev, len, invert});
  return out;
}

// Each character satisfying pred is a match of its own.
template <class Pred>
std::vector<std::pair<std::size_t, std::size_t>> char_matches(std::string_view s, Pred pred) {
  std::vector<std::pair<std::size_t, std::size_t>> m;
  for (std::size_t i = 0; i < s.size();) {
    std::uint32_t cp;
    const std::size_t n = decode_cp(s, i, cp);
    if (pred(cp)) m.emplace_back(i, i + n);
    i += n;
  }
  return m;
}

// HF NormalizedString::split: apply the delimiter behaviour, append non-empty pieces.
void split_spans(const NStr& x, const std::vector<Span>& spans, Behavior how, std::vector<NStr>& out) {
  std::vector<std::pair<std::size_t, std::size_t>> keep;
  switch (how) {
    case Behavior::Removed:
      for (const Span& s : spans)
        if (!s.match) keep.emplace_back(s.b, s.e);
      break;
    case Behavior::Isolated:
      for (const Span& s : spans) keep.emplace_back(s.b, s.e);
      break;
    case Behavior::Contiguous: {
      bool prev = false;
      for (const Span& s : spans) {
        if (s.match == prev && !keep.empty()) {
          keep.back().second = s.e;
        } else {
          keep.emplace_back(s.b, s.e);
        }
        prev = s.match;
      }
      break;
    }
    case Behavior::MergedWithPrevious: {
      bool prev = false;
      for (const Span& s : spans) {
        if (s.match && !prev && !keep.empty()) {
          keep.back().second = s.e;
        } else {
          keep.emplace_back(s.b, s.e);
        }
        prev = s.match;
      }
      break;
    }
    case Behavior::MergedWithNext: {
      bool prev = false;
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->match && !prev && !keep.empty()) {
          keep.back().first = it->b;
        } else {
          keep.emplace_back(it->b, it->e);
        }
        prev = it->match;
      }
      std::reverse(keep.begin(), keep.end());
      break;
    }
  }
  for (auto [b, e] : keep)
    if (e > b) out.push_back(b == 0 && e == x.s.size() ? x : x.slice(b, e));
}

template <class F>
void for_each_piece(std::vector<NStr>& pieces, F f) {
  std::vector<NStr> out;
  out.reserve(pieces.size() * 2);
  for (const NStr& p : pieces) f(p, out);
  pieces = std::move(out);
}

Behavior parse_behavior(const json& j, Behavior dflt, const Ctx& ctx, const std::string& who) {
  auto it = j.find("behavior");
  if (it == j.end() || it->is_null()) return dflt;
  const std::string b = it->is_string() ? it->get<std::string>() : "";
  if (b == "Removed") return Behavior::Removed;
  if (b == "Isolated") return Behavior::Isolated;
  if (b == "MergedWithPrevious") return Behavior::MergedWithPrevious;
  if (b == "MergedWithNext") return Behavior::MergedWithNext;
  if (b == "Contiguous") return Behavior::Contiguous;
  ctx.fail("pre_tokenizer " + who + ": unsupported behavior " + it->dump());
}

bool pretokenizer_bool(const json& j, const char* key, bool dflt) {
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() ? it->get<bool>() : dflt;
}

// Splits on characters satisfying a predicate.
template <class Pred>
class CharSplit final : public PreTokenizer {
 public:
  CharSplit(Pred p, Behavior how) : p_(p), how_(how) {}
  void apply(std::vector<NStr>& pieces) const override {
    for_each_piece(pieces, [&](const NStr& x, std::vector<NStr>& out) {
      split_spans(x, spans_from_matches(char_matches(x.s, p_), x.s.size(), false), how_, out);
    });
  }

 private:
  Pred p_;
  Behavior how_;
};
template <class Pred>
std::unique_ptr<PreTokenizer> char_split(Pred p, Behavior how) {
  return std::make_unique<CharSplit<Pred>>(p, how);
}

class RegexSplit final : public PreTokenizer {
 public:
  RegexSplit(std::unique_ptr<Regex> re, Behavior how, bool invert) : re_(std::move(re)), how_(how), invert_(invert) {}
  void apply(std::vector<NStr>& pieces) const override {
    for_each_piece(pieces, [&](const NStr& x, std::vector<NStr>& out) {
      split_spans(x, spans_from_matches(re_->find_all(x.s), x.s.size(), invert_), how_, out);
    });
  }

 private:
  std::unique_ptr<Regex> re_;
  Behavior how_;
  bool invert_;
};

class BertPre final : public PreTokenizer {
 public:
  void apply(std::vector<NStr>& pieces) const override {
    for_each_piece(pieces, [](const NStr& x, std::vector<NStr>& out) {
      std::vector<NStr> words;
      split_spans(x, spans_from_matches(char_matches(x.s, is_whitespace), x.s.size(), false), Behavior::Removed,
                  words);
      for (const NStr& w : words)
        split_spans(w, spans_from_matches(char_matches(w.s, is_bert_punct), w.s.size(), false), Behavior::Isolated,
                    out);
    });
  }
};

enum class Prepend { Always, First, Never };

class MetaspacePre final : public PreTokenizer {
 public:
  MetaspacePre(std::string rep, Prepend scheme, bool split) : rep_(std::move(rep)), scheme_(scheme), split_(split) {
    decode_cp(rep_, 0, rep_cp_);
  }
  void apply(std::vector<NStr>& pieces) const override {
    for_each_piece(pieces, [&](const NStr& in, std::vector<NStr>& out) {
      NStr x;
      for (std::size_t i = 0; i < in.s.size(); ++i) {
        if (in.s[i] == ' ') {
          x.append(rep_, in.align[i]);
        } else {
          x.s.push_back(in.s[i]);
          x.align.push_back(in.align[i]);
        }
      }
      const bool starts = x.s.compare(0, rep_.size(), rep_) == 0;
      const bool prepend = !x.empty() && !starts &&
                           (scheme_ == Prepend::Always || (scheme_ == Prepend::First && x.align[0].first == 0));
      if (prepend) {
        NStr y;
        y.append(rep_, x.align[0]);
        y.s += x.s;
        y.align.insert(y.align.end(), x.align.begin(), x.align.end());
        x = std::move(y);
      }
      if (split_) {
        const std::uint32_t rc = rep_cp_;
        split_spans(x, spans_from_matches(char_matches(x.s, [rc](std::uint32_t c) { return c == rc; }), x.s.size(), false),
                    Behavior::MergedWithNext, out);
      } else if (!x.empty()) {
        out.push_back(std::move(x));
      }
    });
  }

 private:
  std::string rep_;
  std::uint32_t rep_cp_ = 0;
  Prepend scheme_;
  bool split_;
};

const Regex& gpt2_regex() {
  static const Regex re(kGpt2Pattern, "ByteLevel pre_tokenizer");
  return re;
}

// GPT-2 byte-level: optional leading space, the GPT-2 regex, then every byte -> a printable
// code point (bytes_to_unicode), each keeping the range of the character it belongs to.
class ByteLevelPre final : public PreTokenizer {
 public:
  ByteLevelPre(bool prefix, bool use_regex) : prefix_(prefix), regex_(use_regex) {}
  void apply(std::vector<NStr>& pieces) const override {
    std::vector<NStr> split;
    for (NStr& x : pieces) {
      if (prefix_ && !x.empty() && x.s[0] != ' ') {
        NStr y;
        y.append(" ", x.align[0]);
        y.s += x.s;
        y.align.insert(y.align.end(), x.align.begin(), x.align.end());
        x = std::move(y);
      }
      if (regex_) {
        split_spans(x, spans_from_matches(gpt2_regex().find_all(x.s), x.s.size(), false), Behavior::Isolated, split);
      } else if (!x.empty()) {
        split.push_back(std::move(x));
      }
    }
    const std::uint32_t* table = byte_to_unicode();
    pieces.clear();
    for (const NStr& x : split) {
      NStr y;
      y.s.reserve(x.s.size() * 2);
      y.align.reserve(x.s.size() * 2);
      for (std::size_t i = 0; i < x.s.size(); ++i) y.append_cp(table[static_cast<unsigned char>(x.s[i])], x.align[i]);
      pieces.push_back(std::move(y));
    }
  }

 private:
  bool prefix_, regex_;
};

class SequencePre final : public PreTokenizer {
 public:
  explicit SequencePre(std::vector<std::unique_ptr<PreTokenizer>> v) : v_(std::move(v)) {}
  void apply(std::vector<NStr>& pieces) const override {
    for (const auto& p : v_) p->apply(pieces);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> v_;
};

}  // namespace

std::vector<std::string> byte_level_words(std::string_view text) {
  static const ByteLevelPre pre(false, true);
  std::vector<NStr> pieces{make_nstr(text)};
  pre.apply(pieces);
  std::vector<std::string> out;
  out.reserve(pieces.size());
  for (auto& x : pieces)
    if (!x.s.empty()) out.push_back(std::move(x.s));
  return out;
}

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const json& j, const Ctx& ctx) {
  if (j.is_null()) return nullptr;
  const std::string type = ctx.type_of(j, "pre_tokenizer");
  if (type == "Sequence") {
    auto it = j.find("pretokenizers");
    if (it == j.end() || !it->is_array()) ctx.fail("pre_tokenizer Sequence has no \"pretokenizers\" list");
    std::vector<std::unique_ptr<PreTokenizer>> v;
    for (const auto& c : *it)
      if (auto p = make_pre_tokenizer(c, ctx)) v.push_back(std::move(p));
    return std::make_unique<SequencePre>(std::move(v));
  }
  if (type == "BertPreTokenizer") return std::make_unique<BertPre>();
  if (type == "Whitespace")
    return std::make_unique<RegexSplit>(std::make_unique<Regex>(R"(\w+|[^\w\s]+)", ctx.file), Behavior::Removed, true);
  if (type == "WhitespaceSplit") return char_split(is_whitespace, Behavior::Removed);
  if (type == "Metaspace") {
    std::string rep = kMetaspace;
    if (auto it = j.find("replacement"); it != j.end() && it->is_string()) rep = it->get<std::string>();
    if (rep.empty()) ctx.fail("pre_tokenizer Metaspace: empty replacement");
    Prepend scheme = pretokenizer_bool(j, "add_prefix_space", true) ? Prepend::Always : Prepend::Never;
    if (auto it = j.find("prepend_scheme"); it != j.end() && it->is_string()) {
      const std::string s = it->get<std::string>();
      if (s == "always") scheme = Prepend::Always;
      else if (s == "first") scheme = Prepend::First;
      else if (s == "never") scheme = Prepend::Never;
      else ctx.fail("pre_tokenizer Metaspace: unsupported prepend_scheme \"" + s + "\"");
    }
    return std::make_unique<MetaspacePre>(rep, scheme, pretokenizer_bool(j, "split", true));
  }
  if (type == "ByteLevel")
    return std::make_unique<ByteLevelPre>(pretokenizer_bool(j, "add_prefix_space", true), pretokenizer_bool(j, "use_regex", true));
  if (type == "Split") {
    auto p = j.find("pattern");
    if (p == j.end() || !p->is_object()) ctx.fail("pre_tokenizer Split has no \"pattern\"");
    std::string pattern;
    if (p->contains("String") && (*p)["String"].is_string()) {
      pattern = Regex::escape((*p)["String"].get<std::string>());
    } else if (p->contains("Regex") && (*p)["Regex"].is_string()) {
      pattern = (*p)["Regex"].get<std::string>();
    } else {
      ctx.fail("pre_tokenizer Split: pattern is neither {\"String\": ...} nor {\"Regex\": ...}");
    }
    return std::make_unique<RegexSplit>(std::make_unique<Regex>(pattern, ctx.file + ": pre_tokenizer Split"),
                                        parse_behavior(j, Behavior::Removed, ctx, "Split"),
                                        pretokenizer_bool(j, "invert", false));
  }
  if (type == "Digits")
    return char_split(is_numeric, pretokenizer_bool(j, "individual_digits", false) ? Behavior::Isolated : Behavior::Contiguous);
  if (type == "Punctuation") return char_split(is_bert_punct, parse_behavior(j, Behavior::Isolated, ctx, "Punctuation"));
  if (type == "CharDelimiterSplit") {
    auto it = j.find("delimiter");
    if (it == j.end() || !it->is_string() || it->get<std::string>().empty())
      ctx.fail("pre_tokenizer CharDelimiterSplit has no \"delimiter\"");
    std::uint32_t d;
    decode_cp(it->get<std::string>(), 0, d);
    return char_split([d](std::uint32_t c) { return c == d; }, Behavior::Removed);
  }
  ctx.fail("unsupported pre_tokenizer type \"" + type + "\"");
}

}  // namespace attune::text::detail
