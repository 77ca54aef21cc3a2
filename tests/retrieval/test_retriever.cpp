// The lexical baseline retrievers on literal candidate lists (LAMP.md "Baseline
// retrievers"), the Retriever::rank contract (privacy, k) and spec parsing.
#include <gtest/gtest.h>

#include <cmath>

#include <algorithm>
#include <map>
#include <optional>

#include "attune/core/error.h"
#include "attune/core/rng.h"
#include "attune/index/bm25.h"
#include "attune/retrieval/cached_index.h"
#include "attune/retrieval/candidates.h"
#include "attune/retrieval/retriever.h"
#include "attune/retrieval/spec.h"
#include "attune/text/lexical.h"

namespace attune::retrieval {
namespace {

Document doc(std::string id, std::string text, std::optional<std::string> date = {},
             std::string owner = "u1") {
  Document d;
  d.id = std::move(id);
  d.owner = std::move(owner);
  d.text = std::move(text);
  d.date = std::move(date);
  return d;
}

Query query(std::string text, std::string id = "q1", std::string user = "u1") {
  return Query{std::move(id), std::move(user), std::move(text)};
}

void expect_consistent(const Ranking& r, const std::vector<Document>& c) {
  ASSERT_EQ(r.ids.size(), r.indices.size());
  ASSERT_EQ(r.scores.size(), r.indices.size());
  for (std::size_t i = 0; i < r.size(); ++i) {
    ASSERT_LT(r.indices[i], c.size());
    EXPECT_EQ(r.ids[i], c[r.indices[i]].id);
  }
}

// The hand-worked profile of tests/index/test_bm25.cpp.
std::vector<Document> fruit() {
  return {doc("d0", "apple banana apple cherry", "2020-01-01"),
          doc("d1", "banana cherry date fig", "2021-06-01"),
          doc("d2", "banana cherry date grape", "2020-01-01"),
          doc("d3", "banana kiwi")};
}

// ---- specs -------------------------------------------------------------------------------

TEST(Specs, MakeRetrieverNames) {
  EXPECT_EQ(make_retriever("none", 0)->name(), "none");
  EXPECT_EQ(make_retriever("random", 0)->name(), "random");
  EXPECT_EQ(make_retriever("recency", 0)->name(), "recency");
  EXPECT_EQ(make_retriever(" bm25 ", 0)->name(), "bm25");
  EXPECT_EQ(make_retriever("rrf(bm25, recency)", 0)->name(), "rrf(bm25,recency)");
  EXPECT_EQ(make_retriever("rrf(bm25,rrf(recency,random))", 0)->name(),
            "rrf(bm25,rrf(recency,random))");
}

TEST(Specs, UnknownSpecIsAUsageErrorNamingIt) {
  for (const char* bad : {"bm24", "", "rrf()", "rrf(bm25", "rrf(bm25,)", "BM25", "dense:x"}) {
    EXPECT_THROW(make_retriever(bad, 0), UsageError) << bad;
  }
  try {
    make_retriever("rrf(bm25,foo)", 0);
    FAIL() << "no throw";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("\"foo\""), std::string::npos) << e.what();
  }
}

TEST(Specs, SplitAtTopLevelCommas) {
  EXPECT_EQ(split_specs("a,rrf(b,c),d"), (std::vector<std::string>{"a", "rrf(b,c)", "d"}));
  EXPECT_EQ(split_specs("bm25"), (std::vector<std::string>{"bm25"}));
  EXPECT_EQ(split_specs(" none , rrf(bm25,rrf(recency,random)) "),
            (std::vector<std::string>{"none", "rrf(bm25,rrf(recency,random))"}));
  EXPECT_TRUE(split_specs("").empty());
  EXPECT_THROW(split_specs("a,,b"), UsageError);
  EXPECT_THROW(split_specs("rrf(a,b"), UsageError);
  EXPECT_THROW(split_specs("a),b"), UsageError);
}

// ---- none ----------------------------------------------------------------------------------

TEST(NoneRetriever, RanksNothing) {
  const auto r = make_retriever("none", 1)->rank(query("apple"), fruit(), 3);
  EXPECT_EQ(r.size(), 0u);
}

// ---- random --------------------------------------------------------------------------------

TEST(RandomRetriever, KDrawsWithReplacementSeededBySeedAndQueryId) {
  std::vector<Document> c;
  for (int i = 0; i < 5; ++i) c.push_back(doc("d" + std::to_string(i), "x"));
  const auto r = make_retriever("random", 42)->rank(query("x", "q7"), c, 4);
  expect_consistent(r, c);
  // Exactly random.choices with our Rng: k independent uniform draws.
  Rng rng(derive_seed(42, "q7"));
  std::vector<std::size_t> want;
  for (int i = 0; i < 4; ++i) want.push_back(static_cast<std::size_t>(rng.below(5)));
  EXPECT_EQ(r.indices, want);
}

TEST(RandomRetriever, DeterministicAndIndependentOfCallOrder) {
  std::vector<Document> c;
  for (int i = 0; i < 50; ++i) c.push_back(doc("d" + std::to_string(i), "x"));
  const auto a = make_retriever("random", 7);
  const auto b = make_retriever("random", 7);
  const auto a1 = a->rank(query("x", "q1"), c, 5);
  const auto a2 = a->rank(query("x", "q2"), c, 5);
  const auto b2 = b->rank(query("x", "q2"), c, 5);  // other order, other instance
  const auto b1 = b->rank(query("x", "q1"), c, 5);
  EXPECT_EQ(a1.indices, b1.indices);
  EXPECT_EQ(a2.indices, b2.indices);
  EXPECT_EQ(a->rank(query("x", "q1"), c, 5).indices, a1.indices);  // repeatable
  EXPECT_NE(a1.indices, a2.indices);  // different queries draw differently
  EXPECT_NE(make_retriever("random", 8)->rank(query("x", "q1"), c, 5).indices, a1.indices);
}

TEST(RandomRetriever, KZeroDrawsOncePerCandidateAndEmptyCandidates) {
  std::vector<Document> c = fruit();
  const auto r = make_retriever("random", 3)->rank(query("x"), c, 0);
  EXPECT_EQ(r.size(), c.size());
  expect_consistent(r, c);
  EXPECT_EQ(make_retriever("random", 3)->rank(query("x"), {}, 5).size(), 0u);
  // k > candidates: capped at the number of candidates (draws still with replacement).
  EXPECT_EQ(make_retriever("random", 3)->rank(query("x"), c, 10).size(), c.size());
}

// ---- recency -------------------------------------------------------------------------------

TEST(RecencyRetriever, NewestFirstTiesInReverseOrderUndatedOldest) {
  const std::vector<Document> c = {
      doc("c0", "", "2020-01-01"), doc("c1", ""),  doc("c2", "", "2021-05-01"),
      doc("c3", "", "2020-01-01"), doc("c4", ""),  doc("c5", "", "2021-05-01")};
  // ascending, stable: c1 c4 | c0 c3 | c2 c5; reversed:
  const auto r = make_retriever("recency", 0)->rank(query("x"), c, 0);
  EXPECT_EQ(r.indices, (std::vector<std::size_t>{5, 2, 3, 0, 4, 1}));
  EXPECT_EQ(r.ids, (std::vector<DocId>{"c5", "c2", "c3", "c0", "c4", "c1"}));
  EXPECT_TRUE(std::is_sorted(r.scores.rbegin(), r.scores.rend()));
  EXPECT_EQ(make_retriever("recency", 0)->rank(query("x"), c, 2).indices,
            (std::vector<std::size_t>{5, 2}));
}

// ---- bm25 ----------------------------------------------------------------------------------

TEST(Bm25Retriever, RankBm25OrderAndScores) {
  const auto c = fruit();
  const auto bm25 = make_retriever("bm25", 0);
  // See test_bm25.cpp: d1 and d2 tie at 0.7961187949946881 -> descending index order.
  const auto r = bm25->rank(query("fig grape"), c, 0);
  expect_consistent(r, c);
  EXPECT_EQ(r.indices, (std::vector<std::size_t>{2, 1, 3, 0}));
  EXPECT_EQ(r.scores, (std::vector<Score>{0.7961187949946881, 0.7961187949946881, 0.0, 0.0}));
  const auto r2 = bm25->rank(query("banana banana apple zzz"), c, 0);
  EXPECT_EQ(r2.indices, (std::vector<std::size_t>{0, 3, 2, 1}));
  EXPECT_EQ(r2.scores[0], 1.1804170303878276);
}

TEST(Bm25Retriever, TokensAreWhitespaceSplitCaseSensitive) {
  // "Apple," is its own token: the query "apple" does not match d0.
  const std::vector<Document> c = {doc("d0", "Apple, pie"), doc("d1", "apple\tpie"),
                                   doc("d2", "crumble")};
  const auto r = make_retriever("bm25", 0)->rank(query("apple"), c, 1);
  EXPECT_EQ(r.indices, (std::vector<std::size_t>{1}));
}

TEST(Bm25Retriever, MatchesBm25OkapiDirectly) {
  const auto c = fruit();
  std::vector<std::vector<std::string>> docs;
  for (const auto& d : c) docs.push_back(text::bm25_tokens(d.text));
  const index::Bm25Okapi bm(docs);
  const auto scores = bm.scores(text::bm25_tokens("kiwi cherry date"));
  const auto r = make_retriever("bm25", 0)->rank(query("kiwi cherry date"), c, 0);
  EXPECT_EQ(r.indices, index::rank_bm25_order(scores));
  for (std::size_t i = 0; i < r.size(); ++i) EXPECT_EQ(r.scores[i], scores[r.indices[i]]);
}

// ---- rrf -----------------------------------------------------------------------------------

TEST(RrfRetriever, HandComputedFusion) {
  // query "apple": bm25 ranks e2 (apple, dl 1) > e0 (apple, dl 2) > e1 -> [2, 0, 1];
  // recency ranks e1 (2022) > e2 (2021) > e0 (2020)                    -> [1, 2, 0].
  //   e0: 1/62 + 1/63 = 0.03200...   e1: 1/63 + 1/61 = 0.03227...
  //   e2: 1/61 + 1/62 = 0.03252...   -> fused [2, 1, 0]
  const std::vector<Document> c = {doc("e0", "apple banana", "2020-01-01"),
                                   doc("e1", "cherry", "2022-01-01"),
                                   doc("e2", "apple", "2021-01-01")};
  const auto r = make_retriever("rrf(bm25,recency)", 0)->rank(query("apple"), c, 0);
  expect_consistent(r, c);
  EXPECT_EQ(r.indices, (std::vector<std::size_t>{2, 1, 0}));
  EXPECT_EQ(r.scores, (std::vector<Score>{1.0 / 61 + 1.0 / 62, 1.0 / 63 + 1.0 / 61,
                                          1.0 / 62 + 1.0 / 63}));
  EXPECT_EQ(make_retriever("rrf(bm25,recency)", 0)->rank(query("apple"), c, 1).indices,
            (std::vector<std::size_t>{2}));
}

TEST(RrfRetriever, TiesByCandidatePosition) {
  // query "zzz": bm25 scores all 0 -> [1, 0]; recency (f0 newer) -> [0, 1].
  // Both fuse to 1/61 + 1/62: ascending position.
  const std::vector<Document> c = {doc("f0", "a", "2021-01-01"), doc("f1", "b", "2020-01-01")};
  const auto r = make_retriever("rrf(bm25,recency)", 0)->rank(query("zzz"), c, 0);
  EXPECT_EQ(r.indices, (std::vector<std::size_t>{0, 1}));
  EXPECT_EQ(r.scores[0], r.scores[1]);
}

TEST(RrfRetriever, NoneContributesNothing) {
  const auto c = fruit();
  const auto fused = make_retriever("rrf(none,recency)", 0)->rank(query("x"), c, 0);
  const auto plain = make_retriever("recency", 0)->rank(query("x"), c, 0);
  EXPECT_EQ(fused.indices, plain.indices);
  EXPECT_EQ(make_retriever("rrf(none)", 0)->rank(query("x"), c, 0).size(), 0u);
}

// ---- rerank ---------------------------------------------------------------------------------

TEST(RerankRetriever, RerankerOrdersOnlyTheFirstStagesTopL) {
  // recency: e1 (2022) > e2 (2021) > e0 (2020); its top 2 are {e1, e2}. bm25 on "apple" alone
  // would put e2 > e0 > e1; over {e1, e2} it gives e2 > e1, and e0 never comes back.
  const std::vector<Document> c = {doc("e0", "apple banana", "2020-01-01"),
                                   doc("e1", "cherry", "2022-01-01"),
                                   doc("e2", "apple", "2021-01-01")};
  const auto rr = make_retriever("rerank(recency,2,bm25)", 0);
  EXPECT_EQ(rr->name(), "rerank(recency,2,bm25)");
  const auto r = rr->rank(query("apple"), c, 0);
  expect_consistent(r, c);
  EXPECT_EQ(r.indices, (std::vector<std::size_t>{2, 1}));
  // Scores are the reranker's over the two it saw.
  const std::vector<Document> two = {c[1], c[2]};
  const auto direct = make_retriever("bm25", 0)->rank(query("apple"), two, 0);
  ASSERT_EQ(direct.size(), 2u);
  EXPECT_EQ(r.scores, direct.scores);
  EXPECT_EQ(rr->rank(query("apple"), c, 1).indices, (std::vector<std::size_t>{2}));
  // L beyond the candidates: the reranker over all of them.
  EXPECT_EQ(make_retriever("rerank(recency, 10, bm25)", 0)->rank(query("apple"), c, 0).indices,
            make_retriever("bm25", 0)->rank(query("apple"), c, 0).indices);
}

TEST(RerankRetriever, FuseAddsTheInitialScoresZScoredToTheScaledRerankerScores) {
  // recency scores e1 3, e2 2, e0 1: z = +1.2247, 0, -1.2247. bm25 on "apple": e2 > e0 > e1 (0).
  const std::vector<Document> c = {doc("e0", "apple banana", "2020-01-01"), doc("e1", "cherry", "2022-01-01"),
                                   doc("e2", "apple", "2021-01-01")};
  const auto bm = make_retriever("bm25", 0)->rank(query("apple"), c, 0);
  std::vector<double> bm25_of(3);
  for (std::size_t p = 0; p < bm.size(); ++p) bm25_of[bm.indices[p]] = bm.scores[p];
  const double z1 = std::sqrt(1.5);  // (3 - 2) / sqrt(2/3)
  EXPECT_EQ(initial_prior_z(std::vector<double>{3, 2, 1}), (std::vector<double>{(3 - 2) / std::sqrt(2.0 / 3), 0, (1 - 2) / std::sqrt(2.0 / 3)}));
  EXPECT_EQ(initial_prior_z(std::vector<double>{5, 5}), (std::vector<double>{0, 0}));  // no spread: no prior
  EXPECT_EQ(initial_prior_z(std::vector<double>{7}), (std::vector<double>{0}));
  struct Row {
    const char* spec;
    double scale, weight;
    std::vector<std::size_t> order;
  } rows[] = {
      {"rerank(recency,3,bm25,fuse=2:0)", 2, 0, {2, 0, 1}},      // the reranker's order
      {"rerank(recency,3,bm25,fuse=1:100)", 1, 100, {1, 2, 0}},  // the initial order
  };
  for (const auto& row : rows) {
    const auto rr = make_retriever(row.spec, 0);
    EXPECT_EQ(rr->name(), row.spec);
    const auto r = rr->rank(query("apple"), c, 0);
    expect_consistent(r, c);
    EXPECT_EQ(r.indices, row.order) << row.spec;
    const double z[] = {-z1, z1, 0};  // by candidate
    for (std::size_t p = 0; p < r.size(); ++p)
      EXPECT_NEAR(r.scores[p], row.scale * bm25_of[r.indices[p]] + row.weight * z[r.indices[p]], 1e-12) << row.spec;
    EXPECT_EQ(rr->rank(query("apple"), c, 1).indices, std::vector<std::size_t>{row.order[0]});
  }
}

TEST(RerankRetriever, RepeatedDrawsOfARandomFirstStageCountOnce) {
  const auto c = fruit();
  const auto r = make_retriever("rerank(random,3,recency)", 5)->rank(query("x"), c, 0);
  expect_consistent(r, c);
  std::vector<std::size_t> sorted = r.indices;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end());  // no repeats
  EXPECT_EQ(r.size(), std::min<std::size_t>(3, c.size()));
}

