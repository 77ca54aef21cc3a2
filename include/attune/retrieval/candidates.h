#pragma once
// Where a query's candidates come from: the user's own profile, or the first-stage hits of
// a shared corpus. Candidate documents come back with Document::text filled by the task.
#include <cstddef>
#include <memory>
#include <span>
#include <vector>

#include "attune/core/types.h"
#include "attune/index/corpus_index.h"
#include "attune/retrieval/retriever.h"
#include "attune/tasks/task.h"

namespace attune::retrieval {

class CandidateSource {
 public:
  virtual ~CandidateSource() = default;
  // The documents a query of `ex` may be ranked over, best first when the source ranks
  // (corpus), in profile order otherwise. Thread-safe.
  virtual std::vector<Document> candidates(const Example& ex) const = 0;
  // A hint: candidates() is about to be asked for these examples. A source that searches
  // in batches (the dense corpus search) answers them all at once here; the default does
  // nothing. Thread-safe; candidates() works without it.
  virtual void prefetch(std::span<const Example> examples) const {}
};

// The example's own profile; each document keeps its owner (the example's user).
class ProfileCandidates final : public CandidateSource {
 public:
  explicit ProfileCandidates(const tasks::Task& task) : task_(task) {}
  std::vector<Document> candidates(const Example& ex) const override;

 private:
  const tasks::Task& task_;
};

// The top-n passages of a shared corpus by corpus BM25 for task.query(ex) (owner "").
class CorpusCandidates final : public CandidateSource {
 public:
  // corpus: the passages with text filled; index: built over exactly those texts.
  CorpusCandidates(const tasks::Task& task, std::vector<Document> corpus, index::CorpusIndex index,
                   std::size_t n = 100);
  std::vector<Document> candidates(const Example& ex) const override;
  const std::vector<Document>& corpus() const { return corpus_; }

 private:
  const tasks::Task& task_;
  std::vector<Document> corpus_;
  index::CorpusIndex index_;
  std::size_t n_;
};

// The union of several sources' candidates: the first source's in its order, then each
// next source's documents not seen yet (by id), in its order. E.g. rrf(bm25,dense:DIR) on
// a corpus task ranks the BM25 top-n and the dense top-n together. The sources must
// outlive this object.
class UnionCandidates final : public CandidateSource {
 public:
  explicit UnionCandidates(std::vector<const CandidateSource*> sources) : sources_(std::move(sources)) {}
  std::vector<Document> candidates(const Example& ex) const override;
  void prefetch(std::span<const Example> examples) const override;

 private:
  std::vector<const CandidateSource*> sources_;
};

// Keeps the candidates' order (scores n, n-1, ...): "bm25" on a corpus task, where the
// first stage already ranked by corpus-level BM25.
class FirstStageRetriever final : public Retriever {
 public:
  std::string name() const override { return "bm25"; }
  bool scores_are_ranks() const override { return true; }

 protected:
  Ranking do_rank(const Query& q, std::span<const Document> candidates, std::size_t k) const override;
};

}  // namespace attune::retrieval
