#include "attune/index/vector_index.h"

#include <faiss/IndexFlat.h>
#include <faiss/IndexHNSW.h>
#include <faiss/impl/FaissException.h>
#include <faiss/impl/io.h>
#include <faiss/index_io.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <queue>
#include <utility>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

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

// Floats scored for a list of rows (ascending), the same dot as dot_rows.
ATTUNE_INDEX_CLONES
void dot_listed(const float* q, const float* data, const std::uint32_t* rows, std::size_t n, std::size_t dim, float* out) {
  for (std::size_t i = 0; i < n; ++i) out[i] = dot(q, data + static_cast<std::size_t>(rows[i]) * dim, dim);
}

// ---- the int8 screen. Integer sums are exact, so every kernel below gives the same numbers.

void int8_dots_scalar(const std::int16_t* q, const std::int8_t* rows, std::size_t n, std::size_t dim, std::int32_t* out) {
  for (std::size_t r = 0; r < n; ++r) {
    const std::int8_t* x = rows + r * dim;
    std::int32_t s = 0;
    for (std::size_t i = 0; i < dim; ++i) s += static_cast<std::int32_t>(q[i]) * x[i];
    out[r] = s;
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
// One row's 16-wide blocks: int8 widened to int16, multiplied and summed in pairs into int32
// (vpmaddwd: |127 * 127 * 2| fits).
__attribute__((target("avx2"))) inline __m256i int8_row_avx2(const std::int16_t* q, const std::int8_t* x, std::size_t main) {
  __m256i acc = _mm256_setzero_si256();
  for (std::size_t i = 0; i < main; i += 16) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + i));
    const __m256i b = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)));
    acc = _mm256_add_epi32(acc, _mm256_madd_epi16(a, b));
  }
  return acc;
}

// Four rows at a time, their lanes reduced together; the elements past the last whole 16
// added one by one.
__attribute__((target("avx2"))) void int8_dots_avx2(const std::int16_t* q, const std::int8_t* rows, std::size_t n,
                                                     std::size_t dim, std::int32_t* out) {
  const std::size_t main = dim & ~std::size_t{15};
  std::size_t r = 0;
  for (; r + 4 <= n; r += 4) {
    const std::int8_t* x = rows + r * dim;
    const __m256i a0 = int8_row_avx2(q, x, main), a1 = int8_row_avx2(q, x + dim, main);
    const __m256i a2 = int8_row_avx2(q, x + 2 * dim, main), a3 = int8_row_avx2(q, x + 3 * dim, main);
    const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(a0, a1), _mm256_hadd_epi32(a2, a3));
    const __m128i s = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
    alignas(16) std::int32_t v[4];
    _mm_store_si128(reinterpret_cast<__m128i*>(v), s);
    for (std::size_t j = 0; j < 4; ++j) {
      std::int32_t t = 0;
      for (std::size_t i = main; i < dim; ++i) t += static_cast<std::int32_t>(q[i]) * x[j * dim + i];
      out[r + j] = v[j] + t;
    }
  }
  if (r < n) int8_dots_scalar(q, rows + r * dim, n - r, dim, out + r);
}
#endif

using Int8Dots = void (*)(const std::int16_t*, const std::int8_t*, std::size_t, std::size_t, std::int32_t*);
Int8Dots int8_dots_kernel() {
#if defined(__x86_64__) && defined(__GNUC__)
  if (__builtin_cpu_supports("avx2")) return int8_dots_avx2;
#endif
  return int8_dots_scalar;
}
const Int8Dots int8_dots = int8_dots_kernel();

