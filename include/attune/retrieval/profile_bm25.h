#pragma once
// One user's documents with their BM25 statistics built once (token postings, lengths, idf),
// so a query only tokenises itself and scores postings. Ranks exactly as `bm25` over the same
// documents in the same order (Bm25Retriever): the same Bm25Okapi, the same tie order, hence
// bit-identical scores. The server keeps one per user and rebuilds it when the user's
// documents change. Privacy is checked here, as Retriever::rank does: every document must
// belong to one owner, and only that owner's queries are answered (PrivacyError otherwise).
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "attune/core/types.h"
#include "attune/index/bm25.h"
#include "attune/retrieval/retriever.h"

namespace attune::retrieval {

class ProfileBm25 {
 public:
  // PrivacyError when the documents have more than one owner.
  explicit ProfileBm25(std::vector<Document> docs);
  // The same from statistics() of a ProfileBm25 over these documents (kept in a store), so
  // no document is tokenised again. PrivacyError as above; Error when the bytes are not
  // such statistics or count another number of documents. Only a fingerprint() match
  // tells that they are these documents' statistics: check it first.
  ProfileBm25(std::vector<Document> docs, std::string_view statistics);
  // Bm25Okapi's bytes (index::Bm25Okapi::serialize).
  std::string statistics() const { return bm25_.serialize(); }
  // SHA-256 (64 hex digits) of the documents' owner, ids and texts in order and of the
  // statistics' layout and tokenizer version: equal fingerprints, equal statistics.
  static std::string fingerprint(const std::vector<Document>& docs);
  // The top k (0 = all) of the documents for q, as Bm25Retriever ranks them; indices refer to docs().
  Ranking rank(const Query& q, std::size_t k) const;
  const std::vector<Document>& docs() const { return docs_; }

 private:
  std::vector<Document> docs_;
  UserId owner_;
  index::Bm25Okapi bm25_;
};

}  // namespace attune::retrieval
