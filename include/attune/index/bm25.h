#pragma once
// BM25 exactly as rank_bm25 0.2.2's BM25Okapi computes it (LAMP.md), built per query
// over one user's profile.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace attune::index {

struct Bm25Params {
  double k1 = 1.5;
  double b = 0.75;
  double epsilon = 0.25;  // negative idf -> epsilon * average_idf
};

class Bm25Okapi {
 public:
  Bm25Okapi(const Bm25Okapi&) = default;
  Bm25Okapi(Bm25Okapi&&) noexcept = default;
  Bm25Okapi& operator=(const Bm25Okapi&) = default;
  Bm25Okapi& operator=(Bm25Okapi&&) noexcept = default;
  // docs: each document's tokens (text::bm25_tokens for LaMP fidelity). An empty corpus
  // is allowed and scores nothing.
  explicit Bm25Okapi(const std::vector<std::vector<std::string>>& docs, Bm25Params p = {});
  // The same from tokens held as views (text::bm25_token_views); they need not outlive it.
  explicit Bm25Okapi(std::span<const std::vector<std::string_view>> docs, Bm25Params p = {});
  // One score per document, in corpus order; query tokens are summed with duplicates
  // counted each time, in the same floating-point order as numpy does it.
  std::vector<double> scores(const std::vector<std::string>& query) const;
  // The same into `score` (resized to size()), for query tokens held as views: no allocation
  // when `score` has the capacity. Bit-identical to scores().
  // `within`, when given, is a text every query token lies in (the one they were cut
  // from): the lookups may then read its bytes just past a token.
  void scores_into(std::span<const std::string_view> query, std::vector<double>& score,
                   std::string_view within = {}) const;
  // The same for a query given as its text, split as text::bm25_token_views splits it (str.split()):
  // bit-identical to scores_into(bm25_token_views(text), score). ASCII text is split, hashed and
  // looked up in one pass over its bytes, without making the tokens' views first.
  void scores_text_into(std::string_view text, std::vector<double>& score) const;
  double idf(const std::string& term) const;  // 0 for unseen terms
  double average_idf() const { return average_idf_; }
  double avgdl() const { return avgdl_; }
  std::size_t size() const { return doc_len_.size(); }

  // The statistics as bytes (a versioned little-endian layout: parameters, lengths, terms in
  // id order, idf and postings, every double as its bits; the per-posting factors are derived
  // again on reading), so a server keeps
  // them in its store and a restart scores with them without tokenising a document again.
  std::string serialize() const;
  // The statistics serialize() wrote: scores bit-identical to the original's. Error for
  // bytes that are not such a layout (wrong magic or version, truncated, inconsistent sizes).
  static Bm25Okapi deserialize(std::string_view bytes);

 private:
  Bm25Params p_;
  std::vector<std::size_t> doc_len_;
  // Terms numbered in first-seen order (rank_bm25's dict order); idf_ by term id, with
  // the epsilon floor applied. Postings in CSR form: term t's (doc, tf) pairs, by doc,
  // are post_doc_/post_tf_[post_off_[t] .. post_off_[t + 1]).
  // Term -> id: open addressing over buckets of two slots (a cache line each), the terms'
  // bytes in one buffer. A query's lookups were a third of a kept profile's query time with
  // std::unordered_map (a node chase and a compare per probe; bench/RESULTS.md).
  class TermTable {
   public:
    static constexpr std::uint32_t kNone = 0xFFFFFFFFu;
    // What a lookup needs of a term, computed once: its hash and its first 16 bytes (zero
    // padded, in two words), which the slot holds too, so a term of at most 16 bytes is
    // matched without reading the terms' bytes.
    struct Probe {
      std::uint64_t hash = 0, head = 0, head2 = 0;
    };
    // A term's slot, 32 bytes: its first 16 bytes, 24 bits of its hash with the length
    // (1 + min(length, 254); 0 = an empty slot), id + 1 (its top bit is the bucket's
    // overflow mark, in a bucket's first slot), and two words its owner sets (annotate), so
    // one load gives a query what it needs of the term.
    struct Slot {
      std::uint64_t head = 0, head2 = 0;
      std::uint32_t tag = 0, meta = 0;
      std::uint32_t a = 0, b = 0;
      std::uint32_t id1() const { return meta & 0x7FFFFFFFu; }
    };
    // Two slots a cache line. A term lives in its hash's bucket or, when that is full, in
    // the next bucket with room; every bucket passed on the way is marked, so a lookup that
    // meets an unmarked bucket without the term knows it is absent.
    struct alignas(64) Bucket {
      Slot s[2];
      bool overflowed() const { return (s[0].meta >> 31) != 0; }
    };
    // probe(term), reading bytes of the term only. probe_padded(p, n): the same for the n
    // bytes at p, where at least 16 readable bytes follow p + n.
    static Probe probe(std::string_view term);
    static Probe probe_padded(const char* p, std::size_t n);
    std::uint32_t find(std::string_view term) const;
    // The term's slot (nullptr when absent), with probe(term) computed already; prefetch(p)
    // loads the bucket a find will read first.
    const Slot* find(std::string_view term, const Probe& p) const;
    // The same without a branch on whether the term is there, for the usual case that the
    // first bucket settles it (a term of at most 16 bytes found there, or absent from an
    // unmarked bucket): returns a slot and sets `hit` (the slot is the term's) or not (it
    // is absent). Otherwise it falls back to find().
    const Slot* find_first(std::size_t length, const Probe& p, bool& hit, std::string_view term) const;
    void prefetch(const Probe& p) const;
    // The term's id, adding it with the next id when new; `added` says which.
    std::uint32_t insert(std::string_view term, bool& added);
    // Sets every slot's a and b to f(id) (a pair).
    template <class F>
    void annotate(F f) {
      for (Bucket& k : buckets_)
        for (Slot& s : k.s)
          if (s.tag != 0) {
            const auto [a, b] = f(s.id1() - 1);
            s.a = a, s.b = b;
          }
    }
    std::size_t size() const { return off_.size() - 1; }
    std::string_view term(std::uint32_t id) const { return std::string_view(bytes_).substr(off_[id], off_[id + 1] - off_[id]); }
    void reserve(std::size_t n);