// x = scale * q8 + e, |q8| <= 127, q8 nearest; returns ||e||_2 and ||x||_2 (in double; the
// decomposition is exact in double since scale * q8 needs 24 + 8 bits).
struct Quantized {
  float scale = 0;
  double err = 0, norm = 0, q8_norm = 0;
  bool finite = true;
};
Quantized quantize(const float* x, std::size_t dim, std::int8_t* q8) {
  Quantized out;
  float mx = 0;
  for (std::size_t i = 0; i < dim; ++i) {
    if (!std::isfinite(x[i])) out.finite = false;
    mx = std::max(mx, std::fabs(x[i]));
  }
  if (!out.finite) {
    std::fill(q8, q8 + dim, std::int8_t{0});
    return out;
  }
  out.scale = mx / 127.0f;
  double e2 = 0, n2 = 0, q2 = 0;
  for (std::size_t i = 0; i < dim; ++i) {
    long v = out.scale > 0 ? std::lrint(static_cast<double>(x[i]) / out.scale) : 0;
    v = std::clamp(v, -127L, 127L);
    q8[i] = static_cast<std::int8_t>(v);
    const double e = static_cast<double>(x[i]) - static_cast<double>(out.scale) * static_cast<double>(v);
    e2 += e * e;
    n2 += static_cast<double>(x[i]) * x[i];
    q2 += static_cast<double>(v) * v;
  }
  out.err = std::sqrt(e2);
  out.norm = std::sqrt(n2);
  out.q8_norm = std::sqrt(q2);
  return out;
}

