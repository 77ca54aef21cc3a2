// BM25Okapi exactly as rank_bm25 0.2.2 computes it (LAMP.md "Baseline retrievers").
// Every floating-point operation below mirrors the Python/numpy reference one for one so
// that scores are bit-identical:
//   idf(w)      = math.log(N - n + 0.5) - math.log(n + 0.5), summed in first-seen order
//                 into average_idf (negative idfs included), then idf < 0 -> eps * avg;
//   get_scores  = for each query token q (duplicates each time):
//                 score += idf(q) * (tf * (k1 + 1) / (tf + k1 * ((1 - b) + b * dl / avgdl)))
// numpy adds that expression for every document; a document without q adds idf * 0 =
// +-0.0, which leaves any sum unchanged (a sum that starts at +0.0 is never -0.0), so
// we only visit q's postings (or, for a term in a quarter of the documents or more, add its
// row of n addends, whose +0.0 entries change no sum either). That needs every denominator
// > 0 (true unless k1 = 0 or b = 1 with an empty document, where numpy gets 0/0 = NaN);
// otherwise numpy's expression is evaluated for every document. The build uses
// -ffp-contract=off so no multiply-add is fused.
#include "attune/index/bm25.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "attune/core/ascii_space.h"
#include "attune/core/error.h"
#include "attune/text/lexical.h"
#include "byte_io.h"

