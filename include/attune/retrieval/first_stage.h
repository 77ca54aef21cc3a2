#pragma once
// A corpus's own first stage for a retriever kind: what `attune serve` searches a tenant's
// shared corpus with when its retriever is that kind (dense:DIR: every passage embedded once,
// the query's nearest passages by inner product), instead of BM25's top n. Kinds are
// registered by the layers that implement them (neural/ registers dense), so this layer and
// serve/ stay torch-free.
#include <cstddef>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace attune::store {
class BlobStore;
}

namespace attune::retrieval {

class CorpusFirstStage {
 public:
  virtual ~CorpusFirstStage() = default;
  // The n passages (positions in the texts the stage was built from) nearest the query, best
  // first, with their scores; fewer when the corpus is smaller.
  virtual std::vector<std::pair<std::size_t, double>> search(const std::string& query, std::size_t n) const = 0;
  // Passages run through the model when the stage was built (0: every one came from the cache).
  virtual std::size_t passages_embedded() const = 0;
  // Removes from `cache` what earlier builds of this kind and model stored and this stage
  // does not read (embeddings of passages no longer in the corpus); what other kinds or
  // models stored stays. Returns how many entries went. Only for a cache scoped to this one
  // corpus, as serve's per-tenant scope is: in a cache that several corpora share it would
  // remove theirs.
  virtual std::size_t remove_stale_cache(store::BlobStore& cache) const { return 0; }
};

// A build given up because its `cancelled` answered true (the corpus changed meanwhile, or
// the server is stopping). What it had cached stays cached: the next build resumes there.
struct FirstStageCancelled : std::runtime_error {
  FirstStageCancelled() : std::runtime_error("the corpus first stage's build was cancelled") {}
};

// Builds the stage of "PREFIX:ARG" over `texts` (the passages, in the order search answers
// by), caching what it computes in `cache` (may be null: no cache; the caller scopes its
// keys, e.g. to a tenant). `cancelled` (may be empty) is asked between units of work; when it
// answers true the factory throws FirstStageCancelled.
using StageCancelled = std::function<bool()>;
using FirstStageFactory = std::function<std::unique_ptr<CorpusFirstStage>(
    std::string_view arg, const std::vector<std::string>& texts, store::BlobStore* cache, const StageCancelled& cancelled)>;
// Registers (or replaces) the factory for "prefix:ARG" specs. Thread-safe.
void register_first_stage(std::string prefix, FirstStageFactory factory);
// The stage for `spec` when it is exactly "PREFIX:ARG" of a registered prefix; null for any
// other spec (bm25, a composite such as rrf(...) or rerank(...), an unregistered kind), whose
// corpus candidates stay BM25's. Errors of the factory pass through.
std::unique_ptr<CorpusFirstStage> make_first_stage(std::string_view spec, const std::vector<std::string>& texts,
                                                   store::BlobStore* cache, const StageCancelled& cancelled = {});
// Whether make_first_stage would build one for `spec` (no work done).
bool has_first_stage(std::string_view spec);
// The first stage a retriever spec's corpus candidates come from: the spec itself when it
// is a registered PREFIX:ARG (a trained folder that expands to one: its own encoder), the
// initial retriever's first stage for rerank(A,L,R) (and for a trained folder that expands to
// rerank(A,L,K:DIR), as ROPG's and serve's learned models do), "" for anything else (BM25's
// candidates). Parses the spec (a folder: its attune_model.json), so callers keep the answer.
std::string first_stage_spec(std::string_view spec);

}  // namespace attune::retrieval
