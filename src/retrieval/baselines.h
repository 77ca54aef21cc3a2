#pragma once
// The lexical baseline retrievers (LAMP.md "Baseline retrievers"); private to the layer,
// built through make_retriever().
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "attune/retrieval/retriever.h"
#include "attune/retrieval/spec.h"

namespace attune::retrieval {

// Ranks nothing: the prompt gets no documents.
class NoneRetriever final : public Retriever {
 public:
  std::string name() const override { return "none"; }

 protected:
  Ranking do_rank(const Query&, std::span<const Document>, std::size_t) const override;
};

// LaMP's random.choices(profile, k=k): k draws with replacement from
// Rng(derive_seed(seed, q.id)), each rng.below(n). The number of draws is capped at the
// number of candidates n (the rank() contract), and k = 0 draws n times. Scores are 0.
class RandomRetriever final : public Retriever {
 public:
  explicit RandomRetriever(std::uint64_t seed) : seed_(seed) {}
  std::string name() const override { return "random"; }

 protected:
  Ranking do_rank(const Query& q, std::span<const Document> c, std::size_t k) const override;

 private:
  std::uint64_t seed_;
};

// Newest first: stable sort by date ascending (undated = oldest), then reversed, so
// ties come out in reverse candidate order. Score = n - position (newest scores n).
class RecencyRetriever final : public Retriever {
 public:
  std::string name() const override { return "recency"; }
  bool scores_are_ranks() const override { return true; }

 protected:
  Ranking do_rank(const Query& q, std::span<const Document> c, std::size_t k) const override;
};

// rank_bm25 BM25Okapi over text::bm25_tokens(Document::text), rebuilt per query; the
// order is rank_bm25_order (ties in descending candidate position).
class Bm25Retriever final : public Retriever {
 public:
  std::string name() const override { return "bm25"; }

 protected:
  Ranking do_rank(const Query& q, std::span<const Document> c, std::size_t k) const override;
};

// Reciprocal rank fusion (Cormack et al. 2009): score(d) = sum over lists of
// 1 / (60 + rank_i(d)), ranks 1-based, every list ranked over all candidates (k = 0).
// A candidate missing from a list gets nothing from it (a random list ranks each
// candidate by its first draw); candidates in no list are left out. Ties by position.
class RrfRetriever final : public Retriever {
 public:
  explicit RrfRetriever(std::vector<std::unique_ptr<Retriever>> parts);
  std::string name() const override;

 protected:
  Ranking do_rank(const Query& q, std::span<const Document> c, std::size_t k) const override;

 private:
  std::vector<std::unique_ptr<Retriever>> parts_;
};

// Two stages: `initial` ranks all candidates, its first `depth` distinct documents go
// on, and `reranker` orders only those (LaMP/Pearl's protocol: a cross-encoder over the
// initial retriever's top-l). Scores are the reranker's, or with `fusion` (spec.h
// rerank(A,L,R,fuse=S:W)) S * the reranker's + W * initial_prior_z(the initial scores),
// ties in initial order.
class RerankRetriever final : public Retriever {
 public:
  RerankRetriever(std::unique_ptr<Retriever> initial, std::size_t depth, std::unique_ptr<Retriever> reranker,
                  std::optional<RetrieverSpec::Fusion> fusion = std::nullopt);
  std::string name() const override;

 protected:
  Ranking do_rank(const Query& q, std::span<const Document> c, std::size_t k) const override;

 private:
  std::unique_ptr<Retriever> initial_, reranker_;
  std::size_t depth_;
  std::optional<RetrieverSpec::Fusion> fusion_;
};

}  // namespace attune::retrieval
