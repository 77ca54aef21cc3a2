#pragma once
// Neural retrievers over the BERT-family encoders of models/encoder.h. Torch-free header.
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "attune/core/device.h"
#include "attune/core/micro_batch.h"
#include "attune/models/encoder.h"
#include "attune/models/ium.h"
#include "attune/models/purple.h"
#include "attune/retrieval/retriever.h"

namespace attune::neural {

// The encoder of `dir` with `opts`, loaded once per process while anyone holds it: the
// dense first stage and the dense: retriever of one run share one copy of the model.
std::shared_ptr<const models::TextEncoder> shared_encoder(const std::string& dir, const models::EncoderOptions& opts = {});

// Passage embeddings computed elsewhere (the dense corpus first stage: every passage of the
// corpus), looked up by text. Row-major rows.size() / dim x dim. Keys are SHA-256 digests
// of the text (text_key): a document cannot be made to collide with another's.
struct CorpusEmbeddings {
  std::size_t dim = 0;
  std::vector<float> rows;
  std::unordered_map<std::string, std::uint32_t> row_of;  // text_key(text) -> row
  const float* find(const std::string& key) const {
    auto it = row_of.find(key);
    return it == row_of.end() ? nullptr : rows.data() + static_cast<std::size_t>(it->second) * dim;
  }
};
// The collision-resistant key of a text in the embedding caches (a SHA-256 digest).
std::string text_key(std::string_view text);
// Makes `e` visible to every DenseRetriever whose encoder id is `encoder_id` for as long as
// the caller keeps it alive (held weakly): they read passages from it instead of running
// the encoder again. Thread-safe.
void publish_embeddings(const std::string& encoder_id, std::shared_ptr<const CorpusEmbeddings> e);
std::shared_ptr<const CorpusEmbeddings> published_embeddings(const std::string& encoder_id);

// Queries of concurrent rank() calls encoded together (MicroBatcher), at most n a forward
// pass and `concurrency` forward passes at once, by the DenseRetrievers made after the call;
// n of 0 or 1 (the default) encodes each query alone. `attune serve` turns it on (its
// config's dense_micro_batch), with one forward pass per torch thread group that fits the
// cores. Batching changes no ranking: a text's embedding does not depend on its batch-mates
// (padding is masked), though its last float bits may. Counts of what batched retrievers
// did, for /metrics and benchmarks.
void set_query_micro_batch(std::size_t n, std::size_t concurrency = 1);
std::size_t query_micro_batch();
std::size_t query_micro_batch_concurrency();

// Hands the embedding `v` of query `text` by the encoder `encoder_id`, computed on this thread
// (the dense corpus first stage of `attune serve`), to the next DenseRetriever of that encoder
// ranking the same text on this thread, so a request encodes its query once. Thread-local:
// another thread (another request) never reads it; the next offer replaces it, and a rank()
// of another text or encoder leaves it unused.
void offer_query_embedding(std::string encoder_id, std::string text, std::vector<float> v);
// At most n cross-encoder forward passes (cross:, ium:, purple:) at once in this process,
// admitted first come first served; 0 (the default) admits every caller at once. A server
// with more concurrent requests than cores sets it, so that requests queue instead of
// thrashing the cores (bench/RESULTS.md: 4 clients reranking at once on 2 cores took 1.7 s
// a request, against 0.3 s for one).
void set_forward_concurrency(std::size_t n);

// What `attune serve` (and bench_serve) set before making their retrievers: dense queries
// micro-batched up to `micro_batch`, and as many forward passes at once, dense or
// cross-encoder, as torch's thread groups fit the cores (one with torch on every core; two
// with --threads 1 on two). Configures torch's threads first if nothing has.
void configure_for_serving(std::size_t micro_batch);

struct QueryBatchStats {
  std::uint64_t batches = 0, queries = 0;
};
QueryBatchStats query_batch_stats();  // summed over every DenseRetriever of the process

// Bi-encoder retrieval (dense:MODEL_DIR): score = <embed(query), embed(document text)>,
// exact inner product over the candidates (cosine when the model normalises). Candidate
// embeddings are cached in memory, so a profile or corpus passage seen by several queries
// is embedded once; the cache is shared by concurrent rank() calls. The cache is scoped by
// the document's owner and keyed by a SHA-256 of its text: one user's documents never
// answer (or time) a lookup for another user's, and no crafted text can take another
// text's entry. Passages whose embeddings were published for this encoder
// (publish_embeddings: the dense corpus first stage, shared data) are not embedded again.
// Ties keep candidate order.
class DenseRetriever final : public retrieval::Retriever {
 public:
  // document_fields: embed each document as retrieval::fielded_text (a folder trained with
  // `train --document-fields` / `--document-dates` records them in attune_model.json, and
  // dense:DIR reads them); document_dates = the field `date`.
  explicit DenseRetriever(std::shared_ptr<const models::TextEncoder> encoder, bool document_dates = false);
  DenseRetriever(std::shared_ptr<const models::TextEncoder> encoder, std::vector<std::string> document_fields);
  std::string name() const override { return encoder_->id(); }
  // Documents embedded so far (cache entries).
  std::size_t cached() const;

