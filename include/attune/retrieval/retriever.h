#pragma once
// The Retriever interface and the lexical baselines (LAMP.md "Baseline retrievers").
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
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
  // True when the scores only restate the order (n, n-1, ..., 1 for n candidates: recency,
  // and "bm25" as a corpus task's first stage), not how well a candidate matches; readers
  // of score values (eval's QPP baselines) then take reciprocal ranks 1, 1/2, ... instead.
  virtual bool scores_are_ranks() const { return false; }
  // A reranker trained with the first stage's order as a prior (IUM's --ium-initial-prior
  // learned): the weight w of that order's z-score in its score. rerank(A,L,it) then orders by
  // its score + w z (fuse=1:w) unless its spec says fuse=S:W, and calls mark_fused(); before
  // that it refuses to rank, since its score alone is not the order it learned.
  virtual std::optional<double> initial_prior_weight() const { return std::nullopt; }
  virtual void mark_fused() {}

 protected:
  virtual Ranking do_rank(const Query& q, std::span<const Document> candidates,
                          std::size_t k) const = 0;
};

// The string forms of spec.h, kept for callers that hold spec strings.
// make_retriever(parse_retriever_spec(spec), seed, corpus): spec.h has the grammar (none,
// random, recency, bm25, rrf(...), rerank(A,L,R), PREFIX:ARG, a trained DIR), what
// `corpus` changes, and the errors (UsageError for an unknown spec or an unregistered kind).
std::unique_ptr<Retriever> make_retriever(std::string_view spec, std::uint64_t seed, bool corpus = false);

// The kind a trained-model folder names in its attune_model.json ("dense", "cross", ...);
// "" when `spec` is not a folder. Errors of parse_retriever_spec (for a folder: UsageError
// without attune_model.json, Error for a malformed one).
std::string trained_model_kind(std::string_view spec);

// A trained-model folder's spec spelled out as make_retriever reads it ("dense:DIR",
// "rerank(bm25,16,cross:DIR)"); any other spec comes back trimmed. Errors as above.
std::string expand_spec(std::string_view spec);
// The first stage A of "rerank(A,L,R)", canonical (spec.h to_string); "" for any other
// spec, a Pearl folder included (expand it first). Errors of parse_retriever_spec.
std::string rerank_initial(std::string_view spec);
// Builds a retriever from the ARG of a "PREFIX:ARG" spec (e.g. a model folder). Lets
// layers above this one (neural/, which links torch) add kinds without this layer
// depending on them.
using RetrieverFactory = std::function<std::unique_ptr<Retriever>(std::string_view arg, std::uint64_t seed)>;
// Registers (or replaces) the factory for "prefix:ARG" specs; prefix has no ':' and is
// not empty (UsageError otherwise), and a spec can name it only when it also holds no
// white space, ',', '(' or ')' (spec.h). Thread-safe.
void register_retriever_kind(std::string prefix, RetrieverFactory factory);

// `text` + " date: " + the document's date: the document text paper 000's ROPG training
// reads (LaMP's reference code appends it; `train --document-dates`). UsageError naming
// the document when it has no date: without one the encoder would read a text unlike the
// ones it was trained on.
std::string dated_text(const Document& d, std::string_view text);
// `text` + " FIELD: value" for each of `fields`, in their order: `date` is the document's
// date (dated_text's), any other name a field of its profile item (e.g. commit_area's
// `tag`). `train --document-fields` trains an encoder on such texts and its folder reads
// documents the same way. UsageError naming the document and the field when it lacks one.
std::string fielded_text(const Document& d, std::string_view text, const std::vector<std::string>& fields);

// Splits "a,rrf(b,c),d" at top-level commas, each piece trimmed; nothing for a blank list.
// UsageError for an empty piece or unbalanced parentheses. The pieces are not parsed.
std::vector<std::string> split_specs(std::string_view list);

}  // namespace attune::retrieval
