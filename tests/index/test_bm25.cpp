// Bm25Okapi against rank_bm25 0.2.2, on a profile worked out by hand. The literals were
// printed by tests/index/bm25_reference.py (rank_bm25's code re-typed with Python floats;
// repr() literals parse to the exact doubles), so the comparisons are exact.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>

#include "attune/index/bm25.h"
#include "attune/text/lexical.h"

namespace attune::index {
namespace {

// The profile (tokens = str.split()), N = 4, total length 14, avgdl = 14 / 4 = 3.5:
//   d0 "apple banana apple cherry"   dl 4
//   d1 "banana cherry date fig"      dl 4
//   d2 "banana cherry date grape"    dl 4
//   d3 "banana kiwi"                 dl 2
// Document frequencies and idf = ln(N - n + 0.5) - ln(n + 0.5):
//   n = 1 (apple, fig, grape, kiwi): ln 3.5 - ln 1.5 =  0.8472978603872037
//   n = 2 (date):                    ln 2.5 - ln 2.5 =  0 exactly (not negative: kept)
//   n = 3 (cherry):                  ln 1.5 - ln 3.5 = -0.8472978603872037
//   n = 4 (banana):                  ln 0.5 - ln 4.5 = -2.1972245773362196
// average_idf over all 7 terms, negatives included, in first-seen order
//   (apple, banana, cherry, date, fig, grape, kiwi):
//   (0.8473 - 2.1972 - 0.8473 + 0 + 3 * 0.8473) / 7 = 0.3447 / 7 = 0.04923842911791306
// banana and cherry get epsilon * average_idf = 0.25 * 0.04924 = 0.012309607279478265.
// Length normalisation k1 * ((1 - b) + b * dl / avgdl):
//   dl 4: 1.5 * (0.25 + 0.75 * 4 / 3.5) = 1.6607142857...
//   dl 2: 1.5 * (0.25 + 0.75 * 2 / 3.5) = 1.0178571428...
// Term score idf * tf * 2.5 / (tf + norm).
std::vector<std::vector<std::string>> profile() {
  std::vector<std::vector<std::string>> docs;
  for (const char* s : {"apple banana apple cherry", "banana cherry date fig",
                        "banana cherry date grape", "banana kiwi"}) {
    docs.push_back(text::bm25_tokens(s));
  }
  return docs;
}

const std::vector<std::string> kTerms = {"apple", "banana", "cherry", "date",
                                         "fig", "grape", "kiwi"};

TEST(Bm25Okapi, CorpusStatistics) {
  const Bm25Okapi bm(profile());
  EXPECT_EQ(bm.size(), 4u);
  EXPECT_EQ(bm.avgdl(), 3.5);
  EXPECT_EQ(bm.average_idf(), 0.04923842911791306);
  // The same sum typed out in first-seen order.
  const double pos = std::log(3.5) - std::log(1.5);
  double sum = 0;
  for (double v : {pos, std::log(0.5) - std::log(4.5), std::log(1.5) - std::log(3.5), 0.0,
                   pos, pos, pos}) {
    sum += v;
  }
  EXPECT_EQ(bm.average_idf(), sum / 7);
}

TEST(Bm25Okapi, IdfWithEpsilonFloorAndZero) {
  const Bm25Okapi bm(profile());
  EXPECT_EQ(bm.idf("apple"), 0.8472978603872037);
  EXPECT_EQ(bm.idf("fig"), 0.8472978603872037);
  EXPECT_EQ(bm.idf("kiwi"), 0.8472978603872037);
  EXPECT_EQ(bm.idf("date"), 0.0);  // n = N / 2: exactly zero, no floor
  // negative idfs (n > N / 2) are floored to epsilon * average_idf
  EXPECT_EQ(bm.idf("banana"), 0.012309607279478265);
  EXPECT_EQ(bm.idf("cherry"), 0.012309607279478265);
  EXPECT_EQ(bm.idf("banana"), 0.25 * bm.average_idf());
  EXPECT_EQ(bm.idf("zzz"), 0.0);    // unseen
  EXPECT_EQ(bm.idf("Apple"), 0.0);  // case-sensitive, like str.split()
}

TEST(Bm25Okapi, TiedScoresComeOutInDescendingIndexOrder) {
  // d1 (fig) and d2 (grape): 0.8473 * 2.5 / (1 + 1.6607) = 0.7961 each; d0, d3 score 0.
  const Bm25Okapi bm(profile());
  const auto s = bm.scores({"fig", "grape"});
  const std::vector<double> want = {0.0, 0.7961187949946881, 0.7961187949946881, 0.0};
  EXPECT_EQ(s, want);
  EXPECT_EQ(rank_bm25_order(s), (std::vector<std::size_t>{2, 1, 3, 0}));
}

TEST(Bm25Okapi, DuplicateQueryTokensAndUnseenTerm) {
  // "banana banana apple zzz": banana counted twice, zzz adds 0.
  //   d0: 2 * 0.01231 * 2.5 / (1 + 1.6607) + 0.8473 * 2 * 2.5 / (2 + 1.6607)
  //     = 2 * 0.011566 + 1.157285 = 1.1804170303878276
  //   d1, d2: 2 * 0.011566 = 0.023132147907744392
  //   d3: 2 * 0.01231 * 2.5 / (1 + 1.0179) = 0.03050168175445942
  const Bm25Okapi bm(profile());
  const auto s = bm.scores({"banana", "banana", "apple", "zzz"});
  const std::vector<double> want = {1.1804170303878276, 0.023132147907744392,
                                    0.023132147907744392, 0.03050168175445942};
  EXPECT_EQ(s, want);
  EXPECT_EQ(rank_bm25_order(s), (std::vector<std::size_t>{0, 3, 2, 1}));
  // Duplicates count each time: two "banana" tokens differ from one.
  const auto once = bm.scores({"banana", "apple"});
  EXPECT_LT(once[3], s[3]);
}

TEST(Bm25Okapi, ZeroIdfTermAndEmptyQueryScoreZero) {
  const Bm25Okapi bm(profile());
  const std::vector<double> zeros(4, 0.0);
  EXPECT_EQ(bm.scores({"date"}), zeros);  // idf exactly 0
  EXPECT_EQ(bm.scores({}), zeros);
  EXPECT_EQ(bm.scores({"nothing", "here"}), zeros);
  EXPECT_EQ(rank_bm25_order(zeros), (std::vector<std::size_t>{3, 2, 1, 0}));
}

TEST(Bm25Okapi, FlooredTermTies) {
  // "kiwi cherry": d0, d1, d2 each hold cherry once at dl 4 -> 0.011566073953872196 (tie);
  // d3 holds kiwi at dl 2: 0.8473 * 2.5 / (1 + 1.0179) = 1.0497495615416683.
  const Bm25Okapi bm(profile());
  const auto s = bm.scores({"kiwi", "cherry"});
  const std::vector<double> want = {0.011566073953872196, 0.011566073953872196,
                                    0.011566073953872196, 1.0497495615416683};
  EXPECT_EQ(s, want);
  EXPECT_EQ(rank_bm25_order(s), (std::vector<std::size_t>{3, 2, 1, 0}));
}

TEST(Bm25Okapi, EmptyCorpusScoresNothing) {
  const Bm25Okapi bm(std::vector<std::vector<std::string>>{});
  EXPECT_EQ(bm.size(), 0u);
  EXPECT_TRUE(bm.scores({"a"}).empty());
  EXPECT_TRUE(rank_bm25_order({}).empty());
}

TEST(Bm25Okapi, EmptyDocumentsInsideACorpus) {
  // d1 is empty: dl 0, norm = 1.5 * 0.25; it scores 0 and ties with d2.
  const Bm25Okapi bm({{"x", "y"}, {}, {"z"}});
  EXPECT_EQ(bm.avgdl(), 1.0);
  const auto s = bm.scores({"x"});
  EXPECT_GT(s[0], 0.0);
  EXPECT_EQ(s[1], 0.0);
  EXPECT_EQ(rank_bm25_order(s), (std::vector<std::size_t>{0, 2, 1}));
}

TEST(Bm25Okapi, SingleDocumentFloorsEveryTerm) {
  // N = 1: every term has n = 1 -> ln 0.5 - ln 1.5 < 0, average_idf = that, and each
  // term is floored to 0.25 * (ln 0.5 - ln 1.5): scores are negative, as in rank_bm25.
  const Bm25Okapi bm({{"a", "b", "a"}});
  const double idf = std::log(0.5) - std::log(1.5);
  EXPECT_EQ(bm.average_idf(), (idf + idf) / 2);
  EXPECT_EQ(bm.idf("a"), 0.25 * bm.average_idf());
  EXPECT_LT(bm.scores({"a"})[0], 0.0);
}

TEST(Bm25Okapi, OtherParameters) {
  // k1 = 1.2, b = 0.5, epsilon = 0.3 (last line of bm25_reference.py).
  const Bm25Okapi bm(profile(), Bm25Params{1.2, 0.5, 0.3});
  EXPECT_EQ(bm.average_idf(), 0.04923842911791306);
  EXPECT_EQ(bm.idf("banana"), 0.3 * 0.04923842911791306);
  const std::vector<double> want = {1.1488599485784876, 0.014217596407797397,
                                    0.014217596407797397, 0.9761668082711542};
  EXPECT_EQ(bm.scores({"banana", "apple", "kiwi"}), want);
}

TEST(Bm25Okapi, DegenerateParametersGiveNumpysNaN) {
  // k1 = 0: a document without the token computes 0 / (0 + 0) = NaN in numpy, and NaN
  // poisons its sum; NaN ranks first after the reversal.
  const Bm25Okapi bm({{"a", "b"}, {"c"}, {"a"}}, Bm25Params{0.0, 0.75, 0.25});
  const auto s = bm.scores({"a"});
  EXPECT_FALSE(std::isnan(s[0]));
  EXPECT_TRUE(std::isnan(s[1]));
  EXPECT_EQ(s[0], s[2]);
  EXPECT_EQ(rank_bm25_order(s), (std::vector<std::size_t>{1, 2, 0}));
  // b = 1 and an empty document: its denominator is 0 + 1.5 * 0 for an absent token.
  const Bm25Okapi bm1({{"a"}, {}}, Bm25Params{1.5, 1.0, 0.25});
  const auto s1 = bm1.scores({"a"});
  EXPECT_TRUE(std::isnan(s1[1]));
  EXPECT_TRUE(bm1.scores({}).at(1) == 0.0);  // no token, no NaN
}

TEST(RankBm25Order, DescendingWithReverseIndexTies) {
  EXPECT_EQ(rank_bm25_order({1.0, 3.0, 2.0, 3.0, 1.0}),
            (std::vector<std::size_t>{3, 1, 2, 4, 0}));
  EXPECT_EQ(rank_bm25_order({-1.0, 0.0}), (std::vector<std::size_t>{1, 0}));
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // numpy sorts NaN last, so it comes first after the reversal.
  EXPECT_EQ(rank_bm25_order({1.0, nan, 2.0}), (std::vector<std::size_t>{1, 2, 0}));
}

// rank_bm25_top(s, k) is the first k of rank_bm25_order(s), on score vectors heavy with ties,
// signed zeros and NaNs (the server asks for the top k of a user's documents this way).
TEST(RankBm25Order, TopKIsThePrefixOfTheFullOrder) {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const std::vector<double> pool{0.0, -0.0, 1.0, 1.0, 2.5, -1.0, 0.25, -inf, inf, nan};
  std::uint64_t x = 12345;
  for (int trial = 0; trial < 600; ++trial) {
    // Profiles up to 70 (one 64-bit mask and past it) and some up to 300.
    const std::size_t n = trial < 450 ? 1 + trial % 70 : 60 + trial % 240;
    std::vector<double> s(n);
    for (auto& v : s) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      const std::size_t kinds = trial % 3 == 0 ? pool.size() : trial % 3 == 1 ? pool.size() - 1 : pool.size() - 3;
      v = pool[(x >> 33) % kinds];  // a third with NaNs, a third with infinities, a third finite
    }
    const auto full = rank_bm25_order(s);
    for (std::size_t k : {std::size_t{0}, std::size_t{1}, std::size_t{3}, std::size_t{5}, std::size_t{8}, std::size_t{9},
                          std::size_t{16}, std::size_t{17}, n / 2, n - 1, n, n + 5}) {
      const auto top = rank_bm25_top(s, k);
      const std::size_t want = k == 0 || k > n ? n : k;
      ASSERT_EQ(top.size(), want) << trial << " k " << k;
      EXPECT_TRUE(std::equal(top.begin(), top.end(), full.begin())) << trial << " k " << k;
    }
  }
}

// Views and strings give the same statistics and bit-identical scores.
TEST(Bm25Okapi, ViewsAndStringsAgreeBitForBit) {
  const std::vector<std::string> texts{"the cat sat on the mat", "a dog sat", "the the cat", "", "mat mat dog cat"};
  std::vector<std::vector<std::string>> owned;
  std::vector<std::vector<std::string_view>> views;
  for (const auto& t : texts) {
    owned.push_back(text::bm25_tokens(t));
    views.push_back(text::bm25_token_views(t));
  }
  const Bm25Okapi a(owned), b(views);
  const std::string q = "cat mat the zebra cat";
  std::vector<double> got;
  b.scores_into(text::bm25_token_views(q), got);
  const auto want = a.scores(text::bm25_tokens(q));
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_EQ(std::memcmp(&got[i], &want[i], sizeof(double)), 0) << i;
}


// rank_bm25's get_scores re-typed without any of Bm25Okapi's shortcuts (no postings, no
// precomputed factors, no dense rows, a std::map for the terms): for each query token, in
// order, every document adds idf * (tf * (k1 + 1) / (tf + k1 * ((1 - b) + b * dl / avgdl))).
std::vector<double> numpy_scores(const std::vector<std::vector<std::string>>& docs, const std::vector<std::string>& query) {
  const double k1 = 1.5, b = 0.75, epsilon = 0.25;
  std::vector<std::map<std::string, int>> freqs(docs.size());
  std::vector<std::string> order;  // first-seen order of the `nd` dict
  std::map<std::string, int> nd;
  double total = 0;
  for (std::size_t d = 0; d < docs.size(); ++d) {
    total += static_cast<double>(docs[d].size());
    for (const auto& w : docs[d]) {
      if (++freqs[d][w] == 1) {
        if (!nd.count(w)) order.push_back(w);
        ++nd[w];
      }
    }
  }
  const double avgdl = total / static_cast<double>(docs.size()), n = static_cast<double>(docs.size());
  std::map<std::string, double> idf;
  double idf_sum = 0;
  for (const auto& w : order) {
    const double f = nd[w];
    idf[w] = std::log(n - f + 0.5) - std::log(f + 0.5);
    idf_sum += idf[w];
  }
  const double eps = epsilon * (idf_sum / static_cast<double>(order.size()));
  for (auto& [w, v] : idf)
    if (v < 0) v = eps;
  std::vector<double> score(docs.size(), 0.0);
  for (const auto& q : query) {
    const double w = idf.count(q) ? idf[q] : 0.0;
    for (std::size_t d = 0; d < docs.size(); ++d) {
      const auto it = freqs[d].find(q);
      const double tf = it == freqs[d].end() ? 0.0 : it->second;
      score[d] += w * (tf * (k1 + 1) / (tf + k1 * ((1 - b) + b * static_cast<double>(docs[d].size()) / avgdl)));
    }
  }
  return score;
}

// Profiles of 1 to 300 documents over a vocabulary with common terms (several in most
// documents, so they take the dense rows), rare ones, terms of exactly 8 bytes and of 9,
// terms that differ only past their 8th byte or by a trailing NUL, and one of 300 bytes:
// every score is numpy's bit for bit, and the order is rank_bm25's.
TEST(Bm25Okapi, MatchesNumpysEvaluationOnRandomProfiles) {
  std::vector<std::string> vocab{"the", "a", "to", "of", "fix", "add", "abcdefgh", "abcdefghi", "abcdefghj",
                                 "abcdefgh" + std::string(1, '\0'), std::string("ab\0", 3), "ab", "", "x",
                                 std::string(300, 'q'), std::string(299, 'q') + "r", "\xC3\xA9t\xC3\xA9"};
  for (int i = 0; i < 200; ++i) vocab.push_back("w" + std::to_string(i * 7919));
  std::uint64_t x = 2026;
  const auto next = [&](std::uint64_t m) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    return (x >> 33) % m;
  };
  const auto pick = [&] {
    // Zipf-like: the first terms far more often than the rest.
    const std::size_t r = next(1000);
    return vocab[r < 500 ? r % 6 : r < 800 ? 6 + r % 12 : next(vocab.size())];
  };
  std::size_t dense_seen = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const std::size_t n = trial < 50 ? 1 + next(70) : 100 + next(200);
    std::vector<std::vector<std::string>> docs(n);
    for (auto& d : docs) {
      const std::size_t len = 1 + next(40);  // no empty documents: the sparse, exact path
      for (std::size_t j = 0; j < len; ++j) d.push_back(pick());
    }
    std::vector<std::string> query;
    for (std::size_t j = 0, m = next(60); j < m; ++j) query.push_back(next(10) == 0 ? "unseen" + std::to_string(j) : pick());
    const Bm25Okapi bm25(docs);
    const auto want = numpy_scores(docs, query);
    const auto got = bm25.scores(query);
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t d = 0; d < n; ++d)
      ASSERT_EQ(std::memcmp(&got[d], &want[d], sizeof(double)), 0) << "trial " << trial << " doc " << d << ": " << got[d] << " vs " << want[d];
    EXPECT_EQ(rank_bm25_top(got, 5), rank_bm25_top(want, 5));
    // The same tokens as views into one text (the server's query): the lookups may read
    // past a token inside it, and must score the same.
    std::string text;
    std::vector<std::size_t> at;
    for (const auto& w : query) {
      at.push_back(text.size());
      text += w + " ";
    }
    std::vector<std::string_view> views;
    for (std::size_t j = 0; j < query.size(); ++j) views.emplace_back(text.data() + at[j], query[j].size());
    std::vector<double> in_text;
    bm25.scores_into(views, in_text, text);
    ASSERT_EQ(in_text.size(), n);
    ASSERT_EQ(std::memcmp(in_text.data(), want.data(), n * sizeof(double)), 0) << trial;
    // The statistics' bytes score the same.
    const auto back = Bm25Okapi::deserialize(bm25.serialize()).scores(query);
    ASSERT_EQ(std::memcmp(back.data(), want.data(), n * sizeof(double)), 0) << trial;
    std::size_t common = 0;
    for (const auto& d : docs) common += std::count(d.begin(), d.end(), "the") > 0;
    dense_seen += n >= 16 && 4 * common >= n;
  }
  EXPECT_GT(dense_seen, 20u);  // the dense rows were exercised
}

