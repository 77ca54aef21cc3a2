// Subword models of subword.h: WordPiece, BPE (byte fallback, byte-level vocabularies),
// Unigram (Viterbi) and WordLevel, each tokenizing one pre-tokenized piece.
#include <algorithm>
#include <array>
#include <cstdio>
#include <limits>
#include <queue>

#include "attune/core/error.h"
#include "subword_impl.h"

namespace attune::text::detail {

void Model::set_vocab(Vocab v) {
  vocab_ = std::move(v);
  std::int32_t max_id = -1;
  for (const auto& [t, id] : vocab_) max_id = std::max(max_id, id);
  tokens_.assign(static_cast<std::size_t>(max_id + 1), std::string());
  for (const auto& [t, id] : vocab_) tokens_[static_cast<std::size_t>(id)] = t;
}

namespace {

std::string byte_token(unsigned char b) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "<0x%02X>", b);
  return buf;
}

// ------------------------------------------------------------------------ WordPiece
class WordPiece final : public Model {
 public:
  WordPiece(WordPieceSpec spec, const Ctx& ctx)
      : unk_(std::move(spec.unk)), prefix_(std::move(spec.prefix)), max_chars_(spec.max_chars), file_(ctx.file) {
    set_vocab(std::move(spec.vocab));
    unk_id_ = lookup(unk_);
  }

  void tokenize(std::string_view w, std::vector<Token>& out) const override {
    std::size_t chars = 0;
    for (unsigned char c : w) chars += (c & 0xC0) != 0x80;
    if (chars > max_chars_) return unk(w, out);
    const std::size_t mark = out.size();
    std::string buf;
    std::size_t start = 0;
    while (start < w.size()) {
      std::size_t end = w.size();
      std::int32_t found = -1;
      while (start < end) {
        std::string_view sub = w.substr(start, end - start);
        if (start > 0) {
          buf.assign(prefix_).append(sub);
          sub = buf;
        }
        found = lookup(sub);
        if (found >= 0) break;
        do --end;  // back to the previous character boundary
        while (end > start && (static_cast<unsigned char>(w[end]) & 0xC0) == 0x80);
      }
      if (found < 0) {
        out.resize(mark);
        return unk(w, out);
      }
      out.push_back({found, static_cast<std::uint32_t>(start), static_cast<std::uint32_t>(end)});
      start = end;
    }
  }

 private:
  void unk(std::string_view w, std::vector<Token>& out) const {
    if (unk_id_ < 0) throw Error(file_ + ": WordPiece unk token \"" + unk_ + "\" is not in the vocabulary");
    out.push_back({unk_id_, 0, static_cast<std::uint32_t>(w.size())});
  }
  std::string unk_, prefix_;
  std::size_t max_chars_;
  std::string file_;
};

// ------------------------------------------------------------------------ BPE
class Bpe final : public Model {
 public:
  Bpe(BpeSpec spec, const Ctx& ctx)
      : prefix_(std::move(spec.prefix)), suffix_(std::move(spec.suffix)), fuse_unk_(spec.fuse_unk),
        byte_fallback_(spec.byte_fallback), ignore_merges_(spec.ignore_merges) {
    set_vocab(std::move(spec.vocab));
    if (!spec.unk.empty()) {
      unk_id_ = lookup(spec.unk);
      if (unk_id_ < 0) missing_unk_ = ctx.file + ": BPE unk_token \"" + spec.unk + "\" is not in the vocabulary";
    }
    for (int b = 0; b < 256; ++b) byte_ids_[b] = byte_fallback_ ? lookup(byte_token(static_cast<unsigned char>(b))) : -1;
    merges_.reserve(spec.merges.size());
    std::string merged;
    for (std::size_t rank = 0; rank < spec.merges.size(); ++rank) {
      const auto& [a, b] = spec.merges[rank];
      const std::int32_t ia = lookup(a), ib = lookup(b);
      if (ia < 0 || ib < 0)
        ctx.fail("BPE merge \"" + a + " " + b + "\" (rank " + std::to_string(rank) + ") uses a token not in the vocabulary");
      std::string_view tail = b;
      if (!prefix_.empty() && tail.substr(0, prefix_.size()) == prefix_) tail.remove_prefix(prefix_.size());
      merged.assign(a).append(tail);
      const std::int32_t id = lookup(merged);
      if (id < 0) ctx.fail("BPE merge \"" + a + " " + b + "\": \"" + merged + "\" is not in the vocabulary");
      merges_.emplace(key(ia, ib), std::make_pair(static_cast<std::int32_t>(rank), id));  // first rank wins
    }
  }

