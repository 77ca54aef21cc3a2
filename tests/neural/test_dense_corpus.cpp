// DenseCorpusCandidates: the dense top-n over a whole corpus equals a brute-force scan of
// the encoder's embeddings; embeddings come back from the store on the next construction
// (no encoder calls), a corrupt chunk is embedded again, new weights invalidate the cache;
// dense: ranks its own candidates by the same score without embedding passages again.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <chrono>
#include <thread>

#include "attune/core/error.h"
#include "attune/neural/dense.h"
#include "attune/neural/dense_corpus.h"
#include "attune/retrieval/first_stage.h"
#include "attune/retrieval/retriever.h"
#include "attune/serve/service.h"
#include "attune/store/store.h"
#include "attune/tasks/task.h"
#include "tiny_bert.h"

namespace attune {
namespace {

namespace fs = std::filesystem;

// n passages of 4..11 random tiny words ("title" + "text" as the corpus tasks read them),
// with text filled by the task.
std::vector<Document> tiny_corpus(const tasks::Task& task, std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  const auto& w = testing::tiny_words();
  std::vector<Document> out;
  for (std::size_t i = 0; i < n; ++i) {
    std::string text = "Section: misc.";
    const std::size_t len = 4 + rng() % 8;
    for (std::size_t j = 0; j < len; ++j) text += " " + w[rng() % w.size()];
    Document d;
    d.id = "p" + std::to_string(i);
    d.fields = {{"title", w[rng() % w.size()] + "-" + std::to_string(i)}, {"text", text}};
    d.text = task.document_text(d);
    out.push_back(std::move(d));
  }
  return out;
}

std::vector<Example> tiny_queries(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  const auto& w = testing::tiny_words();
  std::vector<Example> out;
  for (std::size_t i = 0; i < n; ++i) {
    std::string q;
    for (std::size_t j = 0; j < 3 + rng() % 4; ++j) q += (j ? " " : "") + w[rng() % w.size()];
    Example ex;
    ex.id = "q" + std::to_string(i);
    ex.input = "Which Debian package is described as: " + q + "?";
    out.push_back(std::move(ex));
  }
  return out;
}

struct DenseCorpus : ::testing::Test {
  void SetUp() override {
    dir = testing::fresh_dir(::testing::UnitTest::GetInstance()->current_test_info()->name());
    model = dir / "enc";
    testing::write_tiny_encoder(model, models::Pooling::Mean, /*normalize=*/true, 7);
    task = tasks::make_task("qa");
    corpus = tiny_corpus(*task, 300, 1);
    st = store::open_sqlite(dir / "store.db");
    eo.device = "cpu";
  }
  void TearDown() override {
    st.reset();
    fs::remove_all(dir);
  }
  std::unique_ptr<neural::DenseCorpusCandidates> open(neural::DenseCorpusOptions o = {}) {
    o.progress = false;
    return neural::DenseCorpusCandidates::open(*task, corpus, model, st.get(), eo, o);
  }
  fs::path dir, model;
  std::unique_ptr<tasks::Task> task;
  std::vector<Document> corpus;
  std::unique_ptr<store::Store> st;
  models::EncoderOptions eo;
};

TEST_F(DenseCorpus, TopNIsTheBruteForceTopNOverTheWholeCorpus) {
  neural::DenseCorpusOptions o;
  o.n = 20;
  o.chunk = 64;
  auto src = open(o);
  EXPECT_EQ(src->corpus().size(), 300u);
  EXPECT_EQ(src->vectors().kind(), "flat");
  EXPECT_EQ(src->vectors().size(), 300u);
  // Brute force: every passage embedded in one call, double inner products.
  std::vector<std::string> texts;
  for (const auto& d : corpus) texts.push_back(d.text);
  const auto& enc = src->encoder();
  const auto P = enc.embed(texts);
  const std::size_t D = enc.dim();
  auto queries = tiny_queries(12, 2);
  // Half answered by single searches, half by the batched prefetch.
  src->prefetch(std::span<const Example>(queries).subspan(6));
  EXPECT_EQ(src->queries_embedded(), 6u);
  std::size_t exact_lists = 0;
  for (const auto& ex : queries) {
    const std::string q = task->query(ex);
    const auto qv = enc.embed(std::vector<std::string>{q});
    std::vector<double> s(corpus.size());
    for (std::size_t i = 0; i < corpus.size(); ++i) {
      double acc = 0;
      for (std::size_t d = 0; d < D; ++d) acc += static_cast<double>(qv[d]) * P[i * D + d];
      s[i] = acc;
    }
    std::vector<std::size_t> order(corpus.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return s[a] > s[b]; });
    auto cands = src->candidates(ex);
    ASSERT_EQ(cands.size(), 20u);
    std::vector<std::string> want, got;
    for (std::size_t j = 0; j < 20; ++j) want.push_back(corpus[order[j]].id);
    for (const auto& c : cands) {
      got.push_back(c.id);
      EXPECT_TRUE(c.owner.empty());
      EXPECT_FALSE(c.text.empty());
    }
    if (got == want) {
      ++exact_lists;
      continue;
    }
    // Only float-level near-ties may reorder: what came back is the top-20 up to 1e-5.
    auto score = [&](const std::string& id) { return s[std::stoul(id.substr(1))]; };
    for (std::size_t j = 0; j < 20; ++j) EXPECT_NEAR(score(got[j]), score(want[j]), 1e-5) << q << " rank " << j;
  }
  EXPECT_GE(exact_lists, 10u);
  EXPECT_EQ(src->queries_embedded(), 12u);  // the prefetched six were not embedded again
  // Library use: free-text search returns rows of corpus().
  auto hits = src->search(std::vector<std::string>{"debian kernel network"}, 5);
  ASSERT_EQ(hits.size(), 1u);
  EXPECT_EQ(hits[0].size(), 5u);
}

TEST_F(DenseCorpus, TheSecondConstructionReadsTheStoreAndACorruptChunkIsEmbeddedAgain) {
  neural::DenseCorpusOptions o;
  o.chunk = 64;  // chunks of 32 to 128 passages, about 64 on average
  std::vector<float> first;
  std::string key;
  std::vector<neural::DenseCorpusCandidates::Chunk> chunks;
  {
    auto src = open(o);
    EXPECT_EQ(src->passages_embedded(), 300u);
    first = src->embeddings()->rows;
    key = src->cache_key();
    chunks = src->chunks();
  }
  // The chunks tile the corpus, within their bounds.
  ASSERT_GE(chunks.size(), 3u);
  std::size_t at = 0;
  for (std::size_t c = 0; c < chunks.size(); ++c) {
    EXPECT_EQ(chunks[c].lo, at);
    EXPECT_LE(chunks[c].hi - chunks[c].lo, 128u);
    if (c + 1 < chunks.size()) {
      EXPECT_GE(chunks[c].hi - chunks[c].lo, 32u);
    }
    EXPECT_EQ(chunks[c].key.rfind(key + "/", 0), 0u);
    at = chunks[c].hi;
  }
  EXPECT_EQ(at, 300u);
  {
    auto src = open(o);
    EXPECT_EQ(src->passages_embedded(), 0u);  // every chunk from the store
    EXPECT_EQ(src->cache_key(), key);
    EXPECT_EQ(src->embeddings()->rows, first);
  }
  st->blob_put(chunks[1].key, "garbage");
  auto blob = st->blob_get(chunks.back().key);
  ASSERT_TRUE(blob.has_value());
  st->blob_put(chunks.back().key, blob->substr(0, blob->size() - 4));  // short
  ::testing::internal::CaptureStderr();
  auto src = open(o);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(src->passages_embedded(), (chunks[1].hi - chunks[1].lo) + (chunks.back().hi - chunks.back().lo));
  EXPECT_NE(err.find("corrupt"), std::string::npos) << err;
  ASSERT_EQ(src->embeddings()->rows.size(), first.size());
  for (std::size_t i = 0; i < first.size(); ++i) ASSERT_NEAR(src->embeddings()->rows[i], first[i], 1e-6) << i;
}

// A build asked to stop (the server's background builder, when the corpus changed or the
// server stops) throws FirstStageCancelled at its next encoder call; the chunks it finished
// stay in the store, so the next build embeds only the rest, and its embeddings equal a
// build never stopped.
TEST_F(DenseCorpus, ACancelledBuildStopsAtItsNextBatchAndTheNextBuildResumesFromItsChunks) {
  neural::DenseCorpusOptions o;
  o.chunk = 64;
  o.embed_batch = 16;
  std::vector<float> whole;
  {
    neural::DenseCorpusOptions plain = o;
    auto other = store::open_sqlite(dir / "whole.db");
    plain.progress = false;
    whole = neural::DenseCorpusCandidates::open(*task, corpus, model, other.get(), eo, plain)->embeddings()->rows;
  }
  int asked = 0;
  o.cancelled = [&] { return ++asked > 10; };  // 10 batches of 16 embedded, then stop
  EXPECT_THROW(open(o), retrieval::FirstStageCancelled);
  EXPECT_EQ(asked, 11);
  o.cancelled = {};
  auto src = open(o);
  EXPECT_GT(src->passages_embedded(), 0u);
  EXPECT_LT(src->passages_embedded(), 300u - 32u) << "no chunk of the cancelled build was kept";
  EXPECT_EQ(src->embeddings()->rows, whole);
}

// Incremental re-embedding (issue 18): a corpus that grew, lost a passage or had one edited
// embeds only the chunks that changed, and its embeddings equal a fresh build's.
TEST_F(DenseCorpus, AGrownOrEditedCorpusEmbedsOnlyTheChunksItChanged) {
  neural::DenseCorpusOptions o;
  o.chunk = 32;
  o.progress = false;
  const auto all = tiny_corpus(*task, 600, 1);  // the fixture's 300 are its first 300
  corpus.assign(all.begin(), all.begin() + 300);
  const std::size_t before_chunks = open(o)->chunks().size();
  ASSERT_GE(before_chunks, 5u);
  const auto fresh_equal = [&](const neural::DenseCorpusCandidates& src) {
    neural::DenseCorpusCandidates scratch(*task, corpus, neural::shared_encoder(model.string(), eo), "", nullptr, o);
    ASSERT_EQ(src.embeddings()->rows.size(), scratch.embeddings()->rows.size());
    for (std::size_t i = 0; i < scratch.embeddings()->rows.size(); ++i)
      ASSERT_NEAR(src.embeddings()->rows[i], scratch.embeddings()->rows[i], 1e-6) << i;
  };
  // Grown by 300: at most the old last chunk and the new passages are embedded.
  corpus.assign(all.begin(), all.end());
  {
    auto src = open(o);
    EXPECT_GE(src->passages_embedded(), 300u);
    EXPECT_LE(src->passages_embedded(), 300u + 64u);
    fresh_equal(*src);
  }
  // One passage edited in the middle, one removed near the start: a chunk or two each.
  corpus[310].text += " edited";
  corpus.erase(corpus.begin() + 40);
  {
    auto src = open(o);
    EXPECT_GE(src->passages_embedded(), 2u);
    EXPECT_LE(src->passages_embedded(), 4u * 64u) << "of " << corpus.size();
    fresh_equal(*src);
  }
  // Nothing changed: nothing embedded.
  EXPECT_EQ(open(o)->passages_embedded(), 0u);
}

TEST_F(DenseCorpus, NewWeightsInvalidateTheCache) {
  std::string key;
  {
    auto src = open();
    key = src->cache_key();
    EXPECT_EQ(src->passages_embedded(), 300u);
  }
  const auto fp = neural::model_fingerprint(model);
  // Retrained in place: same folder, same sizes, other weights.
  testing::write_tiny_encoder(model, models::Pooling::Mean, true, 8);
  EXPECT_NE(neural::model_fingerprint(model), fp);
  auto src = open();
  EXPECT_NE(src->cache_key(), key);
  EXPECT_EQ(src->passages_embedded(), 300u);
  EXPECT_THROW(neural::model_fingerprint(dir / "nowhere"), Error);
}

TEST_F(DenseCorpus, DenseRanksItsOwnCandidatesByTheSameScoreWithoutEmbeddingThemAgain) {
  auto src = open();
  neural::DenseRetriever r(neural::shared_encoder(model.string(), eo));
  for (const auto& ex : tiny_queries(5, 3)) {
    auto cands = src->candidates(ex);
    auto ranking = r.rank({ex.id, ex.user, task->query(ex)}, cands, 10);
    ASSERT_EQ(ranking.size(), 10u);
    // Same embeddings, same order (up to float near-ties).
    auto hits = src->search(std::vector<std::string>{task->query(ex)}, 100);
    for (std::size_t j = 0; j < 10; ++j)
      EXPECT_NEAR(ranking.scores[j], hits[0].scores[j], 1e-5) << ex.id << " rank " << j;
  }
  EXPECT_EQ(r.cached(), 0u);  // every passage came from the published corpus embeddings
}

// attune serve's micro-batching: concurrent queries are encoded in shared forward passes, and
// every ranking is the one each query gets alone (same order, scores to float rounding).
TEST_F(DenseCorpus, MicroBatchedQueriesRankAsEachAloneUnderConcurrentCalls) {
  const auto enc = neural::shared_encoder(model.string(), eo);
  std::vector<Document> docs(corpus.begin(), corpus.begin() + 60);
  for (auto& d : docs) d.owner = "u";
  const auto queries = tiny_queries(48, 9);
  neural::DenseRetriever alone(enc);
  std::vector<Ranking> expect;
  for (const auto& ex : queries) expect.push_back(alone.rank({ex.id, "u", task->query(ex)}, docs, 10));

  neural::set_query_micro_batch(8);
  neural::DenseRetriever batched(enc);
  neural::set_query_micro_batch(1);
  (void)batched.rank({"warm", "u", "warm up"}, docs, 1);  // embeds the documents (no batching then)
  const auto before = neural::query_batch_stats();
  std::vector<Ranking> got(queries.size());
  std::vector<std::thread> ts;
  for (std::size_t t = 0; t < 4; ++t)
    ts.emplace_back([&, t] {
      for (std::size_t i = t; i < queries.size(); i += 4)
        got[i] = batched.rank({queries[i].id, "u", task->query(queries[i])}, docs, 10);
    });
  for (auto& t : ts) t.join();
  const auto after = neural::query_batch_stats();
  EXPECT_EQ(after.queries - before.queries, queries.size());  // every query went through the batcher
  EXPECT_GE(after.batches - before.batches, queries.size() / 8);
  for (std::size_t i = 0; i < queries.size(); ++i) {
    ASSERT_EQ(got[i].size(), expect[i].size());
    for (std::size_t j = 0; j < got[i].size(); ++j) {
      EXPECT_NEAR(got[i].scores[j], expect[i].scores[j], 1e-5) << i << " rank " << j;
      if (j + 1 < got[i].size() && expect[i].scores[j] - expect[i].scores[j + 1] > 1e-4) {
        EXPECT_EQ(got[i].ids[j], expect[i].ids[j]) << i << " rank " << j;
      }
    }
  }
}


// `attune serve` under dense:DIR searches the tenant's whole corpus with its embeddings (the
// corpus first stage), not BM25's candidates: a query that shares no word with any passage
// still gets the dense top k, in the order a brute-force scan gives. The embeddings are
// cached in the store per tenant: a restarted server embeds nothing, another tenant with the
// same passages embeds its own, and a changed corpus is searched again at once.
TEST(DenseFirstStage, ServeSearchesATenantsWholeCorpusDenselyWithEmbeddingsCachedPerTenant) {
  const auto dir = testing::fresh_dir("serve_dense_stage");
  const auto model = dir / "enc";
  testing::write_tiny_encoder(model, models::Pooling::Mean, /*normalize=*/true, 11);
  neural::register_retrievers();
  neural::register_first_stages();
  const std::string spec = "dense:" + model.string();
  EXPECT_TRUE(retrieval::has_first_stage(spec));
  EXPECT_FALSE(retrieval::has_first_stage("bm25"));
  EXPECT_FALSE(retrieval::has_first_stage("rrf(bm25," + spec + ")"));
  EXPECT_EQ(retrieval::make_first_stage("bm25", {"a"}, nullptr), nullptr);
  for (const char* bad : {"", "dense:x"}) {
    try {
      retrieval::register_first_stage(bad, {});
      ADD_FAILURE() << "registered the first stage kind \"" << bad << "\"";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("a prefix is a non-empty name without ':'"), std::string::npos) << e.what();
    }
  }
  // Passages of the first 15 tiny words; the query of the last 15: no word in common.
  const auto& w = testing::tiny_words();
  std::mt19937 rng(5);
  std::vector<store::ServeDocument> docs;
  std::vector<std::string> texts;
  for (int i = 0; i < 40; ++i) {
    std::string t;
    for (int j = 0; j < 6; ++j) t += (j ? " " : "") + w[rng() % 15];
    docs.push_back({"", "c" + std::to_string(i), t, ""});
    texts.push_back(t);
  }
  const std::string query = w[15] + " " + w[20] + " " + w[27];
  // Brute force: the encoder's inner products over every passage.
  models::EncoderOptions eo;
  eo.device = "cpu";
  const auto enc = neural::shared_encoder(model.string(), eo);
  const auto P = enc->embed(texts);
  const auto qv = enc->embed(std::vector<std::string>{query});
  const std::size_t D = enc->dim();
  std::vector<std::pair<double, std::size_t>> scored;
  for (std::size_t i = 0; i < texts.size(); ++i) {
    double acc = 0;
    for (std::size_t d = 0; d < D; ++d) acc += static_cast<double>(qv[d]) * P[i * D + d];
    scored.emplace_back(-acc, i);
  }
  std::sort(scored.begin(), scored.end());
  std::vector<std::string> expected;
  for (int i = 0; i < 5; ++i) expected.push_back("c" + std::to_string(scored[static_cast<std::size_t>(i)].second));

