#pragma once
// Small string helpers with Python semantics where the reference code relies on them.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace attune {

// Python str.strip(): removes leading/trailing Unicode whitespace (UTF-8 aware).
std::string strip(std::string_view s);
// Python str.split() with no arguments: splits on runs of Unicode whitespace (the set
// str.isspace() accepts), drops empty pieces.
std::vector<std::string> split_whitespace(std::string_view s);
// The same tokens as views into s (no allocation per token).
std::vector<std::string_view> split_whitespace_views(std::string_view s);
// The same into out (cleared first; its capacity reused).
void split_whitespace_views_into(std::string_view s, std::vector<std::string_view>& out);
// Everything after the first occurrence of `marker`, stripped; the whole text stripped
// when the marker is absent.
std::string text_after(std::string_view s, std::string_view marker);
std::string join(const std::vector<std::string>& parts, std::string_view sep);
bool starts_with(std::string_view s, std::string_view prefix);
// True when s is valid UTF-8.
bool valid_utf8(std::string_view s);

// What utf8_decode yields for a byte that does not start a valid sequence.
inline constexpr std::uint32_t kInvalidCodePoint = 0xFFFFFFFF;
// Decodes the code point at s[i] into cp and returns its byte length. Invalid input (bad
// lead byte, missing continuation, overlong form, surrogate, > U+10FFFF) gives
// kInvalidCodePoint and length 1, so decoding resynchronises on the next byte.
std::size_t utf8_decode(std::string_view s, std::size_t i, std::uint32_t& cp);
// The code points Python's str.isspace() accepts.
bool is_python_space(std::uint32_t cp);

}  // namespace attune
