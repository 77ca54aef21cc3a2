// Literal tables for the lexical tokenizers. Expected values were produced by the Python
// reference code (rouge_score's tokenize without stemming, SQuAD v1.1 normalize_answer)
// run on the same strings.
#include "attune/text/lexical.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace attune::text {
namespace {

using Tokens = std::vector<std::string>;

TEST(Bm25Tokens, IsPythonStrSplit) {
  EXPECT_EQ(bm25_tokens("  Hello,  World!\tfoo\nbar  "), (Tokens{"Hello,", "World!", "foo", "bar"}));
  EXPECT_EQ(bm25_tokens(""), Tokens{});
  EXPECT_EQ(bm25_tokens(" \t\n "), Tokens{});
  // U+3000 IDEOGRAPHIC SPACE and U+00A0 NO-BREAK SPACE are whitespace to str.split().
  EXPECT_EQ(bm25_tokens("東京\u3000大阪\u00a0x"), (Tokens{"東京", "大阪", "x"}));
}

struct RougeCase {
  const char* input;
  Tokens expected;
};

TEST(RougeTokens, MatchesRougeScoreTokenizer) {
  const std::vector<RougeCase> cases = {
      {"The quick brown fox.", {"the", "quick", "brown", "fox"}},
      {"don't stop-believing!!  42x", {"don", "t", "stop", "believing", "42x"}},
      {"", {}},
      {"!!! ... ---", {}},
      {"under_score", {"under", "score"}},
      // Non-ASCII letters separate; U+212A KELVIN SIGN lowers to ASCII "k".
      {"Café naïve Ünïcode 東京 KELVIN\u212A", {"caf", "na", "ve", "n", "code", "kelvink"}},
      {"KELVIN\u212Aelvin", {"kelvinkelvin"}},
      // U+0130 lowers to "i" + U+0307 COMBINING DOT ABOVE, which separates.
      {"\u0130stanbul \u0130I", {"i", "stanbul", "i", "i"}},
      // Fullwidth letters and digits are not [a-z0-9].
      {"ＡＢＣ１２３ abc", {"abc"}},
      {"a\u00e9b c\u0301d", {"a", "b", "c", "d"}},
  };
  for (const auto& c : cases) EXPECT_EQ(rouge_tokens(c.input), c.expected) << c.input;
}

TEST(RougeTokens, InvalidUtf8BytesSeparate) {
  EXPECT_EQ(rouge_tokens(std::string("ab\xff" "cd")), (Tokens{"ab", "cd"}));
  EXPECT_EQ(rouge_tokens(std::string("ab\xc3")), (Tokens{"ab"}));                // truncated sequence
  EXPECT_EQ(rouge_tokens(std::string("x\xe2\x84" "y")), (Tokens{"x", "y"}));     // truncated KELVIN SIGN
  EXPECT_EQ(rouge_tokens(std::string("x\xf0\xe2\x84\xaay")), (Tokens{"x", "ky"}));  // stray lead byte, then KELVIN
  EXPECT_EQ(rouge_tokens(std::string("x\xc0\x80y")), (Tokens{"x", "y"}));        // overlong NUL
}

struct SquadCase {
  const char* input;
  const char* expected;
};

TEST(SquadNormalize, MatchesNormalizeAnswer) {
  const std::vector<SquadCase> cases = {
      {"The Cat, the hat!", "cat hat"},
      {"An apple a day", "apple day"},
      {"  THE  answer is: 42. ", "answer is 42"},
      {"Theatre anthem", "theatre anthem"},
      {"a_the", "athe"},  // "_" is punctuation and is removed before the article rule
      {"the", ""},
      {"a a an the x", "x"},
      {"", ""},
      {"Émile Zola", "émile zola"},
      {"ÀÉÎ ÕÜ Ÿ Ĳ Œ Привет", "àéî õü ÿ ĳ œ привет"},
      {"—the end", "— end"},                      // an em dash is not a word character
      {"éthe", "éthe"},                           // é is: no boundary before "the"
      {"the\u0301 x", "\u0301 x"},                // combining marks are not word characters
      {"\u0130the", "i\u0307"},
      {"Ça, c'est «the» end…", "ça cest « » end…"},
      {"\u212Aelvin ＡＢＣ \u212B \u2126 THE", "kelvin ａｂｃ å ω"},  // letterlike and fullwidth forms
  };
  for (const auto& c : cases) EXPECT_EQ(squad_normalize(c.input), c.expected) << c.input;
}

TEST(AnalyzerTokens, SplitsOnAsciiNonAlnumKeepsUtf8) {
  EXPECT_EQ(analyzer_tokens("Hello, World! foo-bar_baz 42"), (Tokens{"hello", "world", "foo", "bar", "baz", "42"}));
  EXPECT_EQ(analyzer_tokens("Café ÜBER 東京."), (Tokens{"café", "Über", "東京"}));
  EXPECT_EQ(analyzer_tokens(""), Tokens{});
  EXPECT_EQ(analyzer_tokens("..."), Tokens{});
}

}  // namespace
}  // namespace attune::text
