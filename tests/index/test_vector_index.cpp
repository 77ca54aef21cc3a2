// VectorIndex: exact, FAISS flat and a brute-force double-precision scan agree; HNSW
// recall; the ordering contract (ties by lower row), k beyond the size, errors, and the
// FAISS serialised form.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <set>

#include "attune/core/error.h"
#include "attune/index/vector_index.h"

namespace attune::index {
namespace {

std::vector<float> random_rows(std::size_t n, std::size_t d, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.f, 1.f);
  std::vector<float> v(n * d);
  for (auto& x : v) x = g(rng);
  return v;
}

// Every row's score in double, sorted best first, ties by lower row; the first k.
VectorHits brute_force(const std::vector<float>& rows, const float* q, std::size_t d, std::size_t k) {
  const std::size_t n = rows.size() / d;
  std::vector<std::pair<double, std::int64_t>> all;
  for (std::size_t i = 0; i < n; ++i) {
    double s = 0;
    for (std::size_t j = 0; j < d; ++j) s += static_cast<double>(q[j]) * rows[i * d + j];
    all.emplace_back(s, static_cast<std::int64_t>(i));
  }
  std::sort(all.begin(), all.end(), [](auto& a, auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); });
  VectorHits h;
  for (std::size_t i = 0; i < std::min(k, n); ++i) {
    h.ids.push_back(all[i].second);
    h.scores.push_back(static_cast<float>(all[i].first));
  }
  return h;
}

TEST(VectorIndex, ExactFlatAndBruteForceAgreeOnRandomData) {
  // 37 dims: a tail after the 16-wide blocks; 5000 rows: the exact index shards rows over
  // threads for few queries and blocks queries for many.
  for (std::size_t nq : {1u, 3u, 70u}) {
    const std::size_t n = 5000, d = 37, k = 10;
    auto rows = random_rows(n, d, 7);
    auto queries = random_rows(nq, d, 8 + static_cast<std::uint32_t>(nq));
    auto exact = make_vector_index("exact", d);
    auto flat = make_vector_index("flat", d);
    // Added in two pieces: ids continue across adds.
    exact->add(std::span<const float>(rows).first(1000 * d));
    exact->add(std::span<const float>(rows).subspan(1000 * d));
    flat->add(rows.data(), 1000);
    flat->add(rows.data() + 1000 * d, n - 1000);
    EXPECT_EQ(exact->size(), n);
    EXPECT_EQ(flat->size(), n);
    auto he = exact->search(queries, k), hf = flat->search(queries, k);
    ASSERT_EQ(he.size(), nq);
    ASSERT_EQ(hf.size(), nq);
    for (std::size_t q = 0; q < nq; ++q) {
      auto bf = brute_force(rows, queries.data() + q * d, d, k);
      ASSERT_EQ(he[q].size(), k);
      ASSERT_EQ(hf[q].size(), k);
      for (std::size_t j = 0; j < k; ++j) {
        EXPECT_EQ(he[q].ids[j], bf.ids[j]) << "nq " << nq << " q " << q << " rank " << j;
        EXPECT_EQ(hf[q].ids[j], bf.ids[j]) << "nq " << nq << " q " << q << " rank " << j;
        EXPECT_NEAR(he[q].scores[j], bf.scores[j], 1e-4 * std::max(1.f, std::abs(bf.scores[j])));
        EXPECT_NEAR(hf[q].scores[j], he[q].scores[j], 1e-5 * std::max(1.f, std::abs(bf.scores[j])));
      }
    }
  }
}

