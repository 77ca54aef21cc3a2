// Corpus BM25 inverted index: BM25Okapi's formula with corpus statistics, scored term at
// a time into a dense per-thread accumulator. Scores equal Bm25Okapi::scores over the same
// analyzer tokens bit for bit: idfs are summed into average_idf in first-seen term order,
// each query token (duplicates included) adds the same expression in the same order, and
// documents without the token would only add +-0.0, which changes no sum.
#include "attune/index/corpus_index.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <unordered_map>

#include "attune/core/error.h"
#include "attune/text/lexical.h"
#include "byte_io.h"

namespace attune::index {
namespace {

// ---- binary format -------------------------------------------------------------------
// magic "ATBM25IX" | u32 version | f64 k1, b, epsilon | varint N | N x varint doc_len |
// varint T | T x (varint len, bytes, f64 idf, varint count, count x (varint doc delta,
// varint tf)) | u64 FNV-1a checksum of everything before it. Integers little-endian,
// varints LEB128; doc deltas are from the previous doc + 1 (so the first is the doc id).
constexpr char kMagic[8] = {'A', 'T', 'B', 'M', '2', '5', 'I', 'X'};
constexpr std::uint32_t kVersion = 1;

// The byte helpers (byte_io.h), with this index's message.
struct CorpusBlob {
  static constexpr const char* kWhat = "corpus index: bad serialized blob: ";
};
using detail::fnv1a;
using Writer = detail::ByteWriter;
using Reader = detail::ByteReader<CorpusBlob>;

// Per-thread scratch for search(): a dense accumulator and "touched" flags of size N,
// reset after each query by walking the touched list only.
struct Scratch {
  std::vector<double> acc;
  std::vector<std::uint8_t> seen;
  std::vector<std::uint32_t> touched;
};

bool better(const Hit& a, const Hit& b) {
  if (a.score != b.score) return a.score > b.score;
  return a.doc < b.doc;
}

}  // namespace

void CorpusIndex::finish_load() {
  // Identical to Bm25Okapi::scores: k1 * ((1 - b) + (b * dl) / avgdl).
  std::uint64_t total = 0;
  for (auto len : doc_len_) total += len;
  avgdl_ = doc_len_.empty() ? 0.0
                            : static_cast<double>(total) / static_cast<double>(doc_len_.size());
  norm_.resize(doc_len_.size());
  for (std::size_t d = 0; d < doc_len_.size(); ++d) {
    norm_[d] = p_.k1 * ((1 - p_.b) + p_.b * static_cast<double>(doc_len_[d]) / avgdl_);
  }
  // Each term's largest contribution, by the very expression search() adds.
  for (auto& pl : postings_) {
    pl.max_score = 0;
    for (const auto& [doc, tf_count] : pl.list) pl.max_score = std::max(pl.max_score, contribution(pl.idf, tf_count, doc));
  }
}

CorpusIndex CorpusIndex::build(const std::vector<std::string>& texts, Bm25Params p) {
  if (texts.size() > UINT32_MAX) throw Error("corpus index: more than 2^32 documents");
  CorpusIndex ix;
  ix.p_ = p;
  ix.doc_len_.reserve(texts.size());
  // Term ids are given in first-seen order (doc by doc, token by token), which is the
  // insertion order of rank_bm25's `nd` dict.
  std::unordered_map<std::string, std::uint32_t> ids;
  std::vector<std::string> names;
  std::vector<Postings> lists;
  std::vector<std::uint32_t> last_doc;  // per term: doc + 1 of its last posting
  for (std::size_t d = 0; d < texts.size(); ++d) {
    const auto doc = static_cast<std::uint32_t>(d);
    auto tokens = text::analyzer_tokens(texts[d]);
    if (tokens.size() > UINT32_MAX) throw Error("corpus index: document too long");
    ix.doc_len_.push_back(static_cast<std::uint32_t>(tokens.size()));
    for (auto& tok : tokens) {
      auto [it, inserted] = ids.try_emplace(std::move(tok), static_cast<std::uint32_t>(names.size()));
      if (inserted) {
        names.push_back(it->first);
        lists.emplace_back();
        last_doc.push_back(0);
      }
      const std::uint32_t t = it->second;
      if (last_doc[t] != doc + 1) {
        lists[t].list.emplace_back(doc, 1);
        last_doc[t] = doc + 1;
      } else {
        ++lists[t].list.back().second;
      }
    }
  }
  // idf and the epsilon floor, exactly as BM25Okapi._calc_idf (sum in first-seen order).
  const double n_docs = static_cast<double>(texts.size());
  double idf_sum = 0;
  for (auto& pl : lists) {
    const double freq = static_cast<double>(pl.list.size());
    pl.idf = std::log(n_docs - freq + 0.5) - std::log(freq + 0.5);
    idf_sum += pl.idf;
  }
  const double average_idf = lists.empty() ? 0.0 : idf_sum / static_cast<double>(lists.size());
  const double eps = p.epsilon * average_idf;
  for (auto& pl : lists) {
    if (pl.idf < 0) pl.idf = eps;
  }
  // Sort the vocabulary for binary search and a canonical serialized form.
  std::vector<std::uint32_t> perm(names.size());
  std::iota(perm.begin(), perm.end(), 0u);
  std::sort(perm.begin(), perm.end(),
            [&](std::uint32_t a, std::uint32_t b) { return names[a] < names[b]; });
  ix.terms_.reserve(perm.size());
  ix.postings_.reserve(perm.size());
  for (auto t : perm) {
    ix.terms_.push_back(std::move(names[t]));
    ix.postings_.push_back(std::move(lists[t]));
  }
  ix.finish_load();
  return ix;
}

const CorpusIndex::Postings* CorpusIndex::find(const std::string& term) const {
  auto it = std::lower_bound(terms_.begin(), terms_.end(), term);
  if (it == terms_.end() || *it != term) return nullptr;
  return &postings_[static_cast<std::size_t>(it - terms_.begin())];
}

std::vector<Hit> CorpusIndex::search(std::string_view query, std::size_t k, Pruning prune, SearchStats* stats) const {
  if (stats) *stats = {};
  if (doc_len_.empty()) return {};
  std::vector<const Postings*> terms;  // in query order, duplicates included; unseen terms add 0 everywhere
  bool negative = false;
  for (const auto& tok : text::analyzer_tokens(query))
    if (const Postings* pl = find(tok)) {
      terms.push_back(pl);
      negative = negative || pl->idf < 0;
      if (stats) stats->postings_total += pl->list.size();
    }
  if (prune != Pruning::none && k > 0 && !negative && terms.size() > 1)
    return prune == Pruning::maxscore ? search_maxscore(terms, k, stats) : search_taat(terms, k, stats);
  return search_exhaustive(terms, k, stats);
}

std::vector<Hit> CorpusIndex::search_exhaustive(const std::vector<const Postings*>& terms, std::size_t k,
                                                SearchStats* stats) const {
  const std::size_t n = doc_len_.size();
  std::vector<Hit> hits;
  thread_local Scratch s;
  if (s.acc.size() < n) {
    s.acc.assign(n, 0.0);
    s.seen.assign(n, 0);
  }
  s.touched.clear();
  for (const Postings* pl : terms) {
    for (const auto& [doc, tf_count] : pl->list) {
      s.acc[doc] += contribution(pl->idf, tf_count, doc);
      if (!s.seen[doc]) {
        s.seen[doc] = 1;
        s.touched.push_back(doc);
      }
    }
    if (stats) stats->postings_scored += pl->list.size();
  }
  hits.reserve(s.touched.size());
  for (auto doc : s.touched) {
    hits.push_back({doc, s.acc[doc]});
    s.acc[doc] = 0.0;
    s.seen[doc] = 0;
  }
  if (k == 0 || k >= hits.size()) {
    std::sort(hits.begin(), hits.end(), better);
  } else {
    std::partial_sort(hits.begin(), hits.begin() + static_cast<std::ptrdiff_t>(k), hits.end(),
                      better);
    hits.resize(k);
  }
  return hits;
}

std::vector<Hit> CorpusIndex::search_maxscore(const std::vector<const Postings*>& terms, std::size_t k,
                                              SearchStats* stats) const {
  using Posting = std::pair<std::uint32_t, std::uint32_t>;
  const std::size_t m = terms.size();
  constexpr double kMargin = 1 + 1e-9;  // bounds are sums in another order: rounding must never drop a document
  // The query's terms by ascending bound; bound[j] = the sum of the first j + 1 bounds.
  std::vector<std::size_t> order(m);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return terms[a]->max_score < terms[b]->max_score; });
  std::vector<double> bound(m);
  for (std::size_t j = 0; j < m; ++j) bound[j] = (j ? bound[j - 1] : 0.0) + terms[order[j]]->max_score;
  std::vector<const Posting*> at(m), end(m);  // cursors, by position in `order`
  for (std::size_t j = 0; j < m; ++j) {
    at[j] = terms[order[j]]->list.data();
    end[j] = at[j] + terms[order[j]]->list.size();
  }
  std::vector<double> part(m);   // the current document's contribution of each query token (by query position)
  std::vector<char> has(m);
  std::vector<Hit> heap;          // the best k so far; its front is the worst of them (by `better`)
  heap.reserve(k + 1);
  double theta = -std::numeric_limits<double>::infinity();  // the k-th score, once there are k
  std::size_t first = 0;          // order[first..] are essential: a document must hold one of them to enter
  std::size_t scored = 0;
  double partial = 0;
  // Takes the contribution of cursor j's posting, which is the current document's.
  const auto take = [&](std::size_t j, std::uint32_t doc) {
    const std::size_t q = order[j];
    part[q] = contribution(terms[q]->idf, at[j]->second, doc);
    has[q] = 1;
    partial += part[q];
    ++scored;
  };
  for (;;) {
    while (first < m && bound[first] * kMargin <= theta) ++first;
    if (first == m) break;
    std::uint32_t doc = std::numeric_limits<std::uint32_t>::max();
    for (std::size_t j = first; j < m; ++j)
      if (at[j] != end[j]) doc = std::min(doc, at[j]->first);
    if (doc == std::numeric_limits<std::uint32_t>::max()) break;
    std::fill(has.begin(), has.end(), 0);
    partial = 0;
    for (std::size_t j = first; j < m; ++j)
      if (at[j] != end[j] && at[j]->first == doc) {
        take(j, doc);
        ++at[j];
      }
    // The non-essential terms, the largest bound first, each probed only while the document can still enter.
    bool dropped = false;
    for (std::size_t j = first; j-- > 0;) {
      if ((partial + bound[j]) * kMargin <= theta) {
        dropped = true;
        break;
      }
      at[j] = std::lower_bound(at[j], end[j], doc, [](const Posting& p, std::uint32_t d) { return p.first < d; });
      if (at[j] != end[j] && at[j]->first == doc) take(j, doc);
    }
    if (dropped) continue;
    // The exact score, summed as search_exhaustive sums it: from 0.0, in query-token order.
    double score = 0.0;
    for (std::size_t q = 0; q < m; ++q)
      if (has[q]) score += part[q];
    const Hit h{doc, score};
    if (heap.size() < k) {
      heap.push_back(h);
      std::push_heap(heap.begin(), heap.end(), better);
    } else if (better(h, heap.front())) {
      std::pop_heap(heap.begin(), heap.end(), better);
      heap.back() = h;
      std::push_heap(heap.begin(), heap.end(), better);
    }
    if (heap.size() == k) theta = heap.front().score;
  }
  if (stats) {
    stats->postings_scored = scored;
    stats->pruned = true;
  }
  std::sort(heap.begin(), heap.end(), better);
  return heap;
}

