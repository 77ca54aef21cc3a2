// SubwordTokenizer (subword.h): loading (tokenizer.json, vocab.txt, spiece.model), added
// tokens, the encode pipeline, truncation, padding, decoding.
#include "attune/text/subword.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <fstream>
#include <sstream>

#include "attune/core/error.h"
#include "attune/core/file.h"
#include "subword_impl.h"

namespace attune::text {

using detail::Ctx;
using detail::Enc;
using detail::json;
using detail::NStr;
namespace fs = std::filesystem;

namespace {

constexpr const char* kMetaspace = "\xE2\x96\x81";

struct AddedToken {
  std::int32_t id = 0;
  std::string content;
  std::string match;  // what is looked for: content, or content normalized when `normalized`
  bool special = false, lstrip = false, rstrip = false, single_word = false, normalized = false;
};

// Added tokens grouped by first byte, longest first (leftmost-longest matching).
struct Matcher {
  std::array<std::vector<std::size_t>, 256> by_byte;
  bool empty = true;
};

struct Seg {
  std::int64_t added;  // index into the added tokens, or -1 for text
  std::size_t b, e;
};

// tokenizer_config.json and special_tokens_map.json (either may be absent: null).
struct Configs {
  json tok_config, special_map;
};

json parse_json(std::string_view text, const std::string& source) {
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::parse_error& e) {
    throw Error(source + ": malformed JSON: " + e.what());
  }
}

Configs read_configs(const fs::path& dir) {
  Configs c;
  std::error_code ec;
  if (fs::is_regular_file(dir / "tokenizer_config.json", ec))
    c.tok_config = parse_json(read_file(dir / "tokenizer_config.json"), (dir / "tokenizer_config.json").string());
  if (fs::is_regular_file(dir / "special_tokens_map.json", ec))
    c.special_map = parse_json(read_file(dir / "special_tokens_map.json"), (dir / "special_tokens_map.json").string());
  return c;
}

// A config's special-token value: a string, {"content": ...}, or null.
enum class Mention { Absent, Null, Value };
Mention config_token(const json& cfg, const char* key, std::string& out) {
  if (!cfg.is_object()) return Mention::Absent;
  auto it = cfg.find(key);
  if (it == cfg.end()) return Mention::Absent;
  if (it->is_string()) {
    out = it->get<std::string>();
    return Mention::Value;
  }
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
    out = (*it)["content"].get<std::string>();
    return Mention::Value;
  }
  return Mention::Null;
}

bool cfg_bool(const Configs& c, const char* key, bool dflt) {
  if (c.tok_config.is_object() && c.tok_config.contains(key) && c.tok_config[key].is_boolean())
    return c.tok_config[key].get<bool>();
  return dflt;
}

bool is_word_char(std::uint32_t cp) { return cp == '_' || detail::is_alphanumeric(cp); }

// Start of the character that ends at byte `i` (exclusive).
std::size_t prev_char(const std::string& s, std::size_t i) {
  std::size_t k = i - 1;
  while (k > 0 && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80) --k;
  return k;
}

}  // namespace

struct SubwordTokenizer::Impl {
  std::string source;  // the path as given (name())
  std::string file;    // the file read (errors)
  std::unique_ptr<detail::Normalizer> normalizer;
  std::unique_ptr<detail::PreTokenizer> pre;
  std::unique_ptr<detail::Model> model;
  std::unique_ptr<detail::PostProcessor> post;
  std::unique_ptr<detail::Decoder> decoder;
  std::vector<AddedToken> added;
  std::unordered_map<std::int32_t, std::size_t> added_by_id;
  detail::Vocab added_by_content;
  Matcher raw, norm;
  std::optional<std::int32_t> bos, eos, pad, unk, cls, sep, mask;
  std::size_t max_len = 0;
  bool cleanup = false;
  std::size_t nspec_single = 0, nspec_pair = 0;

  std::optional<std::int32_t> token_to_id(std::string_view t) const {
    if (auto it = added_by_content.find(t); it != added_by_content.end()) return it->second;
    if (auto it = model->vocab().find(t); it != model->vocab().end()) return it->second;
    return std::nullopt;
  }

