#include "attune/neural/dense_corpus.h"

#include "attune/core/model_hash.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <unordered_set>

#include "attune/core/error.h"
#include "attune/core/hash.h"
#include "attune/core/sha256.h"
#include "attune/core/micro_batch.h"
#include "attune/core/progress.h"
#include "attune/retrieval/first_stage.h"

namespace fs = std::filesystem;

namespace attune::neural {
namespace {

// A stored chunk of embeddings: magic, rows, dim, hash64 of the payload, then rows x dim
// float32 (native byte order: the store is a local cache).
constexpr char kMagic[8] = {'A', 'T', 'V', 'E', 'M', 'B', '1', '\n'};
constexpr std::size_t kHeader = sizeof kMagic + 3 * sizeof(std::uint64_t);

std::string encode_chunk(const float* rows, std::size_t n, std::size_t dim) {
  const std::size_t bytes = n * dim * sizeof(float);
  std::string out(kHeader + bytes, '\0');
  const std::uint64_t header[3] = {n, dim, hash64(std::string_view(reinterpret_cast<const char*>(rows), bytes))};
  std::memcpy(out.data(), kMagic, sizeof kMagic);
  std::memcpy(out.data() + sizeof kMagic, header, sizeof header);
  if (bytes) std::memcpy(out.data() + kHeader, rows, bytes);
  return out;
}

// Copies the chunk into `rows` when it holds exactly n x dim floats with a matching hash.
bool decode_chunk(const std::string& blob, std::size_t n, std::size_t dim, float* rows) {
  const std::size_t bytes = n * dim * sizeof(float);
  if (blob.size() != kHeader + bytes || std::memcmp(blob.data(), kMagic, sizeof kMagic) != 0) return false;
  std::uint64_t header[3];
  std::memcpy(header, blob.data() + sizeof kMagic, sizeof header);
  const std::string_view payload(blob.data() + kHeader, bytes);
  if (header[0] != n || header[1] != dim || header[2] != hash64(payload)) return false;
  if (bytes) std::memcpy(rows, payload.data(), bytes);
  return true;
}

}  // namespace

std::string model_fingerprint(const fs::path& dir) { return model_content_hash(dir); }

DenseCorpusCandidates::DenseCorpusCandidates(const tasks::Task& task, std::vector<Document> corpus,
                                             std::shared_ptr<const models::TextEncoder> encoder,
                                             std::string weights_key, store::BlobStore* store, DenseCorpusOptions opts)
    : task_(task), corpus_(std::move(corpus)), encoder_(std::move(encoder)), opts_(std::move(opts)) {
  if (!encoder_) throw UsageError("dense corpus search needs an encoder");
  opts_.chunk = std::max<std::size_t>(1, opts_.chunk);
  opts_.embed_batch = std::max<std::size_t>(1, opts_.embed_batch);
  // The model's part of every chunk key; the corpus's part is each chunk's own content.
  Sha256 h;
  h.add("dense-corpus-v2").add(encoder_->id()).add(weights_key).add(static_cast<std::uint64_t>(encoder_->dim()));
  key_ = "dense-emb2:" + h.hex();
  // Content-defined chunks: passage i ends a chunk when a digest of its id and text says so
  // (once the chunk holds chunk/2 passages, with probability 2/chunk; at 2 x chunk always).
  // A boundary depends on the passage itself, not on its position, so a passage added,
  // changed or removed changes the chunk it is in (and seldom the next), and every other
  // chunk keeps its key: a grown or edited corpus embeds only what changed.
  const std::size_t half = std::max<std::size_t>(1, opts_.chunk / 2), cap = 2 * opts_.chunk;
  std::size_t lo = 0;
  std::string digests;  // of the chunk's passages so far
  for (std::size_t i = 0; i < corpus_.size(); ++i) {
    const std::string digest = text_key(corpus_[i].id + '\0' + corpus_[i].text);
    digests += digest;
    const std::size_t size = i + 1 - lo;
    const bool natural = size >= half && std::stoull(digest.substr(0, 12), nullptr, 16) % half == 0;
    if (natural || size >= cap || i + 1 == corpus_.size()) {
      Sha256 chunk;
      chunk.add(key_).add(digests).add(static_cast<std::uint64_t>(size));
      chunks_.push_back({lo, i + 1, key_ + "/" + chunk.hex()});
      digests.clear();
      lo = i + 1;
    }
  }
  // Without a weights key, stored embeddings could outlive the weights they came from.
  build(weights_key.empty() ? nullptr : store);
  opts_.cancelled = nullptr;  // asked only while building; what it refers to may not outlive the build
}

DenseCorpusCandidates::~DenseCorpusCandidates() = default;

std::unique_ptr<DenseCorpusCandidates> DenseCorpusCandidates::open(const tasks::Task& task, std::vector<Document> corpus,
                                                                   const fs::path& model_dir, store::BlobStore* store,
                                                                   const models::EncoderOptions& eo,
                                                                   DenseCorpusOptions opts) {
  auto encoder = shared_encoder(model_dir.string(), eo);
  Hasher h;
  h.add(model_fingerprint(model_dir)).add(static_cast<std::uint64_t>(eo.max_length)).add(eo.pooling);
  h.add(std::to_string(eo.normalize));
  return std::make_unique<DenseCorpusCandidates>(task, std::move(corpus), std::move(encoder), h.hex(), store,
                                                 std::move(opts));
}

void DenseCorpusCandidates::build(store::BlobStore* store) {
  const std::size_t N = corpus_.size(), D = encoder_->dim();
  auto emb = std::make_shared<CorpusEmbeddings>();
  emb->dim = D;
  emb->rows.assign(N * D, 0.f);
  std::vector<std::size_t> todo;
  std::size_t todo_rows = 0, bad = 0;
  for (std::size_t c = 0; c < chunks_.size(); ++c) {
    const auto& ch = chunks_[c];
    if (store) {
      if (auto blob = store->blob_get(ch.key)) {
        if (decode_chunk(*blob, ch.hi - ch.lo, D, emb->rows.data() + ch.lo * D)) continue;
        ++bad;
      }
    }
    todo.push_back(c);
    todo_rows += ch.hi - ch.lo;
  }
  if (bad)
    std::fprintf(stderr, "warning: %zu stored chunk(s) of corpus embeddings for %s were short or corrupt; embedding them again\n",
                 bad, encoder_->id().c_str());
  if (todo_rows) {
    if (opts_.progress)
      std::fprintf(stderr, "embedding %zu of %zu corpus passages with %s (%s)\n", todo_rows, N, encoder_->id().c_str(),
                   todo_rows == N ? "once: cached in the store" : "the rest come from the store");
    Progress progress("embedding corpus", todo_rows, opts_.progress);
    std::vector<std::string> texts;
    for (auto c : todo) {
      const std::size_t lo = chunks_[c].lo, hi = chunks_[c].hi;
      for (std::size_t b = lo; b < hi; b += opts_.embed_batch) {
        const std::size_t be = std::min(hi, b + opts_.embed_batch);
        if (opts_.cancelled && opts_.cancelled()) throw retrieval::FirstStageCancelled();
        texts.clear();
        for (std::size_t i = b; i < be; ++i) texts.push_back(corpus_[i].text);
        const auto v = encoder_->embed(texts);
        if (v.size() != (be - b) * D) throw Error("encoder " + encoder_->id() + " returned a wrong-sized batch");
        std::copy(v.begin(), v.end(), emb->rows.begin() + static_cast<std::ptrdiff_t>(b * D));
        passages_embedded_ += be - b;
        progress.add(be - b);
      }
      if (store) store->blob_put(chunks_[c].key, encode_chunk(emb->rows.data() + lo * D, hi - lo, D));
    }
    progress.finish();
  }
  emb->row_of.reserve(N);
  for (std::size_t i = 0; i < N; ++i) emb->row_of.emplace(text_key(corpus_[i].text), static_cast<std::uint32_t>(i));
  index_ = index::make_vector_index(opts_.index, D, opts_.index_options);
  index_->add(emb->rows.data(), N);
  emb_ = std::move(emb);
  publish_embeddings(encoder_->id(), emb_);
}

std::vector<index::VectorHits> DenseCorpusCandidates::search_texts(const std::vector<std::string>& texts,
                                                                   std::size_t k) const {
  if (texts.empty()) return {};
  const std::size_t D = encoder_->dim();
  std::vector<float> q;
  q.reserve(texts.size() * D);
  const bool show = opts_.progress && texts.size() > opts_.embed_batch;
  Progress progress("embedding queries", texts.size(), show);
  for (std::size_t b = 0; b < texts.size(); b += opts_.embed_batch) {
    const std::size_t be = std::min(texts.size(), b + opts_.embed_batch);
    const auto v = encoder_->embed(std::span<const std::string>(texts).subspan(b, be - b));
    q.insert(q.end(), v.begin(), v.end());
    progress.add(be - b);
  }
  if (show) progress.finish();
  queries_embedded_ += texts.size();
  return index_->search(q.data(), texts.size(), k);
}

std::vector<index::VectorHits> DenseCorpusCandidates::search(std::span<const std::string> queries, std::size_t k) const {
  return search_texts(std::vector<std::string>(queries.begin(), queries.end()), k);
}

void DenseCorpusCandidates::prefetch(std::span<const Example> examples) const {
  std::vector<std::string> todo;
  {
    std::lock_guard lock(mu_);
    std::unordered_map<std::string, bool> seen;
    for (const auto& ex : examples) {
      auto q = task_.query(ex);
      if (hits_.count(q) || !seen.emplace(q, true).second) continue;
      todo.push_back(std::move(q));
    }
  }
  auto hits = search_texts(todo, opts_.n);
  std::lock_guard lock(mu_);
  for (std::size_t i = 0; i < todo.size(); ++i) hits_.emplace(std::move(todo[i]), std::move(hits[i]));
}

std::vector<Document> DenseCorpusCandidates::candidates(const Example& ex) const {
  const std::string q = task_.query(ex);
  index::VectorHits h;
  bool found = false;
  {
    std::lock_guard lock(mu_);
    if (auto it = hits_.find(q); it != hits_.end()) {
      h = it->second;
      found = true;
    }
  }
  if (!found) h = search_texts({q}, opts_.n).at(0);
  std::vector<Document> out;
  out.reserve(h.size());
  for (auto id : h.ids) out.push_back(corpus_[static_cast<std::size_t>(id)]);
  return out;
}

namespace {

// `attune serve`'s first stage for a tenant's corpus under dense:DIR (retrieval/first_stage.h):
// the passages embedded once (cached in the caller's store scope by content-defined chunks, so
// a changed corpus embeds only the chunks it changed, and a restart none), an exact flat
// index, and the query's top n by inner product.
class DenseFirstStage final : public retrieval::CorpusFirstStage {
 public:
  DenseFirstStage(const std::string& dir, const std::vector<std::string>& texts, store::BlobStore* cache,
                  const models::EncoderOptions& eo, const retrieval::StageCancelled& cancelled) {
    std::vector<Document> docs(texts.size());
    for (std::size_t i = 0; i < texts.size(); ++i) {
      docs[i].id = std::to_string(i);
      docs[i].text = texts[i];
    }
    DenseCorpusOptions opts;
    opts.progress = false;
    // attune's own exact search, one thread a batch of queries (the server runs batches side
    // by side): Debian's FAISS flat index scans with its scalar reference loop, 55% of a
    // request's CPU in `perf` (bench/RESULTS.md).
    opts.index = "exact";
    opts.index_options.threads = 1;
    opts.cancelled = cancelled;
    index_ = DenseCorpusCandidates::open(free_text_task(), std::move(docs), dir, cache, eo, opts);
    // Concurrent requests' queries are encoded together and scanned in one pass over the
    // passages (the index reads each block of rows once for up to 8 queries), as the server's
    // dense queries are micro-batched (query_micro_batch()).
    if (const std::size_t n = query_micro_batch(); n > 1)
      batcher_ = std::make_unique<MicroBatcher<Request, Found>>(
          [this](std::span<const Request> batch) { return find(batch); }, n, query_micro_batch_concurrency());
  }
  std::vector<std::pair<std::size_t, double>> search(const std::string& query, std::size_t n) const override {
    if (n == 0 || index_->corpus().empty()) return {};
    Request r{query, std::min(n, index_->corpus().size())};
    Found f = batcher_ ? batcher_->run(std::move(r)) : std::move(find(std::span<const Request>(&r, 1))[0]);
    std::vector<std::pair<std::size_t, double>> out;
    out.reserve(f.hits.size());
    for (std::size_t i = 0; i < f.hits.size(); ++i)
      out.emplace_back(static_cast<std::size_t>(f.hits.ids[i]), static_cast<double>(f.hits.scores[i]));
    // The caller ranks next with dense:DIR on this thread: it takes the query's embedding
    // instead of encoding the query again.
    offer_query_embedding(index_->encoder().id(), query, std::move(f.query));
    return out;
  }
  std::size_t passages_embedded() const override { return index_->passages_embedded(); }
  std::size_t remove_stale_cache(store::BlobStore& cache) const override {
    std::unordered_set<std::string> live;
    for (const auto& c : index_->chunks()) live.insert(c.key);
    std::size_t removed = 0;
    for (const auto& key : cache.blob_keys(index_->cache_key() + "/"))
      if (!live.count(key) && cache.blob_delete(key)) ++removed;
    return removed;
  }