// Term at a time with a threshold (the "continue" strategy of Moffat & Zobel 1996, made
// exact). The query's tokens go by descending bound. Phase 1 scores every posting of the
// leading tokens into the accumulator until the k-th best partial score (a lower bound of
// the final k-th score: contributions are never negative) exceeds what all the remaining
// tokens together could add: from then on no document outside the accumulator can enter.
// Phase 2 takes the remaining tokens (the common words with the long lists) only for the
// accumulated documents whose bound still reaches that threshold, probing each list by
// galloping instead of reading it, and drops those that fall short as it goes. Phase 3
// scores the survivors exactly, in query-token order from 0.0 as search_exhaustive sums
// them, and keeps the best k by `better`. A document is dropped only when its bound, with a
// relative margin of 1e-9 for rounding, is below the threshold; so the true top k (ties to
// the lower position included) always survive.
std::vector<Hit> CorpusIndex::search_taat(const std::vector<const Postings*>& terms, std::size_t k,
                                          SearchStats* stats) const {
  using Posting = std::pair<std::uint32_t, std::uint32_t>;
  constexpr double kMargin = 1 + 1e-9;
  const std::size_t m = terms.size();
  const std::size_t n = doc_len_.size();
  std::vector<std::size_t> order(m);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return terms[a]->max_score > terms[b]->max_score; });
  std::vector<double> rest(m + 1, 0.0);  // rest[j]: the bounds of order[j..] summed
  for (std::size_t j = m; j-- > 0;) rest[j] = rest[j + 1] + terms[order[j]]->max_score;
  thread_local Scratch s;
  if (s.acc.size() < n) {
    s.acc.assign(n, 0.0);
    s.seen.assign(n, 0);
  }
  s.touched.clear();
  std::size_t scored = 0;
  std::vector<double> kth;  // scratch for the k-th partial score
  double theta = -std::numeric_limits<double>::infinity();
  std::size_t j = 0;
  for (; j < m; ++j) {
    const Postings* pl = terms[order[j]];
    for (const auto& [doc, tf_count] : pl->list) {
      s.acc[doc] += contribution(pl->idf, tf_count, doc);
      if (!s.seen[doc]) {
        s.seen[doc] = 1;
        s.touched.push_back(doc);
      }
    }
    scored += pl->list.size();
    if (j + 1 == m || s.touched.size() < k) continue;
    kth.clear();
    for (auto d : s.touched) kth.push_back(s.acc[d]);
    std::nth_element(kth.begin(), kth.begin() + static_cast<std::ptrdiff_t>(k - 1), kth.end(), std::greater<>());
    theta = kth[k - 1] / kMargin;  // no final k-th score is lower
    if (rest[j + 1] * kMargin < theta) {
      ++j;
      break;  // a document the accumulator lacks cannot reach the top k
    }
  }
  // The candidates: accumulated documents that can still reach theta, by position.
  std::vector<std::uint32_t> cand;
  if (j < m) {
    for (auto d : s.touched)
      if ((s.acc[d] + rest[j]) * kMargin >= theta) cand.push_back(d);
    std::sort(cand.begin(), cand.end());
    for (; j < m && !cand.empty(); ++j) {
      const Postings* pl = terms[order[j]];
      const Posting* at = pl->list.data();
      const Posting* end = at + pl->list.size();
      std::size_t keep = 0;
      for (auto d : cand) {
        // Gallop to d, then binary search the last step.
        std::size_t step = 1;
        const Posting* lo = at;
        while (lo + step < end && (lo + step)->first < d) {
          lo += step;
          step *= 2;
        }
        at = std::lower_bound(lo, std::min(lo + step + 1, end), d, [](const Posting& p, std::uint32_t x) { return p.first < x; });
        if (at != end && at->first == d) {
          s.acc[d] += contribution(pl->idf, at->second, d);
          ++scored;
        }
        if ((s.acc[d] + rest[j + 1]) * kMargin >= theta) cand[keep++] = d;
      }
      cand.resize(keep);
    }
  } else {
    cand.assign(s.touched.begin(), s.touched.end());
  }
  // Every survivor's accumulator now holds its whole score (summed in another order): only
  // those near the k best need the exact sum.
  if (cand.size() > k) {
    kth.clear();
    for (auto d : cand) kth.push_back(s.acc[d]);
    std::nth_element(kth.begin(), kth.begin() + static_cast<std::ptrdiff_t>(k - 1), kth.end(), std::greater<>());
    const double last = kth[k - 1] / kMargin;
    std::size_t keep = 0;
    for (auto d : cand)
      if (s.acc[d] * kMargin >= last) cand[keep++] = d;
    cand.resize(keep);
  }
  for (auto d : s.touched) {
    s.acc[d] = 0.0;
    s.seen[d] = 0;
  }
  // Exact scores of the survivors, in query-token order from 0.0.
  std::vector<Hit> hits;
  hits.reserve(cand.size());
  for (auto d : cand) {
    double score = 0.0;
    for (const Postings* pl : terms) {
      const auto it = std::lower_bound(pl->list.begin(), pl->list.end(), d,
                                       [](const Posting& p, std::uint32_t x) { return p.first < x; });
      if (it != pl->list.end() && it->first == d) score += contribution(pl->idf, it->second, d);
    }
    hits.push_back({d, score});
  }
  if (stats) {
    stats->postings_scored = scored;
    stats->pruned = true;
  }
  if (k >= hits.size()) {
    std::sort(hits.begin(), hits.end(), better);
  } else {
    std::partial_sort(hits.begin(), hits.begin() + static_cast<std::ptrdiff_t>(k), hits.end(), better);
    hits.resize(k);
  }
  return hits;
}

