#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <set>
#include <thread>

#include "attune/core/error.h"
#include "attune/core/hash.h"
#include "attune/core/micro_batch.h"
#include "attune/core/parallel.h"
#include "attune/core/rng.h"
#include "attune/core/strings.h"

using namespace attune;

TEST(Strings, SplitWhitespaceMatchesPythonStrSplit) {
  // "a\u00a0b\u3000c  d\te\n" splits into five pieces under Python's str.split().
  EXPECT_EQ(split_whitespace("a\xC2\xA0" "b\xE3\x80\x80" "c  d\te\n"),
            (std::vector<std::string>{"a", "b", "c", "d", "e"}));
  EXPECT_TRUE(split_whitespace("   ").empty());
  // U+200B ZERO WIDTH SPACE is not whitespace for Python.
  EXPECT_EQ(split_whitespace("x\xE2\x80\x8By").size(), 1u);
}

// The splitter's fast paths (16 ASCII bytes at a time, a byte table) against the plain
// definition, one decoded code point at a time, on random strings mixing ASCII words and
// spaces, \x1c..\x1f, non-ASCII spaces (U+00A0, U+3000, U+2009), non-space non-ASCII
// characters, stray continuation bytes and truncated sequences.
TEST(Strings, SplitWhitespaceViewsMatchesTheCodePointDefinition) {
  const std::vector<std::string> pieces{"a", "Zq", "7", " ", "\t", "\n", "\x1c", "\x1f", "\x1b", "\xC2\xA0", "\xE3\x80\x80",
                                        "\xE2\x80\x89", "\xC3\xA9", "\xE2\x80\x8B", "\x80", "\xC2", "\xE3\x80", "\xF0\x9F\x98\x80"};
  auto reference = [](std::string_view s) {
    std::vector<std::string_view> out;
    std::size_t i = 0, start = 0;
    bool in_word = false;
    while (i < s.size()) {
      std::uint32_t cp;
      const std::size_t len = utf8_decode(s, i, cp);
      if (is_python_space(cp)) {
        if (in_word) out.push_back(s.substr(start, i - start));
        in_word = false;
      } else if (!in_word) {
        in_word = true;
        start = i;
      }
      i += len;
    }
    if (in_word) out.push_back(s.substr(start));
    return out;
  };
  std::uint64_t x = 99;
  std::vector<std::string_view> got;
  for (int trial = 0; trial < 2000; ++trial) {
    // A third of them ASCII only (the first nine pieces) and longer: runs of 16 bytes and more.
    const bool ascii = trial % 3 == 0;
    std::string s;
    const int n = ascii ? trial % 90 : trial % 40;
    for (int j = 0; j < n; ++j) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      s += pieces[(x >> 33) % (ascii ? 9 : pieces.size())];
    }
    split_whitespace_views_into(s, got);
    ASSERT_EQ(got, reference(s)) << "trial " << trial;
    ASSERT_EQ(split_whitespace_views(s), got);
  }
}

TEST(Strings, StripAndTextAfter) {
  EXPECT_EQ(strip("  \xC2\xA0hi there \n"), "hi there");
  EXPECT_EQ(text_after("review: great movie ", "review:"), "great movie");
  EXPECT_EQ(text_after("a: b: c", ":"), "b: c");
  EXPECT_EQ(text_after(" no marker ", "zzz"), "no marker");
}

TEST(Strings, Utf8Validation) {
  EXPECT_TRUE(valid_utf8("caf\xC3\xA9 \xEF\xBF\xBD"));
  EXPECT_FALSE(valid_utf8("bad \xC3"));
  EXPECT_FALSE(valid_utf8("\xED\xA0\x80"));  // a UTF-16 surrogate
  EXPECT_FALSE(valid_utf8("\xC0\xAF"));      // overlong
}

TEST(Rng, DeterministicAndUniformEnough) {
  Rng a(42), b(42);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(a.below(7), b.below(7));
  Rng c(1);
  std::vector<int> counts(4, 0);
  for (int i = 0; i < 4000; ++i) counts[c.below(4)]++;
  for (int n : counts) EXPECT_NEAR(n, 1000, 150);
  EXPECT_NE(derive_seed(1, "q1"), derive_seed(1, "q2"));
  EXPECT_EQ(derive_seed(1, "q1"), derive_seed(1, "q1"));
}

