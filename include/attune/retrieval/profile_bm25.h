#pragma once
// One user's documents with their BM25 statistics built once (token postings, lengths, idf),
// so a query only tokenises itself and scores postings. Ranks exactly as `bm25` over the same
// documents in the same order (Bm25Retriever): the same Bm25Okapi, the same tie order, hence
// bit-identical scores. The server keeps one per user and rebuilds it when the user's
// documents change. Privacy is checked here, as Retriever::rank does: every document must
// belong to one owner, and only that owner's queries are answered (PrivacyError otherwise).
#include <cstddef>
#include <vector>

#include "attune/core/types.h"
#include "attune/index/bm25.h"
#include "attune/retrieval/retriever.h"

namespace attune::retrieval {

class ProfileBm25 {
 public:
  // PrivacyError when the documents have more than one owner.
  explicit ProfileBm25(std::vector<Document> docs);
  // The top k (0 = all) of the documents for q, as Bm25Retriever ranks them; indices refer to docs().
  Ranking rank(const Query& q, std::size_t k) const;
  const std::vector<Document>& docs() const { return docs_; }

 private:
  std::vector<Document> docs_;
  UserId owner_;
  index::Bm25Okapi bm25_;
};

}  // namespace attune::retrieval
