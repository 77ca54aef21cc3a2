#pragma once
// The dense first stage of a corpus task: every passage of the shared corpus embedded once
// with a bi-encoder (cached in the store), kept in a VectorIndex, and the top-n passages
// by inner product with the embedded query as a query's candidates. Torch-free header.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "attune/index/vector_index.h"
#include "attune/models/encoder.h"
#include "attune/neural/dense.h"
#include "attune/retrieval/candidates.h"
#include "attune/store/store.h"
#include "attune/tasks/task.h"

namespace attune::neural {

// A content fingerprint of a model folder: core/model_hash.h's model_content_hash, a
// SHA-256 over every file of the folder read in full (digests cached by size, time and
// inode). Retraining in place changes the fingerprint. Error when the folder has no
// weights file.
std::string model_fingerprint(const std::filesystem::path& dir);

struct DenseCorpusOptions {
  std::string index = "flat";              // exact | flat (FAISS IndexFlatIP) | hnsw
  index::VectorIndexOptions index_options;
  std::size_t n = 100;                     // candidates per query
  std::size_t chunk = 4096;                // passages per stored blob, on average (content-defined: chunk/2 to 2 x chunk); the unit of resume and of re-embedding
  std::size_t embed_batch = 256;           // passages per encoder call
  bool progress = true;                    // "embedding corpus: done/total" on stderr
  // Asked before each encoder call of the build; true: the build stops with
  // retrieval::FirstStageCancelled, the chunks finished so far stored (empty: never).
  std::function<bool()> cancelled;
};

class DenseCorpusCandidates final : public retrieval::CandidateSource {
 public:
  // corpus: the passages with Document::text filled (task.document_text), as for
  // CorpusCandidates. weights_key: identifies the encoder's weights and options (see
  // open(); model_fingerprint). store: caches the passage embeddings in chunks of about
  // opts.chunk passages, each under a key made of encoder->id(), weights_key and that
  // chunk's passages (null: no cache). Chunk boundaries are content-defined (chunks()), so a
  // corpus that grew or changed embeds only the chunks it changed; new weights embed
  // everything. A stored chunk that is missing, short or corrupt is embedded again (with a
  // warning for the last two), so a killed run resumes at its last finished chunk. Publishes the embeddings for
  // DenseRetriever (publish_embeddings) while this object lives.
  DenseCorpusCandidates(const tasks::Task& task, std::vector<Document> corpus,
                        std::shared_ptr<const models::TextEncoder> encoder, std::string weights_key,
                        store::BlobStore* store, DenseCorpusOptions opts = {});
  ~DenseCorpusCandidates() override;
  // Loads the encoder of `model_dir` (shared_encoder) and keys the cache by its
  // model_fingerprint and the embedding options of `eo`.
  static std::unique_ptr<DenseCorpusCandidates> open(const tasks::Task& task, std::vector<Document> corpus,
                                                     const std::filesystem::path& model_dir, store::BlobStore* store,
                                                     const models::EncoderOptions& eo = {}, DenseCorpusOptions opts = {});

  // The dense top-n passages for task.query(ex), best first (owner ""). Answers come from
  // the prefetched batch when there is one, else from a single search (memoised by query).
  std::vector<Document> candidates(const Example& ex) const override;
  // Embeds the examples' queries in batches and answers them with one batched search.
  void prefetch(std::span<const Example> examples) const override;

  // Library use: the k best passages (rows of corpus()) for each free-text query, in one
  // batched search; k = 0: all.
  std::vector<index::VectorHits> search(std::span<const std::string> queries, std::size_t k) const;
  const index::VectorIndex& vectors() const { return *index_; }
  std::shared_ptr<const CorpusEmbeddings> embeddings() const { return emb_; }
  const std::vector<Document>& corpus() const { return corpus_; }
  const models::TextEncoder& encoder() const { return *encoder_; }
  // Passages this object ran through the encoder (0 when every chunk came from the store).
  std::size_t passages_embedded() const { return passages_embedded_; }
  // Queries embedded so far (prefetch and single searches).
  std::size_t queries_embedded() const { return queries_embedded_.load(); }
  // The store key prefix of the embedding chunks, the model's part ("dense-emb2:<sha256>"):
  // a chunk is stored under "PREFIX/<sha256 of its passages>".
  const std::string& cache_key() const { return key_; }
  // The corpus's chunks, in order: rows [lo, hi) of corpus(), stored under key.
  struct Chunk {
    std::size_t lo = 0, hi = 0;
    std::string key;
  };
  const std::vector<Chunk>& chunks() const { return chunks_; }

 private:
  void build(store::BlobStore* store);
  std::vector<index::VectorHits> search_texts(const std::vector<std::string>& texts, std::size_t k) const;

  const tasks::Task& task_;
  std::vector<Document> corpus_;
  std::shared_ptr<const models::TextEncoder> encoder_;
  DenseCorpusOptions opts_;
  std::string key_;
  std::vector<Chunk> chunks_;
  std::shared_ptr<const CorpusEmbeddings> emb_;
  std::unique_ptr<index::VectorIndex> index_;
  std::size_t passages_embedded_ = 0;
  mutable std::atomic<std::size_t> queries_embedded_{0};
  mutable std::mutex mu_;
  mutable std::unordered_map<std::string, index::VectorHits> hits_;  // query text -> top-n
};

// Registers the dense first stage (retrieval/first_stage.h) for dense:DIR specs, its models
// on `device`: what `attune serve` searches a tenant's corpus with under dense:DIR.
void register_first_stages(const Device& device = {});

}  // namespace attune::neural
