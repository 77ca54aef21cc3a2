#include "attune/core/hash.h"

#include <cstring>

namespace attune {
namespace {

std::uint64_t mix(std::uint64_t x) {  // splitmix64 finaliser
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

}  // namespace

std::uint64_t hash64(std::string_view data, std::uint64_t seed) {
  // 8-byte blocks folded through splitmix64: fast, stable across machines.
  std::uint64_t h = mix(seed + 0x9e3779b97f4a7c15ULL + data.size());
  std::size_t i = 0;
  for (; i + 8 <= data.size(); i += 8) {
    std::uint64_t block;
    std::memcpy(&block, data.data() + i, 8);
    h = mix(h ^ block) * 0x9e3779b97f4a7c15ULL;
  }
  std::uint64_t tail = 0;
  for (std::size_t j = 0; i + j < data.size(); ++j)
    tail |= static_cast<std::uint64_t>(static_cast<unsigned char>(data[i + j])) << (8 * j);
  return mix(h ^ tail ^ (data.size() << 56));
}

Hasher& Hasher::add(std::string_view part) {
  add(static_cast<std::uint64_t>(part.size()));
  a_ = hash64(part, a_);
  b_ = hash64(part, b_ ^ 0x632be59bd9b4e019ULL);
  return *this;
}

Hasher& Hasher::add(std::uint64_t value) {
  a_ = mix(a_ ^ value) + 0x9e3779b97f4a7c15ULL;
  b_ = mix(b_ + value) ^ 0xd6e8feb86659fd93ULL;
  return *this;
}

std::string Hasher::hex() const {
  static const char* digits = "0123456789abcdef";
  std::string out(32, '0');
  std::uint64_t parts[2] = {mix(a_ ^ b_), mix(b_ + 0x9e3779b97f4a7c15ULL)};
  for (int p = 0; p < 2; ++p)
    for (int i = 0; i < 16; ++i) out[p * 16 + i] = digits[(parts[p] >> (60 - 4 * i)) & 0xf];
  return out;
}

}  // namespace attune
