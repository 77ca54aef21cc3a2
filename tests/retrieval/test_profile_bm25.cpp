// ProfileBm25 ranks exactly as bm25 over the same documents (bit-identical scores, same
// tie order) and answers only its owner's queries.
#include <gtest/gtest.h>

#include <random>

#include "attune/core/error.h"
#include "attune/retrieval/profile_bm25.h"
#include "attune/retrieval/spec.h"

using namespace attune;

TEST(ProfileBm25, RanksBitIdenticallyToBm25OverTheSameDocuments) {
  std::mt19937 rng(7);
  const std::vector<std::string> words = {"fix", "parser", "crash", "add", "flag", "docs", "release", "test", "the", "a",
                                          "config", "empty", "key", "Übersetzung", "naïve"};
  const auto bm25 = retrieval::make_retriever(retrieval::parse_retriever_spec("bm25"), 0);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<Document> docs(1 + rng() % 40);
    for (std::size_t i = 0; i < docs.size(); ++i) {
      docs[i].id = "d" + std::to_string(i);
      docs[i].owner = "t/ann";
      for (std::size_t w = 0, n = 1 + rng() % 12; w < n; ++w) docs[i].text += words[rng() % words.size()] + " ";
    }
    retrieval::ProfileBm25 built(docs);
    // Statistics read back from their bytes rank the same, bit for bit (the server's store).
    retrieval::ProfileBm25 index(docs, built.statistics());
    ASSERT_EQ(index.statistics(), built.statistics());
    for (int qi = 0; qi < 5; ++qi) {
      retrieval::Query q{"q", "t/ann", words[rng() % words.size()] + " " + words[rng() % words.size()]};
      for (std::size_t k : {std::size_t{0}, std::size_t{1}, std::size_t{5}}) {
        const Ranking want = bm25->rank(q, docs, k), got = index.rank(q, k);
        ASSERT_EQ(got.indices, want.indices) << "trial " << trial << " query " << q.text << " k " << k;
        ASSERT_EQ(got.ids, want.ids);
        for (std::size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got.scores[i], want.scores[i]);  // bit for bit
      }
    }
  }
}

TEST(ProfileBm25, AnswersOnlyItsOwnersQueries) {
  std::vector<Document> docs(3);  // three: with two, a word of one of them has idf 0 and all tie
  docs[0] = {"a", "t/ann", "fix the parser", {}, std::nullopt};
  docs[1] = {"b", "t/ann", "release notes", {}, std::nullopt};
  docs[2] = {"c", "t/ann", "update the manual", {}, std::nullopt};
  retrieval::ProfileBm25 index(docs);
  EXPECT_EQ(index.rank({"q", "t/ann", "parser"}, 1).ids.at(0), "a");
  EXPECT_THROW(index.rank({"q", "t/bob", "parser"}, 1), PrivacyError);
  docs[1].owner = "t/bob";
  EXPECT_THROW(retrieval::ProfileBm25{docs}, PrivacyError);
}

// The bytes of the statistics: a fingerprint that changes with any document, and every
// damaged form refused with an Error (never a crash, never other scores).
TEST(ProfileBm25, StatisticsBytesAreCheckedAndTheFingerprintFollowsTheDocuments) {
  std::vector<Document> docs(3);
  docs[0] = {"a", "t/ann", "fix the parser crash", {}, std::nullopt};
  docs[1] = {"b", "t/ann", "release notes for the parser", {}, std::nullopt};
  docs[2] = {"c", "t/ann", "update the manual", {}, std::nullopt};
  const retrieval::ProfileBm25 index(docs);
  const std::string bytes = index.statistics(), fp = retrieval::ProfileBm25::fingerprint(docs);
  EXPECT_EQ(fp.size(), 64u);
  auto edited = docs;
  edited[2].text += "s";
  EXPECT_NE(retrieval::ProfileBm25::fingerprint(edited), fp);
  edited = docs;
  edited[1].id = "b2";
  EXPECT_NE(retrieval::ProfileBm25::fingerprint(edited), fp);
  edited = docs;
  std::swap(edited[0], edited[1]);
  EXPECT_NE(retrieval::ProfileBm25::fingerprint(edited), fp);
  edited = docs;
  for (auto& d : edited) d.owner = "t/bob";
  EXPECT_NE(retrieval::ProfileBm25::fingerprint(edited), fp);
  // Every truncation, and a stray byte after the end, is refused, naming what is wrong.
  const auto message = [&](const std::vector<Document>& d, std::string_view b) -> std::string {
    try {
      retrieval::ProfileBm25 r(d, b);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    const std::string m = message(docs, std::string_view(bytes).substr(0, n));
    EXPECT_EQ(m.rfind("BM25 statistics: ", 0), 0u) << n << ": " << m;
  }
  EXPECT_NE(message(docs, bytes.substr(0, 20)).find("truncated"), std::string::npos);
  EXPECT_NE(message(docs, bytes + "x").find("bytes after the end"), std::string::npos);
  // Statistics of another number of documents are refused.
  EXPECT_NE(message(std::vector<Document>(docs.begin(), docs.begin() + 2), bytes).find("3 documents given for a profile of 2"),
            std::string::npos);
  // A flipped byte either fails a check or leaves well-formed statistics; never a crash.
  for (std::size_t i = 8; i < bytes.size(); ++i) {
    std::string bad = bytes;
    bad[i] = static_cast<char>(bad[i] ^ 0x5A);
    try {
      retrieval::ProfileBm25 r(docs, bad);
      (void)r.rank({"q", "t/ann", "parser crash"}, 0);
    } catch (const Error&) {
    }
  }
  // An empty profile round-trips too.
  const retrieval::ProfileBm25 empty(std::vector<Document>{});
  EXPECT_TRUE(retrieval::ProfileBm25(std::vector<Document>{}, empty.statistics()).rank({"q", "t/ann", "parser"}, 0).ids.empty());
  std::string magic = bytes;
  magic[0] = 'X';
  EXPECT_NE(message(docs, magic).find("another version"), std::string::npos);
}
