#include "attune/text/tokenizer.h"

#include <gtest/gtest.h>

#include "attune/core/error.h"

namespace attune::text {
namespace {

TEST(WhitespaceTokenizer, CountsTokensPlusEos) {
  const WhitespaceTokenizer eos(true), plain(false);
  EXPECT_EQ(eos.count(""), 1u);
  EXPECT_EQ(plain.count(""), 0u);
  EXPECT_EQ(eos.count("  one two\tthree\n"), 4u);
  EXPECT_EQ(plain.count("  one two\tthree\n"), 3u);
  EXPECT_EQ(eos.special_tokens(), 1u);
  EXPECT_EQ(plain.special_tokens(), 0u);
  EXPECT_EQ(eos.name(), "whitespace+eos");
  EXPECT_EQ(plain.name(), "whitespace");
}

TEST(WhitespaceTokenizer, TruncateKeepsPrefixWithinBudget) {
  const WhitespaceTokenizer eos(true), plain(false);
  const char* text = "  a  b\tc\nd ";
  EXPECT_EQ(eos.truncate(text, 0), "");
  EXPECT_EQ(eos.truncate(text, 1), "");  // only room for </s>
  EXPECT_EQ(eos.truncate(text, 2), "a");
  EXPECT_EQ(eos.truncate(text, 3), "a b");
  EXPECT_EQ(eos.truncate(text, 5), "a b c d");
  EXPECT_EQ(eos.truncate(text, 100), "a b c d");
  EXPECT_EQ(plain.truncate(text, 0), "");
  EXPECT_EQ(plain.truncate(text, 1), "a");
  EXPECT_EQ(plain.truncate(text, 4), "a b c d");
  // The truncated text never counts more than the budget.
  for (std::size_t n = 1; n < 7; ++n) EXPECT_LE(eos.count(eos.truncate(text, n)), std::max<std::size_t>(n, 1));
}

TEST(MakeTokenizer, KnownSpecs) {
  EXPECT_EQ(make_tokenizer("whitespace")->special_tokens(), 1u);
  EXPECT_EQ(make_tokenizer("whitespace")->count("x y"), 3u);
  EXPECT_EQ(make_tokenizer("whitespace-noeos")->special_tokens(), 0u);
  EXPECT_EQ(make_tokenizer("whitespace-noeos")->count("x y"), 2u);
}

TEST(MakeTokenizer, UnknownSpecNamesIt) {
  try {
    make_tokenizer("bpe:nowhere");
    FAIL() << "expected UsageError";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("bpe:nowhere"), std::string::npos) << e.what();
  }
  EXPECT_THROW(make_tokenizer(""), UsageError);
}

}  // namespace
}  // namespace attune::text
