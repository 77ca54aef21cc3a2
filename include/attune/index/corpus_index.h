#pragma once
// A BM25 inverted index over a shared corpus: BM25Okapi's formula (k1, b, epsilon floor
// for negative idf) with corpus-level statistics, over text::analyzer_tokens (lowercased,
// split on non-alphanumerics). Built once, serialized into the store, loaded per run.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "attune/core/types.h"
#include "attune/index/bm25.h"

namespace attune::index {

struct Hit {
  std::uint32_t doc;  // position in the corpus the index was built from
  double score;
};

// How search() may skip postings; every way gives the exhaustive top k, bit for bit.
enum class Pruning {
  none,      // score every posting of the query's terms
  maxscore,  // document at a time, MaxScore
  taat,      // term at a time with a threshold, then galloping probes (search_taat)
};

// What one search did: postings scored, and postings of the query's terms in all.
struct SearchStats {
  std::size_t postings_scored = 0, postings_total = 0;
  bool pruned = false;  // a pruning strategy ran (see search)
};

class CorpusIndex {
 public:
  CorpusIndex() = default;
  // texts[i] is document i's text (what the task's document_text gives).
  static CorpusIndex build(const std::vector<std::string>& texts, Bm25Params p = {});
  // The k best documents for `query` (analyzed the same way), by descending score, ties
  // by ascending document position; documents with no query term never appear.
  // k = 0 returns every matching document. Thread-safe (per-thread scratch).
  //
  // With prune and k > 0, documents are visited in order with MaxScore
  // (Turtle & Flood 1995): the query's terms sorted by their largest single contribution,
  // those whose bounds together cannot lift a document above the k-th score so far are
  // only probed for documents the others found, and a document whose bound falls short is
  // dropped unscored. The answer is the exhaustive one, bit for bit: each kept document's
  // score is summed in query-token order from 0.0, as the exhaustive path sums it, and a
  // document is dropped only when even its bound (with a relative margin of 1e-9 for
  // rounding) cannot beat the k-th score, ties going to the lower position, which every
  // document already kept has. A term with a negative idf (BM25Okapi's epsilon floor in a
  // tiny corpus) has no useful bound: such queries are scored exhaustively.
  // Not the default: on the Debian corpus with qa dev queries (bench_bm25 CorpusBm25Search,
  // bench/RESULTS.md) it is 1.3x faster for k = 10 but 0.7x for k = 100, what serve asks for.
  std::vector<Hit> search(std::string_view query, std::size_t k, Pruning prune = Pruning::none,
                          SearchStats* stats = nullptr) const;
  std::size_t size() const { return doc_len_.size(); }

  // Compact binary form (versioned); deserialize throws attune::Error on a bad blob.
  std::string serialize() const;
  static CorpusIndex deserialize(std::string_view blob);

 private:
  Bm25Params p_;
  std::vector<std::uint32_t> doc_len_;
  double avgdl_ = 0;
  // term -> (idf, postings [(doc, tf)])
  struct Postings {
    double idf = 0;
    std::vector<std::pair<std::uint32_t, std::uint32_t>> list;
    double max_score = 0;  // the largest single contribution of the term (finish_load; not serialized)
  };
  std::vector<std::string> terms_;        // sorted
  std::vector<Postings> postings_;        // parallel to terms_
  std::vector<double> norm_;              // per doc: k1 * ((1 - b) + b * dl / avgdl)
  const Postings* find(const std::string& term) const;
  void finish_load();                     // avgdl_, norm_ and each max_score from doc_len_, p_ and postings_
  // A term's contribution to a document's score, as Bm25Okapi::scores computes it; every
  // path adds exactly this expression, which keeps their scores bit-identical.
  double contribution(double idf, std::uint32_t tf_count, std::uint32_t doc) const {
    const double tf = static_cast<double>(tf_count);
    return idf * (tf * (p_.k1 + 1) / (tf + norm_[doc]));
  }
  std::vector<Hit> search_exhaustive(const std::vector<const Postings*>& terms, std::size_t k, SearchStats* stats) const;
  std::vector<Hit> search_maxscore(const std::vector<const Postings*>& terms, std::size_t k, SearchStats* stats) const;
  std::vector<Hit> search_taat(const std::vector<const Postings*>& terms, std::size_t k, SearchStats* stats) const;
};

}  // namespace attune::index