// The exact index's scores are the same floats in every build (its AVX-512, AVX2 and baseline
// clones): each is summed in one fixed order, which this reference spells out (sixteen
// partial sums, the elements past the last whole sixteen, then the sums in order), on
// dimensions with and without such a tail and a row count that leaves a partial group.
TEST(VectorIndex, ExactScoresAreSummedInOneFixedOrder) {
  for (const std::size_t d : {std::size_t{5}, std::size_t{37}, std::size_t{128}}) {
    const std::size_t n = 1003;
    auto rows = random_rows(n, d, 21);
    auto query = random_rows(1, d, 22);
    ExactIndex index(d, 1);
    index.add(rows);
    const auto hits = index.search(query, 0);  // every row
    ASSERT_EQ(hits[0].size(), n);
    for (std::size_t j = 0; j < n; ++j) {
      const float* r = rows.data() + static_cast<std::size_t>(hits[0].ids[j]) * d;
      volatile float acc[16] = {};  // volatile: the reference itself neither reassociates nor contracts
      std::size_t c = 0;
      for (; c + 16 <= d; c += 16)
        for (std::size_t l = 0; l < 16; ++l) {
          const float p = query[c + l] * r[c + l];
          acc[l] = acc[l] + p;
        }
      volatile float s = 0;
      for (; c < d; ++c) {
        const float p = query[c] * r[c];
        s = s + p;
      }
      for (std::size_t l = 0; l < 16; ++l) s = s + acc[l];
      ASSERT_EQ(hits[0].scores[j], s) << "d " << d << " row " << hits[0].ids[j];
    }
  }
}

TEST(VectorIndex, ExactIsTheSameOnOneThreadAndMany) {
  const std::size_t n = 6000, d = 16;
  auto rows = random_rows(n, d, 3);
  auto queries = random_rows(5, d, 4);
  ExactIndex one(d, 1), many(d, 4);
  one.add(rows);
  many.add(rows);
  auto a = one.search(queries, 25), b = many.search(queries, 25);
  for (std::size_t q = 0; q < 5; ++q) {
    EXPECT_EQ(a[q].ids, b[q].ids);
    EXPECT_EQ(a[q].scores, b[q].scores);
  }
}

// Over many rows and a small k the exact index screens with int8 copies of its rows and
// scores in float only the rows its error bound cannot rule out. Its answers must be the full
// float scan's, bit for bit: the same rows, the same floats, the same ties. The data mixes
// embedding-like unit rows, exact duplicates (ties at every k), zero rows, rows a thousand
// times longer, and a cluster of near-duplicates closer than int8 can tell apart.
TEST(VectorIndex, ExactScreeningGivesTheFullScansAnswerBitForBit) {
  for (const std::size_t d : {std::size_t{37}, std::size_t{128}}) {
    const std::size_t n = 20000;
    auto rows = random_rows(n, d, 31);
    for (std::size_t i = 0; i < n; ++i) {  // unit rows, like a sentence encoder's
      double s = 0;
      for (std::size_t j = 0; j < d; ++j) s += double(rows[i * d + j]) * rows[i * d + j];
      for (std::size_t j = 0; j < d; ++j) rows[i * d + j] = static_cast<float>(rows[i * d + j] / std::sqrt(s));
    }
    std::mt19937 rng(5);
    for (std::size_t i = 0; i < 400; ++i) {  // exact duplicates of other rows
      const std::size_t a = rng() % n, b = rng() % n;
      std::copy_n(rows.begin() + static_cast<std::ptrdiff_t>(a * d), d, rows.begin() + static_cast<std::ptrdiff_t>(b * d));
    }
    for (std::size_t i = 0; i < 50; ++i) std::fill_n(rows.begin() + static_cast<std::ptrdiff_t>((rng() % n) * d), d, 0.f);
    for (std::size_t i = 0; i < 50; ++i)
      for (std::size_t j = 0, r = rng() % n; j < d; ++j) rows[r * d + j] *= 1000.f;
    for (std::size_t i = 0; i < 300; ++i)  // near-duplicates of row 7, a few ulps apart
      for (std::size_t j = 0, r = 100 + i * 13; j < d; ++j)
        rows[r * d + j] = std::nextafter(rows[7 * d + j], (i + j) % 2 ? 1.f : -1.f);
    auto queries = random_rows(20, d, 32);
    std::copy_n(rows.begin() + 7 * static_cast<std::ptrdiff_t>(d), d, queries.begin());  // a query at the cluster
    for (const std::size_t threads : {std::size_t{1}, std::size_t{3}}) {
      ExactIndex screened(d, threads), full(d, threads, /*screen=*/false);
      screened.add(rows);
      full.add(rows);
      for (const std::size_t k : {std::size_t{1}, std::size_t{10}, std::size_t{100}, std::size_t{1250}}) {
        ASSERT_TRUE(screened.screens(k));
        ASSERT_FALSE(full.screens(k));
        for (const std::size_t nq : {std::size_t{1}, std::size_t{20}}) {
          const auto a = screened.search(queries.data(), nq, k), b = full.search(queries.data(), nq, k);
          for (std::size_t q = 0; q < nq; ++q) {
            ASSERT_EQ(a[q].ids, b[q].ids) << "d " << d << " threads " << threads << " k " << k << " q " << q;
            ASSERT_EQ(a[q].scores, b[q].scores) << "d " << d << " threads " << threads << " k " << k << " q " << q;
          }
        }
      }
      // The screen did its job: far fewer rows scored in float than scanned.
      EXPECT_GT(screened.rows_screened(), 0u);
      EXPECT_LT(screened.rows_rescored() * 5, screened.rows_screened())
          << screened.rows_rescored() << " of " << screened.rows_screened() << " rows rescored";
      EXPECT_EQ(full.rows_screened(), 0u);
    }
  }
}

