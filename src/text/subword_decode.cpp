// Decoders and post-processors of subword.h (HF decoders / processors).
#include <algorithm>

#include "attune/core/error.h"
#include "subword_impl.h"

namespace attune::text::detail {

void Enc::append(const Enc& o, std::int32_t type) {
  ids.insert(ids.end(), o.ids.begin(), o.ids.end());
  if (type < 0) {
    type_ids.insert(type_ids.end(), o.type_ids.begin(), o.type_ids.end());
  } else {
    type_ids.insert(type_ids.end(), o.size(), type);
  }
  offsets.insert(offsets.end(), o.offsets.begin(), o.offsets.end());
  special.insert(special.end(), o.special.begin(), o.special.end());
}

void Enc::truncate(std::size_t n) {
  if (n >= size()) return;
  ids.resize(n);
  type_ids.resize(n);
  offsets.resize(n);
  special.resize(n);
}

namespace {

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  if (from.empty()) return;
  std::string out;
  std::size_t prev = 0;
  for (std::size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + from.size())) {
    out.append(s, prev, p - prev).append(to);
    prev = p + from.size();
  }
  if (prev == 0) return;
  out.append(s, prev, std::string::npos);
  s = std::move(out);
}


// ------------------------------------------------------------------------ decoders
class ByteLevelDec final : public Decoder {
 public:
  void apply(std::vector<std::string>& tokens) const override {
    std::string bytes;
    for (const std::string& t : tokens) {
      const std::size_t mark = bytes.size();
      bool ok = true;
      for (std::size_t i = 0; i < t.size();) {
        std::uint32_t cp;
        const std::size_t n = decode_cp(t, i, cp);
        const int b = unicode_to_byte(cp);
        if (b < 0) {
          ok = false;
          break;
        }
        bytes.push_back(static_cast<char>(b));
        i += n;
      }
      if (!ok) bytes.resize(mark), bytes += t;  // not byte-level text: keep it as is
    }
    tokens.assign(1, utf8_lossy(bytes));
  }
};

class WordPieceDec final : public Decoder {
 public:
  WordPieceDec(std::string prefix, bool cleanup) : prefix_(std::move(prefix)), cleanup_(cleanup) {}
  void apply(std::vector<std::string>& tokens) const override {
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      std::string& t = tokens[i];
      if (i != 0) {
        if (!prefix_.empty() && t.compare(0, prefix_.size(), prefix_) == 0) {
          t.erase(0, prefix_.size());
        } else {
          t.insert(0, " ");
        }
      }
      if (cleanup_) cleanup(t);
    }
  }
  // transformers' clean_up_tokenization.
  static void cleanup(std::string& t) {
    static const std::pair<const char*, const char*> kRules[] = {
        {" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"}, {" n't", "n't"},
        {" 'm", "'m"}, {" do not", " don't"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
    for (auto [from, to] : kRules) replace_all(t, from, to);
  }

 private:
  std::string prefix_;
  bool cleanup_;
};

// Replacement char -> ' '; in the first token it is dropped (the prefix space) unless the
// prepend scheme is "never" (HF drops every one in that token).
class MetaspaceDec final : public Decoder {
 public:
  MetaspaceDec(std::string rep, bool prepend) : rep_(std::move(rep)), prepend_(prepend) {}
  void apply(std::vector<std::string>& tokens) const override {
    for (std::size_t i = 0; i < tokens.size(); ++i) replace_all(tokens[i], rep_, i == 0 && prepend_ ? "" : " ");
  }

 private:
  std::string rep_;
  bool prepend_;
};

class ReplaceDec final : public Decoder {
 public:
  ReplaceDec(std::string literal, std::unique_ptr<Regex> re, std::string content)
      : literal_(std::move(literal)), re_(std::move(re)), content_(std::move(content)) {}
  void apply(std::vector<std::string>& tokens) const override {
    for (std::string& t : tokens) {
      if (!re_) {
        replace_all(t, literal_, content_);
        continue;
      }
      std::string out;
      std::size_t prev = 0;
      for (auto [b, e] : re_->find_all(t)) {
        if (e == b) continue;
        out.append(t, prev, b - prev).append(content_);
        prev = e;
      }
      out.append(t, prev, std::string::npos);
      t = std::move(out);
    }
  }

 private:
  std::string literal_;
  std::unique_ptr<Regex> re_;
  std::string content_;
};

// Runs of <0xNN> tokens become the UTF-8 text they spell; an invalid run gives one U+FFFD
// per byte.
class ByteFallbackDec final : public Decoder {
 public:
  void apply(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    std::string run;
    std::size_t run_len = 0;
    auto flush = [&] {
      if (run_len == 0) return;
      if (valid_utf8_bytes(run)) {
        out.push_back(run);
      } else {
        for (std::size_t k = 0; k < run_len; ++k) out.emplace_back("\xEF\xBF\xBD");
      }
      run.clear();
      run_len = 0;
    };
    for (std::string& t : tokens) {
      int b = -1;
      if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>') b = hex2(t[3], t[4]);
      if (b >= 0) {
        run.push_back(static_cast<char>(b));
        ++run_len;
      } else {
        flush();
        out.push_back(std::move(t));
      }
    }
    flush();
    tokens = std::move(out);
  }

 private:
  static int hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  }
  static int hex2(char a, char b) {
    const int x = hex(a), y = hex(b);
    return x < 0 || y < 0 ? -1 : x * 16 + y;
  }
  static bool valid_utf8_bytes(const std::string& s) { return utf8_lossy(s) == s; }
};