// keep_sample: `limit` distinct items in their original order, the same for a seed, another
// for another seed; every item when the limit is 0 or at least their number.
TEST(Rng, KeepSampleKeepsOrderAndIsSeeded) {
  std::vector<int> all(100);
  for (int i = 0; i < 100; ++i) all[i] = i;
  const auto sample = [&](std::uint64_t seed, std::size_t limit) {
    auto v = all;
    Rng rng(seed);
    keep_sample(v, limit, rng);
    return v;
  };
  const auto a = sample(7, 10);
  ASSERT_EQ(a.size(), 10u);
  EXPECT_TRUE(std::is_sorted(a.begin(), a.end()));
  EXPECT_EQ(std::adjacent_find(a.begin(), a.end()), a.end());  // distinct
  EXPECT_EQ(a, sample(7, 10));
  EXPECT_NE(a, sample(8, 10));
  EXPECT_EQ(sample(7, 0), all);
  EXPECT_EQ(sample(7, 100), all);
  EXPECT_EQ(sample(7, 500), all);
  // Every item is about equally likely to be kept.
  std::vector<int> kept(100, 0);
  for (std::uint64_t seed = 0; seed < 2000; ++seed)
    for (int x : sample(seed, 10)) ++kept[x];
  for (int n : kept) EXPECT_NEAR(n, 200, 60);
}

TEST(Hash, StableAndPartAware) {
  EXPECT_EQ(Hasher().add("ab").add("c").hex(), Hasher().add("ab").add("c").hex());
  EXPECT_NE(Hasher().add("ab").add("c").hex(), Hasher().add("a").add("bc").hex());
  EXPECT_EQ(Hasher().add("x").hex().size(), 32u);
  // Pinned so a change of the function (which would orphan every cache) is noticed.
  EXPECT_EQ(hash64("attune"), hash64("attune"));
}

TEST(Parallel, RunsEveryItemOnceAndPropagatesErrors) {
  std::vector<std::atomic<int>> hits(1000);
  parallel_for(hits.size(), 2, [&](std::size_t i) { hits[i]++; });
  for (auto& h : hits) EXPECT_EQ(h.load(), 1);
  EXPECT_THROW(parallel_for(10, 2, [](std::size_t i) { if (i == 5) throw Error("boom"); }), Error);
}

TEST(Parallel, CountsCpusAndPhysicalCores) {
  const std::size_t cpus = default_threads(), cores = physical_cores();
  EXPECT_GE(cpus, 1u);
  EXPECT_GE(cores, 1u);
  EXPECT_LE(cores, cpus);  // SMT siblings count once, never more than the CPUs we may use
}

TEST(Errors, InputErrorNamesFileRecordField) {
  InputError e("q.json", "record 3 (id \"x\")", "profile[1].date", "expected a string");
  EXPECT_STREQ(e.what(), "q.json: record 3 (id \"x\"): field \"profile[1].date\": expected a string");
}

// MicroBatcher: every caller gets its own item's output, batches never exceed the limit, a
// caller alone is computed at once, concurrent callers share batches, and a failure reaches
// every caller of its batch (and no other).
TEST(MicroBatcher, ConcurrentCallersShareBatchesAndEachGetsItsOwnAnswer) {
  std::atomic<std::size_t> largest{0}, inside{0};
  std::atomic<bool> overlapped{false};
  MicroBatcher<int, int> b(
      [&](std::span<const int> xs) {
        if (inside++ > 0) overlapped = true;  // the batch function is never run twice at once
        std::size_t n = xs.size(), seen = largest.load();
        while (n > seen && !largest.compare_exchange_weak(seen, n)) {
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        std::vector<int> out;
        for (int x : xs) out.push_back(x * x);
        --inside;
        return out;
      },
      4);
  EXPECT_EQ(b.run(7), 49);  // alone: a batch of one, at once
  EXPECT_EQ(b.stats().batches, 1u);
  std::vector<std::thread> ts;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 8; ++t)
    ts.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        const int x = t * 1000 + i;
        if (b.run(x) != x * x) ++wrong;
      }
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_FALSE(overlapped.load());
  EXPECT_LE(largest.load(), 4u);
  const auto s = b.stats();
  EXPECT_EQ(s.items, 401u);
  EXPECT_LT(s.batches, 401u) << "8 concurrent callers never shared a batch";
}

TEST(MicroBatcher, AFailureReachesTheCallersOfItsBatchOnly) {
  MicroBatcher<int, int> b(
      [](std::span<const int> xs) {
        for (int x : xs)
          if (x < 0) throw UsageError("negative");
        return std::vector<int>(xs.begin(), xs.end());
      },
      8);
  EXPECT_THROW(b.run(-1), UsageError);
  EXPECT_EQ(b.run(3), 3);  // the batcher is usable after a failure
  MicroBatcher<int, int> wrong_count([](std::span<const int>) { return std::vector<int>{}; }, 2);
  EXPECT_THROW(wrong_count.run(1), std::logic_error);
}