  void build_matchers() {
    std::vector<std::size_t> order(added.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return added[a].match.size() > added[b].match.size(); });
    for (std::size_t i : order) {
      const AddedToken& t = added[i];
      if (t.match.empty()) continue;
      Matcher& m = t.normalized && normalizer ? norm : raw;
      m.by_byte[static_cast<unsigned char>(t.match[0])].push_back(i);
      m.empty = false;
    }
  }

  // HF AddedVocabulary::find_matches: leftmost-longest, honouring single_word/lstrip/rstrip.
  std::vector<Seg> split_added(const std::string& s, const Matcher& m) const {
    std::vector<Seg> out;
    if (m.empty) {
      if (!s.empty()) out.push_back({-1, 0, s.size()});
      return out;
    }
    std::size_t prev = 0;
    for (std::size_t i = 0; i < s.size();) {
      std::int64_t hit = -1;
      for (std::size_t k : m.by_byte[static_cast<unsigned char>(s[i])]) {
        const AddedToken& t = added[k];
        if (s.compare(i, t.match.size(), t.match) != 0) continue;
        if (t.single_word) {
          std::uint32_t cp;
          if (i > 0 && (detail::decode_cp(s, prev_char(s, i), cp), is_word_char(cp))) continue;
          const std::size_t e = i + t.match.size();
          if (e < s.size() && (detail::decode_cp(s, e, cp), is_word_char(cp))) continue;
        }
        hit = static_cast<std::int64_t>(k);
        break;
      }
      if (hit < 0) {
        ++i;
        continue;
      }
      const AddedToken& t = added[static_cast<std::size_t>(hit)];
      std::size_t start = i, stop = i + t.match.size();
      std::uint32_t cp;
      if (t.lstrip)
        while (start > prev) {
          const std::size_t k = prev_char(s, start);
          detail::decode_cp(s, k, cp);
          if (!detail::is_whitespace(cp)) break;
          start = k;
        }
      if (t.rstrip)
        while (stop < s.size()) {
          const std::size_t n = detail::decode_cp(s, stop, cp);
          if (!detail::is_whitespace(cp)) break;
          stop += n;
        }
      if (start > prev) out.push_back({-1, prev, start});
      out.push_back({hit, start, stop});
      prev = i = stop;
    }
    if (prev < s.size()) out.push_back({-1, prev, s.size()});
    return out;
  }

  // The tokens of one text, no specials; offsets into it.
  Enc encode_text(std::string_view text) const {
    Enc out;
    const NStr all = detail::make_nstr(text);
    std::vector<detail::Token> toks;
    std::vector<NStr> pieces;
    auto add_token = [&](const NStr& from, const Seg& seg) {
      const AddedToken& t = added[static_cast<std::size_t>(seg.added)];
      const auto r = from.original(seg.b, seg.e);
      out.push(t.id, 0, {r.first, r.second}, t.special);
    };
    for (const Seg& seg : split_added(all.s, raw)) {
      if (seg.added >= 0) {
        add_token(all, seg);
        continue;
      }
      NStr n = all.slice(seg.b, seg.e);
      if (normalizer) normalizer->apply(n);
      for (const Seg& sub : split_added(n.s, norm)) {
        if (sub.added >= 0) {
          add_token(n, sub);
          continue;
        }
        pieces.clear();
        pieces.push_back(sub.b == 0 && sub.e == n.s.size() ? n : n.slice(sub.b, sub.e));
        if (pre) pre->apply(pieces);
        for (const NStr& p : pieces) {
          if (p.empty()) continue;
          toks.clear();
          model->tokenize(p.s, toks);
          for (const detail::Token& t : toks) {
            const auto r = t.end > t.begin ? p.original(t.begin, t.end) : detail::Range{p.align[t.begin].first, p.align[t.begin].first};
            out.push(t.id, 0, {r.first, r.second}, false);
          }
        }
      }
    }
    return out;
  }

  Enc post_process(Enc a, Enc* b, bool add_special) const {
    std::vector<Enc> v;
    v.push_back(std::move(a));
    if (b != nullptr) v.push_back(std::move(*b));
    if (post) post->process(v, add_special);
    Enc all = std::move(v[0]);
    for (std::size_t k = 1; k < v.size(); ++k) all.append(v[k], -1);
    return all;
  }

  static void truncate_pair(Enc& a, Enc& b, std::size_t budget, bool second_only) {
    std::size_t na = a.size(), nb = b.size();
    if (na + nb <= budget) return;
    if (second_only) {
      if (na > budget) na = budget;
      nb = budget - na;
    } else {  // HF longest_first: the shorter keeps its length if it can, else both get half
      const bool swap = na > nb;
      std::size_t n1 = std::min(na, nb), n2;
      n2 = n1 > budget ? n1 : std::max(n1, budget - n1);
      if (n1 + n2 > budget) {
        n1 = budget / 2;
        n2 = n1 + budget % 2;
      }
      na = swap ? n2 : n1;
      nb = swap ? n1 : n2;
    }
    a.truncate(na);
    b.truncate(nb);
  }

  std::string decode(std::span<const std::int32_t> ids, bool skip_special) const {
    std::vector<std::string> tokens;
    tokens.reserve(ids.size());
    const auto& mt = model->tokens();
    for (std::int32_t id : ids) {
      if (auto it = added_by_id.find(id); it != added_by_id.end()) {
        const AddedToken& t = added[it->second];
        if (!(skip_special && t.special)) tokens.push_back(t.content);
        continue;
      }
      if (id >= 0 && static_cast<std::size_t>(id) < mt.size() && !mt[static_cast<std::size_t>(id)].empty())
        tokens.push_back(mt[static_cast<std::size_t>(id)]);
    }
    std::string out;
    if (decoder) {
      decoder->apply(tokens);
      for (const auto& t : tokens) out += t;
    } else {
      for (std::size_t k = 0; k < tokens.size(); ++k) {
        if (k) out += ' ';
        out += tokens[k];
      }
    }
    if (cleanup) detail::clean_up_tokenization(out);
    return out;
  }

  SubwordTokenizer::Encoding to_public(Enc e) const {
    SubwordTokenizer::Encoding out;
    out.ids = std::move(e.ids);
    out.type_ids = std::move(e.type_ids);
    out.offsets = std::move(e.offsets);
    return out;
  }

  SubwordTokenizer::Batch pad_rows(std::vector<Enc>& rows, const BatchOptions& o) const {
    Batch b;
    b.rows = rows.size();
    std::size_t longest = 0;
    for (const Enc& r : rows) longest = std::max(longest, r.size());
    b.cols = o.pad_to_longest || o.max_length == 0 ? longest : std::max(longest, o.max_length);
    const std::int32_t pad_value = pad.value_or(0);
    b.ids.assign(b.rows * b.cols, pad_value);
    b.type_ids.assign(b.rows * b.cols, 0);
    b.mask.assign(b.rows * b.cols, 0);
    for (std::size_t i = 0; i < rows.size(); ++i)
      for (std::size_t j = 0; j < rows[i].size(); ++j) {
        b.ids[i * b.cols + j] = rows[i].ids[j];
        b.type_ids[i * b.cols + j] = rows[i].type_ids[j];
        b.mask[i * b.cols + j] = 1;
      }
    return b;
  }
};