class FuseDec final : public Decoder {
 public:
  void apply(std::vector<std::string>& tokens) const override {
    std::string all;
    for (const auto& t : tokens) all += t;
    tokens.assign(1, std::move(all));
  }
};

// Per token: drop up to `start` leading and `stop` trailing `content` characters.
class StripDec final : public Decoder {
 public:
  StripDec(std::string content, std::size_t start, std::size_t stop) : c_(std::move(content)), start_(start), stop_(stop) {}
  void apply(std::vector<std::string>& tokens) const override {
    if (c_.empty()) return;
    for (std::string& t : tokens) {
      for (std::size_t k = 0; k < start_ && t.compare(0, c_.size(), c_) == 0; ++k) t.erase(0, c_.size());
      for (std::size_t k = 0; k < stop_ && t.size() >= c_.size() && t.compare(t.size() - c_.size(), c_.size(), c_) == 0; ++k)
        t.resize(t.size() - c_.size());
    }
  }

 private:
  std::string c_;
  std::size_t start_, stop_;
};

class BpeDec final : public Decoder {
 public:
  explicit BpeDec(std::string suffix) : suffix_(std::move(suffix)) {}
  void apply(std::vector<std::string>& tokens) const override {
    for (std::size_t i = 0; i < tokens.size(); ++i) replace_all(tokens[i], suffix_, i + 1 == tokens.size() ? "" : " ");
  }

 private:
  std::string suffix_;
};

class SequenceDec final : public Decoder {
 public:
  explicit SequenceDec(std::vector<std::unique_ptr<Decoder>> v) : v_(std::move(v)) {}
  void apply(std::vector<std::string>& tokens) const override {
    for (const auto& d : v_) d->apply(tokens);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> v_;
};

std::pair<std::string, std::unique_ptr<Regex>> parse_pattern(const json& j, const Ctx& ctx, const std::string& who) {
  auto p = j.find("pattern");
  if (p != j.end() && p->is_object()) {
    if (p->contains("String") && (*p)["String"].is_string()) return {(*p)["String"].get<std::string>(), nullptr};
    if (p->contains("Regex") && (*p)["Regex"].is_string())
      return {"", std::make_unique<Regex>((*p)["Regex"].get<std::string>(), ctx.file + ": " + who)};
  }
  ctx.fail(who + ": pattern is neither {\"String\": ...} nor {\"Regex\": ...}");
}

// ------------------------------------------------------------------------ post-processors
struct TemplatePiece {
  bool special = false;           // special token(s) or a sequence
  std::vector<std::int32_t> ids;  // special: the ids it stands for
  int seq = 0;                    // sequence: 0 = A, 1 = B
  std::int32_t type_id = 0;
};

void concat(std::vector<Enc>& encs) {
  if (encs.size() <= 1) return;
  Enc all = std::move(encs[0]);
  for (std::size_t k = 1; k < encs.size(); ++k) all.append(encs[k], -1);
  encs.assign(1, std::move(all));
}

class Template final : public PostProcessor {
 public:
  Template(std::vector<TemplatePiece> single, std::vector<TemplatePiece> pair)
      : single_(std::move(single)), pair_(std::move(pair)) {}
  void process(std::vector<Enc>& encs, bool add_special) const override {
    const auto& t = encs.size() >= 2 ? pair_ : single_;
    Enc out;
    for (const TemplatePiece& p : t) {
      if (p.special) {
        if (add_special)
          for (std::int32_t id : p.ids) out.push(id, p.type_id, {0, 0}, true);
      } else if (static_cast<std::size_t>(p.seq) < encs.size()) {
        out.append(encs[static_cast<std::size_t>(p.seq)], p.type_id);
      }
    }
    encs.assign(1, std::move(out));
  }
  std::size_t added_tokens(bool pair) const override {
    std::size_t n = 0;
    for (const TemplatePiece& p : pair ? pair_ : single_)
      if (p.special) n += p.ids.size();
    return n;
  }

