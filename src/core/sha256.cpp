#include "attune/core/sha256.h"

#include <openssl/evp.h>

#include "attune/core/error.h"

namespace attune {

struct Sha256::Ctx {
  EVP_MD_CTX* md = nullptr;
  bool done = false;
  ~Ctx() {
    if (md) EVP_MD_CTX_free(md);
  }
};

Sha256::Sha256() : ctx_(std::make_unique<Ctx>()) {
  ctx_->md = EVP_MD_CTX_new();
  if (!ctx_->md || EVP_DigestInit_ex(ctx_->md, EVP_sha256(), nullptr) != 1) throw Error("SHA-256: cannot initialise");
}

Sha256::~Sha256() = default;

Sha256& Sha256::update(std::string_view bytes) {
  if (ctx_->done) throw Error("SHA-256: update after hex()");
  if (!bytes.empty() && EVP_DigestUpdate(ctx_->md, bytes.data(), bytes.size()) != 1) throw Error("SHA-256: update failed");
  return *this;
}

Sha256& Sha256::add(std::uint64_t value) {
  unsigned char b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<unsigned char>(value >> (8 * i));
  return update(std::string_view(reinterpret_cast<const char*>(b), 8));
}

Sha256& Sha256::add(std::string_view part) {
  add(static_cast<std::uint64_t>(part.size()));
  return update(part);
}

std::string Sha256::hex() {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (ctx_->done || EVP_DigestFinal_ex(ctx_->md, out, &n) != 1) throw Error("SHA-256: final failed");
  ctx_->done = true;
  static const char* digits = "0123456789abcdef";
  std::string s;
  s.reserve(2 * n);
  for (unsigned int i = 0; i < n; ++i) {
    s.push_back(digits[out[i] >> 4]);
    s.push_back(digits[out[i] & 15]);
  }
  return s;
}

std::string sha256_hex(std::string_view bytes) { return Sha256().update(bytes).hex(); }

}  // namespace attune
