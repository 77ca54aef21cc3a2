#pragma once
// Maximum inner-product search over float32 vectors: the k rows with the largest
// <query, row>. Two implementations behind one interface:
//  - ExactIndex: a contiguous row-major matrix and blocked dot products, spread over
//    threads (attune/core/parallel.h). The right tool for a profile (tens to thousands of
//    rows) and the reference the others are tested against. Over many rows and a small k it
//    screens first: an int8 copy of every row gives each row's score within a proven error
//    bound, and only the rows whose bound reaches the k-th best are scored in float. The
//    answer is the full float scan's, bit for bit (same scores, same ties), not an
//    approximation.
//  - FaissIndex: FAISS IndexFlatIP (exact, BLAS for batches) or IndexHNSWFlat (approximate,
//    M = 32) for a corpus. Debian's FAISS answers single queries slowly: batch them.
// Torch-free and FAISS-free header (FAISS stays in the .cpp).
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace faiss {
struct Index;
}

namespace attune::index {

// One query's answer: rows (0-based, in the order they were added) and scores, best first;
// equal scores by lower row.
struct VectorHits {
  std::vector<std::int64_t> ids;
  std::vector<float> scores;
  std::size_t size() const { return ids.size(); }
};

struct VectorIndexOptions {
  std::size_t threads = 0;          // ExactIndex search threads (0 = all cores)
  bool screen = true;               // ExactIndex: int8 screening where it pays (exact either way)
  std::size_t hnsw_m = 32;          // hnsw: neighbours per node
  std::size_t ef_construction = 80; // hnsw: candidate list while building
  std::size_t ef_search = 128;      // hnsw: candidate list while searching (recall vs speed)
};

class VectorIndex {
 public:
  virtual ~VectorIndex() = default;
  virtual std::size_t dim() const = 0;
  virtual std::size_t size() const = 0;
  // "exact", "flat" or "hnsw".
  virtual std::string kind() const = 0;
  // Appends n rows (row-major n x dim()); they get ids size() .. size() + n - 1.
  virtual void add(const float* rows, std::size_t n) = 0;
  // For each of nq queries (row-major nq x dim()), the min(k, size()) best rows; k = 0
  // means every row (hnsw: as many as it finds; ties by lower row among the rows it
  // visited). Thread-safe between adds.
  virtual std::vector<VectorHits> search(const float* queries, std::size_t nq, std::size_t k) const = 0;

  // Checked forms: UsageError when the length is not a multiple of dim().
  void add(std::span<const float> rows);
  std::vector<VectorHits> search(std::span<const float> queries, std::size_t k) const;
};

class ExactIndex final : public VectorIndex {
 public:
  explicit ExactIndex(std::size_t dim, std::size_t threads = 0, bool screen = true);
  std::size_t dim() const override { return dim_; }
  std::size_t size() const override { return dim_ ? data_.size() / dim_ : 0; }
  std::string kind() const override { return "exact"; }
  using VectorIndex::add;
  using VectorIndex::search;
  void add(const float* rows, std::size_t n) override;
  std::vector<VectorHits> search(const float* queries, std::size_t nq, std::size_t k) const override;
  // Row i (dim() floats).
  const float* row(std::size_t i) const { return data_.data() + i * dim_; }
  // Rows scored in float by screened searches so far, and rows those searches screened
  // (each query counts every row it scanned): how much the int8 bound saved.
  std::uint64_t rows_rescored() const { return rescored_.load(std::memory_order_relaxed); }
  std::uint64_t rows_screened() const { return screened_.load(std::memory_order_relaxed); }
  // Whether a search for k of the rows would screen (else it scans in float).
  bool screens(std::size_t k) const;

 private:
  struct Scanner;
  std::size_t dim_, threads_;
  bool screen_;
  std::vector<float> data_;
  // The int8 copy: row r is scale_[r] * q8_[r*dim .. +dim) + e with ||e||_2 <= err_[r];
  // norm_[r] >= ||row r||_2. Any non-finite value in a row switches screening off for good.
  std::vector<std::int8_t> q8_;
  std::vector<float> scale_, err_, norm_;
  bool finite_ = true;
  mutable std::atomic<std::uint64_t> rescored_{0}, screened_{0};
};

class FaissIndex final : public VectorIndex {
 public:
  // kind "flat" (IndexFlatIP) or "hnsw" (IndexHNSWFlat, inner product).
  FaissIndex(std::string_view kind, std::size_t dim, const VectorIndexOptions& opts = {});
  ~FaissIndex() override;
  std::size_t dim() const override { return dim_; }
  std::size_t size() const override;
  std::string kind() const override { return kind_; }
  using VectorIndex::add;
  using VectorIndex::search;
  void add(const float* rows, std::size_t n) override;
  std::vector<VectorHits> search(const float* queries, std::size_t nq, std::size_t k) const override;
  // hnsw only: the search-time candidate list (ignored for flat).
  void set_ef_search(std::size_t ef);
  // FAISS's own serialised form (faiss::write_index) and back; Error on a bad blob.
  std::string serialize() const;
  static std::unique_ptr<FaissIndex> deserialize(std::string_view blob);

 private:
  FaissIndex();
  std::string kind_;
  std::size_t dim_ = 0;
  std::unique_ptr<faiss::Index> index_;
};

// "exact" -> ExactIndex; "flat" / "hnsw" -> FaissIndex. UsageError for another kind or dim 0.
std::unique_ptr<VectorIndex> make_vector_index(std::string_view kind, std::size_t dim,
                                               const VectorIndexOptions& opts = {});

}  // namespace attune::index