  void tokenize(std::string_view w, std::vector<Token>& out) const override {
    if (ignore_merges_) {
      if (std::int32_t id = lookup(w); id >= 0) {
        out.push_back({id, 0, static_cast<std::uint32_t>(w.size())});
        return;
      }
    }
    std::vector<Sym> syms;
    syms.reserve(w.size());
    auto add = [&](std::int32_t id, std::size_t b, std::size_t e) {
      syms.push_back({id, static_cast<std::uint32_t>(b), static_cast<std::uint32_t>(e), 0, 0});
    };
    bool pending = false;
    Sym unk{};
    auto flush_unk = [&] {
      if (pending) add(unk.id, unk.b, unk.e);
      pending = false;
    };
    std::string buf;
    for (std::size_t i = 0; i < w.size();) {
      std::size_t n = 1;
      while (i + n < w.size() && (static_cast<unsigned char>(w[i + n]) & 0xC0) == 0x80) ++n;
      std::string_view s = w.substr(i, n);
      if ((!prefix_.empty() && i > 0) || (!suffix_.empty() && i + n == w.size())) {
        buf.clear();
        if (i > 0) buf += prefix_;
        buf += s;
        if (i + n == w.size()) buf += suffix_;
        s = buf;
      }
      const std::int32_t id = lookup(s);
      if (id >= 0) {
        flush_unk();
        add(id, i, i + n);
      } else if (byte_fallback_ && std::all_of(s.begin(), s.end(), [&](char c) { return byte_ids_[static_cast<unsigned char>(c)] >= 0; })) {
        flush_unk();
        // Offsets of the byte tokens: one byte each (of the character, clamped to it).
        for (std::size_t k = 0; k < s.size(); ++k) {
          const std::size_t b = std::min(i + k, i + n - 1);
          add(byte_ids_[static_cast<unsigned char>(s[k])], b, b + 1);
        }
      } else if (unk_id_ >= 0) {
        if (pending && fuse_unk_) {
          unk.e = static_cast<std::uint32_t>(i + n);
        } else {
          flush_unk();
          unk = {unk_id_, static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(i + n), 0, 0};
          pending = true;
        }
      } else if (!missing_unk_.empty()) {
        throw Error(missing_unk_);  // HF fails the same way, on use
      }  // no unk token at all: the character is dropped, as in HF
      i += n;
    }
    flush_unk();
    merge(syms);
    for (const Sym& s : syms)
      if (s.e > s.b || s.id >= 0) out.push_back({s.id, s.b, s.e});
  }

 private:
  struct Sym {
    std::int32_t id;
    std::uint32_t b, e;  // e == b marks a symbol merged into its left neighbour
    std::int32_t prev, next;
  };
  struct Cand {
    std::int32_t rank;
    std::uint32_t pos;
    std::int32_t new_id;
    bool operator<(const Cand& o) const {  // priority_queue is a max-heap: invert
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  static std::uint64_t key(std::int32_t a, std::int32_t b) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) | static_cast<std::uint32_t>(b);
  }
  const std::pair<std::int32_t, std::int32_t>* find_merge(std::int32_t a, std::int32_t b) const {
    auto it = merges_.find(key(a, b));
    return it == merges_.end() ? nullptr : &it->second;
  }

  // HF Word::merge_all: repeatedly apply the lowest-rank merge (leftmost on ties) with a
  // priority queue over adjacent pairs and a linked list of live symbols: O(n log n).
  void merge(std::vector<Sym>& syms) const {
    const std::int32_t n = static_cast<std::int32_t>(syms.size());
    if (n < 2) return;
    for (std::int32_t i = 0; i < n; ++i) {
      syms[i].prev = i - 1;
      syms[i].next = i + 1 < n ? i + 1 : -1;
    }
    std::vector<Cand> heap;
    heap.reserve(static_cast<std::size_t>(n));
    for (std::int32_t i = 0; i + 1 < n; ++i)
      if (auto m = find_merge(syms[i].id, syms[i + 1].id)) heap.push_back({m->first, static_cast<std::uint32_t>(i), m->second});
    std::priority_queue<Cand> q(std::less<Cand>(), std::move(heap));
    std::vector<bool> dead(static_cast<std::size_t>(n), false);
    while (!q.empty()) {
      const Cand top = q.top();
      q.pop();
      Sym& cur = syms[top.pos];
      if (dead[top.pos] || cur.next < 0) continue;
      const std::int32_t ni = cur.next;
      const Sym right = syms[ni];
      auto m = find_merge(cur.id, right.id);
      if (m == nullptr || m->second != top.new_id) continue;  // stale entry
      cur.id = top.new_id;
      cur.e = right.e;
      cur.next = right.next;
      dead[ni] = true;
      if (right.next >= 0) syms[right.next].prev = static_cast<std::int32_t>(top.pos);
      if (cur.prev >= 0)
        if (auto pm = find_merge(syms[cur.prev].id, cur.id)) q.push({pm->first, static_cast<std::uint32_t>(cur.prev), pm->second});
      if (cur.next >= 0)
        if (auto nm = find_merge(cur.id, syms[cur.next].id)) q.push({nm->first, top.pos, nm->second});
    }
    std::size_t k = 0;
    for (std::int32_t i = 0; i < n; ++i)
      if (!dead[i]) syms[k++] = syms[i];
    syms.resize(k);
  }