TEST(RerankRetriever, MalformedSpecsAreUsageErrorsSayingWhatIsExpected) {
  for (const char* spec : {"rerank(bm25,16)", "rerank(bm25,0,recency)", "rerank(bm25,x,recency)", "rerank(bm25,-2,recency)",
                           "rerank(bm25,4,recency,none)", "rerank(,4,recency)", "rerank(bm25,4,rrf(recency)"}) {
    try {
      make_retriever(spec, 0);
      ADD_FAILURE() << "no throw for " << spec;
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("rerank"), std::string::npos) << spec << ": " << e.what();
    }
  }
  EXPECT_EQ(rerank_initial("rerank(rrf(bm25,recency),8,bm25)"), "rrf(bm25,recency)");
  EXPECT_EQ(rerank_initial("bm25"), "");
}

// ---- the rank() contract -------------------------------------------------------------------

TEST(Retriever, CandidateOfAnotherUserThrowsPrivacyError) {
  auto c = fruit();
  c.push_back(doc("secret", "apple", "2023-01-01", "u2"));
  for (const char* spec : {"none", "random", "recency", "bm25", "rrf(bm25,recency)"}) {
    try {
      make_retriever(spec, 0)->rank(query("apple", "q1", "u1"), c, 2);
      FAIL() << spec << ": no throw";
    } catch (const PrivacyError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("\"secret\""), std::string::npos) << msg;
      EXPECT_NE(msg.find("\"u2\""), std::string::npos) << msg;
      EXPECT_NE(msg.find("\"u1\""), std::string::npos) << msg;
    }
  }
}