namespace {

using Impl = SubwordTokenizer::Impl;

// Ids of the special-token roles: the configs first (an explicit null means none), then
// `dflt` (sentencepiece's trainer ids), then well-known names present in the vocabulary.
void resolve_specials(Impl& im, const Configs& cfg, const std::array<std::optional<std::int32_t>, 7>& dflt) {
  struct Role {
    const char* key;
    std::optional<std::int32_t>* slot;
    std::vector<const char*> guesses;
  };
  const Role roles[] = {
      {"bos_token", &im.bos, {"<s>", "<|begin_of_text|>", "<|startoftext|>"}},
      {"eos_token", &im.eos, {"</s>", "<|end_of_text|>", "<|endoftext|>"}},
      {"pad_token", &im.pad, {"[PAD]", "<pad>", "<|pad|>"}},
      {"unk_token", &im.unk, {"[UNK]", "<unk>", "<|unk|>"}},
      {"cls_token", &im.cls, {"[CLS]"}},
      {"sep_token", &im.sep, {"[SEP]"}},
      {"mask_token", &im.mask, {"[MASK]", "<mask>"}},
  };
  for (std::size_t r = 0; r < 7; ++r) {
    const Role& role = roles[r];
    std::string tok;
    Mention m1 = config_token(cfg.tok_config, role.key, tok);
    if (m1 != Mention::Value) {
      const Mention m2 = config_token(cfg.special_map, role.key, tok);
      if (m2 != Mention::Absent) m1 = m2 == Mention::Value ? m2 : (m1 == Mention::Absent ? m2 : m1);
    }
    if (m1 == Mention::Value) {
      *role.slot = im.token_to_id(tok);
      continue;
    }
    if (m1 == Mention::Null) continue;
    if (dflt[r]) {
      *role.slot = dflt[r];
      continue;
    }
    if (r == 3 && im.model->unk_id() >= 0) {
      *role.slot = im.model->unk_id();
      continue;
    }
    for (const char* g : role.guesses)
      if (auto id = im.token_to_id(g)) {
        *role.slot = id;
        break;
      }
  }
  if (cfg.tok_config.is_object()) {
    auto it = cfg.tok_config.find("model_max_length");
    if (it != cfg.tok_config.end() && it->is_number() && it->get<double>() > 0 && it->get<double>() < 1e12)
      im.max_len = static_cast<std::size_t>(it->get<double>());
    im.cleanup = cfg_bool(cfg, "clean_up_tokenization_spaces", false);
  }
}

// Assembles a tokenizer from a tokenizer.json-shaped object; `model` overrides "model".
std::shared_ptr<const SubwordTokenizer> assemble(const json& tok, std::unique_ptr<detail::Model> model,
                                                 const std::string& source, const std::string& file,
                                                 const Configs& cfg,
                                                 const std::array<std::optional<std::int32_t>, 7>& dflt = {}) {
  if (!tok.is_object()) throw Error(file + ": not a tokenizer.json object");
  const Ctx ctx{file};
  auto im = std::make_shared<Impl>();
  im->source = source;
  im->file = file;
  auto get = [&](const char* key) -> const json& {
    static const json null;
    auto it = tok.find(key);
    return it == tok.end() ? null : *it;
  };
  im->normalizer = detail::make_normalizer(get("normalizer"), ctx);
  im->pre = detail::make_pre_tokenizer(get("pre_tokenizer"), ctx);
  im->model = model ? std::move(model) : detail::make_model(get("model"), ctx);
  im->post = detail::make_post_processor(get("post_processor"), ctx);
  im->decoder = detail::make_decoder(get("decoder"), ctx);

  const json& added = get("added_tokens");
  if (!added.is_null() && !added.is_array()) ctx.fail("\"added_tokens\" is not a list");
  if (added.is_array()) {
    for (std::size_t k = 0; k < added.size(); ++k) {
      const json& a = added[k];
      if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() || !a.contains("content") ||
          !a["content"].is_string())
        ctx.fail("added_tokens[" + std::to_string(k) + "] has no integer \"id\" and string \"content\"");
      AddedToken t;
      t.id = a["id"].get<std::int32_t>();
      t.content = a["content"].get<std::string>();
      t.special = a.value("special", false);
      t.lstrip = a.value("lstrip", false);
      t.rstrip = a.value("rstrip", false);
      t.single_word = a.value("single_word", false);
      t.normalized = a.value("normalized", !t.special);
      t.match = t.content;
      if (t.normalized && im->normalizer) {
        NStr n = detail::make_nstr(t.content);
        im->normalizer->apply(n);
        t.match = n.s;
      }
      if (im->added_by_id.count(t.id) != 0) continue;  // first declaration wins
      im->added_by_id.emplace(t.id, im->added.size());
      im->added_by_content.emplace(t.content, t.id);
      im->added.push_back(std::move(t));
    }
  }
  im->build_matchers();
  if (im->post) {
    im->nspec_single = im->post->added_tokens(false);
    im->nspec_pair = im->post->added_tokens(true);
  }
  resolve_specials(*im, cfg, dflt);
  return std::make_shared<const SubwordTokenizer>(std::shared_ptr<const Impl>(std::move(im)));
}

