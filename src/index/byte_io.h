#pragma once
// Little-endian integers, doubles by their bits, LEB128 varints and checked reads: the byte
// layouts the index layer stores (CorpusIndex, Bm25Okapi). Private to src/index.
#include <bit>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "attune/core/error.h"

namespace attune::index::detail {

inline std::uint64_t fnv1a(std::string_view s) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

class ByteWriter {
 public:
  void raw(const void* p, std::size_t n) { out_.append(static_cast<const char*>(p), n); }
  void u32(std::uint32_t v) {
    for (int i = 0; i < 4; ++i) out_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  }
  void u64(std::uint64_t v) {
    for (int i = 0; i < 8; ++i) out_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  }
  void f64(double v) { u64(std::bit_cast<std::uint64_t>(v)); }
  void varint(std::uint64_t v) {
    while (v >= 0x80) {
      out_.push_back(static_cast<char>((v & 0x7f) | 0x80));
      v >>= 7;
    }
    out_.push_back(static_cast<char>(v));
  }
  std::string& str() { return out_; }

 private:
  std::string out_;
};

// Context::kWhat starts every error message ("corpus index: bad serialized blob: ").
template <class Context>
class ByteReader {
 public:
  explicit ByteReader(std::string_view s) : s_(s) {}
  [[noreturn]] static void fail(const std::string& what) {
    throw Error(std::string(Context::kWhat) + what);
  }
  void need(std::size_t n, const char* what) {
    if (s_.size() - pos_ < n) fail(std::string("truncated while reading ") + what);
  }
  std::uint32_t u32(const char* what) {
    need(4, what);
    std::uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= std::uint32_t(std::uint8_t(s_[pos_ + i])) << (8 * i);
    pos_ += 4;
    return v;
  }
  std::uint64_t u64(const char* what) {
    need(8, what);
    std::uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= std::uint64_t(std::uint8_t(s_[pos_ + i])) << (8 * i);
    pos_ += 8;
    return v;
  }
  double f64(const char* what) { return std::bit_cast<double>(u64(what)); }
  std::uint64_t varint(const char* what) {
    std::uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      need(1, what);
      const auto byte = std::uint8_t(s_[pos_++]);
      v |= std::uint64_t(byte & 0x7f) << shift;
      if (!(byte & 0x80)) return v;
    }
    fail(std::string("overlong varint in ") + what);
  }
  // A count of items that each take at least `min_bytes`: bounded by what is left, so a
  // corrupt count cannot make us allocate gigabytes.
  std::size_t count(const char* what, std::size_t min_bytes) {
    const std::uint64_t n = varint(what);
    if (n > (s_.size() - pos_) / min_bytes) fail(std::string("impossible ") + what);
    return static_cast<std::size_t>(n);
  }
  std::string_view bytes(std::size_t n, const char* what) {
    need(n, what);
    auto v = s_.substr(pos_, n);
    pos_ += n;
    return v;
  }
  bool done() const { return pos_ == s_.size(); }

 private:
  std::string_view s_;
  std::size_t pos_ = 0;
};

}  // namespace attune::index::detail
