#include "attune/index/vector_index.h"

#include <faiss/IndexFlat.h>
#include <faiss/IndexHNSW.h>
#include <faiss/impl/FaissException.h>
#include <faiss/impl/io.h>
#include <faiss/index_io.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "attune/core/error.h"
#include "attune/core/parallel.h"

namespace attune::index {
namespace {

// a better than b: higher score, or the same score and a lower row.
struct Better {
  bool operator()(const std::pair<float, std::int64_t>& a, const std::pair<float, std::int64_t>& b) const {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  }
};

// The k best of a stream of (score, row): a heap whose front is the worst kept.
class TopK {
 public:
  explicit TopK(std::size_t k) : k_(k) { h_.reserve(k); }
  void push(float s, std::int64_t id) {
    if (h_.size() < k_) {
      h_.emplace_back(s, id);
      std::push_heap(h_.begin(), h_.end(), Better{});
    } else if (Better{}({s, id}, h_.front())) {
      std::pop_heap(h_.begin(), h_.end(), Better{});
      h_.back() = {s, id};
      std::push_heap(h_.begin(), h_.end(), Better{});
    }
  }
  void merge(const TopK& o) {
    for (const auto& [s, id] : o.h_) push(s, id);
  }
  VectorHits take() {
    std::sort_heap(h_.begin(), h_.end(), Better{});  // best first
    VectorHits out;
    out.ids.reserve(h_.size());
    out.scores.reserve(h_.size());
    for (const auto& [s, id] : h_) {
      out.ids.push_back(id);
      out.scores.push_back(s);
    }
    return out;
  }

