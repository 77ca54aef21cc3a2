#pragma once
// SHA-256 (OpenSSL's libcrypto) for identities that must not collide, by accident or on
// purpose: a model folder's content, cache keys that keep users' data apart. hash.h's
// Hasher is faster but not collision-resistant; use it only where a collision is harmless.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace attune {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  // Raw bytes, as they are (sha256_hex("abc") is the standard test vector).
  Sha256& update(std::string_view bytes);
  // A length-prefixed part: ("ab","c") and ("a","bc") differ.
  Sha256& add(std::string_view part);
  Sha256& add(std::uint64_t value);
  // 64 lowercase hex digits; the object cannot be updated afterwards.
  std::string hex();

 private:
  struct Ctx;
  std::unique_ptr<Ctx> ctx_;
};

std::string sha256_hex(std::string_view bytes);

}  // namespace attune
