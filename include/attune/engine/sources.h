#pragma once
// The candidate sources of a run, by retriever spec: what each retriever ranks.
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "attune/engine/data_spec.h"
#include "attune/engine/models.h"
#include "attune/retrieval/candidates.h"
#include "attune/store/store.h"

namespace attune::engine {

// Profile candidates on per-profile tasks; on corpus tasks the corpus BM25 top-n (the
// index is built once and kept in the store as a blob). `quiet`: no progress line.
std::unique_ptr<retrieval::CandidateSource> make_source(const DataSpec& d, const tasks::Task& task, store::BlobStore& store,
                                                        bool quiet, std::size_t n = 100);

// Corpus tasks (`base` searches a corpus): every gold_doc of `ds` must be a passage of it
// (data::check_gold_docs: InputError naming the example and the id). Nothing otherwise.
void check_gold_docs(const DataSpec& d, const data::Dataset& ds, const retrieval::CandidateSource& base);

// Per-profile tasks: the profile for every retriever. Corpus tasks: the BM25 top-n (`base`)
// for every retriever, except those whose first stage is dense:DIR, which get their own
// dense top-n over the whole corpus (DenseCorpusCandidates, embeddings cached in the store),
// and rrf(...) with dense:DIR parts, which get the union of the BM25 and dense top-n (BM25's
// first, deduplicated by id). The first stage of rerank(A,L,R) is A's.
struct Sources {
  std::unique_ptr<retrieval::CandidateSource> base;
  std::map<std::string, const retrieval::CandidateSource*> by_spec;  // overrides of base
  std::vector<std::unique_ptr<retrieval::CandidateSource>> owned;     // dense first stages, unions
  const retrieval::CandidateSource& for_spec(const std::string& spec) const;
  // For eval::EvalOptions::source_for / feedback::CollectOptions::source_for.
  std::function<const retrieval::CandidateSource*(const std::string&)> lookup() const;
};
Sources make_sources(const DataSpec& d, const tasks::Task& task, store::BlobStore& store, const ModelOptions& models,
                     bool quiet, const std::vector<std::string>& specs, std::size_t n = 100);

}  // namespace attune::engine
