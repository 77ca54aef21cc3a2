#pragma once
// Python's str.split() whitespace among ASCII bytes (\t..\r, \x1c..\x1f, ' '), sixteen bytes
// at a time: split_whitespace (core/strings.cpp) and BM25's one-pass query split
// (index/bm25.cpp) classify bytes with it.
#if defined(__SSE2__)
#include <emmintrin.h>

namespace attune {

// The ASCII whitespace among 16 bytes, as a bit mask (bit j: byte j). A byte >= 0x80 is never
// counted as whitespace (its bit is 0); callers that meet one decode it or split another way.
inline unsigned ascii_space_mask(__m128i v) {
  const __m128i t1 = _mm_sub_epi8(v, _mm_set1_epi8(9));     // \t..\r -> 0..4
  const __m128i t2 = _mm_sub_epi8(v, _mm_set1_epi8(0x1c));  // \x1c..\x1f -> 0..3
  const __m128i r1 = _mm_and_si128(_mm_cmpgt_epi8(t1, _mm_set1_epi8(-1)), _mm_cmplt_epi8(t1, _mm_set1_epi8(5)));
  const __m128i r2 = _mm_and_si128(_mm_cmpgt_epi8(t2, _mm_set1_epi8(-1)), _mm_cmplt_epi8(t2, _mm_set1_epi8(4)));
  const __m128i sp = _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8(' ')), _mm_or_si128(r1, r2));
  return static_cast<unsigned>(_mm_movemask_epi8(sp));
}

}  // namespace attune
#endif
