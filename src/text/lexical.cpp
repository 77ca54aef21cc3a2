#include "attune/text/lexical.h"

#include <cstdint>

#include "attune/core/strings.h"

namespace attune::text {
namespace {

constexpr std::uint32_t kInvalid = kInvalidCodePoint;  // separators for every tokenizer here
using attune::utf8_decode;

void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

bool is_ascii_alnum(std::uint32_t c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

char ascii_lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

// Python str.lower() for the scripts European answers use: ASCII, Latin-1 Supplement,
// Latin Extended-A, basic Cyrillic, fullwidth Latin and the three letterlike symbols that
// lower to letters (checked against CPython over those blocks). Other code points,
// Greek included (its final-sigma rule needs context), are returned unchanged; U+0130 is handled by the caller (it lowers to two
// code points).
std::uint32_t lower_cp(std::uint32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 0x20;
  if (c < 0xC0) return c;
  if (c <= 0xDE) return c == 0xD7 ? c : c + 0x20;
  if (c >= 0x100 && c <= 0x17F) {
    if (c <= 0x12F || (c >= 0x132 && c <= 0x137) || (c >= 0x14A && c <= 0x177))
      return (c % 2 == 0) ? c + 1 : c;
    if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) return (c % 2 == 1) ? c + 1 : c;
    if (c == 0x178) return 0xFF;
    return c;
  }
  if (c >= 0x400 && c <= 0x40F) return c + 0x50;
  if (c >= 0x410 && c <= 0x42F) return c + 0x20;
  if (c >= 0xFF21 && c <= 0xFF3A) return c + 0x20;
  if (c == 0x2126) return 0x3C9;  // OHM SIGN -> omega
  if (c == 0x212A) return 'k';    // KELVIN SIGN
  if (c == 0x212B) return 0xE5;   // ANGSTROM SIGN -> a with ring
  return c;
}

// Python's `\w` (str.isalnum() or '_') as `\b` in SQuAD's article regex sees it.
// Exact for ASCII, Latin-1, combining marks, General Punctuation, CJK punctuation and
// fullwidth forms (checked against CPython); every other non-ASCII code point is taken
// to be a letter, which holds for the letters and ideographs answers are made of.
bool is_word_cp(std::uint32_t c) {
  if (c < 0x80) return is_ascii_alnum(c) || c == '_';
  if (c == kInvalid || is_python_space(c)) return false;
  if (c <= 0xBF) {
    switch (c) {
      case 0xAA: case 0xB2: case 0xB3: case 0xB5: case 0xB9: case 0xBA: case 0xBC: case 0xBD:
      case 0xBE:
        return true;
      default:
        return false;
    }
  }
  if (c == 0xD7 || c == 0xF7) return false;
  if (c >= 0x300 && c <= 0x36F) return false;
  if (c >= 0x2000 && c <= 0x206F) return false;
  if (c >= 0x3000 && c <= 0x303F) {
    return c == 0x3005 || c == 0x3006 || c == 0x3007 || (c >= 0x3021 && c <= 0x3029) ||
           (c >= 0x3031 && c <= 0x3035) || (c >= 0x3038 && c <= 0x303C);
  }
  if ((c >= 0xFF01 && c <= 0xFF0F) || (c >= 0xFF1A && c <= 0xFF20) || (c >= 0xFF3B && c <= 0xFF40) ||
      (c >= 0xFF5B && c <= 0xFF65))
    return false;
  return true;
}

// Python's string.punctuation.
bool is_ascii_punct(std::uint32_t c) {
  return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) ||
         (c >= 0x7B && c <= 0x7E);
}

}  // namespace

std::vector<std::string_view> bm25_token_views(std::string_view s) { return split_whitespace_views(s); }
void bm25_token_views_into(std::string_view s, std::vector<std::string_view>& out) { split_whitespace_views_into(s, out); }
std::vector<std::string> bm25_tokens(std::string_view s) {
  const auto views = bm25_token_views(s);
  return std::vector<std::string>(views.begin(), views.end());
}

std::vector<std::string> rouge_tokens(std::string_view s) {
  // After lower() the only characters that can survive [^a-z0-9]+ -> " " are ASCII
  // letters and digits, so a token is a maximal run of code points that lower to one.
  std::vector<std::string> out;
  std::string cur;
  auto flush = [&] {
    if (!cur.empty()) out.push_back(std::move(cur));
    cur.clear();
  };
  std::size_t i = 0;
  while (i < s.size()) {
    std::uint32_t cp;
    const std::size_t len = utf8_decode(s, i, cp);
    i += len;
    if (cp < 0x80 && is_ascii_alnum(cp)) {
      cur += ascii_lower(static_cast<char>(cp));
    } else if (cp == 0x212A) {  // KELVIN SIGN: lower() gives ASCII "k".
      cur += 'k';
    } else if (cp == 0x0130) {  // lower() gives "i" + U+0307; the combining dot separates.
      cur += 'i';
      flush();
    } else {
      flush();
    }
  }
  flush();
  return out;
}

std::string squad_normalize(std::string_view s) {
  // lower(), then drop string.punctuation, working on code points.
  std::vector<std::uint32_t> cps;
  cps.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    std::uint32_t cp;
    const std::size_t len = utf8_decode(s, i, cp);
    if (cp == kInvalid) {
      // Keep the raw byte (stored above the Unicode range) so no input is lost.
      cps.push_back(0x80000000u | static_cast<unsigned char>(s[i]));
    } else if (cp == 0x130) {
      cps.push_back('i');
      cps.push_back(0x307);
    } else {
      const std::uint32_t l = lower_cp(cp);
      if (!is_ascii_punct(l)) cps.push_back(l);
    }
    i += len;
  }
  // re.sub(r"\b(a|an|the)\b", " ", text): a maximal run of word characters that is
  // exactly an article becomes one space.
  std::string text;
  text.reserve(s.size());
  std::size_t i = 0;
  while (i < cps.size()) {
    auto word = [&](std::uint32_t c) { return (c & 0x80000000u) == 0 && is_word_cp(c); };
    if (!word(cps[i])) {
      if (cps[i] & 0x80000000u)
        text += static_cast<char>(cps[i] & 0xFF);
      else
        append_utf8(text, cps[i]);
      ++i;
      continue;
    }
    std::size_t j = i;
    while (j < cps.size() && word(cps[j])) ++j;
    const std::size_t n = j - i;
    const bool article = (n == 1 && cps[i] == 'a') || (n == 2 && cps[i] == 'a' && cps[i + 1] == 'n') ||
                         (n == 3 && cps[i] == 't' && cps[i + 1] == 'h' && cps[i + 2] == 'e');
    if (article) {
      text += ' ';
    } else {
      for (std::size_t k = i; k < j; ++k) append_utf8(text, cps[k]);
    }
    i = j;
  }
  // ' '.join(text.split())
  return join(split_whitespace(text), " ");
}

std::vector<std::string> analyzer_tokens(std::string_view s) {
  std::vector<std::string> out;
  std::string cur;
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c >= 0x80 || is_ascii_alnum(c)) {
      cur += ascii_lower(ch);
    } else if (!cur.empty()) {
      out.push_back(std::move(cur));
      cur.clear();
    }
  }
  if (!cur.empty()) out.push_back(std::move(cur));
  return out;
}

}  // namespace attune::text
