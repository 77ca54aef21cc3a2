#pragma once
// Retriever specs parsed once into a typed tree (faiss index_factory style): the CLI, the
// engine and the server parse the description string at their edge, and nothing below
// looks at the string again. Grammar (white space around every part is ignored):
//
// none: ranks nothing (the prompt gets no documents).
// random: k draws WITH replacement (LaMP reference), seeded by (seed, query id).
// recency: newest first by date; ties in reverse original order (sorted asc, reversed);
//          undated documents count as oldest.
// bm25: rank_bm25 BM25Okapi over text::bm25_tokens of Document::text, rebuilt per query.
// rrf(A,B,...): sum over lists of 1 / (60 + rank), 1-based, each list ranked over all
//          candidates; ties by candidate position.
// rerank(A,L,R): A ranks all candidates, R orders A's first L distinct ones (e.g.
//          rerank(bm25,16,cross:DIR), Pearl's protocol); scores are R's.
// rerank(A,L,R,fuse=S:W): the same L documents ordered by S * R's score + W * z(d), z(d)
//          = A's score of d z-scored over the L (initial_prior_z; 0 when they are all
//          equal): a reranker that keeps part of the initial order (ROPG's learned
//          --initial-prior). S > 0 and W finite, written with 17 significant digits.
// PREFIX:ARG: a kind registered with register_retriever_kind (dense:MODEL_DIR,
//          cross:MODEL_DIR once attune::neural::register_retrievers() has run), also
//          inside rrf(...) and rerank(...). PREFIX is not empty and holds no white space,
//          ',', '(' or ')'.
// DIR: a folder written by `attune train` (it holds attune_model.json {"kind": K}) is the
//          spec K:DIR (e.g. dense:DIR for a ROPG-trained encoder), or, when the marker
//          also holds "rerank": {"initial": A, "top_l": L} (Pearl), rerank(A,L,K:DIR):
//          the reranker over the candidates it was trained on.
// The words are tried first, then rrf(...) and rerank(...), then a folder, then PREFIX:ARG.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "attune/retrieval/retriever.h"

namespace attune::retrieval {

struct RetrieverSpec {
  enum class Kind { None, Random, Recency, Bm25, Rrf, Rerank, Registered };
  Kind kind = Kind::None;
  // Rrf: the fused lists (at least one). Rerank: {initial, reranker}. Otherwise empty.
  std::vector<RetrieverSpec> children;
  std::size_t depth = 0;  // Rerank: L, how many distinct documents of the initial list go on
  // Rerank: the final score is reranker_scale * R's score + initial_weight * z (A's scores
  // z-scored over the L documents); unset: R's score alone.
  struct Fusion {
    double reranker_scale = 1, initial_weight = 0;
    bool operator==(const Fusion&) const = default;
  };
  std::optional<Fusion> fusion;
  std::string prefix;     // Registered: PREFIX of PREFIX:ARG ("dense", "cross", ...)
  std::string arg;        // Registered: ARG, trimmed (may be empty: make_retriever refuses it)
  // The trained-model folder this node was read from, as written; "" when the spec was
  // written out. The node itself is what the folder expands to (K:DIR or rerank(A,L,K:DIR)).
  std::string folder;

  bool operator==(const RetrieverSpec&) const = default;
};

// The initial-order prior of rerank(A,L,R,fuse=S:W): `scores` (A's, of the L documents)
// minus their mean over their standard deviation (population); all 0 when the standard
// deviation is 0 (or there are fewer than 2). ROPG trains with the same function.
std::vector<double> initial_prior_z(std::span<const double> scores);

// Parses one spec. UsageError naming the spec when it is malformed or unknown, or when it
// is a folder without attune_model.json; Error for a malformed attune_model.json. Whether
// a PREFIX is registered is make_retriever's question, not the parser's.
// A trained folder whose run did not finish (attune_model.json "complete": false: killed,
// or stopped early) is a UsageError naming its progress, unless allow_incomplete_models(true)
// (the CLI's --allow-incomplete) was called in this process.
RetrieverSpec parse_retriever_spec(std::string_view spec);
void allow_incomplete_models(bool allow);
bool incomplete_models_allowed();

// The canonical text: no white space around the parts, L in decimal, a node read from a
// folder as that folder; parse_retriever_spec(to_string(s)) == s (while the folder's
// attune_model.json stays as it was).
std::string to_string(const RetrieverSpec& spec);

// The first spec of `specs` that repeats an earlier one, as written; "" when all differ.
// Specs are compared by their canonical text (to_string: "rrf(bm25, recency)" is
// "rrf(bm25,recency)") where they parse, else as written (trimmed).
std::string first_repeated_spec(const std::vector<std::string>& specs);

// Builds the retriever a spec describes (seeded by `seed` where it draws). corpus: the
// candidates are a corpus task's first stage, already ranked by corpus-level BM25; "bm25"
// (inside rrf(...) and rerank(...) too) then keeps that order (FirstStageRetriever)
// instead of BM25 over the candidates alone. UsageError for an unregistered PREFIX (saying
// so for dense and cross, which this program may not have registered) or an empty ARG.
std::unique_ptr<Retriever> make_retriever(const RetrieverSpec& spec, std::uint64_t seed, bool corpus = false);

// The kind the attune_model.json of the folder `spec` was read from names ("dense",
// "cross", "selector", ...); "" when `spec` was not read from a folder.
std::string trained_model_kind(const RetrieverSpec& spec);

// The model folders of the dense:DIR parts of `spec`, in order: ARG of dense:ARG (a dense
// trained folder parses into one), and the parts of rrf(...), recursively. Nothing for
// rerank(...), which ranks what its first stage gives it (see first_stage), or other kinds.
std::vector<std::string> dense_dirs(const RetrieverSpec& spec);

// Where a rerank chain's candidates come from: first_stage(A) for rerank(A,L,R), the spec
// itself otherwise. The result refers into `spec`, hence no temporaries.
const RetrieverSpec& first_stage(const RetrieverSpec& spec);
const RetrieverSpec& first_stage(RetrieverSpec&&) = delete;

}  // namespace attune::retrieval