  std::unordered_map<std::uint64_t, std::pair<std::int32_t, std::int32_t>> merges_;  // (a,b) -> (rank, merged id)
  std::string prefix_, suffix_;
  std::string missing_unk_;  // error message when the unk token is named but not in the vocabulary
  bool fuse_unk_, byte_fallback_, ignore_merges_;
  std::int32_t byte_ids_[256];
};

// ------------------------------------------------------------------------ Unigram
class Unigram final : public Model {
 public:
  Unigram(UnigramSpec spec, const Ctx& ctx) : byte_fallback_(spec.byte_fallback) {
    Vocab v;
    v.reserve(spec.pieces.size());
    scores_.reserve(spec.pieces.size());
    double min_score = std::numeric_limits<double>::infinity();
    nodes_.push_back({0, -1, -1, -1});  // root
    root_.fill(-1);
    for (std::size_t id = 0; id < spec.pieces.size(); ++id) {
      const auto& [piece, score] = spec.pieces[id];
      v.emplace(piece, static_cast<std::int32_t>(id));  // first occurrence wins
      scores_.push_back(score);
      min_score = std::min(min_score, score);
      const bool matchable = spec.matchable.empty() || spec.matchable[id];
      if (matchable && !piece.empty()) insert(piece, static_cast<std::int32_t>(id));
    }
    set_vocab(std::move(v));
    unk_id_ = spec.unk_id;
    if (unk_id_ >= static_cast<std::int32_t>(spec.pieces.size())) ctx.fail("Unigram unk_id " + std::to_string(unk_id_) + " is out of the vocabulary");
    unk_score_ = (spec.pieces.empty() ? 0.0 : min_score) - 10.0;  // HF's kUnkPenalty
    for (int b = 0; b < 256; ++b) byte_ids_[b] = byte_fallback_ ? lookup(byte_token(static_cast<unsigned char>(b))) : -1;
    file_ = ctx.file;
  }

  void tokenize(std::string_view s, std::vector<Token>& out) const override {
    if (s.empty()) return;
    const std::size_t n = s.size();
    struct Best {
      double score = 0;
      std::int32_t start = -1, id = -1;
    };
    std::vector<Best> best(n + 1);
    best[0].start = 0;
    for (std::size_t start = 0; start < n;) {
      std::size_t clen = 1;
      while (start + clen < n && (static_cast<unsigned char>(s[start + clen]) & 0xC0) == 0x80) ++clen;
      const double base = best[start].score;
      bool single = false;
      std::int32_t node = root_[static_cast<unsigned char>(s[start])];
      for (std::size_t end = start + 1; node >= 0; ++end) {
        const Node& nd = nodes_[node];
        if (nd.id >= 0) {
          const double cand = base + scores_[nd.id];
          Best& t = best[end];
          if (t.start < 0 || cand > t.score) t = {cand, static_cast<std::int32_t>(start), nd.id};
          if (end - start == clen) single = true;
        }
        if (end >= n) break;
        node = child(node, static_cast<unsigned char>(s[end]));
      }
      if (!single) {
        const double cand = base + unk_score_;
        Best& t = best[start + clen];
        if (t.start < 0 || cand > t.score) t = {cand, static_cast<std::int32_t>(start), unk_id_};
      }
      start += clen;
    }
    // Backtrack; runs of unknown pieces fuse into one (HF fuse_unk).
    std::vector<Token> rev;
    for (std::size_t end = n; end > 0;) {
      const Best& b = best[end];
      const auto st = static_cast<std::uint32_t>(b.start);
      if (b.id == unk_id_ && !rev.empty() && rev.back().id == unk_id_ && rev.back().begin == end) {
        rev.back().begin = st;
      } else {
        rev.push_back({b.id, st, static_cast<std::uint32_t>(end)});
      }
      end = st;
    }
    for (auto it = rev.rbegin(); it != rev.rend(); ++it) {
      if (it->id != unk_id_ || it->id < 0) {
        if (it->id < 0) {  // no unk piece at all
          if (!bytes(s, *it, out)) throw Error(file_ + ": Unigram model has no unk_id and cannot encode \"" + std::string(s.substr(it->begin, it->end - it->begin)) + "\"");
          continue;
        }
        out.push_back(*it);
        continue;
      }
      const std::string_view text = s.substr(it->begin, it->end - it->begin);
      if (const std::int32_t id = lookup(text); id >= 0) {
        out.push_back({id, it->begin, it->end});
      } else if (!bytes(s, *it, out)) {
        out.push_back(*it);
      }
    }
  }