// The term table tells apart terms that share their first 8 bytes, differ by a NUL, or only
// in length; each term's idf is its own.
TEST(Bm25Okapi, TermsThatShareTheirFirstBytesAreToldApart) {
  const std::vector<std::string> terms{"abcdefgh", "abcdefghi", "abcdefghj", std::string("abcdefgh\0", 9), "ab",
                                       std::string("ab\0", 3), std::string(254, 'z'), std::string(255, 'z'),
                                       std::string(256, 'z'), std::string(255, 'z') + "y",
                                       // the slot holds 16 bytes: terms that agree on them, or differ only there
                                       "abcdefghijklmnop", "abcdefghijklmnoq", "abcdefghijklmnopq", "abcdefghijklmnopr",
                                       std::string("abcdefghijklmnop\0", 17), "abcdefghijklmnopqrstuvwxyz0123456",
                                       "abcdefghijklmnopqrstuvwxyz0123457"};
  // Term i is in i + 1 of the 40 documents, so each has another idf, none of them floored.
  std::vector<std::vector<std::string>> docs(40, std::vector<std::string>{"pad"});
  for (std::size_t i = 0; i < terms.size(); ++i)
    for (std::size_t d = 0; d <= i; ++d) docs[d].push_back(terms[i]);
  const Bm25Okapi bm25(docs);
  const double n = static_cast<double>(docs.size());
  for (std::size_t i = 0; i < terms.size(); ++i) {
    const double f = static_cast<double>(i + 1), raw = std::log(n - f + 0.5) - std::log(f + 0.5);
    ASSERT_GT(raw, 0.0);
    EXPECT_EQ(bm25.idf(terms[i]), raw) << i;
  }
  EXPECT_EQ(bm25.idf("abcdefg"), 0.0);
  EXPECT_EQ(bm25.idf("abcdefghijklmno"), 0.0);
  EXPECT_EQ(bm25.idf("abcdefghijklmnopqrstuvwxyz012345"), 0.0);
  EXPECT_EQ(bm25.idf(std::string(257, 'z')), 0.0);
  EXPECT_EQ(bm25.idf("a"), 0.0);
}