// A float no smaller than v (and a hair above, for the double arithmetic that produced it).
float up(double v) {
  const float f = static_cast<float>(v * (1 + 1e-9));
  return std::nextafter(f, std::numeric_limits<float>::infinity());
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

ExactIndex::ExactIndex(std::size_t dim, std::size_t threads, bool screen)
    : dim_(dim), threads_(threads), screen_(screen) {
  check_dim(dim);
}

void ExactIndex::add(const float* rows, std::size_t n) {
  data_.insert(data_.end(), rows, rows + n * dim_);
  if (!screen_) return;
  const std::size_t r0 = scale_.size();
  q8_.resize((r0 + n) * dim_);
  for (std::size_t r = 0; r < n; ++r) {
    const auto qz = quantize(rows + r * dim_, dim_, q8_.data() + (r0 + r) * dim_);
    finite_ = finite_ && qz.finite;
    scale_.push_back(qz.scale);
    err_.push_back(up(qz.err));
    norm_.push_back(up(qz.norm));
  }
}

bool ExactIndex::screens(std::size_t k) const {
  const std::size_t N = size();
  if (k == 0 || k > N) k = N;
  // The int8 dot products sum up to 127 * 127 * dim in an int32 (so dim <= 65,536), and the
  // float error bound below assumes dim * 2^-24 < 1/2.
  return screen_ && finite_ && N >= 2048 && k * 16 <= N && dim_ <= 65536;
}

// One screened pass: for each query of a block, the int8 score of every row of a range and its
// proven interval [lo, hi] around the float dot the full scan computes; the rows whose hi
// reaches the k-th largest lo are scored in float and kept by the same TopK.
//
// With q = sq q8 + eq and x = sx x8 + ex (x8, q8 the nearest int8 multiples):
//   q.x = sq sx (q8.x8) + sq (q8.ex) + eq.x, so
//   |q.x - sq sx (q8.x8)| <= sq ||q8|| ||ex|| + ||eq|| ||x||   (Cauchy-Schwarz),
// and the float dot (any summation order, no FMA) is within gamma_d sum|q_i x_i| <=
// gamma_d ||q|| ||x|| of q.x, gamma_d = d u / (1 - d u), u = 2^-24. At least k rows have a
// float dot >= their lo >= the k-th largest lo, so a row whose hi is below it is strictly
// worse than k others and cannot be in the top k, ties included.
struct ExactIndex::Scanner {
  const ExactIndex& ix;
  std::size_t k;
  void run(const float* queries, std::size_t q0, std::size_t q1, std::size_t r0, std::size_t r1, std::vector<TopK>& tops) const {
    const std::size_t D = ix.dim_;
    constexpr std::size_t QB = 8, RB = 256;
    std::vector<std::int16_t> q16(QB * D);
    std::vector<std::int8_t> q8(D);
    std::int32_t dots[QB][RB];
    struct Query {
      double sq = 0, c1 = 0, c2 = 0;
      std::priority_queue<double, std::vector<double>, std::greater<>> lows;  // the k largest lo
      std::vector<std::uint32_t> rows;                                        // hi >= the running k-th lo
      std::vector<double> highs;
    };
    std::vector<Query> qs(QB);
    const double u = std::ldexp(1.0, -24), gamma = static_cast<double>(D) * u / (1 - static_cast<double>(D) * u);
    std::vector<float> scores;
    std::uint64_t rescored = 0;
    for (std::size_t qb = q0; qb < q1; qb += QB) {
      const std::size_t qe = std::min(q1, qb + QB);
      for (std::size_t q = qb; q < qe; ++q) {
        const auto qz = quantize(queries + q * D, D, q8.data());
        for (std::size_t i = 0; i < D; ++i) q16[(q - qb) * D + i] = q8[i];
        Query& Q = qs[q - qb];
        Q.sq = qz.scale;
        Q.c1 = static_cast<double>(qz.scale) * qz.q8_norm;
        Q.c2 = qz.err + gamma * qz.norm;
        Q.lows = {};
        Q.rows.clear();
        Q.highs.clear();
      }
      for (std::size_t rb = r0; rb < r1; rb += RB) {
        const std::size_t re = std::min(r1, rb + RB);
        for (std::size_t q = qb; q < qe; ++q)
          int8_dots(q16.data() + (q - qb) * D, ix.q8_.data() + rb * D, re - rb, D, dots[q - qb]);
        for (std::size_t q = qb; q < qe; ++q) {
          Query& Q = qs[q - qb];
          for (std::size_t r = rb; r < re; ++r) {
            const double approx = Q.sq * static_cast<double>(ix.scale_[r]) * static_cast<double>(dots[q - qb][r - rb]);
            const double bound = (Q.c1 * ix.err_[r] + Q.c2 * ix.norm_[r]) * (1 + 1e-9) + 1e-12 * std::fabs(approx) + 1e-300;
            const double lo = approx - bound, hi = approx + bound;
            if (Q.lows.size() < k) Q.lows.push(lo);
            else if (lo > Q.lows.top()) {
              Q.lows.pop();
              Q.lows.push(lo);
            }
            if (Q.lows.size() < k || hi >= Q.lows.top()) {
              Q.rows.push_back(static_cast<std::uint32_t>(r));
              Q.highs.push_back(hi);
            }
          }
        }
      }
      for (std::size_t q = qb; q < qe; ++q) {
        Query& Q = qs[q - qb];
        const double t = Q.lows.size() < k ? -std::numeric_limits<double>::infinity() : Q.lows.top();
        std::size_t m = 0;
        for (std::size_t j = 0; j < Q.rows.size(); ++j)
          if (Q.highs[j] >= t) Q.rows[m++] = Q.rows[j];
        scores.resize(m);
        dot_listed(queries + q * D, ix.data_.data(), Q.rows.data(), m, D, scores.data());
        TopK& top = tops[q - q0];
        for (std::size_t j = 0; j < m; ++j) top.push(scores[j], static_cast<std::int64_t>(Q.rows[j]));
        rescored += m;
      }
    }
    ix.rescored_.fetch_add(rescored, std::memory_order_relaxed);
    ix.screened_.fetch_add((q1 - q0) * (r1 - r0), std::memory_order_relaxed);
  }
};

std::vector<VectorHits> ExactIndex::search(const float* queries, std::size_t nq, std::size_t k) const {
  const std::size_t N = size();
  if (k == 0 || k > N) k = N;
  std::vector<VectorHits> out(nq);
  if (nq == 0 || k == 0) return out;
  constexpr std::size_t QB = 8;    // queries per block: each row is loaded once per block
  constexpr std::size_t RB = 256;  // rows per block: the block's scores stay in L1
  // Scans rows [r0, r1) for queries [q0, q1) into tops[0 .. q1 - q0).
  bool screen = screens(k);
  if (screen)  // a non-finite query keeps the float scan (its order of NaNs is the reference's)
    for (std::size_t i = 0; i < nq * dim_ && screen; ++i) screen = std::isfinite(queries[i]);
  const Scanner screened{*this, k};
  auto scan = [&](std::size_t q0, std::size_t q1, std::size_t r0, std::size_t r1, std::vector<TopK>& tops) {
    if (screen) return screened.run(queries, q0, q1, r0, r1, tops);
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
  if (kind == "exact") return std::make_unique<ExactIndex>(dim, opts.threads, opts.screen);
  if (kind == "flat" || kind == "hnsw") return std::make_unique<FaissIndex>(kind, dim, opts);
  throw UsageError("unknown vector index \"" + std::string(kind) + "\" (expected exact, flat or hnsw)");
}

}  // namespace attune::index