json special_piece(const std::string& name, std::int32_t type) {
  return json{{"SpecialToken", {{"id", name}, {"type_id", type}}}};
}
json seq_piece(const char* id, std::int32_t type) { return json{{"Sequence", {{"id", id}, {"type_id", type}}}}; }
json special_entry(const std::string& name, std::int32_t id) {
  return json{{"id", name}, {"ids", json::array({id})}, {"tokens", json::array({name})}};
}
std::string cfg_token(const Configs& cfg, const char* key, const std::string& dflt) {
  std::string out;
  if (config_token(cfg.tok_config, key, out) == Mention::Value) return out;
  if (config_token(cfg.special_map, key, out) == Mention::Value) return out;
  return dflt;
}

// ------------------------------------------------------------------------ vocab.txt (BERT)
std::shared_ptr<const SubwordTokenizer> load_vocab_txt(const fs::path& file, const std::string& source) {
  const Configs cfg = read_configs(file.parent_path());
  const std::string text = read_file(file);
  detail::WordPieceSpec spec;
  std::int32_t id = 0;
  for (std::size_t i = 0; i < text.size();) {
    std::size_t e = text.find('\n', i);
    if (e == std::string::npos) e = text.size();
    std::string line = text.substr(i, e - i);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    spec.vocab[line] = id++;
    i = e + 1;
  }
  if (spec.vocab.empty()) throw Error(file.string() + ": empty vocabulary");
  const bool lower = cfg_bool(cfg, "do_lower_case", true);
  json strip = nullptr;
  if (cfg.tok_config.is_object() && cfg.tok_config.contains("strip_accents") && cfg.tok_config["strip_accents"].is_boolean())
    strip = cfg.tok_config["strip_accents"];
  spec.unk = cfg_token(cfg, "unk_token", "[UNK]");
  const std::string cls = cfg_token(cfg, "cls_token", "[CLS]"), sep = cfg_token(cfg, "sep_token", "[SEP]");
  json tok = {
      {"normalizer",
       {{"type", "BertNormalizer"}, {"clean_text", true}, {"handle_chinese_chars", cfg_bool(cfg, "tokenize_chinese_chars", true)},
        {"strip_accents", strip}, {"lowercase", lower}}},
      {"pre_tokenizer", {{"type", "BertPreTokenizer"}}},
      {"decoder", {{"type", "WordPiece"}, {"prefix", "##"}, {"cleanup", true}}},
      {"added_tokens", json::array()}};
  auto cls_it = spec.vocab.find(cls), sep_it = spec.vocab.find(sep);
  if (cls_it != spec.vocab.end() && sep_it != spec.vocab.end()) {
    tok["post_processor"] = {
        {"type", "TemplateProcessing"},
        {"single", json::array({special_piece(cls, 0), seq_piece("A", 0), special_piece(sep, 0)})},
        {"pair", json::array({special_piece(cls, 0), seq_piece("A", 0), special_piece(sep, 0), seq_piece("B", 1),
                              special_piece(sep, 1)})},
        {"special_tokens", {{cls, special_entry(cls, cls_it->second)}, {sep, special_entry(sep, sep_it->second)}}}};
  }
  for (const char* key : {"pad_token", "unk_token", "cls_token", "sep_token", "mask_token"}) {
    static const std::pair<const char*, const char*> kDefaults[] = {
        {"pad_token", "[PAD]"}, {"unk_token", "[UNK]"}, {"cls_token", "[CLS]"}, {"sep_token", "[SEP]"}, {"mask_token", "[MASK]"}};
    std::string dflt;
    for (auto [k, v] : kDefaults)
      if (std::strcmp(k, key) == 0) dflt = v;
    const std::string name = cfg_token(cfg, key, dflt);
    auto it = spec.vocab.find(name);
    if (it == spec.vocab.end()) continue;
    tok["added_tokens"].push_back({{"id", it->second}, {"content", name}, {"special", true}, {"normalized", false}});
  }
  const Ctx ctx{file.string()};
  return assemble(tok, detail::make_wordpiece(std::move(spec), ctx), source, file.string(), cfg);
}

