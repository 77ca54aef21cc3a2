#pragma once
// BM25 exactly as rank_bm25 0.2.2's BM25Okapi computes it (LAMP.md), built per query
// over one user's profile.
#include <cstddef>
#include <cstdint>
#include <string>
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
  // docs: each document's tokens (text::bm25_tokens for LaMP fidelity). An empty corpus
  // is allowed and scores nothing.
  explicit Bm25Okapi(const std::vector<std::vector<std::string>>& docs, Bm25Params p = {});
  // One score per document, in corpus order; query tokens are summed with duplicates
  // counted each time, in the same floating-point order as numpy does it.
  std::vector<double> scores(const std::vector<std::string>& query) const;
  double idf(const std::string& term) const;  // 0 for unseen terms
  double average_idf() const { return average_idf_; }
  double avgdl() const { return avgdl_; }
  std::size_t size() const { return doc_len_.size(); }

 private:
  Bm25Params p_;
  std::vector<std::size_t> doc_len_;
  // Terms numbered in first-seen order (rank_bm25's dict order); idf_ by term id, with
  // the epsilon floor applied. Postings in CSR form: term t's (doc, tf) pairs, by doc,
  // are post_doc_/post_tf_[post_off_[t] .. post_off_[t + 1]).
  std::unordered_map<std::string, std::uint32_t> term_ids_;
  std::vector<double> idf_;
  std::vector<std::uint32_t> post_off_, post_doc_, post_tf_;
  std::vector<double> norm_;  // per doc: k1 * ((1 - b) + b * dl / avgdl)
  bool sparse_exact_ = true;  // every norm_ > 0, so absent terms add exactly +-0
  double avgdl_ = 0, average_idf_ = 0;
};

// numpy.argsort(scores)[::-1]: descending score, ties in DESCENDING index order.
std::vector<std::size_t> rank_bm25_order(const std::vector<double>& scores);

}  // namespace attune::index