// A table at its fullest (as many terms as buckets, half the slots: 4,095 and 255 terms and
// "pad"), so that many buckets overflow into the next, and one just grown (4,097 terms):
// every term is found with its own idf, every other word is not, and the statistics' bytes
// rebuild a table that answers the same.
TEST(Bm25Okapi, AFullTermTableFindsEveryTermAndNoOther) {
  for (const std::size_t terms : {4095u, 4096u, 255u}) {
    std::vector<std::vector<std::string>> docs(3);
    for (std::size_t i = 0; i < terms; ++i) {
      // Term i in 1 or 2 documents of 3: two idfs, told apart below.
      docs[0].push_back("t" + std::to_string(i));
      if (i % 2) docs[1].push_back("t" + std::to_string(i));
    }
    docs[2].push_back("pad");
    const Bm25Okapi bm25(docs);
    const auto back = Bm25Okapi::deserialize(bm25.serialize());
    const double one = std::log(3 - 1 + 0.5) - std::log(1 + 0.5);
    for (std::size_t i = 0; i < terms; ++i) {
      const std::string t = "t" + std::to_string(i);
      const double want = i % 2 ? bm25.average_idf() * 0.25 : one;  // in 2 of 3: idf < 0, floored
      ASSERT_EQ(bm25.idf(t), want) << t;
      ASSERT_EQ(back.idf(t), want) << t;
      ASSERT_EQ(bm25.idf("u" + std::to_string(i)), 0.0) << i;
      ASSERT_EQ(bm25.idf(t + "x"), 0.0) << i;
    }
    // Queries as text (one pass) and as views score the same.
    std::string text;
    for (std::size_t i = 0; i < terms; i += 7) text += "t" + std::to_string(i) + " u" + std::to_string(i) + " ";
    std::vector<double> a, b;
    bm25.scores_text_into(text, a);
    bm25.scores_into(text::bm25_token_views(text), b);
    ASSERT_EQ(a.size(), 3u);
    EXPECT_EQ(std::memcmp(a.data(), b.data(), 3 * sizeof(double)), 0);
    EXPECT_GT(a[0], 0.0);
  }
}