TEST(Retriever, SharedCorpusPassagesHaveNoOwner) {
  std::vector<Document> c = fruit();
  c.push_back(doc("shared", "apple", {}, ""));
  const auto r = make_retriever("bm25", 0)->rank(query("apple", "q1", "u1"), c, 0);
  EXPECT_EQ(r.size(), c.size());
}

TEST(Retriever, KLargerThanCandidatesAndKZero) {
  const auto c = fruit();
  for (const char* spec : {"recency", "bm25", "rrf(bm25,recency)"}) {
    const auto r = make_retriever(spec, 0);
    EXPECT_EQ(r->rank(query("apple"), c, 10).size(), c.size()) << spec;
    EXPECT_EQ(r->rank(query("apple"), c, 0).size(), c.size()) << spec;
    const auto two = r->rank(query("apple"), c, 2);
    ASSERT_EQ(two.size(), 2u) << spec;
    const auto all = r->rank(query("apple"), c, 0);
    EXPECT_EQ(two.indices, std::vector<std::size_t>(all.indices.begin(), all.indices.begin() + 2));
    EXPECT_EQ(two.scores, std::vector<Score>(all.scores.begin(), all.scores.begin() + 2));
    EXPECT_EQ(r->rank(query("apple"), {}, 3).size(), 0u) << spec;
  }
}