   private:
    // 24 bits of the hash (bits 16-39, apart from those home() takes in tables of up to 2^24
    // buckets), and the length.
    static std::uint32_t tag_of(const Probe& p, std::size_t len) {
      return static_cast<std::uint32_t>((p.hash >> 16) & 0xFFFFFFu) << 8 | static_cast<std::uint32_t>(1 + (len < 254 ? len : 254));
    }
    // A hash's bucket: its top bits (the well-mixed ones of a multiplicative hash).
    std::uint64_t home(std::uint64_t hash) const { return hash >> shift_; }
    static std::uint64_t finish(std::uint64_t head, std::uint64_t head2, const char* p, std::size_t n);
    bool matches(const Slot& s, std::uint32_t tag, const Probe& p, std::string_view term) const;
    std::vector<Bucket> buckets_;
    std::uint64_t mask_ = 0;  // buckets_.size() - 1
    unsigned shift_ = 63;     // 64 - log2(buckets_.size())
    std::string bytes_;
    std::vector<std::uint32_t> off_{0};
    void grow();
    void place(Slot s, std::uint64_t hash);
  };
  TermTable term_ids_;
  std::vector<double> idf_;
  std::vector<std::uint32_t> post_off_, post_doc_, post_tf_;
  std::vector<double> norm_;  // per doc: k1 * ((1 - b) + b * dl / avgdl)
  // Per posting (sparse path only): idf * (tf * (k1 + 1) / (tf + norm_[doc])), the term's
  // whole addend; the same double numpy's expression gives.
  std::vector<double> post_value_;
  // Terms held by at least a quarter of the documents (and 4 or more) also have a dense row:
  // n addends, +0.0 for a document without the term (numpy adds idf * 0 = +-0.0 there, which
  // changes no sum), added with vector instructions. dense_row_[t] is the row's number, or
  // kNoRow.
  static constexpr std::uint32_t kNoRow = 0xFFFFFFFFu;
  std::vector<std::uint32_t> dense_row_;
  std::vector<double> dense_;
  // Each term's slot in term_ids_ holds where a query finds its addends: postings [a, b),
  // or when b is kNoRow, dense row a.
  bool sparse_exact_ = true;  // every norm_ > 0, so absent terms add exactly +-0
  double avgdl_ = 0, average_idf_ = 0;
  Bm25Okapi() = default;  // deserialize()
  // norm_, post_value_, the dense rows and sparse_exact_ from doc_len_, avgdl_, p_ and the postings.
  void derive_factors();
};

// numpy.argsort(scores)[::-1]: descending score, ties in DESCENDING index order.
std::vector<std::size_t> rank_bm25_order(const std::vector<double>& scores);
// The first k of rank_bm25_order(scores) (all when k is 0 or at least the size), found
// without sorting the rest.
std::vector<std::size_t> rank_bm25_top(const std::vector<double>& scores, std::size_t k);
// The same into `out`, which keeps its capacity (no allocation for a small k once it has it).
void rank_bm25_top_into(const std::vector<double>& scores, std::size_t k, std::vector<std::size_t>& out);
// Which copy of the query's inner loops this process runs: "avx2" (where the CPU has AVX2 and
// popcnt) or "baseline" (x86-64 without them, other CPUs, or ATTUNE_BM25_BASELINE=1 set). The
// two score bit for bit alike.
const char* bm25_query_isa();

}  // namespace attune::index
