#pragma once
// The corpus BM25 index kept in the store: built once, verified every time it is loaded.
#include <string>
#include <vector>

#include "attune/index/corpus_index.h"
#include "attune/store/blob_store.h"

namespace attune::retrieval {

// The BM25 index of `texts`, kept in `store` under `key`: the stored blob when it verifies
// (its checksum and structure, and one document per text), else built and stored (again).
// A stored blob that does not verify is rebuilt with a one-line warning on stderr naming
// `what` (the corpus) and the fault; `quiet` silences only the "building" progress line.
index::CorpusIndex cached_corpus_index(store::BlobStore& store, const std::string& key,
                                       const std::vector<std::string>& texts, const std::string& what, bool quiet);

}  // namespace attune::retrieval