// ------------------------------------------------------------------------ spiece.model
// A minimal protobuf reader for sentencepiece's ModelProto.
class Pb {
 public:
  Pb(std::string_view data, const std::string& file) : p_(data.data()), end_(data.data() + data.size()), file_(file) {}
  bool done() const { return p_ >= end_; }
  std::uint64_t varint() {
    std::uint64_t v = 0;
    for (int shift = 0;; shift += 7) {
      if (p_ >= end_ || shift > 63) fail("truncated varint");
      const auto b = static_cast<unsigned char>(*p_++);
      v |= static_cast<std::uint64_t>(b & 0x7F) << shift;
      if ((b & 0x80) == 0) return v;
    }
  }
  std::string_view bytes() {
    const std::uint64_t n = varint();
    if (n > static_cast<std::uint64_t>(end_ - p_)) fail("truncated field");
    std::string_view out(p_, static_cast<std::size_t>(n));
    p_ += n;
    return out;
  }
  float fixed32_float() {
    if (end_ - p_ < 4) fail("truncated float");
    std::uint32_t u = 0;
    for (int k = 0; k < 4; ++k) u |= static_cast<std::uint32_t>(static_cast<unsigned char>(p_[k])) << (8 * k);
    p_ += 4;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  void skip(unsigned wire) {
    switch (wire) {
      case 0: varint(); break;
      case 1: advance(8); break;
      case 2: bytes(); break;
      case 5: advance(4); break;
      default: fail("unsupported protobuf wire type " + std::to_string(wire));
    }
  }
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(file_ + ": not a sentencepiece model (" + what + ")");
  }

 private:
  void advance(std::ptrdiff_t n) {
    if (end_ - p_ < n) fail("truncated field");
    p_ += n;
  }
  const char* p_;
  const char* end_;
  const std::string& file_;
};

struct SpmPiece {
  std::string piece;
  float score = 0;
  int type = 1;  // NORMAL=1 UNKNOWN=2 CONTROL=3 USER_DEFINED=4 UNUSED=5 BYTE=6
};

struct SpmModel {
  std::vector<SpmPiece> pieces;
  int model_type = 1;  // UNIGRAM=1 BPE=2 WORD=3 CHAR=4
  bool byte_fallback = false;
  std::int32_t unk_id = 0, bos_id = 1, eos_id = 2, pad_id = -1;
  std::string norm_name;
  bool add_dummy_prefix = true, remove_extra_ws = true;
};

