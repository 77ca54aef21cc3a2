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

class CorpusIndex {
 public:
  CorpusIndex() = default;
  // texts[i] is document i's text (what the task's document_text gives).
  static CorpusIndex build(const std::vector<std::string>& texts, Bm25Params p = {});
  // The k best documents for `query` (analyzed the same way), by descending score, ties
  // by ascending document position; documents with no query term never appear.
  // k = 0 returns every matching document. Thread-safe (per-thread scratch).
  std::vector<Hit> search(std::string_view query, std::size_t k) const;
  std::size_t size() const { return doc_len_.size(); }

  // Compact binary form (versioned); deserialize throws attune::Error on a bad blob.
  std::string serialize() const;
  static CorpusIndex deserialize(std::string_view blob);

 private:
  Bm25Params p_;
  std::vector<std::uint32_t> doc_len_;
  double avgdl_ = 0;
  // term -> (idf, postings [(doc, tf)])
  struct Postings { double idf = 0; std::vector<std::pair<std::uint32_t, std::uint32_t>> list; };
  std::vector<std::string> terms_;        // sorted
  std::vector<Postings> postings_;        // parallel to terms_
  std::vector<double> norm_;              // per doc: k1 * ((1 - b) + b * dl / avgdl)
  const Postings* find(const std::string& term) const;
  void finish_load();                     // avgdl_ and norm_ from doc_len_ and p_
};

}  // namespace attune::index
