#pragma once
// Seeded, platform-independent randomness. std::*_distribution results differ between
// standard libraries, so attune draws its own integers and doubles from mt19937_64.
#include <algorithm>
#include <cstdint>
#include <random>
#include <string_view>
#include <utility>
#include <vector>

namespace attune {

class Rng {
 public:
  explicit Rng(std::uint64_t seed) : gen_(seed) {}
  std::uint64_t next() { return gen_(); }
  // Uniform integer in [0, n); n > 0.
  std::uint64_t below(std::uint64_t n);
  // Uniform double in [0, 1).
  double uniform() { return static_cast<double>(gen_() >> 11) * 0x1.0p-53; }

 private:
  std::mt19937_64 gen_;
};

// Derives an independent stream seed from a run seed and a key (e.g. a query id), so a
// result does not depend on the order or thread in which items are processed.
std::uint64_t derive_seed(std::uint64_t seed, std::string_view key);

// Fisher-Yates with rng.below: the same order on every platform for a seed.
template <class T>
void seeded_shuffle(std::vector<T>& v, Rng& rng) {
  for (std::size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[rng.below(i)]);
}

// Keeps a sample of `limit` of `items` drawn with `rng`, in their original order (all of them
// when limit is 0 or at least their number).
template <class T>
void keep_sample(std::vector<T>& items, std::size_t limit, Rng& rng) {
  if (limit == 0 || limit >= items.size()) return;
  std::vector<std::size_t> pos(items.size());
  for (std::size_t i = 0; i < pos.size(); ++i) pos[i] = i;
  seeded_shuffle(pos, rng);
  pos.resize(limit);
  std::sort(pos.begin(), pos.end());
  std::vector<T> kept;
  kept.reserve(limit);
  for (auto p : pos) kept.push_back(std::move(items[p]));
  items = std::move(kept);
}

}  // namespace attune
