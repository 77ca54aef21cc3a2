#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "attune/llm/reference.h"

using attune::llm::ReferenceReader;

namespace {
// Background "a b" and "a": N = 3 tokens, V = {a, b}, mean output length 1.5, so
// e = 1 / 2.5 = 0.4.
ReferenceReader tiny(double lambda = 0.5) { return ReferenceReader({"a b", "a"}, {}, {lambda, 12}); }
}  // namespace

TEST(ReferenceReader, ScoreByHand) {
  auto r = tiny();
  // Prompt "a c": P = {a, c}, |V + P| = 3, so p_bg = (n + 1) / 7: a 3/7, b 2/7, c 1/7, UNK 1/7.
  // p(a) = 0.5 * 1/2 + 0.5 * 3/7; p(c) = 0.5 * 1/2 + 0.5 * 1/7; p(zzz) = 0.5 * 1/7.
  EXPECT_NEAR(r.score_one("a c", ""), std::log(0.4), 1e-12);
  EXPECT_NEAR(r.score_one("a c", "a"), std::log(0.4) + std::log(0.6) + std::log(0.25 + 1.5 / 7), 1e-12);
  EXPECT_NEAR(r.score_one("a c", "A, zzz!"),
              std::log(0.4) + 2 * std::log(0.6) + std::log(0.25 + 1.5 / 7) + std::log(0.5 / 7), 1e-12);
  // No prompt tokens: the background alone, |V| = 2: p(b) = 2/6.
  EXPECT_NEAR(r.score_one("", "b"), std::log(0.4) + std::log(0.6) + std::log(2.0 / 6.0), 1e-12);
}

TEST(ReferenceReader, ScoreIsATrueLogProbability) {
  // Summed over every symbol sequence of length <= 4 (the background words a, b, the prompt
  // words xyz, qq, and one word seen nowhere), the probabilities add up to 1 - (1 - e)^5.
  auto r = tiny(0.3);
  const std::vector<std::string> symbols = {"a", "b", "xyz", "qq", "never"};
  double total = 0;
  std::function<void(std::string, int)> walk = [&](std::string target, int depth) {
    total += std::exp(r.score_one("b qq a a xyz", target));
    if (depth == 4) return;
    for (auto& s : symbols) walk(target.empty() ? s : target + " " + s, depth + 1);
  };
  walk("", 0);
  EXPECT_NEAR(total, 1.0 - std::pow(0.6, 5), 1e-12);
}

TEST(ReferenceReader, BatchedEqualsOneByOne) {
  auto r = tiny();
  std::vector<attune::llm::ScoreRequest> reqs = {{"a c", "a"}, {"b b", "b a"}, {"", ""}};
  auto batched = r.score(reqs);
  for (std::size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(batched[i], r.score_one(reqs[i].prompt, reqs[i].target));
}

TEST(ReferenceReader, GeneratesTheMostLikelyLabel) {
  ReferenceReader r({"yes", "no", "no"}, {"yes", "no"});
  // Background favours "no" (3/5 vs 2/5 before mixing); the prompt's "yes yes" tips it.
  EXPECT_EQ(r.generate_one("is it? yes yes"), "yes");
  EXPECT_EQ(r.generate_one("is it?"), "no");
}

TEST(ReferenceReader, CandidateSpans) {
  ReferenceReader r({"x"}, {});
  auto c = r.candidates("\"fix the parser\" is the title. Describe: one two three");
  std::vector<std::string> expected = {"fix the parser", "\"fix the parser\" is the title.", "Describe: one two three",
                                       "one two three"};
  EXPECT_EQ(c, expected);
}

TEST(ReferenceReader, GeneratesTheSpanTheRestOfThePromptSupports) {
  // "parser cache" is repeated in the description, so the quoted title about it is better
  // supported by the rest of the prompt than the unrelated one.
  ReferenceReader r({"fix parser cache", "add pager color"}, {});
  const std::string prompt =
      "\"fix parser cache\" is the title for \"x\", and \"add pager color\" is the title for \"y\". "
      "Generate a subject line for the following commit description: the parser cache was wrong in the parser";
  EXPECT_EQ(r.generate_one(prompt), "fix parser cache");
  // Deterministic, and capped by max_new_tokens (in words).
  EXPECT_EQ(r.generate_one(prompt), r.generate_one(prompt));
  EXPECT_EQ(r.generate_one(prompt, 2), "fix parser");
}

TEST(ReferenceReader, ModelIdDependsOnBackgroundLabelsAndLambda) {
  EXPECT_EQ(tiny().info().id, tiny().info().id);
  EXPECT_NE(tiny(0.5).info().id, tiny(0.4).info().id);
  EXPECT_NE(ReferenceReader({"a"}, {}).info().id, ReferenceReader({"b"}, {}).info().id);
  EXPECT_NE(ReferenceReader({"a"}, {}).info().id, ReferenceReader({"a"}, {"a"}).info().id);
}