 protected:
  Ranking do_rank(const retrieval::Query& q, std::span<const Document> candidates, std::size_t k) const override;

 private:
  std::shared_ptr<const models::TextEncoder> encoder_;
  std::vector<std::string> fields_;
  std::unique_ptr<MicroBatcher<std::string, std::vector<float>>> queries_;  // null: no batching
  mutable std::mutex mu_;
  // text_key(owner + '\0' + text) -> embedding.
  mutable std::unordered_map<std::string, std::vector<float>> cache_;
};

// Cross-encoder reranking (cross:MODEL_DIR): score = model(query, document text) for every
// candidate; best first, ties in candidate order.
class CrossEncoderRetriever final : public retrieval::Retriever {
 public:
  explicit CrossEncoderRetriever(std::shared_ptr<const models::CrossEncoder> model) : model_(std::move(model)) {}
  std::string name() const override { return model_->id(); }

 protected:
  Ranking do_rank(const retrieval::Query& q, std::span<const Document> candidates, std::size_t k) const override;

 private:
  std::shared_ptr<const models::CrossEncoder> model_;
};

// PURPLE's selector (purple:MODEL_DIR, 003): the candidates ordered by their propensities,
// read as one list (a candidate's propensity depends on the others unless the model is
// pointwise); ties keep candidate order. A PURPLE folder as a spec is
// rerank(INITIAL,L,purple:DIR), the candidates it was trained on.
class PurpleRetriever final : public retrieval::Retriever {
 public:
  explicit PurpleRetriever(std::shared_ptr<const models::PurpleModel> model) : model_(std::move(model)) {}
  std::string name() const override { return model_->id(); }
  // A folder trained with the initial prior ranks by log f inside rerank(...), which adds
  // w * the first stage's z; on its own it refuses (UsageError naming the spec to use).
  std::optional<double> initial_prior_weight() const override { return model_->initial_prior_weight(); }
  void mark_fused() override { fused_ = true; }

 protected:
  Ranking do_rank(const retrieval::Query& q, std::span<const Document> candidates, std::size_t k) const override;

 private:
  std::shared_ptr<const models::PurpleModel> model_;
  bool fused_ = false;
};

// IUM's reranker for one agent (ium:MODEL_DIR?task=TASK&model=MODEL, 002): candidates
// ordered by p(R = 1 | tid, mid, x, d); a task or model the folder has no token for reads
// [UNK]. Ties keep candidate order.
class IumRetriever final : public retrieval::Retriever {
 public:
  IumRetriever(std::shared_ptr<const models::IumModel> model, std::string task, std::string llm)
      : model_(std::move(model)), task_(std::move(task)), llm_(std::move(llm)) {}
  std::string name() const override { return model_->id() + "?task=" + task_ + "&model=" + llm_; }
  // A folder trained with the initial prior ranks by its logits inside rerank(...), which adds
  // the prior; on its own it refuses (UsageError naming the spec to use).
  std::optional<double> initial_prior_weight() const override { return model_->initial_prior_weight(); }
  void mark_fused() override { fused_ = true; }

 protected:
  Ranking do_rank(const retrieval::Query& q, std::span<const Document> candidates, std::size_t k) const override;

 private:
  std::shared_ptr<const models::IumModel> model_;
  std::string task_, llm_;
  bool fused_ = false;
};

// Parses the ARG of ium:ARG: "DIR?task=TASK&model=MODEL" -> {DIR, TASK, MODEL}. UsageError
// naming the spec when the agent is missing or a key is unknown.
struct IumSpec {
  std::string dir, task, model;
};
IumSpec parse_ium_arg(std::string_view arg);

// Registers "dense", "cross", "purple" and "ium" with retrieval::make_retriever; their models load on
// `device` (the CLI's --device). Call from main(); calling again (e.g. with the parsed
// --device) replaces the factories.
void register_retrievers(const Device& device = {});

}  // namespace attune::neural
