#pragma once
// Stable content hashes (same value on every machine and run) for cache keys and
// dataset identity. Not cryptographic.
#include <cstdint>
#include <string>
#include <string_view>

namespace attune {

std::uint64_t hash64(std::string_view data, std::uint64_t seed = 0);

// Incremental 128-bit hash rendered as 32 hex digits. Parts are length-prefixed, so
// ("ab","c") and ("a","bc") differ.
class Hasher {
 public:
  Hasher& add(std::string_view part);
  Hasher& add(std::uint64_t value);
  std::string hex() const;

 private:
  std::uint64_t a_ = 0x9e3779b97f4a7c15ULL, b_ = 0xc2b2ae3d27d4eb4fULL;
};

}  // namespace attune