// scores_are_ranks() is true exactly where eval used to test the spec's name
// (spec == "recency" || (corpus && spec == "bm25")): wrappers are false even around recency.
TEST(Retriever, ScoresAreRanksForRecencyAndTheCorpusFirstStageOnly) {
  const struct {
    const char* spec;
    bool profile, corpus;  // scores_are_ranks() with corpus = false / true
  } table[] = {
      {"none", false, false},
      {"random", false, false},
      {"recency", true, true},
      {"bm25", false, true},
      {"rrf(recency)", false, false},
      {"rrf(bm25,recency)", false, false},
      {"rerank(bm25,4,recency)", false, false},
      {"rerank(recency,4,bm25)", false, false},
  };
  for (const auto& row : table) {
    const std::string spec = row.spec;
    EXPECT_EQ(make_retriever(spec, 0, false)->scores_are_ranks(), row.profile) << spec;
    EXPECT_EQ(make_retriever(spec, 0, true)->scores_are_ranks(), row.corpus) << spec;
    EXPECT_EQ(row.profile, spec == "recency") << spec;
    EXPECT_EQ(row.corpus, spec == "recency" || spec == "bm25") << spec;
  }
  // Where it is true, the scores are n, n-1, ..., 1.
  const auto c = fruit();
  for (bool corpus : {false, true}) {
    const auto r = make_retriever(corpus ? "bm25" : "recency", 0, corpus)->rank(query("apple"), c, 0);
    EXPECT_EQ(r.scores, (std::vector<Score>{4, 3, 2, 1})) << corpus;
  }
}

