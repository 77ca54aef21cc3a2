#pragma once
// Where a query's candidates come from: the user's own profile, or the first-stage hits of
// a shared corpus. Candidate documents come back with Document::text filled by the task.
#include <cstddef>
#include <memory>
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

// Keeps the candidates' order (scores n, n-1, ...): "bm25" on a corpus task, where the
// first stage already ranked by corpus-level BM25.
class FirstStageRetriever final : public Retriever {
 public:
  std::string name() const override { return "bm25"; }

 protected:
  Ranking do_rank(const Query& q, std::span<const Document> candidates, std::size_t k) const override;
};

}  // namespace attune::retrieval
