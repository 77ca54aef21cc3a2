#include "attune/core/rng.h"

#include "attune/core/hash.h"

namespace attune {

std::uint64_t Rng::below(std::uint64_t n) {
  // Rejection sampling keeps the result exactly uniform and identical on every platform.
  const std::uint64_t limit = n == 0 ? 0 : (~std::uint64_t{0} - (~std::uint64_t{0} % n + 1) % n);
  std::uint64_t x;
  do {
    x = gen_();
  } while (x > limit);
  return x % n;
}

std::uint64_t derive_seed(std::uint64_t seed, std::string_view key) {
  return hash64(key, seed ^ 0x5851f42d4c957f2dULL);
}

}  // namespace attune