SpmModel parse_spm(std::string_view data, const std::string& file) {
  SpmModel m;
  auto i32 = [](std::uint64_t v) { return static_cast<std::int32_t>(static_cast<std::uint32_t>(v)); };
  Pb top(data, file);
  while (!top.done()) {
    const std::uint64_t key = top.varint();
    const auto field = key >> 3;
    const auto wire = static_cast<unsigned>(key & 7);
    if (wire != 2 || field < 1 || field > 3) {
      top.skip(wire);
      continue;
    }
    Pb sub(top.bytes(), file);
    SpmPiece piece;
    while (!sub.done()) {
      const std::uint64_t k = sub.varint();
      const auto f = k >> 3;
      const auto w = static_cast<unsigned>(k & 7);
      if (field == 1 && f == 1 && w == 2) {
        piece.piece = std::string(sub.bytes());
      } else if (field == 1 && f == 2 && w == 5) {
        piece.score = sub.fixed32_float();
      } else if (field == 1 && f == 3 && w == 0) {
        piece.type = static_cast<int>(sub.varint());
      } else if (field == 2 && f == 3 && w == 0) {
        m.model_type = static_cast<int>(sub.varint());
      } else if (field == 2 && f == 35 && w == 0) {
        m.byte_fallback = sub.varint() != 0;
      } else if (field == 2 && f >= 40 && f <= 43 && w == 0) {
        const std::int32_t v = i32(sub.varint());
        (f == 40 ? m.unk_id : f == 41 ? m.bos_id : f == 42 ? m.eos_id : m.pad_id) = v;
      } else if (field == 3 && f == 1 && w == 2) {
        m.norm_name = std::string(sub.bytes());
      } else if (field == 3 && f == 3 && w == 0) {
        m.add_dummy_prefix = sub.varint() != 0;
      } else if (field == 3 && f == 4 && w == 0) {
        m.remove_extra_ws = sub.varint() != 0;
      } else {
        sub.skip(w);
      }
    }
    if (field == 1) m.pieces.push_back(std::move(piece));
  }
  if (m.pieces.empty()) top.fail("no pieces");
  return m;
}

