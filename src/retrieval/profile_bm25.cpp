#include "attune/retrieval/profile_bm25.h"

#include "attune/core/error.h"
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

Ranking ProfileBm25::rank(const Query& q, std::size_t k) const {
  if (!owner_.empty() && owner_ != q.user)
    throw PrivacyError("bm25 (profile index): the documents belong to user \"" + owner_ + "\", not to the query's user \"" +
                       q.user + "\" (query \"" + q.id + "\")");
  Ranking r;
  if (docs_.empty()) return r;
  // The query's tokens as views, scored into a buffer each thread keeps.
  thread_local std::vector<double> scores;
  const auto tokens = text::bm25_token_views(q.text);
  bm25_.scores_into(tokens, scores);
  for (std::size_t i : index::rank_bm25_top(scores, k)) {
    r.indices.push_back(i);
    r.ids.push_back(docs_[i].id);
    r.scores.push_back(scores[i]);
  }
  return r;
}

}  // namespace attune::retrieval
