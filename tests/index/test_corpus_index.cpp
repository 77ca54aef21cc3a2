// CorpusIndex: equivalence with a brute-force Bm25Okapi over the same analyzer tokens
// (exact, not approximate), ordering contract, and the serialized form.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "attune/core/error.h"
#include "attune/index/corpus_index.h"
#include "attune/text/lexical.h"

namespace attune::index {
namespace {

const std::vector<std::string> kTexts = {
    "Section: games. A chess engine for the Xboard protocol.",
    "Section: libs. Chess library: move generation, chess-board I/O.",
    "Section: games. Tetris clone with a twist.",
    "",  // empty document: dl 0
    "Section: utils. Convert PGN chess games; CHESS, chess!",
    "Section: libs. Library for the PNG image format.",
};

// Brute force: BM25Okapi over analyzer tokens, every document, then the search contract.
struct BruteForce {
  explicit BruteForce(const std::vector<std::string>& texts) : bm(analyze(texts, docs)) {
    for (auto d : docs) {  // sorted copies, for "does document d hold term t"
      std::sort(d.begin(), d.end());
      sorted.push_back(std::move(d));
    }
  }
  static const std::vector<std::vector<std::string>>& analyze(
      const std::vector<std::string>& texts, std::vector<std::vector<std::string>>& out) {
    for (const auto& t : texts) out.push_back(text::analyzer_tokens(t));
    return out;
  }
  std::vector<Hit> search(std::string_view query, std::size_t k) const {
    const auto q = text::analyzer_tokens(query);
    const auto scores = bm.scores(q);
    std::vector<Hit> hits;
    for (std::size_t d = 0; d < docs.size(); ++d) {
      const bool has = std::any_of(q.begin(), q.end(), [&](const std::string& t) {
        return std::binary_search(sorted[d].begin(), sorted[d].end(), t);
      });
      if (has) hits.push_back({static_cast<std::uint32_t>(d), scores[d]});
    }
    std::stable_sort(hits.begin(), hits.end(),
                     [](const Hit& a, const Hit& b) { return a.score > b.score; });
    if (k != 0 && hits.size() > k) hits.resize(k);
    return hits;
  }
  std::vector<std::vector<std::string>> docs, sorted;
  Bm25Okapi bm;
};

void expect_same(const std::vector<Hit>& got, const std::vector<Hit>& want,
                 const std::string& query) {
  ASSERT_EQ(got.size(), want.size()) << query;
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].doc, want[i].doc) << query << " rank " << i;
    EXPECT_EQ(got[i].score, want[i].score) << query << " rank " << i;  // exact
  }
}

const std::vector<std::string> kQueries = {
    "chess",            "Chess games",     "section",  // section: negative idf -> floor
    "libs library png", "chess chess xboard",          // duplicate tokens
    "nothing matches",  "",                 "the",      "games. GAMES, twist!"};

TEST(CorpusIndex, MatchesBruteForceBm25Exactly) {
  const auto ix = CorpusIndex::build(kTexts);
  const BruteForce brute(kTexts);
  EXPECT_EQ(ix.size(), kTexts.size());
  for (const auto& q : kQueries) {
    for (std::size_t k : {0u, 1u, 2u, 3u, 10u}) {
      expect_same(ix.search(q, k), brute.search(q, k), q + " k=" + std::to_string(k));
    }
  }
}

TEST(CorpusIndex, OnlyDocumentsWithAQueryTermTiesByAscendingPosition) {
  // "a" is in 3 of 4 documents (idf floored to epsilon * average_idf); d0, d1 and d3
  // have the same length and tf, so they tie and come out by ascending position.
  const auto ix = CorpusIndex::build({"b a", "a b", "c", "a b"});
  const auto hits = ix.search("a", 0);
  ASSERT_EQ(hits.size(), 3u);  // doc 2 has no "a"
  EXPECT_EQ(hits[0].doc, 0u);
  EXPECT_EQ(hits[1].doc, 1u);
  EXPECT_EQ(hits[2].doc, 3u);
  EXPECT_EQ(hits[0].score, hits[2].score);
  EXPECT_TRUE(ix.search("zzz", 5).empty());
  EXPECT_TRUE(ix.search("", 5).empty());
  EXPECT_EQ(ix.search("a", 2).size(), 2u);
}