 private:
  std::vector<TemplatePiece> single_, pair_;
};

// BertProcessing / RobertaProcessing: cls A sep [sep? B sep]; Roberta uses type id 0 for B.
class ClsSep final : public PostProcessor {
 public:
  ClsSep(std::int32_t cls, std::int32_t sep, bool roberta) : cls_(cls), sep_(sep), roberta_(roberta) {}
  void process(std::vector<Enc>& encs, bool add_special) const override {
    if (!add_special) return concat(encs);
    const std::int32_t tb = roberta_ ? 0 : 1;
    Enc out;
    out.push(cls_, 0, {0, 0}, true);
    out.append(encs[0], 0);
    out.push(sep_, 0, {0, 0}, true);
    if (encs.size() >= 2) {
      if (roberta_) out.push(sep_, tb, {0, 0}, true);
      out.append(encs[1], tb);
      out.push(sep_, tb, {0, 0}, true);
    }
    encs.assign(1, std::move(out));
  }
  std::size_t added_tokens(bool pair) const override { return pair ? (roberta_ ? 4 : 3) : 2; }

 private:
  std::int32_t cls_, sep_;
  bool roberta_;
};

class Identity final : public PostProcessor {
 public:
  void process(std::vector<Enc>&, bool) const override {}
  std::size_t added_tokens(bool) const override { return 0; }
};

class SequencePost final : public PostProcessor {
 public:
  explicit SequencePost(std::vector<std::unique_ptr<PostProcessor>> v) : v_(std::move(v)) {}
  void process(std::vector<Enc>& encs, bool add_special) const override {
    for (const auto& p : v_) p->process(encs, add_special);
  }
  std::size_t added_tokens(bool pair) const override {
    std::size_t n = 0;
    for (const auto& p : v_) n += p->added_tokens(pair);
    return n;
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> v_;
};

std::pair<std::string, std::int32_t> token_pair(const json& j, const char* key, const Ctx& ctx, const std::string& who) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_array() || it->size() != 2 || !(*it)[0].is_string() || !(*it)[1].is_number_integer())
    ctx.fail("post_processor " + who + ": \"" + key + "\" is not [token, id]");
  return {(*it)[0].get<std::string>(), (*it)[1].get<std::int32_t>()};
}

// One template piece: {"SpecialToken": {"id", "type_id"}}, {"Sequence": {"id": "A"|"B", "type_id"}},
// or the string forms "$A", "$B:1", "[CLS]", "[SEP]:1".
TemplatePiece parse_piece(const json& p, const json& specials, const Ctx& ctx) {
  TemplatePiece out;
  std::string name;
  bool special = false;
  if (p.is_object() && p.contains("SpecialToken")) {
    const json& s = p["SpecialToken"];
    name = opt_string(s, "id", "");
    out.type_id = s.value("type_id", 0);
    special = true;
  } else if (p.is_object() && p.contains("Sequence")) {
    const json& s = p["Sequence"];
    const std::string id = opt_string(s, "id", "A");
    out.type_id = s.value("type_id", 0);
    if (id != "A" && id != "B") ctx.fail("post_processor TemplateProcessing: sequence id \"" + id + "\" is not A or B");
    out.seq = id == "A" ? 0 : 1;
    return out;
  } else if (p.is_string()) {
    std::string s = p.get<std::string>();
    if (auto colon = s.rfind(':'); colon != std::string::npos && colon + 1 < s.size() &&
                                   std::all_of(s.begin() + static_cast<std::ptrdiff_t>(colon) + 1, s.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      out.type_id = std::stoi(s.substr(colon + 1));
      s.resize(colon);
    }
    if (!s.empty() && s[0] == '$') {
      const std::string id = s.substr(1);
      if (id.empty() || id == "A" || id == "0") {
        out.seq = 0;
      } else if (id == "B" || id == "1") {
        out.seq = 1;
      } else {
        ctx.fail("post_processor TemplateProcessing: bad sequence \"" + s + "\"");
      }
      return out;
    }
    name = s;
    special = true;
  } else {
    ctx.fail("post_processor TemplateProcessing: bad template piece " + p.dump());
  }
  (void)special;
  out.special = true;
  auto it = specials.is_object() ? specials.find(name) : specials.end();
  if (it == specials.end()) ctx.fail("post_processor TemplateProcessing: special token \"" + name + "\" has no entry in \"special_tokens\"");
  const json& ids = (*it)["ids"];
  if (!ids.is_array()) ctx.fail("post_processor TemplateProcessing: special token \"" + name + "\" has no \"ids\"");
  for (const auto& id : ids) out.ids.push_back(id.get<std::int32_t>());
  return out;
}

std::vector<TemplatePiece> parse_template(const json& t, const json& specials, const Ctx& ctx) {
  std::vector<TemplatePiece> out;
  if (t.is_string()) {  // "[CLS] $A [SEP]"
    const std::string s = t.get<std::string>();
    std::size_t i = 0;
    while (i < s.size()) {
      while (i < s.size() && s[i] == ' ') ++i;
      std::size_t j = i;
      while (j < s.size() && s[j] != ' ') ++j;
      if (j > i) out.push_back(parse_piece(json(s.substr(i, j - i)), specials, ctx));
      i = j;
    }
    return out;
  }
  if (!t.is_array()) ctx.fail("post_processor TemplateProcessing: template is not a list");
  for (const auto& p : t) out.push_back(parse_piece(p, specials, ctx));
  return out;
}

}  // namespace