// ctest runs these tests twice: as they are, and with ATTUNE_BM25_BASELINE=1, which keeps the
// query's loops to their baseline copies (tests/index/CMakeLists.txt).
TEST(Bm25Okapi, QueryLoopsFollowTheEnvironment) {
  const char* e = std::getenv("ATTUNE_BM25_BASELINE");
  const std::string isa = bm25_query_isa();
  if (e != nullptr && std::string(e) == "1") {
    EXPECT_EQ(isa, "baseline");
  } else {
#if defined(__x86_64__)
    EXPECT_EQ(isa, __builtin_cpu_supports("avx2") && __builtin_cpu_supports("popcnt") ? "avx2" : "baseline");
#else
    EXPECT_EQ(isa, "baseline");
#endif
  }
}

// scores_text_into splits the text as str.split() does (text::bm25_token_views) and scores
// bit for bit as scores_into those tokens, and as numpy: random texts of words of 1 to 40
// bytes (8, 16 and 17 among them) between runs of every ASCII whitespace byte, of lengths
// around the 64-byte blocks, with NUL and DEL bytes inside words, and with non-ASCII words
// and Unicode whitespace (U+00A0, U+0085, U+3000), which take the views' path.
TEST(Bm25Okapi, QueryTextScoresAsItsTokens) {
  const std::string spaces[] = {" ", "\t", "\n", "\v", "\f", "\r", "\x1c", "\x1d", "\x1e", "\x1f", "  ", " \t\n"};
  const std::string unicode_spaces[] = {"\xC2\xA0", "\xC2\x85", "\xE3\x80\x80"};
  std::uint64_t x = 7;
  const auto next = [&](std::uint64_t m) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    return (x >> 33) % m;
  };
  std::vector<std::string> vocab{"the", "a", "fix", "abcdefgh", "abcdefghijklmnop", "abcdefghijklmnopq", std::string("n\0l", 3),
                                 "del\x7f"};
  for (int i = 0; i < 60; ++i) {
    std::string w;
    for (std::size_t j = 0, len = 1 + next(40); j < len; ++j) w += static_cast<char>('!' + next(94));
    vocab.push_back(w);
  }
  const auto pick = [&] { return vocab[next(10) < 6 ? next(8) : next(vocab.size())]; };
  std::vector<std::vector<std::string>> docs(40);
  for (auto& d : docs)
    for (std::size_t j = 0, len = 1 + next(30); j < len; ++j) d.push_back(next(20) ? pick() : "\xC3\xA9t\xC3\xA9");
  const Bm25Okapi bm25(docs);
  std::size_t ascii = 0;
  for (int trial = 0; trial < 400; ++trial) {
    std::string text;
    const bool unicode = trial % 5 == 4;
    const std::size_t target = trial < 200 ? static_cast<std::size_t>(trial) : next(400);
    if (next(2)) text += spaces[next(12)];
    while (text.size() < target) {
      text += unicode && next(6) == 0 ? "\xC3\xA9t\xC3\xA9" : next(8) ? pick() : "q" + std::to_string(next(100));
      text += unicode && next(3) == 0 ? unicode_spaces[next(3)] : spaces[next(12)];
    }
    if (next(2) && !text.empty()) text.pop_back();  // sometimes ends inside a word
    std::vector<double> got, want;
    bm25.scores_text_into(text, got);
    bm25.scores_into(text::bm25_token_views(text), want);
    ASSERT_EQ(got.size(), docs.size()) << trial;
    ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(double)), 0) << trial << ": \"" << text << "\"";
    const auto numpy = numpy_scores(docs, text::bm25_tokens(text));
    ASSERT_EQ(std::memcmp(got.data(), numpy.data(), got.size() * sizeof(double)), 0) << trial;
    ascii += text.find_first_of("\x80\xC2\xC3\xE3") == std::string::npos;
  }
  EXPECT_GT(ascii, 200u);  // most took the one-pass path
  // Only whitespace, or nothing: every score +0.0.
  for (const std::string& t : std::vector<std::string>{"", " ", "\t\n \x1f", std::string(200, ' ')}) {
    std::vector<double> got;
    bm25.scores_text_into(t, got);
    ASSERT_EQ(got.size(), docs.size());
    for (double v : got) EXPECT_TRUE(v == 0.0 && !std::signbit(v)) << "\"" << t << "\"";
  }
  // An empty corpus, and degenerate parameters (numpy's NaNs), go the views' way.
  std::vector<double> none;
  Bm25Okapi(std::vector<std::vector<std::string>>{}).scores_text_into("a b", none);
  EXPECT_TRUE(none.empty());
  const Bm25Okapi nan_params(std::vector<std::vector<std::string>>{{"a"}, {}}, Bm25Params{1.5, 1.0, 0.25});
  std::vector<double> got, want;
  nan_params.scores_text_into("a b a", got);
  nan_params.scores_into(text::bm25_token_views("a b a"), want);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(std::memcmp(got.data(), want.data(), 2 * sizeof(double)), 0);
}

}  // namespace
}  // namespace attune::index