std::shared_ptr<const SubwordTokenizer> load_spm(const fs::path& file, const std::string& source) {
  const Configs cfg = read_configs(file.parent_path());
  const std::string fname = file.string();
  const SpmModel m = parse_spm(read_file(file), fname);
  const Ctx ctx{fname};
  const auto n = static_cast<std::int32_t>(m.pieces.size());
  auto valid = [&](std::int32_t id) -> std::optional<std::int32_t> {
    return id >= 0 && id < n ? std::optional<std::int32_t>(id) : std::nullopt;
  };

  // Normalizer: NFKC for sentencepiece's nmt_nfkc rules ("identity" keeps the text), the
  // whitespace clean-up, then (BPE) the ▁ prefix and space replacement.
  json norms = json::array();
  if (m.norm_name != "identity") norms.push_back({{"type", "NFKC"}});
  if (m.remove_extra_ws) {
    norms.push_back({{"type", "Strip"}, {"strip_left", true}, {"strip_right", true}});
    norms.push_back({{"type", "Replace"}, {"pattern", {{"Regex", " {2,}"}}}, {"content", " "}});
  }
  json tok = {{"added_tokens", json::array()}};
  const bool bpe = m.model_type == 2;
  if (m.model_type != 1 && m.model_type != 2)
    throw Error(fname + ": unsupported sentencepiece model_type " + std::to_string(m.model_type) + " (only unigram and bpe)");
  if (bpe) {
    if (m.add_dummy_prefix) norms.push_back({{"type", "Prepend"}, {"prepend", kMetaspace}});
    norms.push_back({{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kMetaspace}});
  } else {
    tok["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", kMetaspace},
                            {"prepend_scheme", m.add_dummy_prefix ? "always" : "never"}, {"split", true}};
  }
  tok["normalizer"] = {{"type", "Sequence"}, {"normalizers", norms}};
  tok["decoder"] = {{"type", "Sequence"},
                    {"decoders", json::array({{{"type", "Replace"}, {"pattern", {{"String", kMetaspace}}}, {"content", " "}},
                                              {{"type", "ByteFallback"}},
                                              {{"type", "Fuse"}},
                                              {{"type", "Strip"}, {"content", " "}, {"start", m.add_dummy_prefix ? 1 : 0}, {"stop", 0}}})}};
  // Control and unknown pieces are special added tokens; user-defined pieces plain ones.
  for (std::int32_t id = 0; id < n; ++id) {
    const SpmPiece& p = m.pieces[static_cast<std::size_t>(id)];
    if (p.type == 2 || p.type == 3 || p.type == 4)
      tok["added_tokens"].push_back({{"id", id}, {"content", p.piece}, {"special", p.type != 4}, {"normalized", false}});
  }
  // BOS/EOS: tokenizer_config's add_bos_token / add_eos_token; by default Llama-style BPE
  // adds BOS and T5-style unigram adds EOS.
  const bool add_bos = cfg_bool(cfg, "add_bos_token", bpe) && valid(m.bos_id);
  const bool add_eos = cfg_bool(cfg, "add_eos_token", !bpe) && valid(m.eos_id);
  if (add_bos || add_eos) {
    json single = json::array(), pair = json::array(), specials = json::object();
    const std::string bos = add_bos ? m.pieces[static_cast<std::size_t>(m.bos_id)].piece : "";
    const std::string eos = add_eos ? m.pieces[static_cast<std::size_t>(m.eos_id)].piece : "";
    if (add_bos) specials[bos] = special_entry(bos, m.bos_id);
    if (add_eos) specials[eos] = special_entry(eos, m.eos_id);
    for (int s = 0; s < 2; ++s) {
      json& t = s == 0 ? single : pair;
      for (int q = 0; q <= s; ++q) {
        if (add_bos) t.push_back(special_piece(bos, q));
        t.push_back(seq_piece(q == 0 ? "A" : "B", q));
        if (add_eos) t.push_back(special_piece(eos, q));
      }
    }
    tok["post_processor"] = {{"type", "TemplateProcessing"}, {"single", single}, {"pair", pair}, {"special_tokens", specials}};
  }

  std::unique_ptr<detail::Model> model;
  if (bpe) {
    detail::BpeSpec spec;
    for (std::int32_t id = 0; id < n; ++id) spec.vocab.emplace(m.pieces[static_cast<std::size_t>(id)].piece, id);
    if (auto u = valid(m.unk_id)) spec.unk = m.pieces[static_cast<std::size_t>(*u)].piece;
    spec.fuse_unk = true;
    spec.byte_fallback = m.byte_fallback;
    // transformers' SentencePieceExtractor: every split of a piece into two pieces is a
    // merge, ranked by the merged piece's score (highest first), then by the ids of the halves.
    struct M {
      float score;
      std::int32_t l, r;
      std::string a, b;
    };
    std::vector<M> merges;
    for (std::int32_t id = 0; id < n; ++id) {
      const std::string& piece = m.pieces[static_cast<std::size_t>(id)].piece;
      std::vector<M> local;
      for (std::size_t k = 1; k < piece.size(); ++k) {
        if ((static_cast<unsigned char>(piece[k]) & 0xC0) == 0x80) continue;
        auto l = spec.vocab.find(std::string_view(piece).substr(0, k));
        auto r = spec.vocab.find(std::string_view(piece).substr(k));
        if (l != spec.vocab.end() && r != spec.vocab.end())
          local.push_back({m.pieces[static_cast<std::size_t>(id)].score, l->second, r->second, l->first, r->first});
      }
      std::sort(local.begin(), local.end(), [](const M& x, const M& y) { return std::tie(x.l, x.r) < std::tie(y.l, y.r); });
      for (auto& x : local) merges.push_back(std::move(x));
    }
    std::stable_sort(merges.begin(), merges.end(), [](const M& x, const M& y) { return x.score > y.score; });
    spec.merges.reserve(merges.size());
    for (auto& x : merges) spec.merges.emplace_back(std::move(x.a), std::move(x.b));
    model = detail::make_bpe(std::move(spec), ctx);
  } else {
    detail::UnigramSpec spec;
    spec.pieces.reserve(m.pieces.size());
    spec.matchable.reserve(m.pieces.size());
    for (const SpmPiece& p : m.pieces) {
      spec.pieces.emplace_back(p.piece, static_cast<double>(p.score));
      spec.matchable.push_back(p.type == 1 || p.type == 4);
    }
    spec.unk_id = valid(m.unk_id).value_or(-1);
    spec.byte_fallback = m.byte_fallback;
    model = detail::make_unigram(std::move(spec), ctx);
  }
  const std::array<std::optional<std::int32_t>, 7> dflt = {valid(m.bos_id), valid(m.eos_id), valid(m.pad_id),
                                                           valid(m.unk_id), std::nullopt, std::nullopt, std::nullopt};
  return assemble(tok, std::move(model), source, fname, cfg, dflt);
}

}  // namespace

// ------------------------------------------------------------------------ public API
std::shared_ptr<const SubwordTokenizer> SubwordTokenizer::from_json(std::string_view text, std::string source_name) {
  return assemble(parse_json(text, source_name), nullptr, source_name, source_name, Configs{});
}

std::shared_ptr<const SubwordTokenizer> SubwordTokenizer::load(const fs::path& path) {
  std::error_code ec;
  const std::string source = path.string();
  if (!fs::exists(path, ec)) throw Error(source + ": no such tokenizer file or folder");
  fs::path file = path;
  if (fs::is_directory(path, ec)) {
    file.clear();
    for (const char* name : {"tokenizer.json", "vocab.txt", "spiece.model", "tokenizer.model"})
      if (fs::is_regular_file(path / name, ec)) {
        file = path / name;
        break;
      }
    if (file.empty())
      throw Error(source + ": no tokenizer.json, vocab.txt, spiece.model or tokenizer.model in the folder");
  }
  const std::string ext = file.extension().string();
  if (ext == ".txt") return load_vocab_txt(file, source);
  if (ext == ".model") return load_spm(file, source);
  const std::string fname = file.string();
  return assemble(parse_json(read_file(file), fname), nullptr, source, fname, read_configs(file.parent_path()));
}