std::unique_ptr<Decoder> make_decoder(const json& j, const Ctx& ctx) {
  if (j.is_null()) return nullptr;
  const std::string type = ctx.type_of(j, "decoder");
  if (type == "Sequence") {
    auto it = j.find("decoders");
    if (it == j.end() || !it->is_array()) ctx.fail("decoder Sequence has no \"decoders\" list");
    std::vector<std::unique_ptr<Decoder>> v;
    for (const auto& c : *it)
      if (auto d = make_decoder(c, ctx)) v.push_back(std::move(d));
    return std::make_unique<SequenceDec>(std::move(v));
  }
  if (type == "ByteLevel") return std::make_unique<ByteLevelDec>();
  if (type == "WordPiece") return std::make_unique<WordPieceDec>(opt_string(j, "prefix", "##"), opt_bool(j, "cleanup", true));
  if (type == "Metaspace") {
    bool prepend = opt_bool(j, "add_prefix_space", true);
    if (auto it = j.find("prepend_scheme"); it != j.end() && it->is_string()) prepend = it->get<std::string>() != "never";
    return std::make_unique<MetaspaceDec>(opt_string(j, "replacement", "\xE2\x96\x81"), prepend);
  }
  if (type == "Replace") {
    auto [lit, re] = parse_pattern(j, ctx, "decoder Replace");
    return std::make_unique<ReplaceDec>(std::move(lit), std::move(re), opt_string(j, "content", ""));
  }
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDec>();
  if (type == "Fuse") return std::make_unique<FuseDec>();
  if (type == "Strip")
    return std::make_unique<StripDec>(opt_string(j, "content", " "), j.value("start", std::size_t{0}), j.value("stop", std::size_t{0}));
  if (type == "BPEDecoder") return std::make_unique<BpeDec>(opt_string(j, "suffix", "</w>"));
  ctx.fail("unsupported decoder type \"" + type + "\"");
}

void clean_up_tokenization(std::string& s) { WordPieceDec::cleanup(s); }

std::unique_ptr<PostProcessor> make_post_processor(const json& j, const Ctx& ctx) {
  if (j.is_null()) return nullptr;
  const std::string type = ctx.type_of(j, "post_processor");
  if (type == "TemplateProcessing") {
    const json specials = j.contains("special_tokens") ? j["special_tokens"] : json::object();
    if (!j.contains("single")) ctx.fail("post_processor TemplateProcessing has no \"single\" template");
    auto single = parse_template(j["single"], specials, ctx);
    std::vector<TemplatePiece> pair;
    if (j.contains("pair") && !j["pair"].is_null()) {
      pair = parse_template(j["pair"], specials, ctx);
    } else {  // no pair template: the single one, then B with type id 1
      pair = single;
      TemplatePiece b;
      b.seq = 1;
      b.type_id = 1;
      pair.push_back(b);
    }
    return std::make_unique<Template>(std::move(single), std::move(pair));
  }
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    const auto sep = token_pair(j, "sep", ctx, type), cls = token_pair(j, "cls", ctx, type);
    return std::make_unique<ClsSep>(cls.second, sep.second, type == "RobertaProcessing");
  }
  if (type == "ByteLevel") return std::make_unique<Identity>();
  if (type == "Sequence") {
    auto it = j.find("processors");
    if (it == j.end() || !it->is_array()) ctx.fail("post_processor Sequence has no \"processors\" list");
    std::vector<std::unique_ptr<PostProcessor>> v;
    for (const auto& c : *it)
      if (auto p = make_post_processor(c, ctx)) v.push_back(std::move(p));
    return std::make_unique<SequencePost>(std::move(v));
  }
  ctx.fail("unsupported post_processor type \"" + type + "\"");
}

}  // namespace attune::text::detail