// A source with fixed documents, for UnionCandidates.
class ListSource final : public CandidateSource {
 public:
  explicit ListSource(std::vector<std::string> ids) : ids_(std::move(ids)) {}
  std::vector<Document> candidates(const Example&) const override {
    std::vector<Document> out;
    for (const auto& id : ids_) out.push_back({id, "", "text of " + id, {}, {}});
    return out;
  }
  void prefetch(std::span<const Example> ex) const override { prefetched += ex.size(); }
  mutable std::size_t prefetched = 0;

 private:
  std::vector<std::string> ids_;
};

TEST(UnionCandidates, FirstSourceFirstThenUnseenDocumentsInOrder) {
  ListSource bm25({"a", "b", "c"}), dense({"c", "d", "a", "e"});
  UnionCandidates u({&bm25, &dense});
  Example ex;
  ex.id = "q";
  auto docs = u.candidates(ex);
  std::vector<std::string> ids;
  for (auto& d : docs) ids.push_back(d.id);
  EXPECT_EQ(ids, (std::vector<std::string>{"a", "b", "c", "d", "e"}));
  std::vector<Example> exs(3);
  u.prefetch(exs);
  EXPECT_EQ(bm25.prefetched, 3u);
  EXPECT_EQ(dense.prefetched, 3u);
}

}  // namespace
}  // namespace attune::retrieval

