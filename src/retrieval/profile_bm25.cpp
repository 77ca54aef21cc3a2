#include "attune/retrieval/profile_bm25.h"

#include "attune/core/error.h"
#include "attune/core/sha256.h"
#include "attune/text/lexical.h"

namespace attune::retrieval {

namespace {

std::vector<std::vector<std::string_view>> tokens_of(const std::vector<Document>& docs) {
  std::vector<std::vector<std::string_view>> out;
  out.reserve(docs.size());
  for (const auto& d : docs) out.push_back(text::bm25_token_views(d.text));
  return out;
}

UserId single_owner(const std::vector<Document>& docs) {
  for (const auto& d : docs)
    if (d.owner != docs.front().owner)
      throw PrivacyError("a profile index holds documents of two owners (\"" + docs.front().owner + "\" and \"" + d.owner +
                         "\")");
  return docs.empty() ? UserId{} : docs.front().owner;
}

}  // namespace

ProfileBm25::ProfileBm25(std::vector<Document> docs)
    : docs_(std::move(docs)), owner_(single_owner(docs_)), bm25_(tokens_of(docs_)) {}

ProfileBm25::ProfileBm25(std::vector<Document> docs, std::string_view statistics)
    : docs_(std::move(docs)), owner_(single_owner(docs_)), bm25_(index::Bm25Okapi::deserialize(statistics)) {
  if (bm25_.size() != docs_.size())
    throw Error("BM25 statistics of " + std::to_string(bm25_.size()) + " documents given for a profile of " +
                std::to_string(docs_.size()));
}

std::string ProfileBm25::fingerprint(const std::vector<Document>& docs) {
  Sha256 h;
  // Bump when bm25_token_views or Bm25Okapi's layout changes what the bytes mean.
  h.add("attune profile bm25 statistics v1");
  h.add(static_cast<std::uint64_t>(docs.size()));
  for (const auto& d : docs) h.add(d.owner).add(d.id).add(d.text);
  return h.hex();
}

Ranking ProfileBm25::rank(const Query& q, std::size_t k) const {
  if (!owner_.empty() && owner_ != q.user)
    throw PrivacyError("bm25 (profile index): the documents belong to user \"" + owner_ + "\", not to the query's user \"" +
                       q.user + "\" (query \"" + q.id + "\")");
  Ranking r;
  if (docs_.empty()) return r;
  // The query's text split, hashed and scored in one pass, into a buffer each thread keeps.
  thread_local std::vector<double> scores;
  bm25_.scores_text_into(q.text, scores);
  thread_local std::vector<std::size_t> top;
  index::rank_bm25_top_into(scores, k, top);
  r.indices.reserve(top.size());
  r.ids.reserve(top.size());
  r.scores.reserve(top.size());
  for (std::size_t i : top) {
    r.indices.push_back(i);
    r.ids.push_back(docs_[i].id);
    r.scores.push_back(scores[i]);
  }
  return r;
}

}  // namespace attune::retrieval