 private:
  struct Node {
    unsigned char byte;
    std::int32_t first_child, next_sibling, id;
  };
  bool bytes(std::string_view s, const Token& t, std::vector<Token>& out) const {
    if (!byte_fallback_) return false;
    for (std::uint32_t k = t.begin; k < t.end; ++k)
      if (byte_ids_[static_cast<unsigned char>(s[k])] < 0) return false;
    for (std::uint32_t k = t.begin; k < t.end; ++k) out.push_back({byte_ids_[static_cast<unsigned char>(s[k])], t.begin, t.end});
    return true;
  }
  std::int32_t child(std::int32_t node, unsigned char b) const {
    for (std::int32_t c = nodes_[node].first_child; c >= 0; c = nodes_[c].next_sibling)
      if (nodes_[c].byte == b) return c;
    return -1;
  }
  void insert(std::string_view piece, std::int32_t id) {
    const auto b0 = static_cast<unsigned char>(piece[0]);
    if (root_[b0] < 0) {
      root_[b0] = static_cast<std::int32_t>(nodes_.size());
      nodes_.push_back({b0, -1, -1, -1});
    }
    std::int32_t node = root_[b0];
    for (std::size_t k = 1; k < piece.size(); ++k) {
      const auto b = static_cast<unsigned char>(piece[k]);
      std::int32_t c = child(node, b);
      if (c < 0) {
        c = static_cast<std::int32_t>(nodes_.size());
        nodes_.push_back({b, -1, nodes_[node].first_child, -1});
        nodes_[node].first_child = c;
      }
      node = c;
    }
    if (nodes_[node].id < 0) nodes_[node].id = id;
  }

  std::vector<double> scores_;
  std::vector<Node> nodes_;
  std::array<std::int32_t, 256> root_;
  double unk_score_ = 0;
  bool byte_fallback_;
  std::int32_t byte_ids_[256];
  std::string file_;
};

// ------------------------------------------------------------------------ WordLevel
class WordLevel final : public Model {
 public:
  WordLevel(Vocab v, const std::string& unk, const Ctx& ctx) : file_(ctx.file), unk_(unk) {
    set_vocab(std::move(v));
    unk_id_ = lookup(unk);
  }
  void tokenize(std::string_view w, std::vector<Token>& out) const override {
    std::int32_t id = lookup(w);
    if (id < 0) id = unk_id_;
    if (id < 0) throw Error(file_ + ": WordLevel unk token \"" + unk_ + "\" is not in the vocabulary");
    out.push_back({id, 0, static_cast<std::uint32_t>(w.size())});
  }

 private:
  std::string file_, unk_;
};

Vocab parse_vocab(const json& j, const Ctx& ctx, const std::string& model) {
  if (!j.is_object()) ctx.fail(model + " model: \"vocab\" is not an object of token -> id");
  Vocab v;
  v.reserve(j.size());
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!it.value().is_number_integer() || it.value().get<long long>() < 0 ||
        it.value().get<long long>() > std::numeric_limits<std::int32_t>::max())
      ctx.fail(model + " model: vocab entry \"" + it.key() + "\" has no valid id");
    v.emplace(it.key(), static_cast<std::int32_t>(it.value().get<long long>()));
  }
  return v;
}


}  // namespace

