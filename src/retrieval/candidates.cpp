#include "attune/retrieval/candidates.h"

#include <unordered_set>

namespace attune::retrieval {

std::vector<Document> ProfileCandidates::candidates(const Example& ex) const {
  std::vector<Document> docs = ex.profile;
  for (auto& d : docs) d.text = task_.document_text(d);
  return docs;
}

CorpusCandidates::CorpusCandidates(const tasks::Task& task, std::vector<Document> corpus, index::CorpusIndex index,
                                   std::size_t n)
    : task_(task), corpus_(std::move(corpus)), index_(std::move(index)), n_(n) {}

std::vector<Document> CorpusCandidates::candidates(const Example& ex) const {
  std::vector<Document> out;
  for (const auto& hit : index_.search(task_.query(ex), n_)) out.push_back(corpus_[hit.doc]);
  return out;
}

std::vector<Document> UnionCandidates::candidates(const Example& ex) const {
  std::vector<Document> out;
  std::unordered_set<std::string> seen;
  for (const auto* s : sources_)
    for (auto& d : s->candidates(ex))
      if (seen.insert(d.id).second) out.push_back(std::move(d));
  return out;
}

void UnionCandidates::prefetch(std::span<const Example> examples) const {
  for (const auto* s : sources_) s->prefetch(examples);
}

Ranking FirstStageRetriever::do_rank(const Query&, std::span<const Document> candidates, std::size_t k) const {
  Ranking r;
  const std::size_t n = candidates.size();
  for (std::size_t i = 0; i < n; ++i) {
    r.indices.push_back(i);
    r.ids.push_back(candidates[i].id);
    r.scores.push_back(static_cast<double>(n - i));
  }
  return r;
}

}  // namespace attune::retrieval