// Where screening cannot be proven right it is not used: a non-finite value in a row, a
// non-finite query, k too large a share of the rows, too few rows.
TEST(VectorIndex, ExactScreeningStepsAsideWhereItsBoundDoesNotHold) {
  const std::size_t n = 4096, d = 16;
  auto rows = random_rows(n, d, 41);
  ExactIndex a(d, 1), small(d, 1);
  a.add(rows);
  small.add(std::span<const float>(rows).first(1000 * d));
  EXPECT_TRUE(a.screens(10));
  EXPECT_FALSE(a.screens(0));     // every row
  EXPECT_FALSE(a.screens(1000));  // a quarter of them
  EXPECT_FALSE(small.screens(1));
  auto q = random_rows(1, d, 42);
  q[3] = std::numeric_limits<float>::quiet_NaN();
  a.search(q, 10);
  EXPECT_EQ(a.rows_screened(), 0u) << "a NaN query was screened";
  std::vector<float> bad(d, 1.f);
  bad[5] = std::numeric_limits<float>::infinity();
  a.add(bad);
  EXPECT_FALSE(a.screens(10));
}

TEST(VectorIndex, HnswRecallAtTenIsHigh) {
  const std::size_t n = 5000, d = 64, nq = 200, k = 10;
  auto rows = random_rows(n, d, 11);
  auto queries = random_rows(nq, d, 12);
  auto exact = make_vector_index("exact", d);
  auto hnsw = make_vector_index("hnsw", d);
  exact->add(rows);
  hnsw->add(rows);
  EXPECT_EQ(hnsw->kind(), "hnsw");
  auto he = exact->search(queries, k), hh = hnsw->search(queries, k);
  std::size_t found = 0;
  for (std::size_t q = 0; q < nq; ++q) {
    std::set<std::int64_t> truth(he[q].ids.begin(), he[q].ids.end());
    for (auto id : hh[q].ids) found += truth.count(id);
    for (std::size_t j = 1; j < hh[q].size(); ++j) EXPECT_GE(hh[q].scores[j - 1], hh[q].scores[j]);
  }
  const double recall = static_cast<double>(found) / (nq * k);
  EXPECT_GE(recall, 0.95) << "hnsw recall@10 " << recall;
}