TEST(CorpusIndex, AnalyzerLowercasesAndSplitsOnPunctuation) {
  const auto ix = CorpusIndex::build({"Foo-Bar", "foobar"});
  const auto hits = ix.search("BAR", 10);
  ASSERT_EQ(hits.size(), 1u);
  EXPECT_EQ(hits[0].doc, 0u);
}

TEST(CorpusIndex, EmptyCorpus) {
  const auto ix = CorpusIndex::build({});
  EXPECT_EQ(ix.size(), 0u);
  EXPECT_TRUE(ix.search("a", 3).empty());
  const auto back = CorpusIndex::deserialize(ix.serialize());
  EXPECT_EQ(back.size(), 0u);
}

TEST(CorpusIndex, SerializeRoundTripGivesIdenticalResults) {
  const auto ix = CorpusIndex::build(kTexts, Bm25Params{1.2, 0.5, 0.3});
  const std::string blob = ix.serialize();
  const auto back = CorpusIndex::deserialize(blob);
  EXPECT_EQ(back.size(), ix.size());
  EXPECT_EQ(back.serialize(), blob);
  for (const auto& q : kQueries) expect_same(back.search(q, 0), ix.search(q, 0), q);
}

TEST(CorpusIndex, CorruptOrTruncatedBlobThrows) {
  const std::string blob = CorpusIndex::build(kTexts).serialize();
  // Every proper prefix is rejected.
  for (std::size_t n = 0; n < blob.size(); ++n) {
    EXPECT_THROW(CorpusIndex::deserialize(std::string_view(blob).substr(0, n)), Error)
        << "prefix " << n;
  }
  // Every single-byte corruption is rejected (checksum, magic or version).
  for (std::size_t i = 0; i < blob.size(); ++i) {
    std::string bad = blob;
    bad[i] = static_cast<char>(bad[i] ^ 0x5a);
    EXPECT_THROW(CorpusIndex::deserialize(bad), Error) << "byte " << i;
  }
  EXPECT_THROW(CorpusIndex::deserialize(blob + "x"), Error);
  try {
    CorpusIndex::deserialize("not an index at all, just text");
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("magic"), std::string::npos) << e.what();
  }
}

TEST(CorpusIndex, ConcurrentSearchesAgreeWithSequential) {
  const auto ix = CorpusIndex::build(kTexts);
  std::vector<std::vector<Hit>> want;
  for (const auto& q : kQueries) want.push_back(ix.search(q, 0));
  std::vector<std::vector<std::vector<Hit>>> got(4);
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < got.size(); ++t) {
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 50; ++rep) {
        got[t].clear();
        for (const auto& q : kQueries) got[t].push_back(ix.search(q, 0));
      }
    });
  }
  for (auto& th : threads) th.join();
  for (const auto& g : got) {
    for (std::size_t i = 0; i < kQueries.size(); ++i) expect_same(g[i], want[i], kQueries[i]);
  }
}

// A real sample: the first 3,000 Debian passages, queried with qa dev synopses.
TEST(CorpusIndex, DebianSampleMatchesBruteForce) {
  const std::filesystem::path dir = std::filesystem::path(ATTUNE_SHARED_DIR) / "data/debian";
  if (!std::filesystem::exists(dir / "debian_corpus.jsonl")) {
    GTEST_SKIP() << "no Debian corpus at " << dir;
  }
  std::vector<std::string> texts;
  {
    std::ifstream in(dir / "debian_corpus.jsonl");
    std::string line;
    while (texts.size() < 3000 && std::getline(in, line)) {
      texts.push_back(nlohmann::json::parse(line).at("text").get<std::string>());
    }
  }
  std::vector<std::string> queries;
  {
    std::ifstream in(dir / "qa_dev.jsonl");
    std::string line;
    while (queries.size() < 40 && std::getline(in, line)) {
      auto input = nlohmann::json::parse(line).at("input").get<std::string>();
      auto pos = input.find("described as:");
      queries.push_back(input.substr(pos == std::string::npos ? 0 : pos + 13));
    }
  }
  const auto ix = CorpusIndex::build(texts);
  const auto back = CorpusIndex::deserialize(ix.serialize());
  const BruteForce brute(texts);
  for (const auto& q : queries) {
    const auto want = brute.search(q, 100);
    expect_same(ix.search(q, 100), want, q);
    expect_same(back.search(q, 100), want, q);
  }
}