namespace attune::index {

namespace {
// A buffer a thread keeps, at least n long: it only grows, so that a query shorter than the
// last does not make the next longer one value-initialise the difference again.
template <class T>
T* at_least(std::vector<T>& v, std::size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

std::vector<std::vector<std::string_view>> views_of(const std::vector<std::vector<std::string>>& docs) {
  std::vector<std::vector<std::string_view>> out;
  out.reserve(docs.size());
  for (const auto& d : docs) out.emplace_back(d.begin(), d.end());
  return out;
}
}  // namespace

Bm25Okapi::Bm25Okapi(const std::vector<std::vector<std::string>>& docs, Bm25Params p)
    : Bm25Okapi(std::span<const std::vector<std::string_view>>(views_of(docs)), p) {}

Bm25Okapi::Bm25Okapi(std::span<const std::vector<std::string_view>> docs, Bm25Params p)
    : p_(p) {
  const auto n_docs = static_cast<std::uint32_t>(docs.size());
  doc_len_.reserve(n_docs);
  // Pass 1: number terms in first-seen order (doc by doc, token by token — the insertion
  // order of rank_bm25's `nd` dict) and collect each document's (term, tf) pairs.
  std::vector<std::uint32_t> nd;         // per term: documents holding it
  std::vector<std::uint32_t> last_doc;   // per term: doc + 1 of its last occurrence
  std::vector<std::uint32_t> slot;       // per term: index of that doc's pair in pairs
  std::vector<std::uint32_t> pair_term, pair_tf;
  std::vector<std::uint32_t> doc_off{0};
  std::size_t num_tokens = 0;
  for (std::uint32_t d = 0; d < n_docs; ++d) {
    doc_len_.push_back(docs[d].size());
    num_tokens += docs[d].size();
    for (const auto& w : docs[d]) {
      bool inserted = false;
      const std::uint32_t t = term_ids_.insert(w, inserted);
      if (inserted) {
        nd.push_back(0);
        last_doc.push_back(0);
        slot.push_back(0);
      }
      if (last_doc[t] != d + 1) {
        last_doc[t] = d + 1;
        slot[t] = static_cast<std::uint32_t>(pair_term.size());
        pair_term.push_back(t);
        pair_tf.push_back(1);
        ++nd[t];
      } else {
        ++pair_tf[slot[t]];
      }
    }
    doc_off.push_back(static_cast<std::uint32_t>(pair_term.size()));
  }
  if (n_docs == 0) return;  // rank_bm25 divides by zero here; we score nothing.
  avgdl_ = static_cast<double>(num_tokens) / static_cast<double>(n_docs);

  // idf, average_idf and the epsilon floor, as BM25Okapi._calc_idf.
  const double n = static_cast<double>(n_docs);
  idf_.resize(nd.size());
  double idf_sum = 0;
  for (std::size_t t = 0; t < nd.size(); ++t) {
    const double freq = static_cast<double>(nd[t]);
    idf_[t] = std::log(n - freq + 0.5) - std::log(freq + 0.5);
    idf_sum += idf_[t];
  }
  // rank_bm25 divides by len(idf) even when it is 0 (all documents empty); 0 here.
  average_idf_ = nd.empty() ? 0.0 : idf_sum / static_cast<double>(nd.size());
  const double eps = p_.epsilon * average_idf_;
  for (auto& v : idf_) {
    if (v < 0) v = eps;
  }

  // Pass 2: postings by term (CSR), each list in document order.
  post_off_.assign(nd.size() + 1, 0);
  for (std::size_t t = 0; t < nd.size(); ++t) post_off_[t + 1] = post_off_[t] + nd[t];
  post_doc_.resize(pair_term.size());
  post_tf_.resize(pair_term.size());
  std::vector<std::uint32_t> fill(post_off_.begin(), post_off_.end() - 1);
  for (std::uint32_t d = 0; d < n_docs; ++d) {
    for (std::uint32_t i = doc_off[d]; i < doc_off[d + 1]; ++i) {
      const std::uint32_t at = fill[pair_term[i]]++;
      post_doc_[at] = d;
      post_tf_[at] = pair_tf[i];
    }
  }

  derive_factors();
}

void Bm25Okapi::derive_factors() {
  // k1 * ((1 - b) + (b * dl) / avgdl): numpy evaluates b * doc_len first, then / avgdl,
  // then adds the scalar (1 - b), then multiplies by k1. Same value for every token.
  const std::size_t n_docs = doc_len_.size();
  sparse_exact_ = true;
  norm_.resize(n_docs);
  for (std::size_t d = 0; d < n_docs; ++d) {
    norm_[d] = p_.k1 * ((1 - p_.b) + p_.b * static_cast<double>(doc_len_[d]) / avgdl_);
    if (!(norm_[d] > 0)) sparse_exact_ = false;
  }
  post_value_.clear();
  dense_row_.clear();
  dense_.clear();
  if (!sparse_exact_) return;
  const double k1p1 = p_.k1 + 1;
  post_value_.resize(post_doc_.size());
  dense_row_.assign(idf_.size(), kNoRow);
  std::size_t rows = 0;
  for (std::size_t t = 0; t < idf_.size(); ++t) {
    const std::uint32_t df = post_off_[t + 1] - post_off_[t];
    if (df >= 4 && 4 * static_cast<std::size_t>(df) >= n_docs) dense_row_[t] = static_cast<std::uint32_t>(rows++);
  }
  dense_.assign(rows * n_docs, 0.0);
  term_ids_.annotate([&](std::uint32_t t) {
    return dense_row_[t] == kNoRow ? std::pair{post_off_[t], post_off_[t + 1]} : std::pair{dense_row_[t], kNoRow};
  });
  for (std::size_t t = 0; t < idf_.size(); ++t) {
    // idf * (tf * (k1 + 1) / (tf + norm)): the parenthesis first, as numpy evaluates it.
    double* row = dense_row_[t] == kNoRow ? nullptr : dense_.data() + dense_row_[t] * n_docs;
    for (std::uint32_t i = post_off_[t]; i < post_off_[t + 1]; ++i) {
      const double tf = static_cast<double>(post_tf_[i]);
      post_value_[i] = idf_[t] * (tf * k1p1 / (tf + norm_[post_doc_[i]]));
      if (row) row[post_doc_[i]] = post_value_[i];
    }
  }
}

double Bm25Okapi::idf(const std::string& term) const {
  const std::uint32_t t = term_ids_.find(term);
  return t == TermTable::kNone ? 0.0 : idf_[t];
}

std::vector<double> Bm25Okapi::scores(const std::vector<std::string>& query) const {
  std::vector<std::string_view> views(query.begin(), query.end());
  std::vector<double> score;
  scores_into(views, score);
  return score;
}

namespace {
// out[d] += v[d] for d < n: two at a time where SSE2 is (every x86-64), each add rounded as
// the scalar one is.
inline void add_row(double* out, const double* v, std::size_t n) {
  std::size_t d = 0;
#if defined(__SSE2__)
  for (; d + 4 <= n; d += 4) {
    _mm_storeu_pd(out + d, _mm_add_pd(_mm_loadu_pd(out + d), _mm_loadu_pd(v + d)));
    _mm_storeu_pd(out + d + 2, _mm_add_pd(_mm_loadu_pd(out + d + 2), _mm_loadu_pd(v + d + 2)));
  }
#endif
  for (; d < n; ++d) out[d] += v[d];
}

// A query's found terms, in query order: a dense row (b == kRowMark, Bm25Okapi::kNoRow, and a
// = the row) or a run of postings [a, b).
constexpr std::uint32_t kRowMark = 0xFFFFFFFFu;
struct Hit {
  std::uint32_t a, b;
};

// Adds every hit's addends to out, in query order: the same adds, one rounding each, as one
// term at a time. Templated on the row adder so that the AVX2 copy below (four doubles an
// add, the same IEEE additions) is the same loop compiled for that target.
template <class AddRow>
[[gnu::always_inline]] inline void add_hits(double* out, std::span<const Hit> hits, const double* dense, std::size_t n,
                                            const std::uint32_t* post_doc, const double* post_value, AddRow add) {
  for (const Hit w : hits) {
    if (w.b == kRowMark) {
      // Every document's addend, +0.0 where the term is absent: element-wise adds, the
      // same roundings as one at a time.
      add(out, dense + static_cast<std::size_t>(w.a) * n, n);
    } else {
      // `self.idf.get(q) or 0` times the parenthesis, multiplied at build time.
      for (std::uint32_t i = w.a; i < w.b; ++i) out[post_doc[i]] += post_value[i];
    }
  }
}

void add_hits_sse2(double* out, std::span<const Hit> hits, const double* dense, std::size_t n, const std::uint32_t* post_doc,
                   const double* post_value) {
  add_hits(out, hits, dense, n, post_doc, post_value, add_row);
}

#if defined(__x86_64__) && defined(__GNUC__)
#define ATTUNE_BM25_AVX2 1
__attribute__((target("avx2"))) void add_hits_avx2(double* out, std::span<const Hit> hits, const double* dense, std::size_t n,
                                                   const std::uint32_t* post_doc, const double* post_value) {
  add_hits(out, hits, dense, n, post_doc, post_value, [](double* o, const double* v, std::size_t m) __attribute__((target("avx2"))) {
    std::size_t d = 0;
    for (; d + 8 <= m; d += 8) {
      _mm256_storeu_pd(o + d, _mm256_add_pd(_mm256_loadu_pd(o + d), _mm256_loadu_pd(v + d)));
      _mm256_storeu_pd(o + d + 4, _mm256_add_pd(_mm256_loadu_pd(o + d + 4), _mm256_loadu_pd(v + d + 4)));
    }
    for (; d < m; ++d) o[d] += v[d];
  });
}
#endif

// Whether the AVX2 copies below may be used: the CPU has AVX2 and popcnt, and
// ATTUNE_BM25_BASELINE is not set (to 1 or anything but 0), which keeps the baseline x86-64
// copies (the tests run both).
bool avx2_allowed() {
  static const bool allowed = [] {
    const char* e = std::getenv("ATTUNE_BM25_BASELINE");
    if (e != nullptr && *e != '\0' && std::string_view(e) != "0") return false;
#if defined(ATTUNE_BM25_AVX2)
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("popcnt");
#else
    return false;
#endif
  }();
  return allowed;
}

using AddHits = void (*)(double*, std::span<const Hit>, const double*, std::size_t, const std::uint32_t*, const double*);
// The AVX2 copy where the CPU has it (chosen once, at the first query).
AddHits add_hits_for_this_cpu() {
  static const AddHits f = [] {
#if defined(ATTUNE_BM25_AVX2)
    if (avx2_allowed()) return &add_hits_avx2;
#endif
    return &add_hits_sse2;
  }();
  return f;
}
}  // namespace

void Bm25Okapi::scores_into(std::span<const std::string_view> query, std::vector<double>& score, std::string_view within) const {
  const std::size_t n = doc_len_.size();
  score.assign(n, 0.0);
  if (n == 0) return;
  const double k1p1 = p_.k1 + 1;
  std::vector<double> dense_tf;
  // Every token probed and its slot prefetched first, so that the table's cache misses
  // overlap instead of coming one after another.
  thread_local std::vector<TermTable::Probe> probe_buffer;
  TermTable::Probe* const probes = at_least(probe_buffer, query.size());
  const auto lo = reinterpret_cast<std::uintptr_t>(within.data()), hi = lo + within.size();
  for (std::size_t j = 0; j < query.size(); ++j) {
    const std::string_view t = query[j];
    const auto at = reinterpret_cast<std::uintptr_t>(t.data());
    // Inside `within` with 16 readable bytes after it: a short term's words are two loads.
    const bool padded = !within.empty() && at >= lo && at <= hi && t.size() + 16 <= hi - at;
    probes[j] = padded ? TermTable::probe_padded(t.data(), t.size()) : TermTable::probe(t);
    term_ids_.prefetch(probes[j]);
  }
  double* const out = score.data();
  if (sparse_exact_) {
    // Then every token's slot, which says where its addends are, before any is added: the
    // lookups' misses overlap (scoring a common term between them would fill the reorder
    // window). Prefetching the addends here as well measured no faster.
    static_assert(kNoRow == kRowMark);
    thread_local std::vector<Hit> hit_buffer;
    Hit* const hits = at_least(hit_buffer, query.size());
    std::size_t found = 0;
    for (std::size_t j = 0; j < query.size(); ++j) {
      // Whether a token is in the profile is a coin toss to the branch predictor: the slot is
      // written down either way, and kept by advancing `found` only on a hit.
      bool hit = false;
      const TermTable::Slot* s = term_ids_.find_first(query[j].size(), probes[j], hit, query[j]);
      hits[found] = {s->a, s->b};
      found += hit;  // idf 0 * finite = 0: an absent term adds nothing
    }
    add_hits_for_this_cpu()(out, std::span<const Hit>(hits, found), dense_.data(), n, post_doc_.data(), post_value_.data());
    return;
  }
  for (std::size_t j = 0; j < query.size(); ++j) {
    // Degenerate parameters: numpy's dense evaluation, NaNs included.
    const TermTable::Slot* s = term_ids_.find(query[j], probes[j]);
    const std::uint32_t t = s ? s->id1() - 1 : TermTable::kNone;
    dense_tf.assign(n, 0.0);
    double w = 0;
    if (t != TermTable::kNone) {
      w = idf_[t];
      for (std::uint32_t i = post_off_[t]; i < post_off_[t + 1]; ++i) {
        dense_tf[post_doc_[i]] = static_cast<double>(post_tf_[i]);
      }
    }
    for (std::size_t d = 0; d < n; ++d) {
      score[d] += w * (dense_tf[d] * k1p1 / (dense_tf[d] + norm_[d]));
    }
  }
}

namespace {
// The set bits of x, without the library call __builtin_popcountll makes where the baseline
// x86-64 target has no popcnt instruction.
inline unsigned popcount64(std::uint64_t x) {
  x = x - ((x >> 1) & 0x5555555555555555ull);
  x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
  x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0Full;
  return static_cast<unsigned>((x * 0x0101010101010101ull) >> 56);
}

// The whitespace of Python's str.split() among 64 ASCII bytes at p, as bits (bit j: byte j):
// \t..\r, \x1c..\x1f and ' '. `high` gets the bytes >= 0x80 (which this does not classify).
inline std::uint64_t ascii_space_bits(const unsigned char* p, std::uint64_t& high) {
  std::uint64_t m = 0, h = 0;
#if defined(__SSE2__)
  for (int c = 0; c < 4; ++c) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * c));
    m |= static_cast<std::uint64_t>(ascii_space_mask(v)) << (16 * c);
    h |= static_cast<std::uint64_t>(static_cast<unsigned>(_mm_movemask_epi8(v))) << (16 * c);
  }
#else
  for (int j = 0; j < 64; ++j) {
    const unsigned char c = p[j];
    m |= static_cast<std::uint64_t>(c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f)) << j;
    h |= static_cast<std::uint64_t>(c >= 0x80) << j;
  }