std::string CorpusIndex::serialize() const {
  Writer w;
  w.raw(kMagic, sizeof kMagic);
  w.u32(kVersion);
  w.f64(p_.k1);
  w.f64(p_.b);
  w.f64(p_.epsilon);
  w.varint(doc_len_.size());
  for (auto len : doc_len_) w.varint(len);
  w.varint(terms_.size());
  for (std::size_t t = 0; t < terms_.size(); ++t) {
    w.varint(terms_[t].size());
    w.raw(terms_[t].data(), terms_[t].size());
    w.f64(postings_[t].idf);
    w.varint(postings_[t].list.size());
    std::uint64_t next = 0;
    for (const auto& [doc, tf] : postings_[t].list) {
      w.varint(doc - next);
      w.varint(tf);
      next = std::uint64_t(doc) + 1;
    }
  }
  w.u64(fnv1a(w.str()));
  return std::move(w.str());
}

CorpusIndex CorpusIndex::deserialize(std::string_view blob) {
  if (blob.size() < sizeof kMagic + 4 + 8) Reader::fail("truncated (too short for a header)");
  if (std::memcmp(blob.data(), kMagic, sizeof kMagic) != 0) Reader::fail("wrong magic");
  Reader r(blob.substr(0, blob.size() - 8));
  r.bytes(sizeof kMagic, "magic");
  const std::uint32_t version = r.u32("version");
  if (version != kVersion) {
    Reader::fail("unsupported version " + std::to_string(version) + " (this build reads " +
                 std::to_string(kVersion) + ")");
  }
  Reader tail(blob.substr(blob.size() - 8));
  if (tail.u64("checksum") != fnv1a(blob.substr(0, blob.size() - 8))) {
    Reader::fail("checksum mismatch (truncated or corrupt)");
  }
  CorpusIndex ix;
  ix.p_.k1 = r.f64("k1");
  ix.p_.b = r.f64("b");
  ix.p_.epsilon = r.f64("epsilon");
  const std::size_t n = r.count("document count", 1);
  if (n > UINT32_MAX) Reader::fail("too many documents");
  ix.doc_len_.resize(n);
  for (auto& len : ix.doc_len_) {
    const auto v = r.varint("document length");
    if (v > UINT32_MAX) Reader::fail("document length out of range");
    len = static_cast<std::uint32_t>(v);
  }
  std::vector<std::uint64_t> tf_sum(n, 0);
  const std::size_t terms = r.count("term count", 11);
  ix.terms_.reserve(terms);
  ix.postings_.reserve(terms);
  for (std::size_t t = 0; t < terms; ++t) {
    const std::size_t len = r.count("term length", 1);
    std::string term(r.bytes(len, "term"));
    if (term.empty() || (!ix.terms_.empty() && !(ix.terms_.back() < term))) {
      Reader::fail("terms not strictly sorted at term " + std::to_string(t));
    }
    Postings pl;
    pl.idf = r.f64("idf");
    const std::size_t count = r.count("posting count", 2);
    if (count == 0 || count > n) Reader::fail("bad posting count for term \"" + term + "\"");
    pl.list.reserve(count);
    std::uint64_t next = 0;
    for (std::size_t i = 0; i < count; ++i) {
      const std::uint64_t doc = next + r.varint("posting document");
      const std::uint64_t tf = r.varint("posting frequency");
      if (doc >= n || tf == 0 || tf > UINT32_MAX) {
        Reader::fail("bad posting for term \"" + term + "\"");
      }
      tf_sum[doc] += tf;
      pl.list.emplace_back(static_cast<std::uint32_t>(doc), static_cast<std::uint32_t>(tf));
      next = doc + 1;
    }
    ix.terms_.push_back(std::move(term));
    ix.postings_.push_back(std::move(pl));
  }
  if (!r.done()) Reader::fail("trailing bytes after the last term");
  for (std::size_t d = 0; d < n; ++d) {
    if (tf_sum[d] != ix.doc_len_[d]) {
      Reader::fail("document " + std::to_string(d) + " length disagrees with its postings");
    }
  }
  ix.finish_load();
  return ix;
}

}  // namespace attune::index
