#include "attune/core/strings.h"

#include "attune/core/ascii_space.h"

#include <cstdint>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace attune {
std::size_t utf8_decode(std::string_view s, std::size_t i, std::uint32_t& cp) {
  const auto c = static_cast<unsigned char>(s[i]);
  auto cont = [&](std::size_t k) {
    return i + k < s.size() && (static_cast<unsigned char>(s[i + k]) & 0xC0) == 0x80;
  };
  auto byte = [&](std::size_t k) { return static_cast<std::uint32_t>(static_cast<unsigned char>(s[i + k]) & 0x3F); };
  if (c < 0x80) {
    cp = c;
    return 1;
  }
  if ((c & 0xE0) == 0xC0 && cont(1)) {
    cp = (static_cast<std::uint32_t>(c & 0x1F) << 6) | byte(1);
    if (cp >= 0x80) return 2;
  } else if ((c & 0xF0) == 0xE0 && cont(1) && cont(2)) {
    cp = (static_cast<std::uint32_t>(c & 0x0F) << 12) | (byte(1) << 6) | byte(2);
    if (cp >= 0x800 && (cp < 0xD800 || cp > 0xDFFF)) return 3;
  } else if ((c & 0xF8) == 0xF0 && cont(1) && cont(2) && cont(3)) {
    cp = (static_cast<std::uint32_t>(c & 0x07) << 18) | (byte(1) << 12) | (byte(2) << 6) | byte(3);
    if (cp >= 0x10000 && cp <= 0x10FFFF) return 4;
  }
  cp = kInvalidCodePoint;
  return 1;
}

bool is_python_space(std::uint32_t cp) {
  switch (cp) {
    case 0x09: case 0x0A: case 0x0B: case 0x0C: case 0x0D: case 0x1C: case 0x1D: case 0x1E:
    case 0x1F: case 0x20: case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029:
    case 0x202F: case 0x205F: case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}


namespace {
// Each byte's class for Python's str.split(): 0 a word byte, 1 an ASCII space (\t..\r,
// \x1c..\x1f, ' '), 2 the lead or continuation byte of a non-ASCII character (decoded).
struct ByteClasses {
  unsigned char of[256] = {};
  constexpr ByteClasses() {
    for (unsigned c = 0; c < 256; ++c)
      of[c] = c >= 0x80 ? 2 : (c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f)) ? 1 : 0;
  }
};
constexpr ByteClasses kBytes;
}  // namespace


void split_whitespace_views_into(std::string_view s, std::vector<std::string_view>& out) {
  out.clear();
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const std::size_t n = s.size();
  std::size_t i = 0, start = 0;
  bool in_word = false;
  while (i < n) {
#if defined(__SSE2__)
    // Sixteen ASCII bytes at once: their whitespace as bits, the words' ends and starts
    // found by counting trailing zeros. (The values are those of the table below.)
    if (i + 16 <= n) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i));
      if (_mm_movemask_epi8(v) == 0) {
        const unsigned space = ascii_space_mask(v), word = ~space & 0xFFFFu;
        unsigned off = 0;
        while (off < 16) {
          const unsigned m = (in_word ? space : word) & (0xFFFFu << off);
          if (!m) break;
          const auto pos = static_cast<unsigned>(__builtin_ctz(m));
          if (in_word) out.emplace_back(s.data() + start, i + pos - start);
          else start = i + pos;
          in_word = !in_word;
          off = pos;
        }
        i += 16;
        continue;
      }
    }
#endif
    // One character: a table lookup, or a UTF-8 decode for a non-ASCII one.
    std::size_t len = 1;
    bool space;
    if (const unsigned char c = kBytes.of[p[i]]; c != 2) {
      space = c == 1;
    } else {
      std::uint32_t cp;
      len = utf8_decode(s, i, cp);
      space = is_python_space(cp);
    }
    if (space) {
      if (in_word) out.emplace_back(s.data() + start, i - start);
      in_word = false;
    } else if (!in_word) {
      in_word = true;
      start = i;
    }
    i += len;
  }
  if (in_word) out.emplace_back(s.data() + start, n - start);
}

std::vector<std::string_view> split_whitespace_views(std::string_view s) {
  std::vector<std::string_view> out;
  split_whitespace_views_into(s, out);
  return out;
}

std::vector<std::string> split_whitespace(std::string_view s) {
  const auto views = split_whitespace_views(s);
  return std::vector<std::string>(views.begin(), views.end());
}

std::string strip(std::string_view s) {
  std::size_t i = 0, begin = s.size(), end = 0;
  while (i < s.size()) {
    std::uint32_t cp;
    std::size_t len = utf8_decode(s, i, cp);
    if (!is_python_space(cp)) {
      if (begin == s.size()) begin = i;
      end = i + len;
    }
    i += len;
  }
  if (begin == s.size()) return {};
  return std::string(s.substr(begin, end - begin));
}

std::string text_after(std::string_view s, std::string_view marker) {
  auto pos = s.find(marker);
  if (pos == std::string_view::npos) return strip(s);
  return strip(s.substr(pos + marker.size()));
}

std::string join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i) out += sep;
    out += parts[i];
  }
  return out;
}

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

bool valid_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    std::uint32_t cp;
    std::size_t len = utf8_decode(s, i, cp);
    if (cp == kInvalidCodePoint) return false;
    i += len;
  }
  return true;
}

}  // namespace attune