#endif
  high = h;
  return m;
}

// Each word's first byte and the byte after its last, in one list (they alternate: a word's
// start, its end, the next start, ...), for `blocks` 64-byte blocks of ASCII text padded with
// spaces: whitespace bits, shifted by one to see the byte before (before the text counts as
// whitespace). Returns how many; `high` gets the bits of bytes >= 0x80 (non-ASCII text,
// which the caller splits another way). `bounds` has room for 64 a block and 8 more.
template <class SpaceBits, class Popcount>
[[gnu::always_inline]] inline std::size_t word_bounds_with(const unsigned char* buf, std::size_t blocks, std::uint32_t* bounds,
                                                           std::uint64_t& high, SpaceBits space_bits, Popcount popcount) {
  std::size_t found = 0;
  std::uint64_t carry = 1, any_high = 0;
  for (std::size_t k = 0; k < blocks; ++k) {
    std::uint64_t h = 0;
    const std::uint64_t space = space_bits(buf + 64 * k, h);
    any_high |= h;
    const std::uint64_t before = space << 1 | carry;  // bit j: byte j - 1 is whitespace
    carry = space >> 63;
    std::uint64_t bits = space ^ before;  // a word starts or ends at bit j
    const auto base = static_cast<std::uint32_t>(64 * k);
    // The set bits' positions, eight at a time whether or not that many are left (the
    // places past the count are overwritten next), so that the loop runs a number of times
    // the branch predictor can guess. (Bit 63 or'ed in keeps ctz defined once bits is 0.)
    const std::size_t count = popcount(bits);
    std::uint32_t* const out = bounds + found;
    for (std::size_t c = 0; c < count; c += 8)
      for (std::size_t u = 0; u < 8; ++u) {
        out[c + u] = base + static_cast<std::uint32_t>(__builtin_ctzll(bits | (1ull << 63)));
        bits &= bits - 1;
      }
    found += count;
  }
  high = any_high;
  return found;
}