  const auto db = dir / "serve.db";
  auto st = store::open_sqlite(db);
  const auto a = st->tenant_create("acme"), b = st->tenant_create("globex");
  serve::ServeConfig cfg;
  cfg.retriever = spec;
  cfg.corpus_candidates = 10;
  cfg.corpus_stage_background = false;  // each change's first query builds the stage (counted below)
  serve::RetrieveRequest rq;
  rq.user = "ann";
  rq.query = query;
  rq.k = 5;
  rq.personal = false;
  const auto served = [&](serve::Service& svc, store::TenantId t) {
    std::vector<std::string> ids;
    for (const auto& d : svc.retrieve(t, rq).documents) {
      EXPECT_EQ(d.source, "corpus");
      ids.push_back(d.id);
    }
    return ids;
  };
  {
    serve::Service svc(*st, cfg);
    svc.put_documents(a, "", docs);
    EXPECT_EQ(served(svc, a), expected);  // BM25 would find no candidate at all
    EXPECT_EQ(served(svc, a), expected);
    EXPECT_EQ(svc.counts().corpus_stages_built, 1u);
    EXPECT_EQ(svc.counts().corpus_passages_embedded, 40u);
    // Another tenant's same passages: its own cache, so embedded again, never read from acme's.
    svc.put_documents(b, "", docs);
    EXPECT_EQ(served(svc, b), expected);
    EXPECT_EQ(svc.counts().corpus_passages_embedded, 80u);
    EXPECT_EQ(svc.counts().corpus_stage_cache_removed, 0u);
    // A spec without a first stage of its own keeps BM25's candidates: none for this query.
    serve::ServeConfig plain;
    plain.retriever = "bm25";
    serve::Service bm25(*st, plain);
    EXPECT_TRUE(served(bm25, a).empty());
  }
  // The tenants' cached embeddings, and an entry of another model in acme's scope.
  const auto keys_of = [&](store::TenantId t) { return st->blob_keys(store::corpus_stage_blob_prefix(t)); };
  auto a_keys = keys_of(a);
  const auto b_keys = keys_of(b);
  ASSERT_FALSE(a_keys.empty());
  ASSERT_EQ(b_keys.size(), a_keys.size());
  const std::string foreign = store::corpus_stage_blob_prefix(a) + "dense-emb2:another-model/chunk";
  st->blob_put(foreign, "kept");
  a_keys.insert(std::lower_bound(a_keys.begin(), a_keys.end(), foreign), foreign);
  {
    // A restart: the same answers from the stored embeddings, no passage embedded.
    serve::Service svc(*st, cfg);
    EXPECT_EQ(served(svc, a), expected);
    EXPECT_EQ(svc.counts().corpus_passages_embedded, 0u);
    // A new passage, the query's own text: the stage is rebuilt and serves it first.
    svc.put_documents(a, "", {{"", "new", query, ""}});
    const auto ids = served(svc, a);
    ASSERT_FALSE(ids.empty());
    EXPECT_EQ(ids[0], "new");
    EXPECT_EQ(svc.counts().corpus_stages_built, 2u);
    // The chunk the new passage changed is no longer read: the rebuilt stage removed it.
    EXPECT_GE(svc.counts().corpus_stage_cache_removed, 1u);
    EXPECT_NE(keys_of(a), a_keys);
    // A deleted passage is no longer served, and the chunk that held it goes too: acme's
    // scope holds again exactly what it held before, the other model's entry included, and
    // globex's is untouched.
    ASSERT_TRUE(svc.delete_document(a, "", "new"));
    EXPECT_EQ(served(svc, a), expected);
    EXPECT_EQ(keys_of(a), a_keys);
    EXPECT_EQ(keys_of(b), b_keys);
    EXPECT_EQ(st->blob_get(foreign).value_or(""), "kept");
  }
  {
    // The background builder removes stale entries as well: a deleted passage's chunk goes
    // once the stage without it is built.
    serve::ServeConfig bg = cfg;
    bg.corpus_stage_background = true;
    serve::Service svc(*st, bg);
    svc.put_documents(a, "", {{"", "later", query, ""}});
    const auto wait_for = [&](auto done) {
      for (int i = 0; i < 3000 && !done(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      return done();
    };
    ASSERT_TRUE(wait_for([&] { return keys_of(a) != a_keys; })) << "the stage with \"later\" was never built";
    ASSERT_TRUE(svc.delete_document(a, "", "later"));
    EXPECT_TRUE(wait_for([&] { return keys_of(a) == a_keys; })) << "the chunk that held \"later\" was not removed";
    // At least the chunk with "later" (the corpus's own chunk too when the build with "later"
    // finished before the delete cancelled it).
    EXPECT_GE(svc.counts().corpus_stage_cache_removed, 1u);
    EXPECT_EQ(keys_of(a), a_keys);
  }
  st.reset();
  fs::remove_all(dir);
}

// Under concurrent requests with micro-batching on (what `attune serve` configures), the
// dense stage encodes the queries of concurrent requests together and scans the passages once
// for the batch, and each request's query is encoded once: dense:DIR ranks the stage's
// candidates with the stage's embedding of the query (the retriever's own query batcher
// encodes nothing). Every request still gets its own brute-force top 5.
TEST(DenseFirstStage, ConcurrentRequestsAreBatchedAndEachQueryIsEncodedOnce) {
  const auto dir = testing::fresh_dir("serve_dense_stage_batch");
  const auto model = dir / "enc";
  testing::write_tiny_encoder(model, models::Pooling::Mean, /*normalize=*/true, 12);
  neural::register_retrievers();
  neural::register_first_stages();
  const auto& w = testing::tiny_words();
  std::mt19937 rng(9);
  std::vector<store::ServeDocument> docs;
  std::vector<std::string> texts, queries;
  for (int i = 0; i < 60; ++i) {
    std::string t;
    for (int j = 0; j < 5; ++j) t += (j ? " " : "") + w[rng() % w.size()];
    docs.push_back({"", "c" + std::to_string(i), t, ""});
    texts.push_back(t);
  }
  for (int i = 0; i < 24; ++i) queries.push_back(w[rng() % w.size()] + " " + w[rng() % w.size()] + " " + w[rng() % w.size()]);
  models::EncoderOptions eo;
  eo.device = "cpu";
  const auto enc = neural::shared_encoder(model.string(), eo);
  const auto P = enc->embed(texts), Q = enc->embed(queries);
  const std::size_t D = enc->dim();
  std::vector<std::vector<std::string>> expected;
  for (std::size_t q = 0; q < queries.size(); ++q) {
    std::vector<std::pair<double, std::size_t>> scored;
    for (std::size_t i = 0; i < texts.size(); ++i) {
      double acc = 0;
      for (std::size_t d = 0; d < D; ++d) acc += static_cast<double>(Q[q * D + d]) * P[i * D + d];
      scored.emplace_back(-acc, i);
    }
    std::sort(scored.begin(), scored.end());
    std::vector<std::string> top;
    for (int i = 0; i < 5; ++i) top.push_back("c" + std::to_string(scored[static_cast<std::size_t>(i)].second));
    expected.push_back(top);
  }
  neural::set_query_micro_batch(4, 2);
  {
    auto st = store::open_sqlite(dir / "serve.db");
    const auto t = st->tenant_create("acme");
    serve::ServeConfig cfg;
    cfg.retriever = "dense:" + model.string();
    cfg.corpus_candidates = 10;
    cfg.corpus_stage_background = false;
    serve::Service svc(*st, cfg);
    svc.put_documents(t, "", docs);
    const auto before = neural::query_batch_stats();
    std::vector<std::vector<std::string>> got(queries.size());
    std::vector<std::thread> threads;
    for (std::size_t c = 0; c < 6; ++c)
      threads.emplace_back([&, c] {
        for (std::size_t q = c; q < queries.size(); q += 6) {
          serve::RetrieveRequest rq;
          rq.user = "u" + std::to_string(c);
          rq.query = queries[q];
          rq.k = 5;
          rq.personal = false;
          for (const auto& d : svc.retrieve(t, rq).documents) got[q].push_back(d.id);
        }
      });
    for (auto& th : threads) th.join();
    for (std::size_t q = 0; q < queries.size(); ++q) EXPECT_EQ(got[q], expected[q]) << "query " << q << ": " << queries[q];
    EXPECT_EQ(neural::query_batch_stats().queries, before.queries) << "dense:DIR encoded a query the stage had encoded";
    EXPECT_EQ(svc.counts().corpus_stages_built, 1u);
  }
  neural::set_query_micro_batch(1, 1);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace attune