 private:
  struct Request {
    std::string query;
    std::size_t n = 0;
  };
  struct Found {
    index::VectorHits hits;
    std::vector<float> query;  // its embedding
  };
  // The batch's queries encoded in one forward pass and searched in one scan.
  std::vector<Found> find(std::span<const Request> batch) const {
    std::vector<std::string> texts;
    std::size_t n = 0;
    for (const auto& r : batch) {
      texts.push_back(r.query);
      n = std::max(n, r.n);
    }
    const auto& enc = index_->encoder();
    const std::size_t D = enc.dim();
    const auto q = enc.embed(texts);
    auto hits = index_->vectors().search(q.data(), batch.size(), n);
    std::vector<Found> out(batch.size());
    for (std::size_t i = 0; i < batch.size(); ++i) {
      out[i].hits = std::move(hits[i]);
      if (out[i].hits.size() > batch[i].n) {  // best first: its own n are the head
        out[i].hits.ids.resize(batch[i].n);
        out[i].hits.scores.resize(batch[i].n);
      }
      out[i].query.assign(q.begin() + static_cast<std::ptrdiff_t>(i * D), q.begin() + static_cast<std::ptrdiff_t>((i + 1) * D));
    }
    return out;
  }

  // DenseCorpusCandidates reads a task only to turn an Example into its query (candidates());
  // this stage searches free text (search()), so any task serves.
  static const tasks::Task& free_text_task() {
    static const auto task = tasks::make_task("qa");
    return *task;
  }
  std::unique_ptr<DenseCorpusCandidates> index_;
  std::unique_ptr<MicroBatcher<Request, Found>> batcher_;  // null: each query alone
};

}  // namespace

void register_first_stages(const Device& device) {
  models::EncoderOptions o;
  o.device = device;
  retrieval::register_first_stage("dense", [o](std::string_view dir, const std::vector<std::string>& texts,
                                               store::BlobStore* cache, const retrieval::StageCancelled& cancelled)
                                                -> std::unique_ptr<retrieval::CorpusFirstStage> {
    return std::make_unique<DenseFirstStage>(std::string(dir), texts, cache, o, cancelled);
  });
}

}  // namespace attune::neural