std::size_t word_bounds_sse2(const unsigned char* buf, std::size_t blocks, std::uint32_t* bounds, std::uint64_t& high) {
  return word_bounds_with(buf, blocks, bounds, high, ascii_space_bits, [](std::uint64_t x) -> std::size_t { return popcount64(x); });
}

#if defined(ATTUNE_BM25_AVX2)
// The same with 32 bytes a compare and the popcnt instruction.
__attribute__((target("avx2,popcnt"))) std::size_t word_bounds_avx2(const unsigned char* buf, std::size_t blocks,
                                                                     std::uint32_t* bounds, std::uint64_t& high) {
  const auto space_bits = [](const unsigned char* p, std::uint64_t& h) __attribute__((target("avx2"))) {
    std::uint64_t m = 0, hi = 0;
    for (int c = 0; c < 2; ++c) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32 * c));
      // \t..\r is v - 9 <= 4 and \x1c..\x1f is v - 0x1c <= 3, unsigned: x <= c where min(x, c) == x.
      const __m256i t1 = _mm256_sub_epi8(v, _mm256_set1_epi8(9));
      const __m256i t2 = _mm256_sub_epi8(v, _mm256_set1_epi8(0x1c));
      const __m256i r1 = _mm256_cmpeq_epi8(_mm256_min_epu8(t1, _mm256_set1_epi8(4)), t1);
      const __m256i r2 = _mm256_cmpeq_epi8(_mm256_min_epu8(t2, _mm256_set1_epi8(3)), t2);
      const __m256i sp = _mm256_or_si256(_mm256_cmpeq_epi8(v, _mm256_set1_epi8(' ')), _mm256_or_si256(r1, r2));
      m |= static_cast<std::uint64_t>(static_cast<std::uint32_t>(_mm256_movemask_epi8(sp))) << (32 * c);
      hi |= static_cast<std::uint64_t>(static_cast<std::uint32_t>(_mm256_movemask_epi8(v))) << (32 * c);
    }
    h = hi;
    return m;
  };
  const auto popcount = [](std::uint64_t x) __attribute__((target("popcnt"))) {
    return static_cast<std::size_t>(_mm_popcnt_u64(x));
  };
  return word_bounds_with(buf, blocks, bounds, high, space_bits, popcount);
}
#endif

using WordBounds = std::size_t (*)(const unsigned char*, std::size_t, std::uint32_t*, std::uint64_t&);
// The AVX2 copy where the CPU has it (chosen once, at the first query).
WordBounds word_bounds_for_this_cpu() {
  static const WordBounds f = [] {
#if defined(ATTUNE_BM25_AVX2)
    if (avx2_allowed()) return &word_bounds_avx2;
#endif
    return &word_bounds_sse2;
  }();
  return f;
}
}  // namespace