SubwordTokenizer::Encoding SubwordTokenizer::encode(std::string_view text, bool add_special_tokens) const {
  return impl_->to_public(impl_->post_process(impl_->encode_text(text), nullptr, add_special_tokens));
}

SubwordTokenizer::Encoding SubwordTokenizer::encode_pair(std::string_view a, std::string_view b,
                                                         bool add_special_tokens) const {
  Enc eb = impl_->encode_text(b);
  return impl_->to_public(impl_->post_process(impl_->encode_text(a), &eb, add_special_tokens));
}

std::string SubwordTokenizer::decode(std::span<const std::int32_t> ids, bool skip_special_tokens) const {
  return impl_->decode(ids, skip_special_tokens);
}

SubwordTokenizer::Batch SubwordTokenizer::encode_batch(std::span<const std::string> texts, const BatchOptions& o) const {
  std::vector<Enc> rows;
  rows.reserve(texts.size());
  const std::size_t ns = o.add_special_tokens ? impl_->nspec_single : 0;
  for (const std::string& t : texts) {
    Enc e = impl_->encode_text(t);
    if (o.max_length > 0) e.truncate(o.max_length > ns ? o.max_length - ns : 0);
    rows.push_back(impl_->post_process(std::move(e), nullptr, o.add_special_tokens));
  }
  return impl_->pad_rows(rows, o);
}

SubwordTokenizer::Batch SubwordTokenizer::encode_batch(std::span<const std::pair<std::string, std::string>> pairs,
                                                       const BatchOptions& o) const {
  std::vector<Enc> rows;
  rows.reserve(pairs.size());
  const std::size_t ns = o.add_special_tokens ? impl_->nspec_pair : 0;
  for (const auto& [a, b] : pairs) {
    Enc ea = impl_->encode_text(a), eb = impl_->encode_text(b);
    if (o.max_length > 0) Impl::truncate_pair(ea, eb, o.max_length > ns ? o.max_length - ns : 0, o.truncate_second_only);
    rows.push_back(impl_->post_process(std::move(ea), &eb, o.add_special_tokens));
  }
  return impl_->pad_rows(rows, o);
}

std::optional<std::int32_t> SubwordTokenizer::token_to_id(std::string_view token) const { return impl_->token_to_id(token); }

std::string SubwordTokenizer::id_to_token(std::int32_t id) const {
  if (auto it = impl_->added_by_id.find(id); it != impl_->added_by_id.end()) return impl_->added[it->second].content;
  const auto& mt = impl_->model->tokens();
  return id >= 0 && static_cast<std::size_t>(id) < mt.size() ? mt[static_cast<std::size_t>(id)] : std::string();
}

std::size_t SubwordTokenizer::vocab_size() const {
  std::size_t n = impl_->model->tokens().size();
  for (const auto& t : impl_->added) n = std::max(n, static_cast<std::size_t>(t.id) + 1);
  return n;
}

std::optional<std::int32_t> SubwordTokenizer::bos_id() const { return impl_->bos; }
std::optional<std::int32_t> SubwordTokenizer::eos_id() const { return impl_->eos; }
std::optional<std::int32_t> SubwordTokenizer::pad_id() const { return impl_->pad; }
std::optional<std::int32_t> SubwordTokenizer::unk_id() const { return impl_->unk; }
std::optional<std::int32_t> SubwordTokenizer::cls_id() const { return impl_->cls; }
std::optional<std::int32_t> SubwordTokenizer::sep_id() const { return impl_->sep; }
std::optional<std::int32_t> SubwordTokenizer::mask_id() const { return impl_->mask; }
std::size_t SubwordTokenizer::model_max_length() const { return impl_->max_len; }
std::size_t SubwordTokenizer::num_special_tokens(bool pair) const { return pair ? impl_->nspec_pair : impl_->nspec_single; }

std::size_t SubwordTokenizer::count(std::string_view text) const {
  return impl_->encode_text(text).size() + impl_->nspec_single;
}

std::string SubwordTokenizer::truncate(std::string_view text, std::size_t max_tokens) const {
  if (max_tokens <= impl_->nspec_single) return {};
  Enc e = impl_->encode_text(text);
  e.truncate(max_tokens - impl_->nspec_single);
  return impl_->decode(e.ids, true);
}

std::string SubwordTokenizer::name() const { return "hf:" + impl_->source; }

}  // namespace attune::text