 private:
  std::size_t k_;
  std::vector<std::pair<float, std::int64_t>> h_;
};

// Sixteen independent partial sums: the compiler vectorises the inner loop without
// reassociating (this library is built with -ffp-contract=off and no fast-math).
inline float dot(const float* a, const float* b, std::size_t d) {
  float acc[16] = {};
  std::size_t i = 0;
  for (; i + 16 <= d; i += 16)
    for (std::size_t j = 0; j < 16; ++j) acc[j] += a[i + j] * b[i + j];
  float s = 0;
  for (; i < d; ++i) s += a[i] * b[i];
  for (std::size_t j = 0; j < 16; ++j) s += acc[j];
  return s;
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define ATTUNE_INDEX_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define ATTUNE_INDEX_CLONES
#endif

// out[r] = dot(q, row r) for n rows: compiled for AVX-512, AVX2 and the baseline, the widest
// the machine has taken at run time (the sums are the same in each: no reassociation, no FMA
// contraction). One query over a 50k x 128 corpus is memory-bound either way; the baseline
// build did it 4 floats at a time.
ATTUNE_INDEX_CLONES
void dot_rows(const float* q, const float* rows, std::size_t n, std::size_t dim, float* out) {
  for (std::size_t r = 0; r < n; ++r) out[r] = dot(q, rows + r * dim, dim);
}

void check_dim(std::size_t dim) {
  if (dim == 0) throw UsageError("vector index: the dimension must be positive");
}

}  // namespace

void VectorIndex::add(std::span<const float> rows) {
  if (rows.size() % dim() != 0)
    throw UsageError("vector index: " + std::to_string(rows.size()) + " floats is not a whole number of " +
                     std::to_string(dim()) + "-dimensional rows");
  add(rows.data(), rows.size() / dim());
}

std::vector<VectorHits> VectorIndex::search(std::span<const float> queries, std::size_t k) const {
  if (queries.size() % dim() != 0)
    throw UsageError("vector index: " + std::to_string(queries.size()) + " floats is not a whole number of " +
                     std::to_string(dim()) + "-dimensional queries");
  return search(queries.data(), queries.size() / dim(), k);
}

// ---------------------------------------------------------------- exact

ExactIndex::ExactIndex(std::size_t dim, std::size_t threads) : dim_(dim), threads_(threads) { check_dim(dim); }

void ExactIndex::add(const float* rows, std::size_t n) { data_.insert(data_.end(), rows, rows + n * dim_); }

std::vector<VectorHits> ExactIndex::search(const float* queries, std::size_t nq, std::size_t k) const {
  const std::size_t N = size();
  if (k == 0 || k > N) k = N;
  std::vector<VectorHits> out(nq);
  if (nq == 0 || k == 0) return out;
  constexpr std::size_t QB = 8;    // queries per block: each row is loaded once per block
  constexpr std::size_t RB = 256;  // rows per block: the block's scores stay in L1
  // Scans rows [r0, r1) for queries [q0, q1) into tops[0 .. q1 - q0).
  auto scan = [&](std::size_t q0, std::size_t q1, std::size_t r0, std::size_t r1, std::vector<TopK>& tops) {
    float scores[QB][RB];
    for (std::size_t qb = q0; qb < q1; qb += QB) {
      const std::size_t qe = std::min(q1, qb + QB);
      for (std::size_t rb = r0; rb < r1; rb += RB) {
        const std::size_t re = std::min(r1, rb + RB);
        for (std::size_t q = qb; q < qe; ++q)
          dot_rows(queries + q * dim_, data_.data() + rb * dim_, re - rb, dim_, scores[q - qb]);
        for (std::size_t q = qb; q < qe; ++q) {
          TopK& t = tops[q - q0];
          for (std::size_t r = rb; r < re; ++r) t.push(scores[q - qb][r - rb], static_cast<std::int64_t>(r));
        }
      }
    }
  };
  const std::size_t threads = threads_ ? threads_ : default_threads();
  if (threads <= 1 || nq >= 2 * threads * QB || N < 4096) {
    // Enough queries (or little work): threads take blocks of queries.
    const std::size_t blocks = (nq + QB - 1) / QB;
    parallel_for(blocks, threads, [&](std::size_t b) {
      const std::size_t q0 = b * QB, q1 = std::min(nq, q0 + QB);
      std::vector<TopK> tops(q1 - q0, TopK(k));
      scan(q0, q1, 0, N, tops);
      for (std::size_t q = q0; q < q1; ++q) out[q] = tops[q - q0].take();
    });
  } else {
    // Few queries over many rows: threads take shards of rows, then the tops merge.
    std::vector<std::vector<TopK>> shard_tops(threads, std::vector<TopK>(nq, TopK(k)));
    const std::size_t per = (N + threads - 1) / threads;
    parallel_for(threads, threads, [&](std::size_t s) {
      const std::size_t r0 = std::min(N, s * per), r1 = std::min(N, r0 + per);
      scan(0, nq, r0, r1, shard_tops[s]);
    });
    for (std::size_t q = 0; q < nq; ++q) {
      for (std::size_t s = 1; s < threads; ++s) shard_tops[0][q].merge(shard_tops[s][q]);
      out[q] = shard_tops[0][q].take();
    }
  }
  return out;
}

// ---------------------------------------------------------------- faiss

FaissIndex::FaissIndex(std::string_view kind, std::size_t dim, const VectorIndexOptions& opts)
    : kind_(kind), dim_(dim) {
  check_dim(dim);
  if (kind == "flat") {
    index_ = std::make_unique<faiss::IndexFlatIP>(static_cast<faiss::Index::idx_t>(dim));
  } else if (kind == "hnsw") {
    auto h = std::make_unique<faiss::IndexHNSWFlat>(static_cast<int>(dim), static_cast<int>(std::max<std::size_t>(2, opts.hnsw_m)),
                                                    faiss::METRIC_INNER_PRODUCT);
    h->hnsw.efConstruction = static_cast<int>(std::max<std::size_t>(1, opts.ef_construction));
    h->hnsw.efSearch = static_cast<int>(std::max<std::size_t>(1, opts.ef_search));
    index_ = std::move(h);
  } else {
    throw UsageError("unknown FAISS index kind \"" + std::string(kind) + "\" (expected flat or hnsw)");
  }
}

FaissIndex::FaissIndex() = default;
FaissIndex::~FaissIndex() = default;

std::size_t FaissIndex::size() const { return static_cast<std::size_t>(index_->ntotal); }

void FaissIndex::add(const float* rows, std::size_t n) {
  if (n == 0) return;
  try {
    index_->add(static_cast<faiss::Index::idx_t>(n), rows);
  } catch (const faiss::FaissException& e) {
    throw Error(std::string("FAISS add: ") + e.what());
  }
}

std::vector<VectorHits> FaissIndex::search(const float* queries, std::size_t nq, std::size_t k) const {
  const std::size_t N = size();
  if (k == 0 || k > N) k = N;
  std::vector<VectorHits> out(nq);
  if (nq == 0 || k == 0) return out;
  // HNSW explores max(efSearch, k) candidates anyway: asking for all of them costs nothing
  // and lets equal scores at the k-th place resolve by lower row among what it found.
  std::size_t kk = k;
  if (auto* h = dynamic_cast<const faiss::IndexHNSW*>(index_.get()))
    kk = std::min(N, std::max(k, static_cast<std::size_t>(h->hnsw.efSearch)));
  std::vector<float> D(nq * kk);
  std::vector<faiss::Index::idx_t> I(nq * kk);
  try {
    index_->search(static_cast<faiss::Index::idx_t>(nq), queries, static_cast<faiss::Index::idx_t>(kk), D.data(), I.data());
  } catch (const faiss::FaissException& e) {
    throw Error(std::string("FAISS search: ") + e.what());
  }
  for (std::size_t q = 0; q < nq; ++q) {
    std::vector<std::pair<float, std::int64_t>> hits;
    hits.reserve(kk);
    for (std::size_t j = 0; j < kk; ++j)
      if (I[q * kk + j] >= 0) hits.emplace_back(D[q * kk + j], static_cast<std::int64_t>(I[q * kk + j]));
    // FAISS's flat heap already prefers lower ids on ties; sorting makes the contract explicit.
    std::sort(hits.begin(), hits.end(), Better{});
    if (hits.size() > k) hits.resize(k);
    for (const auto& [s, id] : hits) {
      out[q].ids.push_back(id);
      out[q].scores.push_back(s);
    }
  }
  return out;
}

void FaissIndex::set_ef_search(std::size_t ef) {
  if (auto* h = dynamic_cast<faiss::IndexHNSW*>(index_.get())) h->hnsw.efSearch = static_cast<int>(std::max<std::size_t>(1, ef));
}

std::string FaissIndex::serialize() const {
  faiss::VectorIOWriter w;
  try {
    faiss::write_index(index_.get(), &w);
  } catch (const faiss::FaissException& e) {
    throw Error(std::string("FAISS write_index: ") + e.what());
  }
  return std::string(reinterpret_cast<const char*>(w.data.data()), w.data.size());
}

std::unique_ptr<FaissIndex> FaissIndex::deserialize(std::string_view blob) {
  faiss::VectorIOReader r;
  r.data.assign(reinterpret_cast<const std::uint8_t*>(blob.data()), reinterpret_cast<const std::uint8_t*>(blob.data()) + blob.size());
  std::unique_ptr<faiss::Index> idx;
  try {
    idx.reset(faiss::read_index(&r));
  } catch (const faiss::FaissException& e) {
    throw Error(std::string("FAISS read_index: not a valid index blob (") + e.what() + ")");
  }
  std::unique_ptr<FaissIndex> out(new FaissIndex());
  if (dynamic_cast<faiss::IndexFlatIP*>(idx.get())) out->kind_ = "flat";
  else if (dynamic_cast<faiss::IndexHNSWFlat*>(idx.get()) && idx->metric_type == faiss::METRIC_INNER_PRODUCT) out->kind_ = "hnsw";
  else throw Error("FAISS read_index: not an inner-product flat or HNSW index");
  out->dim_ = static_cast<std::size_t>(idx->d);
  out->index_ = std::move(idx);
  return out;
}

std::unique_ptr<VectorIndex> make_vector_index(std::string_view kind, std::size_t dim, const VectorIndexOptions& opts) {
  if (kind == "exact") return std::make_unique<ExactIndex>(dim, opts.threads);
  if (kind == "flat" || kind == "hnsw") return std::make_unique<FaissIndex>(kind, dim, opts);
  throw UsageError("unknown vector index \"" + std::string(kind) + "\" (expected exact, flat or hnsw)");
}

}  // namespace attune::index