void Bm25Okapi::scores_text_into(std::string_view text, std::vector<double>& score) const {
  const std::size_t n = doc_len_.size();
  // Split first (the views' path), for what the one-pass path does not cover: an empty
  // corpus, degenerate parameters, and (below) text that is not all ASCII.
  thread_local std::vector<std::string_view> views;
  const auto by_views = [&] {
    text::bm25_token_views_into(text, views);
    scores_into(views, score, text);
  };
  if (n == 0 || !sparse_exact_ || text.size() >= 0x7FFFFFC0u) return by_views();
  // The text in 64-byte blocks, padded with spaces: at least one space after its last byte
  // (which ends its last word) and 16 readable bytes after any word (the probe's loads).
  const std::size_t blocks = (text.size() + 1 + 63) / 64;
  thread_local std::vector<unsigned char> buffer;
  unsigned char* const buf = at_least(buffer, blocks * 64 + 16);
  if (!text.empty()) std::memcpy(buf, text.data(), text.size());
  std::memset(buf + text.size(), ' ', blocks * 64 + 16 - text.size());
  const char* const p = reinterpret_cast<const char*>(buf);
  // Each word's first byte and the byte after its last, in one list.
  thread_local std::vector<std::uint32_t> bound_buffer;
  std::uint32_t* const bounds = at_least(bound_buffer, blocks * 64 + 8);
  std::uint64_t high = 0;
  const std::size_t found_bounds = word_bounds_for_this_cpu()(buf, blocks, bounds, high);
  const std::size_t words = found_bounds / 2;  // word j: [bounds[2j], bounds[2j + 1]); the padding ends the last
  if (high != 0) return by_views();  // a non-ASCII byte: UTF-8 whitespace is decoded there
  score.assign(n, 0.0);
  // Every word's probe and its bucket prefetched, then every lookup, then the adds, as in
  // scores_into.
  thread_local std::vector<TermTable::Probe> probe_buffer;
  TermTable::Probe* const probes = at_least(probe_buffer, words);
  for (std::size_t j = 0; j < words; ++j) {
    probes[j] = TermTable::probe_padded(p + bounds[2 * j], bounds[2 * j + 1] - bounds[2 * j]);
    term_ids_.prefetch(probes[j]);
  }
  thread_local std::vector<Hit> hit_buffer;
  Hit* const hits = at_least(hit_buffer, words);
  std::size_t found = 0;
  for (std::size_t j = 0; j < words; ++j) {
    const std::size_t len = bounds[2 * j + 1] - bounds[2 * j];
    bool hit = false;
    const TermTable::Slot* s = term_ids_.find_first(len, probes[j], hit, std::string_view(p + bounds[2 * j], len));
    hits[found] = {s->a, s->b};
    found += hit;
  }
  add_hits_for_this_cpu()(score.data(), std::span<const Hit>(hits, found), dense_.data(), n, post_doc_.data(),
                          post_value_.data());
}

std::vector<std::size_t> rank_bm25_order(const std::vector<double>& scores) {
  // LAMP.md: argsort ascending with ties kept in index order, then reversed, so equal
  // scores come out in descending index order.
  std::vector<std::size_t> idx(scores.size());
  std::iota(idx.begin(), idx.end(), std::size_t{0});
  // NaN sorts last in numpy (so first after the reversal); keep that order total.
  std::stable_sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) {
    const double x = scores[a], y = scores[b];
    return x < y || (!std::isnan(x) && std::isnan(y));
  });
  std::reverse(idx.begin(), idx.end());
  return idx;
}