namespace attune::retrieval {
namespace {

// An in-memory blob store.
class MemoryBlobs final : public store::BlobStore {
 public:
  std::optional<std::string> blob_get(const std::string& key) override {
    auto it = blobs.find(key);
    if (it == blobs.end()) return std::nullopt;
    return it->second;
  }
  void blob_put(const std::string& key, const std::string& value) override {
    blobs[key] = value;
    ++puts;
  }
  bool blob_delete(const std::string& key) override { return blobs.erase(key) > 0; }
  std::vector<std::string> blob_keys(const std::string& prefix) override {
    std::vector<std::string> out;
    for (auto it = blobs.lower_bound(prefix); it != blobs.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it)
      out.push_back(it->first);
    return out;
  }
  std::map<std::string, std::string> blobs;
  int puts = 0;
};

TEST(CachedCorpusIndex, BuiltOnceThenLoaded) {
  MemoryBlobs store;
  const std::vector<std::string> texts = {"red apple", "green pear", "red cherry"};
  auto a = cached_corpus_index(store, "bm25:x", texts, "c_corpus.jsonl", true);
  EXPECT_EQ(store.puts, 1);
  testing::internal::CaptureStderr();
  auto b = cached_corpus_index(store, "bm25:x", texts, "c_corpus.jsonl", true);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  EXPECT_EQ(store.puts, 1);
  EXPECT_EQ(b.serialize(), a.serialize());
}

TEST(CachedCorpusIndex, CorruptStoredBlobIsRebuiltWithAWarning) {
  MemoryBlobs store;
  const std::vector<std::string> texts = {"red apple", "green pear", "red cherry"};
  const std::string good = cached_corpus_index(store, "bm25:x", texts, "c_corpus.jsonl", true).serialize();
  const auto corrupt = [&](std::string blob, const char* fault) {
    store.blobs["bm25:x"] = blob;
    testing::internal::CaptureStderr();
    auto idx = cached_corpus_index(store, "bm25:x", texts, "c_corpus.jsonl", true);
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find("warning: the stored BM25 index of c_corpus.jsonl did not verify"), std::string::npos) << fault << ": " << err;
    EXPECT_NE(err.find("building it again"), std::string::npos) << err;
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
    EXPECT_EQ(idx.search("red", 0).size(), 2u) << fault;
    EXPECT_EQ(store.blobs["bm25:x"], good) << fault;  // stored again, verified next time
  };
  std::string flipped = good;
  flipped[flipped.size() / 2] ^= 0x5a;
  corrupt(flipped, "a flipped byte");
  corrupt(good.substr(0, good.size() - 3), "truncated");
  corrupt("", "empty");
  // A valid blob of another corpus (two documents, not three) does not verify either.
  MemoryBlobs other;
  corrupt(cached_corpus_index(other, "k", {"red apple", "red"}, "o", true).serialize(), "another corpus");
}

}  // namespace
}  // namespace attune::retrieval