TEST(VectorIndex, TiesGoToTheLowerRow) {
  // Rows 1, 3 and 4 are the same vector; row 0 is better, row 2 worse.
  const std::size_t d = 4;
  std::vector<float> rows = {2, 0, 0, 0,  1, 1, 0, 0,  0, 0, 0, 1,  1, 1, 0, 0,  1, 1, 0, 0};
  std::vector<float> q = {1, 1, 0, 0};
  for (const char* kind : {"exact", "flat"}) {
    auto idx = make_vector_index(kind, d);
    idx->add(rows);
    auto h = idx->search(q, 3);
    ASSERT_EQ(h.size(), 1u);
    EXPECT_EQ(h[0].ids, (std::vector<std::int64_t>{0, 1, 3})) << kind;  // score 2 for all three: lower rows win
    auto all = idx->search(q, 0);
    EXPECT_EQ(all[0].ids, (std::vector<std::int64_t>{0, 1, 3, 4, 2})) << kind;
    EXPECT_EQ(all[0].scores, (std::vector<float>{2, 2, 2, 2, 0})) << kind;
  }
  // HNSW is approximate (its neighbour pruning may even hide a duplicate), but what it
  // returns follows the same order: best first, equal scores by lower row.
  auto hnsw = make_vector_index("hnsw", d);
  hnsw->add(rows);
  auto h = hnsw->search(q, 0).at(0);
  ASSERT_GE(h.size(), 3u);
  EXPECT_EQ(h.ids[0], 0);
  for (std::size_t j = 1; j < h.size(); ++j)
    EXPECT_TRUE(h.scores[j - 1] > h.scores[j] || (h.scores[j - 1] == h.scores[j] && h.ids[j - 1] < h.ids[j]));
}

TEST(VectorIndex, KBeyondTheSizeAndEmptyIndexes) {
  const std::size_t d = 8;
  auto rows = random_rows(3, d, 5);
  auto q = random_rows(2, d, 6);
  for (const char* kind : {"exact", "flat", "hnsw"}) {
    auto empty = make_vector_index(kind, d);
    auto none = empty->search(q, 5);
    ASSERT_EQ(none.size(), 2u) << kind;
    EXPECT_EQ(none[0].size(), 0u) << kind;
    auto idx = make_vector_index(kind, d);
    idx->add(rows);
    auto h = idx->search(q, 100);
    ASSERT_EQ(h.size(), 2u);
    EXPECT_EQ(h[0].size(), 3u) << kind;  // never -1 ids from FAISS
    std::vector<std::int64_t> ids = h[1].ids;
    std::sort(ids.begin(), ids.end());
    EXPECT_EQ(ids, (std::vector<std::int64_t>{0, 1, 2})) << kind;
    EXPECT_TRUE(idx->search(q.data(), 0, 5).empty());
  }
}

TEST(VectorIndex, BadKindsAndDimensionMismatchesAreUsageErrors) {
  EXPECT_THROW(make_vector_index("ivf", 8), UsageError);
  EXPECT_THROW(make_vector_index("exact", 0), UsageError);
  EXPECT_THROW(make_vector_index("flat", 0), UsageError);
  for (const char* kind : {"exact", "flat", "hnsw"}) {
    auto idx = make_vector_index(kind, 4);
    EXPECT_EQ(idx->dim(), 4u);
    EXPECT_EQ(idx->kind(), kind);
    std::vector<float> seven(7, 1.f), four(4, 1.f);
    EXPECT_THROW(idx->add(seven), UsageError) << kind;
    idx->add(four);
    EXPECT_THROW(idx->search(seven, 1), UsageError) << kind;
    EXPECT_EQ(idx->search(four, 1).at(0).ids, (std::vector<std::int64_t>{0}));
  }
}

TEST(VectorIndex, FaissIndexRoundTripsThroughItsSerialisedForm) {
  const std::size_t n = 300, d = 16;
  auto rows = random_rows(n, d, 21);
  auto q = random_rows(4, d, 22);
  for (const char* kind : {"flat", "hnsw"}) {
    FaissIndex idx(kind, d);
    idx.add(rows);
    auto back = FaissIndex::deserialize(idx.serialize());
    EXPECT_EQ(back->kind(), kind);
    EXPECT_EQ(back->dim(), d);
    EXPECT_EQ(back->size(), n);
    auto a = idx.search(q, 7), b = back->search(q, 7);
    for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(a[i].ids, b[i].ids) << kind;
  }
  EXPECT_THROW(FaissIndex::deserialize("not an index"), Error);
}

}  // namespace
}  // namespace attune::index