void rank_bm25_top_into(const std::vector<double>& scores, std::size_t k, std::vector<std::size_t>& idx) {
  if (k == 0 || k >= scores.size()) {
    idx = rank_bm25_order(scores);
    return;
  }
  // rank_bm25_order as a strict total order: NaN first (the reversed sort puts numpy's last
  // first), then higher scores, equal scores (+0 and -0 included) in descending index order.
  const auto before = [&](std::size_t a, std::size_t b) {
    const double x = scores[a], y = scores[b];
    const bool nx = std::isnan(x), ny = std::isnan(y);
    if (nx != ny) return nx;
    if (!nx && x != y) return x > y;
    return a > b;
  };
  idx.clear();
  const std::size_t n = scores.size();
  bool nan = false;
  for (const double v : scores) nan |= v != v;  // no early exit: the loop vectorises
#if defined(__SSE2__)
  if (k <= 8 && n <= 64 && !nan) {
    // A small k of a small profile without NaNs (the server's per-user query): k passes, each
    // taking the largest score left (a vector max) at its highest index (the equal scores'
    // bits, the top one), without a branch on the values, which would be a coin toss to the
    // predictor. Equal scores (+0 and -0 among them) come out in descending index order.
    alignas(16) double left[64];
    const double lowest = -std::numeric_limits<double>::infinity();
    const std::size_t span = (n + 7) / 8 * 8;  // the places looked at: n, rounded up to 8
    for (std::size_t i = 0; i < span; ++i) left[i] = i < n ? scores[i] : lowest;
    std::uint64_t taken = n == 64 ? 0 : ~0ull << n;  // places past n count as taken
    idx.resize(k);
    for (std::size_t r = 0; r < k; ++r) {
      __m128d m0 = _mm_set1_pd(lowest), m1 = m0, m2 = m0, m3 = m0;
      for (std::size_t i = 0; i < span; i += 8) {
        m0 = _mm_max_pd(m0, _mm_load_pd(left + i));
        m1 = _mm_max_pd(m1, _mm_load_pd(left + i + 2));
        m2 = _mm_max_pd(m2, _mm_load_pd(left + i + 4));
        m3 = _mm_max_pd(m3, _mm_load_pd(left + i + 6));
      }
      const __m128d m = _mm_max_pd(_mm_max_pd(m0, m1), _mm_max_pd(m2, m3));
      const __m128d top = _mm_set1_pd(std::max(_mm_cvtsd_f64(m), _mm_cvtsd_f64(_mm_unpackhi_pd(m, m))));
      std::uint64_t equal = 0;
      for (std::size_t i = 0; i < span; i += 2)
        equal |= static_cast<std::uint64_t>(_mm_movemask_pd(_mm_cmpeq_pd(_mm_load_pd(left + i), top))) << i;
      equal &= ~taken;  // the largest left is always among them (at worst -inf, where all left are)
      const auto j = static_cast<std::size_t>(63 - __builtin_clzll(equal));
      idx[r] = j;
      taken |= 1ull << j;
      left[j] = lowest;
    }
    return;
  }
#endif
  if (k <= 16 && !nan) {
    // A small k without NaNs (the server's query): one pass in index order keeping the best k
    // by value; a later index wins a tie, so an entry joins at >= the k-th and moves past
    // every entry it is >= (+0 and -0 compare equal, as in the order above). Once k are
    // kept, most entries fall below the k-th, held in a register, at one comparison.
    std::size_t best[17];
    double value[17];
    std::size_t m = 0;
    double kth = -std::numeric_limits<double>::infinity();
    const double* v = scores.data();
    for (std::size_t i = 0; i < n; ++i) {
      const double x = v[i];
      if (m == k && x < kth) continue;
      std::size_t j = m;
      for (; j > 0 && x >= value[j - 1]; --j) {
        best[j] = best[j - 1];
        value[j] = value[j - 1];
      }
      best[j] = i;
      value[j] = x;
      if (m < k) ++m;
      if (m == k) kth = value[k - 1];
    }
    idx.assign(best, best + m);
    return;
  }
  if (k <= 16) {
    // A small k (the server's): one pass, the best k kept in order; most entries lose to the
    // k-th at one comparison.
    idx.reserve(k + 1);
    for (std::size_t i = 0; i < scores.size(); ++i) {
      if (idx.size() == k && !before(i, idx.back())) continue;
      std::size_t j = idx.size();
      idx.push_back(i);
      for (; j > 0 && before(i, idx[j - 1]); --j) idx[j] = idx[j - 1];
      idx[j] = i;
      if (idx.size() > k) idx.pop_back();
    }
    return;
  }
  idx.resize(scores.size());
  std::iota(idx.begin(), idx.end(), std::size_t{0});
  std::partial_sort(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(k), idx.end(), before);
  idx.resize(k);
}

const char* bm25_query_isa() { return avx2_allowed() ? "avx2" : "baseline"; }

std::vector<std::size_t> rank_bm25_top(const std::vector<double>& scores, std::size_t k) {
  std::vector<std::size_t> idx;
  rank_bm25_top_into(scores, k, idx);
  return idx;
}


// ---------------------------------------------------------------- term table

namespace {
// The term table's probe: the first 16 bytes as two words (zero padded, read without a
// variable-length copy a load would wait on: overlapping 4-byte reads, or the first, middle
// and last byte), the rest 8 bytes at a time (the last 8 overlapping), mixed with the length
// by murmur's multipliers and finaliser; several times cheaper than std::hash on the 3-8
// byte words a query is made of. Nothing stores it (the statistics' bytes keep the terms,
// and the table is rebuilt from them).
inline std::uint64_t load8(const char* p) {
  std::uint64_t w;
  std::memcpy(&w, p, 8);
  return w;
}

// Up to 8 bytes at p, zero padded (n may exceed 8: the first 8).
inline std::uint64_t head_of(const char* p, std::size_t n) {
  if (n >= 8) return load8(p);
  if (n >= 4) {
    std::uint32_t a, b;
    std::memcpy(&a, p, 4);
    std::memcpy(&b, p + n - 4, 4);
    return a | (static_cast<std::uint64_t>(b) << (8 * (n - 4)));
  }
  if (n == 0) return 0;
  const auto byte = [&](std::size_t i) { return static_cast<std::uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i); };
  return byte(0) | byte(n / 2) | byte(n - 1);
}

// The low min(n, 8) bytes of a word kept, the rest cleared (n may be 0 or exceed 8).
inline std::uint64_t keep_bytes(std::size_t n) { return n >= 8 ? ~0ull : (1ull << (8 * n)) - 1; }
}  // namespace

// The hash of a term whose first 16 bytes are known: each word and the length times an odd
// constant (a multiplicative hash: the product's high bits depend on every bit of the word,
// and the table takes its bucket from the high bits), the bytes past 16 folded in 8 at a time
// (the last 8 overlapping). Three independent multiplies for the short words a query is
// made of, no finaliser.
[[gnu::always_inline]] inline std::uint64_t Bm25Okapi::TermTable::finish(std::uint64_t head, std::uint64_t head2, const char* p,
                                                                         std::size_t n) {
  std::uint64_t h = (head * 0x9E3779B97F4A7C15ull) ^ (head2 * 0xC2B2AE3D27D4EB4Full) ^ (n * 0xFF51AFD7ED558CCDull);
  if (n > 16) [[unlikely]] {
    std::size_t i = 16;
    for (; i + 8 <= n; i += 8) h = (h ^ (h >> 29) ^ load8(p + i)) * 0xC4CEB9FE1A85EC53ull;
    if (i < n) h = (h ^ (h >> 29) ^ load8(p + n - 8)) * 0xFF51AFD7ED558CCDull;  // the last 8, overlapping
  }
  return h;
}