// MaxScore (search's default) against the exhaustive path, on corpora full of ties: equal
// documents, equal lengths, repeated query tokens. Every k, every query: the same hits in
// the same order with bit-identical scores, and fewer postings scored once k is small.
TEST(CorpusIndex, MaxScoreGivesTheExhaustiveTopKBitForBitTiesIncluded) {
  std::vector<std::string> texts;
  std::uint64_t x = 12345;
  const auto next = [&] { return (x = x * 6364136223846793005ULL + 1442695040888963407ULL) >> 33; };
  const std::vector<std::string> words = {"alpha", "beta", "gamma", "delta", "eps", "zeta", "eta", "theta",
                                          "iota",  "kappa", "lambda", "mu",   "nu",  "xi",   "omicron", "pi"};
  for (int d = 0; d < 2000; ++d) {
    if (d % 7 == 3) {  // exact copies of an earlier document: equal scores, told apart by position
      texts.push_back(texts[d / 2]);
      continue;
    }
    std::string t;
    const std::size_t len = 3 + next() % 12;
    for (std::size_t i = 0; i < len; ++i) t += words[(next() % words.size()) * (next() % 3 ? 1 : 0)] + " ";  // alpha is frequent
    texts.push_back(t);
  }
  const auto ix = CorpusIndex::build(texts);
  for (const Pruning how : {Pruning::maxscore, Pruning::taat}) {
    std::size_t scored = 0, total = 0, pruned = 0;
    for (int qi = 0; qi < 300; ++qi) {
      std::string q;
      const std::size_t len = 1 + next() % 6;
      for (std::size_t i = 0; i < len; ++i) q += words[next() % words.size()] + " ";
      for (std::size_t k : {1, 3, 10, 100}) {
        SearchStats st;
        const auto fast = ix.search(q, k, how, &st);
        const auto all = ix.search(q, k);
        expect_same(fast, all, q + " k=" + std::to_string(k) + (how == Pruning::taat ? " taat" : " maxscore"));
        scored += st.postings_scored;
        total += st.postings_total;
        pruned += st.pruned;
      }
    }
    EXPECT_GT(pruned, 0u);
    EXPECT_LT(scored, total) << "pruning skipped no posting";
  }
}

// On the real corpus sample: MaxScore's top 10 and top 100 equal the exhaustive ones for 200
// qa dev queries, and it scores fewer postings.
TEST(CorpusIndex, MaxScoreEqualsExhaustiveOnTheDebianCorpus) {
  const std::filesystem::path dir = std::filesystem::path(ATTUNE_SHARED_DIR) / "data/debian";
  if (!std::filesystem::exists(dir / "debian_corpus.jsonl")) GTEST_SKIP() << "no Debian corpus at " << dir;
  std::vector<std::string> texts, queries;
  {
    std::ifstream in(dir / "debian_corpus.jsonl");
    std::string line;
    while (texts.size() < 20000 && std::getline(in, line)) texts.push_back(nlohmann::json::parse(line).at("text").get<std::string>());
  }
  {
    std::ifstream in(dir / "qa_dev.jsonl");
    std::string line;
    while (queries.size() < 200 && std::getline(in, line)) queries.push_back(nlohmann::json::parse(line).at("input").get<std::string>());
  }
  const auto ix = CorpusIndex::build(texts);
  std::size_t scored = 0, total = 0;
  for (const Pruning how : {Pruning::maxscore, Pruning::taat})
    for (const auto& q : queries)
      for (std::size_t k : {10, 100}) {
        SearchStats st;
        expect_same(ix.search(q, k, how, &st), ix.search(q, k), q);
        scored += st.postings_scored;
        total += st.postings_total;
      }
  EXPECT_LT(scored, total);
  std::printf("MaxScore and term-at-a-time on %zu passages: %zu of %zu postings scored (%.1f%%)\n", texts.size(), scored, total,
              100.0 * static_cast<double>(scored) / static_cast<double>(total));
}

}  // namespace
}  // namespace attune::index
