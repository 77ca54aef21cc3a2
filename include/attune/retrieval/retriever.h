#pragma once
// The Retriever interface and the lexical baselines (LAMP.md "Baseline retrievers").
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "attune/core/types.h"

namespace attune::retrieval {

struct Query {
  ExampleId id;     // seeds per-query randomness
  UserId user;      // whose profile may be searched
  std::string text; // phi_q(x)
};

// Ranks candidates for one query. Privacy is enforced here, not by callers: rank()
// throws PrivacyError when any candidate belongs to another user (owner not empty and
// != q.user). Returns at most k entries (fewer when there are fewer candidates; k = 0
// means all), best first. Implementations are thread-safe for concurrent rank() calls.
class Retriever {
 public:
  virtual ~Retriever() = default;
  Ranking rank(const Query& q, std::span<const Document> candidates, std::size_t k) const;
  virtual std::string name() const = 0;

 protected:
  virtual Ranking do_rank(const Query& q, std::span<const Document> candidates,
                          std::size_t k) const = 0;
};

// none: ranks nothing (the prompt gets no documents).
// random: k draws WITH replacement (LaMP reference), seeded by (seed, query id).
// recency: newest first by date; ties in reverse original order (sorted asc, reversed);
//          undated documents count as oldest.
// bm25: rank_bm25 BM25Okapi over text::bm25_tokens of Document::text, rebuilt per query.
// rrf(A,B,...): sum over lists of 1 / (60 + rank), 1-based, each list ranked over all
//          candidates; ties by candidate position.
// rerank(A,L,R): A ranks all candidates, R orders A's first L distinct ones (e.g.
//          rerank(bm25,16,cross:DIR), Pearl's protocol); scores are R's.
// PREFIX:ARG: a kind registered with register_retriever_kind (dense:MODEL_DIR,
//          cross:MODEL_DIR once attune::neural::register_retrievers() has run), also
//          inside rrf(...).
// DIR: a folder written by `attune train` (it holds attune_model.json {"kind": K}) is the
//          spec K:DIR (e.g. dense:DIR for a ROPG-trained encoder), or, when the marker
//          also holds "rerank": {"initial": A, "top_l": L} (Pearl), rerank(A,L,K:DIR):
//          the reranker over the candidates it was trained on.
// corpus: the candidates are a corpus task's first stage, already ranked by corpus-level
//          BM25; "bm25" (inside rrf(...) and rerank(...) too) then keeps that order
//          (FirstStageRetriever) instead of BM25 over the candidates alone.
// UsageError for an unknown spec or an unregistered kind.
std::unique_ptr<Retriever> make_retriever(std::string_view spec, std::uint64_t seed, bool corpus = false);

// The kind a trained-model folder names in its attune_model.json ("dense", "cross", ...);
// "" when `spec` is not a folder. UsageError for a folder without attune_model.json, Error
// for a malformed one.
std::string trained_model_kind(std::string_view spec);

// A trained-model folder's spec spelled out as make_retriever reads it ("dense:DIR",
// "rerank(bm25,16,cross:DIR)"); any other spec comes back trimmed. Errors as above.
std::string expand_spec(std::string_view spec);
// The first stage A of "rerank(A,L,R)"; "" for any other spec. UsageError when malformed.
std::string rerank_initial(std::string_view spec);
// Builds a retriever from the ARG of a "PREFIX:ARG" spec (e.g. a model folder). Lets
// layers above this one (neural/, which links torch) add kinds without this layer
// depending on them.
using RetrieverFactory = std::function<std::unique_ptr<Retriever>(std::string_view arg, std::uint64_t seed)>;
// Registers (or replaces) the factory for "prefix:ARG" specs; prefix has no ':' and is
// not empty (UsageError otherwise). Thread-safe.
void register_retriever_kind(std::string prefix, RetrieverFactory factory);

// Splits "a,rrf(b,c),d" at top-level commas.
std::vector<std::string> split_specs(std::string_view list);

}  // namespace attune::retrieval