std::unique_ptr<Model> make_wordpiece(WordPieceSpec spec, const Ctx& ctx) { return std::make_unique<WordPiece>(std::move(spec), ctx); }
std::unique_ptr<Model> make_bpe(BpeSpec spec, const Ctx& ctx) { return std::make_unique<Bpe>(std::move(spec), ctx); }
std::unique_ptr<Model> make_unigram(UnigramSpec spec, const Ctx& ctx) { return std::make_unique<Unigram>(std::move(spec), ctx); }

std::unique_ptr<Model> make_model(const json& j, const Ctx& ctx) {
  if (!j.is_object()) ctx.fail("\"model\" is missing or not an object");
  std::string type;
  if (auto it = j.find("type"); it != j.end() && it->is_string()) {
    type = it->get<std::string>();
  } else if (j.contains("merges")) {  // untyped (old) files: infer like HF
    type = "BPE";
  } else if (j.contains("vocab") && j["vocab"].is_array()) {
    type = "Unigram";
  } else if (j.contains("continuing_subword_prefix") || j.contains("max_input_chars_per_word")) {
    type = "WordPiece";
  } else {
    type = "WordLevel";
  }
  const json& vocab = j.contains("vocab") ? j["vocab"] : json();
  if (type == "WordPiece") {
    WordPieceSpec s;
    s.vocab = parse_vocab(vocab, ctx, type);
    s.unk = opt_string(j, "unk_token", "[UNK]");
    s.prefix = opt_string(j, "continuing_subword_prefix", "##");
    if (auto it = j.find("max_input_chars_per_word"); it != j.end() && it->is_number_unsigned())
      s.max_chars = it->get<std::size_t>();
    return make_wordpiece(std::move(s), ctx);
  }
  if (type == "BPE") {
    BpeSpec s;
    s.vocab = parse_vocab(vocab, ctx, type);
    s.unk = opt_string(j, "unk_token", "");
    s.prefix = opt_string(j, "continuing_subword_prefix", "");
    s.suffix = opt_string(j, "end_of_word_suffix", "");
    s.fuse_unk = opt_bool(j, "fuse_unk", false);
    s.byte_fallback = opt_bool(j, "byte_fallback", false);
    s.ignore_merges = opt_bool(j, "ignore_merges", false);
    auto m = j.find("merges");
    if (m != j.end() && !m->is_null()) {
      if (!m->is_array()) ctx.fail("BPE model: \"merges\" is not a list");
      s.merges.reserve(m->size());
      for (std::size_t k = 0; k < m->size(); ++k) {
        const json& e = (*m)[k];
        if (e.is_string()) {  // "a b" (legacy)
          const std::string line = e.get<std::string>();
          const std::size_t sp = line.find(' ');
          if (sp == std::string::npos || line.find(' ', sp + 1) != std::string::npos)
            ctx.fail("BPE model: merge " + std::to_string(k) + " \"" + line + "\" is not \"a b\"");
          s.merges.emplace_back(line.substr(0, sp), line.substr(sp + 1));
        } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
          s.merges.emplace_back(e[0].get<std::string>(), e[1].get<std::string>());
        } else {
          ctx.fail("BPE model: merge " + std::to_string(k) + " is neither \"a b\" nor [\"a\", \"b\"]");
        }
      }
    }
    return make_bpe(std::move(s), ctx);
  }
  if (type == "Unigram") {
    UnigramSpec s;
    if (!vocab.is_array()) ctx.fail("Unigram model: \"vocab\" is not a list of [piece, score]");
    s.pieces.reserve(vocab.size());
    for (std::size_t k = 0; k < vocab.size(); ++k) {
      const json& e = vocab[k];
      if (!e.is_array() || e.size() != 2 || !e[0].is_string() || !e[1].is_number())
        ctx.fail("Unigram model: vocab entry " + std::to_string(k) + " is not [piece, score]");
      s.pieces.emplace_back(e[0].get<std::string>(), e[1].get<double>());
    }
    if (auto it = j.find("unk_id"); it != j.end() && it->is_number_integer()) s.unk_id = it->get<std::int32_t>();
    s.byte_fallback = opt_bool(j, "byte_fallback", false);
    return make_unigram(std::move(s), ctx);
  }
  if (type == "WordLevel") return std::make_unique<WordLevel>(parse_vocab(vocab, ctx, type), opt_string(j, "unk_token", "[UNK]"), ctx);
  ctx.fail("unsupported model type \"" + type + "\"");
}

}  // namespace attune::text::detail
