#include "attune/retrieval/candidates.h"

#include <cstdio>
#include <unordered_set>

#include "attune/core/error.h"
#include "attune/retrieval/cached_index.h"

namespace attune::retrieval {

std::vector<Document> ProfileCandidates::candidates(const Example& ex) const {
  std::vector<Document> docs = ex.profile;
  for (auto& d : docs) d.text = task_.document_text(d);
  return docs;
}

CorpusCandidates::CorpusCandidates(const tasks::Task& task, std::vector<Document> corpus, index::CorpusIndex index,
                                   std::size_t n)
    : task_(task), corpus_(std::move(corpus)), index_(std::move(index)), n_(n) {}

index::CorpusIndex cached_corpus_index(store::BlobStore& store, const std::string& key,
                                       const std::vector<std::string>& texts, const std::string& what, bool quiet) {
  if (auto blob = store.blob_get(key)) {
    try {
      auto idx = index::CorpusIndex::deserialize(*blob);
      if (idx.size() != texts.size())
        throw Error("it indexes " + std::to_string(idx.size()) + " documents, the corpus has " + std::to_string(texts.size()));
      return idx;
    } catch (const Error& e) {
      std::fprintf(stderr, "warning: the stored BM25 index of %s did not verify (%s); building it again\n", what.c_str(),
                   e.what());
    }
  } else if (!quiet) {
    std::fprintf(stderr, "building the BM25 index of %s (%zu passages), once\n", what.c_str(), texts.size());
  }
  auto idx = index::CorpusIndex::build(texts);
  store.blob_put(key, idx.serialize());
  return idx;
}

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