[[gnu::always_inline]] inline Bm25Okapi::TermTable::Probe Bm25Okapi::TermTable::probe(std::string_view t) {
  const char* p = t.data();
  const std::size_t n = t.size();
  const std::uint64_t head = head_of(p, n);
  const std::uint64_t head2 = n > 8 ? head_of(p + 8, n - 8) : 0;
  return {finish(head, head2, p, n), head, head2};
}

[[gnu::always_inline]] inline Bm25Okapi::TermTable::Probe Bm25Okapi::TermTable::probe_padded(const char* p, std::size_t n) {
  // Two loads and two masks: the bytes past a short term are read and cleared, not branched on.
  const std::uint64_t head = load8(p) & keep_bytes(n);
  const std::uint64_t head2 = load8(p + 8) & keep_bytes(n > 8 ? n - 8 : 0);
  return {finish(head, head2, p, n), head, head2};
}

[[gnu::always_inline]] inline void Bm25Okapi::TermTable::prefetch(const Probe& p) const {
  if (!buckets_.empty()) __builtin_prefetch(buckets_.data() + home(p.hash));
}

std::uint32_t Bm25Okapi::TermTable::find(std::string_view term) const {
  const Slot* s = find(term, probe(term));
  return s ? s->id1() - 1 : kNone;
}

// Whether s holds the term: its tag (the length within) and first 16 bytes, and past 16
// bytes the rest of its bytes and its exact length.
[[gnu::always_inline]] inline bool Bm25Okapi::TermTable::matches(const Slot& s, std::uint32_t tag, const Probe& p,
                                                                std::string_view term) const {
  if (s.tag != tag || s.head != p.head || s.head2 != p.head2) return false;
  if (term.size() <= 16) return true;
  const std::uint32_t id = s.id1() - 1, b = off_[id], e = off_[id + 1];
  return e - b == term.size() && std::memcmp(bytes_.data() + b + 16, term.data() + 16, term.size() - 16) == 0;
}

[[gnu::always_inline]] inline const Bm25Okapi::TermTable::Slot* Bm25Okapi::TermTable::find(std::string_view term,
                                                                                          const Probe& p) const {
  if (buckets_.empty()) return nullptr;
  const std::uint32_t tag = tag_of(p, term.size());
  for (std::uint64_t i = home(p.hash);; i = (i + 1) & mask_) {
    const Bucket& k = buckets_[i];
    if (matches(k.s[0], tag, p, term)) return &k.s[0];
    if (matches(k.s[1], tag, p, term)) return &k.s[1];
    if (!k.overflowed()) return nullptr;
  }
}

void Bm25Okapi::TermTable::reserve(std::size_t n) {
  off_.reserve(n + 1);
  while (buckets_.size() < n) grow();
}

[[gnu::always_inline]] inline const Bm25Okapi::TermTable::Slot* Bm25Okapi::TermTable::find_first(std::size_t length,
                                                                                                const Probe& p, bool& hit,
                                                                                                std::string_view term) const {
  static const Slot kEmpty{};
  if (buckets_.empty()) [[unlikely]] {
    hit = false;
    return &kEmpty;
  }
  const Bucket& k = buckets_[home(p.hash)];
  const std::uint32_t tag = tag_of(p, length);
  const bool m0 = (k.s[0].tag == tag) & (k.s[0].head == p.head) & (k.s[0].head2 == p.head2);
  const bool m1 = (k.s[1].tag == tag) & (k.s[1].head == p.head) & (k.s[1].head2 == p.head2);
  // At most one slot holds a given term, so m0 and m1 are never both set.
  if ((length <= 16) & (m0 | m1 | !k.overflowed())) [[likely]] {
    hit = m0 | m1;
    return &k.s[m1];
  }
  const Slot* f = find(term, p);
  hit = f != nullptr;
  return f ? f : &kEmpty;
}

void Bm25Okapi::TermTable::place(Slot s, std::uint64_t hash) {
  s.meta &= 0x7FFFFFFFu;
  for (std::uint64_t i = home(hash);; i = (i + 1) & mask_) {
    Bucket& k = buckets_[i];
    for (Slot& slot : k.s)
      if (slot.tag == 0) {
        const std::uint32_t mark = slot.meta & 0x80000000u;  // the bucket's mark stays where it is
        slot = s;
        slot.meta |= mark;
        return;
      }
    k.s[0].meta |= 0x80000000u;  // full: the term goes on, and this bucket says so
  }
}

void Bm25Okapi::TermTable::grow() {
  std::vector<Bucket> old = std::move(buckets_);
  buckets_.assign(old.empty() ? 8 : old.size() * 2, Bucket{});
  mask_ = buckets_.size() - 1;
  shift_ = static_cast<unsigned>(64 - std::countr_zero(buckets_.size()));
  for (const Bucket& k : old)
    for (const Slot& s : k.s)
      if (s.tag != 0) place(s, probe(term(s.id1() - 1)).hash);
}

std::uint32_t Bm25Okapi::TermTable::insert(std::string_view term, bool& added) {
  added = false;
  const Probe p = probe(term);
  if (const Slot* s = find(term, p)) return s->id1() - 1;
  if (size() + 1 > buckets_.size()) grow();  // at most half the slots full
  const auto id = static_cast<std::uint32_t>(size());
  if (bytes_.size() + term.size() >= kNone || id + 1 >= 0x7FFFFFFFu)
    throw Error("BM25 statistics: more than 4 GiB of distinct terms, or 2^31 of them, in one index");
  bytes_.append(term);
  off_.push_back(static_cast<std::uint32_t>(bytes_.size()));
  place(Slot{p.head, p.head2, tag_of(p, term.size()), id + 1, 0, 0}, p.hash);
  added = true;
  return id;
}

