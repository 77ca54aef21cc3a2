#pragma once
// Neural retrievers over the BERT-family encoders of models/encoder.h. Torch-free header.
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "attune/models/encoder.h"
#include "attune/retrieval/retriever.h"

namespace attune::neural {

// Bi-encoder retrieval (dense:MODEL_DIR): score = <embed(query), embed(document text)>,
// exact inner product over the candidates (cosine when the model normalises). Candidate
// embeddings are cached in memory by document text, so a profile or corpus passage seen
// by several queries is embedded once; the cache is shared by concurrent rank() calls.
// Ties keep candidate order.
class DenseRetriever final : public retrieval::Retriever {
 public:
  explicit DenseRetriever(std::shared_ptr<const models::TextEncoder> encoder);
  std::string name() const override { return encoder_->id(); }
  // Documents embedded so far (cache entries).
  std::size_t cached() const;

 protected:
  Ranking do_rank(const retrieval::Query& q, std::span<const Document> candidates, std::size_t k) const override;

 private:
  std::shared_ptr<const models::TextEncoder> encoder_;
  mutable std::mutex mu_;
  // hash64(text) -> embedding; a collision would only swap two documents' vectors and the
  // key is 64 bits, so texts are not kept.
  mutable std::unordered_map<std::uint64_t, std::vector<float>> cache_;
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

// Registers "dense" and "cross" with retrieval::make_retriever (models load on the CPU or
// CUDA per "auto"). Call once from main(); calling again is harmless.
void register_retrievers();

}  // namespace attune::neural
