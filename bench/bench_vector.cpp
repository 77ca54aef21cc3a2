// VectorIndex search throughput (index/vector_index.h): a batch of 256 queries, k = 100,
// over 50,000 x 256 random unit vectors (about the shape of an encoder's corpus: the Debian
// corpus has 49,626 passages), for each kind:
//   exact: contiguous matrix, blocked dot products, all cores (attune's own code); it
//          screens with int8 copies of the rows and rescores in float what the bound keeps
//   exact-full: the same without the screen (every row scored in float)
//   flat:  FAISS IndexFlatIP (exact; BLAS for batches)
//   hnsw:  FAISS IndexHNSWFlat, M = 32, efConstruction 80, efSearch as the argument
// Indexes are built once, outside the timed loop (VectorBuild/<kind> times the build).
// items/s = queries/s.
#include <benchmark/benchmark.h>

#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "attune/index/vector_index.h"

namespace {

constexpr std::size_t kRows = 50000, kDim = 256, kQueries = 256, kK = 100;

std::vector<float> unit_rows(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.f, 1.f);
  std::vector<float> v(n * kDim);
  for (std::size_t i = 0; i < n; ++i) {
    double norm = 0;
    for (std::size_t d = 0; d < kDim; ++d) norm += (v[i * kDim + d] = g(rng)) * v[i * kDim + d];
    for (std::size_t d = 0; d < kDim; ++d) v[i * kDim + d] /= static_cast<float>(std::sqrt(norm));
  }
  return v;
}

const std::vector<float>& rows() {
  static const auto r = unit_rows(kRows, 1);
  return r;
}
const std::vector<float>& queries() {
  static const auto q = unit_rows(kQueries, 2);
  return q;
}
const char* kind_name(std::int64_t i) { return i == 0 ? "exact" : i == 1 ? "flat" : i == 2 ? "hnsw" : "exact-full"; }

std::unique_ptr<attune::index::VectorIndex> make(const std::string& kind) {
  if (kind == "exact-full") return std::make_unique<attune::index::ExactIndex>(kDim, 0, /*screen=*/false);
  return attune::index::make_vector_index(kind, kDim);
}

attune::index::VectorIndex& built(const std::string& kind) {
  static std::map<std::string, std::unique_ptr<attune::index::VectorIndex>> cache;
  auto& idx = cache[kind];
  if (!idx) {
    idx = make(kind);
    idx->add(rows());
  }
  return *idx;
}

void VectorSearch(benchmark::State& state) {
  const std::string kind = kind_name(state.range(0));
  auto& idx = built(kind);
  if (kind == "hnsw") static_cast<attune::index::FaissIndex&>(idx).set_ef_search(static_cast<std::size_t>(state.range(1)));
  const std::size_t nq = static_cast<std::size_t>(state.range(2));
  auto* exact = dynamic_cast<attune::index::ExactIndex*>(&idx);
  const std::uint64_t r0 = exact ? exact->rows_rescored() : 0, s0 = exact ? exact->rows_screened() : 0;
  for (auto _ : state) benchmark::DoNotOptimize(idx.search(queries().data(), nq, kK));
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * nq));
  state.SetLabel(kind + (kind == "hnsw" ? " ef" + std::to_string(state.range(1)) : std::string()));
  if (exact && exact->rows_screened() > s0)  // the share of rows the int8 screen left to float
    state.counters["rescored"] = static_cast<double>(exact->rows_rescored() - r0) / static_cast<double>(exact->rows_screened() - s0);
}
// (kind, efSearch, queries per call): a batch of 256, and one query at a time.
BENCHMARK(VectorSearch)
    ->ArgsProduct({{0, 3, 1}, {0}, {256, 1}})
    ->Args({2, 128, 256})
    ->Args({2, 128, 1})
    ->Args({2, 256, 256})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void VectorBuild(benchmark::State& state) {
  const std::string kind = kind_name(state.range(0));
  for (auto _ : state) {
    auto idx = make(kind);
    idx->add(rows());
    benchmark::DoNotOptimize(idx->size());
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * kRows));
  state.SetLabel(kind);
}
BENCHMARK(VectorBuild)->Arg(0)->Arg(3)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