// ---------------------------------------------------------------- bytes

namespace {

// magic "ATBM25v3" | f64 k1, b, epsilon, avgdl, average_idf | then arrays, each a varint
// count and its items' bytes as this (little-endian) machine holds them: u64 doc lengths,
// u32 term lengths, the terms' bytes, f64 idf, u32 post_off, post_doc, post_tf.
constexpr char kMagic[8] = {'A', 'T', 'B', 'M', '2', '5', 'v', '3'};

struct Bm25Blob {
  static constexpr const char* kWhat = "BM25 statistics: ";
};
using Writer = detail::ByteWriter;
using Reader = detail::ByteReader<Bm25Blob>;

template <class T>
void put_array(Writer& w, const T* data, std::size_t n) {
  w.varint(n);
  w.raw(data, n * sizeof(T));
}

template <class T>
std::vector<T> get_array(Reader& r, const char* what) {
  const std::size_t n = r.count(what, sizeof(T));
  const auto b = r.bytes(n * sizeof(T), what);
  std::vector<T> v(n);
  if (n) std::memcpy(v.data(), b.data(), b.size());
  return v;
}

}  // namespace

std::string Bm25Okapi::serialize() const {
  Writer w;
  w.raw(kMagic, sizeof kMagic);
  for (double v : {p_.k1, p_.b, p_.epsilon, avgdl_, average_idf_}) w.f64(v);
  const std::vector<std::uint64_t> len(doc_len_.begin(), doc_len_.end());
  put_array(w, len.data(), len.size());
  // Terms in id order: their lengths, then all their bytes.
  std::vector<std::uint32_t> term_len(term_ids_.size());
  std::size_t total = 0;
  for (std::uint32_t id = 0; id < term_len.size(); ++id) total += term_len[id] = static_cast<std::uint32_t>(term_ids_.term(id).size());
  put_array(w, term_len.data(), term_len.size());
  w.varint(total);
  for (std::uint32_t id = 0; id < term_len.size(); ++id) w.raw(term_ids_.term(id).data(), term_len[id]);
  // norm_, post_value_ and the dense rows are not written: deserialize() derives them as the constructor
  // does, the same operations on the same values, so the same bits.
  put_array(w, idf_.data(), idf_.size());
  for (const auto* v : {&post_off_, &post_doc_, &post_tf_}) put_array(w, v->data(), v->size());
  return std::move(w.str());
}

Bm25Okapi Bm25Okapi::deserialize(std::string_view bytes) {
  Reader r(bytes);
  if (r.bytes(sizeof kMagic, "magic") != std::string_view(kMagic, sizeof kMagic))
    Reader::fail("not attune's BM25 layout (or another version of it)");
  Bm25Okapi m;
  m.p_.k1 = r.f64("k1"), m.p_.b = r.f64("b"), m.p_.epsilon = r.f64("epsilon");
  m.avgdl_ = r.f64("avgdl"), m.average_idf_ = r.f64("average idf");
  const auto len = get_array<std::uint64_t>(r, "document lengths");
  m.doc_len_.assign(len.begin(), len.end());
  const auto term_len = get_array<std::uint32_t>(r, "term lengths");
  const std::string_view term_bytes = r.bytes(r.count("term bytes", 1), "term bytes");
  std::size_t used = 0;
  m.term_ids_.reserve(term_len.size());
  for (const std::uint32_t n : term_len) {
    if (n > term_bytes.size() - used) Reader::fail("the terms' lengths exceed their bytes");
    bool added = false;
    m.term_ids_.insert(term_bytes.substr(used, n), added);
    if (!added) Reader::fail("a repeated term");
    used += n;
  }
  if (used != term_bytes.size()) Reader::fail("the terms do not add up (stray bytes)");
  m.idf_ = get_array<double>(r, "idf");
  m.post_off_ = get_array<std::uint32_t>(r, "posting offsets");
  m.post_doc_ = get_array<std::uint32_t>(r, "posting documents");
  m.post_tf_ = get_array<std::uint32_t>(r, "posting frequencies");
  if (!r.done()) Reader::fail("bytes after the end");
  const std::size_t T = term_len.size(), N = m.doc_len_.size(), P = m.post_doc_.size();
  // An empty corpus keeps no offsets at all (the constructor returns before them).
  const bool offsets_ok = (N == 0 && T == 0 && P == 0 && m.post_off_.empty()) || (m.post_off_.size() == T + 1 && m.post_off_.back() == P);
  if (m.idf_.size() != T || !offsets_ok || m.post_tf_.size() != P)
    Reader::fail("inconsistent sizes (" + std::to_string(T) + " terms, " + std::to_string(N) + " documents, " + std::to_string(P) +
                 " postings)");
  for (std::size_t t = 0; t + 1 < m.post_off_.size(); ++t)
    if (m.post_off_[t] > m.post_off_[t + 1]) Reader::fail("posting offsets go backwards at term " + std::to_string(t));
  for (auto d : m.post_doc_)
    if (d >= N) Reader::fail("a posting names document " + std::to_string(d) + " of " + std::to_string(N));
  m.derive_factors();
  return m;
}

}  // namespace attune::index
