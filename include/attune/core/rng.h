#pragma once
// Seeded, platform-independent randomness. std::*_distribution results differ between
// standard libraries, so attune draws its own integers and doubles from mt19937_64.
#include <cstdint>
#include <random>
#include <string_view>

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

}  // namespace attune
