// What every Store does, whatever keeps it: the same tests run against SQLite (a temporary
// file) and PostgreSQL (a fresh database on the fixture's server; skipped without one).
// Import (idempotent, all-or-nothing), load round trip, LLM cache, feedback upserts, runs,
// blobs, each role through its own interface, reopening, tenants and keys, serve rows per
// tenant, the document change log replicas replay, leases, threads and several connections.
// What only one backend has (SQLite's file, PostgreSQL's database) is tested in
// test_sqlite_store.cpp and test_postgres_store.cpp.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <regex>
#include <set>
#include <thread>

#include "attune/core/error.h"
#include "attune/store/store.h"
#include "fixtures/postgres.h"
#include "sqlite_raw.h"
#include "temp_dir.h"

namespace attune::store {
namespace {

namespace fs = std::filesystem;

// Where one test's store lives, and a look at its rows from outside attune.
class Backend {
 public:
  virtual ~Backend() = default;
  // A new connection to the test's store (the first one creates it).
  virtual std::unique_ptr<Store> open() = 0;
  // Rows of a table, read with a separate raw connection (what is really stored).
  virtual std::int64_t raw_count(const std::string& table) = 0;
};

class SqliteBackend : public Backend {
 public:
  std::unique_ptr<Store> open() override { return open_sqlite(path_); }
  std::int64_t raw_count(const std::string& table) override { return store::raw_count(path_, table); }

 private:
  TempDir dir_;
  fs::path path_ = dir_ / "a.db";
};

class PostgresBackend : public Backend {
 public:
  explicit PostgresBackend(std::unique_ptr<fixtures::PostgresDatabase> db) : db_(std::move(db)) {}
  std::unique_ptr<Store> open() override { return open_postgresql(db_->url()); }
  std::int64_t raw_count(const std::string& table) override {
    return std::stoll(db_->exec("SELECT COUNT(*) FROM " + table));
  }

 private:
  std::unique_ptr<fixtures::PostgresDatabase> db_;
};

class StoreContract : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "postgresql") {
      auto db = fixtures::postgres_database();
      if (!db) GTEST_SKIP() << fixtures::kNoPostgres;
      backend_ = std::make_unique<PostgresBackend>(std::move(db));
    } else {
      backend_ = std::make_unique<SqliteBackend>();
    }
  }
  std::unique_ptr<Store> open() { return backend_->open(); }
  std::int64_t raw_count(const std::string& table) { return backend_->raw_count(table); }

 private:
  std::unique_ptr<Backend> backend_;
};

INSTANTIATE_TEST_SUITE_P(Store, StoreContract, ::testing::Values("sqlite", "postgresql"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

data::Dataset small_dataset(const std::string& hash = "h1") {
  data::Dataset ds;
  ds.task = "lamp4";
  ds.split = "dev";
  ds.has_outputs = true;
  ds.sources = {"/x/dev_questions.json", "/x/dev_outputs.json"};
  ds.content_hash = hash;
  for (int i = 0; i < 4; ++i) {
    Example ex;
    ex.id = "q" + std::to_string(i);
    ex.user = i < 3 ? ex.id : "q0";  // the last example shares user q0
    ex.input = "input \xE2\x80\x94 " + std::to_string(i) + "\n\"quoted\"";
    ex.output = i == 2 ? "" : "out " + std::to_string(i);
    if (i == 1) ex.gold_docs = {"g1", "g2"};
    if (i == 3) ex.agent = "agent-a";
    for (int j = 0; j < i; ++j) {
      Document d;
      d.id = "d" + std::to_string(j);
      d.owner = ex.user;
      d.text = j == 0 ? "" : "some text";
      d.fields = {{"title", "T\xC3\xBC" + std::to_string(j)}, {"text", "x\\y \"z\""}};
      if (j % 2 == 0) d.date = "2020-01-0" + std::to_string(j + 1);
      ex.profile.push_back(d);
    }
    ds.examples.push_back(ex);
  }
  return ds;
}

void expect_same(const data::Dataset& a, const data::Dataset& b) {
  EXPECT_EQ(a.task, b.task);
  EXPECT_EQ(a.split, b.split);
  EXPECT_EQ(a.has_outputs, b.has_outputs);
  EXPECT_EQ(a.sources, b.sources);
  EXPECT_EQ(a.content_hash, b.content_hash);
  ASSERT_EQ(a.examples.size(), b.examples.size());
  for (std::size_t i = 0; i < a.examples.size(); ++i) {
    const Example& x = a.examples[i];
    const Example& y = b.examples[i];
    EXPECT_EQ(x.id, y.id);
    EXPECT_EQ(x.user, y.user);
    EXPECT_EQ(x.input, y.input);
    EXPECT_EQ(x.output, y.output);
    EXPECT_EQ(x.gold_docs, y.gold_docs);
    EXPECT_EQ(x.agent, y.agent);
    ASSERT_EQ(x.profile.size(), y.profile.size()) << x.id;
    for (std::size_t j = 0; j < x.profile.size(); ++j) {
      EXPECT_EQ(x.profile[j].id, y.profile[j].id);
      EXPECT_EQ(x.profile[j].owner, y.profile[j].owner);
      EXPECT_EQ(x.profile[j].text, y.profile[j].text);
      EXPECT_EQ(x.profile[j].fields, y.profile[j].fields);
      EXPECT_EQ(x.profile[j].date, y.profile[j].date);
    }
  }
}

// SQLite's strftime('%Y-%m-%dT%H:%M:%fZ'); PostgreSQL writes the same.
bool is_timestamp(const std::string& s) {
  static const std::regex kFormat(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)");
  return std::regex_match(s, kFormat);
}

TEST_P(StoreContract, ImportAndLoadRoundTrip) {
  auto s = open();
  auto ds = small_dataset();
  ImportResult r = s->import_dataset(ds);
  EXPECT_FALSE(r.already_present);
  EXPECT_GT(r.dataset_id, 0);
  EXPECT_EQ(r.examples, 4u);
  EXPECT_EQ(r.users, 3u);
  EXPECT_EQ(r.documents, 0u + 1 + 2 + 3);
  auto back = s->load_dataset("lamp4", "dev");
  ASSERT_TRUE(back.has_value());
  expect_same(ds, *back);
  EXPECT_FALSE(s->load_dataset("lamp4", "test").has_value());
  EXPECT_FALSE(s->load_dataset("lamp5", "dev").has_value());

  auto infos = s->datasets();
  ASSERT_EQ(infos.size(), 1u);
  EXPECT_EQ(infos[0].id, r.dataset_id);
  EXPECT_EQ(infos[0].task, "lamp4");
  EXPECT_EQ(infos[0].split, "dev");
  EXPECT_EQ(infos[0].content_hash, "h1");
  EXPECT_EQ(infos[0].examples, 4u);
  EXPECT_EQ(infos[0].users, 3u);
  EXPECT_EQ(infos[0].documents, 6u);
}

TEST_P(StoreContract, ImportTwiceIsANoOp) {
  auto s = open();
  auto ds = small_dataset();
  ImportResult first = s->import_dataset(ds);
  auto docs = raw_count("documents");
  ImportResult second = s->import_dataset(ds);
  EXPECT_TRUE(second.already_present);
  EXPECT_EQ(second.dataset_id, first.dataset_id);
  EXPECT_EQ(second.users, first.users);
  EXPECT_EQ(second.documents, first.documents);
  EXPECT_EQ(second.examples, first.examples);
  EXPECT_EQ(s->datasets().size(), 1u);
  EXPECT_EQ(raw_count("documents"), docs);
  EXPECT_EQ(raw_count("examples"), 4);
  EXPECT_EQ(raw_count("users"), 3);
}

TEST_P(StoreContract, NewContentIsANewDatasetAndLoadTakesTheNewest) {
  auto s = open();
  s->import_dataset(small_dataset("h1"));
  auto ds2 = small_dataset("h2");
  ds2.examples.pop_back();
  ImportResult r = s->import_dataset(ds2);
  EXPECT_FALSE(r.already_present);
  EXPECT_EQ(s->datasets().size(), 2u);
  auto back = s->load_dataset("lamp4", "dev");
  ASSERT_TRUE(back);
  EXPECT_EQ(back->content_hash, "h2");
  EXPECT_EQ(back->examples.size(), 3u);
}

TEST_P(StoreContract, FailedImportRollsBackEverything) {
  auto s = open();
  // A good dataset first: it must survive the failed import untouched.
  auto good = small_dataset("good");
  good.split = "train";
  s->import_dataset(good);
  const auto users = raw_count("users"), examples = raw_count("examples"), documents = raw_count("documents");

  auto bad = small_dataset("bad");
  bad.examples.push_back(bad.examples[2]);  // duplicate example id "q2", after 4 good examples
  try {
    s->import_dataset(bad);
    FAIL() << "expected attune::Error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("q2"), std::string::npos) << msg;
    EXPECT_NE(msg.find("nothing was imported"), std::string::npos) << msg;
  }
  EXPECT_EQ(s->datasets().size(), 1u);
  EXPECT_FALSE(s->load_dataset("lamp4", "dev").has_value());
  EXPECT_EQ(raw_count("datasets"), 1);
  EXPECT_EQ(raw_count("users"), users);
  EXPECT_EQ(raw_count("examples"), examples);
  EXPECT_EQ(raw_count("documents"), documents);
  // The store is still usable, and the fixed dataset imports.
  bad.examples.pop_back();
  EXPECT_FALSE(s->import_dataset(bad).already_present);
  auto back = s->load_dataset("lamp4", "train");
  ASSERT_TRUE(back);
  expect_same(good, *back);
}

TEST_P(StoreContract, CacheHitAndMiss) {
  auto s = open();
  CacheKey a{"m1", "generate", "prompt a", "{beams:4}"};
  CacheKey b{"m1", "score", "prompt a", "target"};
  CacheKey c{"m2", "generate", "prompt a", "{beams:4}"};  // another model: another key
  EXPECT_EQ(s->cache_size(), 0u);
  s->cache_put({{a, "answer a"}, {b, "-3.25"}});
  EXPECT_EQ(s->cache_size(), 2u);
  auto got = s->cache_get({a, c, b, a});
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[0], "answer a");
  EXPECT_FALSE(got[1].has_value());
  EXPECT_EQ(got[2], "-3.25");
  EXPECT_EQ(got[3], "answer a");
  s->cache_put({{a, "answer a2"}});  // replace
  EXPECT_EQ(s->cache_size(), 2u);
  EXPECT_EQ(s->cache_get({a})[0], "answer a2");
  s->cache_put({{c, "first"}, {c, "second"}});  // the later of two equal keys wins
  EXPECT_EQ(s->cache_get({c})[0], "second");
  EXPECT_TRUE(s->cache_get({}).empty());
}

TEST(CacheKey, DigestIsLengthPrefixed) {
  CacheKey a{"m", "generate", "ab", "c"};
  CacheKey b{"m", "generate", "a", "bc"};
  EXPECT_EQ(a.digest().size(), 32u);
  EXPECT_EQ(a.digest(), (CacheKey{"m", "generate", "ab", "c"}).digest());
  EXPECT_NE(a.digest(), b.digest());  // parts are length-prefixed
}

TEST_P(StoreContract, FeedbackUpsertKeepsTheFirstPutOrder) {
  auto s = open();
  FeedbackRecord r{"lamp4/dev/h1", "q1", "doc", "d1", "m1", "an output", 0.5};
  FeedbackRecord r2{"lamp4/dev/h1", "q1", "doc", "d2", "m1", "other", 0.25};
  FeedbackRecord other_model{"lamp4/dev/h1", "q1", "doc", "d1", "m2", "x", 1.0};
  FeedbackRecord other_kind{"lamp4/dev/h1", "q1", "likelihood", "d1", "m1", "", -7.5};
  s->feedback_put({r, r2, other_model, other_kind});
  r.value = 0.75;
  r.output = "a better output";
  FeedbackRecord r3{"lamp4/dev/h1", "q2", "doc", "d1", "m1", "", 1.0 / 3.0};
  s->feedback_put({r3, r});  // r updated in place (first), r3 new (last)
  EXPECT_EQ(raw_count("feedback"), 5);
  auto got = s->feedback_get("lamp4/dev/h1", "doc", "m1");
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].item, "d1");
  EXPECT_EQ(got[0].example, "q1");
  EXPECT_EQ(got[0].value, 0.75);
  EXPECT_EQ(got[0].output, "a better output");
  EXPECT_EQ(got[0].dataset, "lamp4/dev/h1");
  EXPECT_EQ(got[0].kind, "doc");
  EXPECT_EQ(got[0].model, "m1");
  EXPECT_EQ(got[1].item, "d2");
  EXPECT_EQ(got[1].value, 0.25);
  EXPECT_EQ(got[2].example, "q2");
  EXPECT_EQ(got[2].value, 1.0 / 3.0);  // every bit of the double comes back
  EXPECT_EQ(s->feedback_get("lamp4/dev/h1", "doc", "m2").size(), 1u);
  auto lik = s->feedback_get("lamp4/dev/h1", "likelihood", "m1");
  ASSERT_EQ(lik.size(), 1u);
  EXPECT_EQ(lik[0].value, -7.5);
  EXPECT_TRUE(s->feedback_get("other", "doc", "m1").empty());
}

TEST_P(StoreContract, Runs) {
  auto s = open();
  const std::uint64_t big_seed = 0xFFFFFFFFFFFFFFF0ULL;
  auto id1 = s->run_begin("eval", R"({"k": 4})", 42);
  auto id2 = s->run_begin("train", "{}", big_seed);
  EXPECT_NE(id1, id2);
  s->run_end(id1, "ok", R"({"rouge1": 0.3})");
  auto runs = s->runs();
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].id, id1);
  EXPECT_EQ(runs[0].verb, "eval");
  EXPECT_EQ(runs[0].args_json, R"({"k": 4})");
  EXPECT_EQ(runs[0].seed, 42u);
  EXPECT_EQ(runs[0].status, "ok");
  EXPECT_EQ(runs[0].summary_json, R"({"rouge1": 0.3})");
  EXPECT_TRUE(is_timestamp(runs[0].started)) << runs[0].started;
  EXPECT_TRUE(is_timestamp(runs[0].finished)) << runs[0].finished;
  EXPECT_LE(runs[0].started, runs[0].finished);
  EXPECT_EQ(runs[1].status, "running");
  EXPECT_EQ(runs[1].seed, big_seed);
  EXPECT_EQ(runs[1].finished, "");
  EXPECT_THROW(s->run_end(9999, "ok", "{}"), Error);
}

TEST_P(StoreContract, ARunScopeLeftByAnErrorIsRecordedAsFailed) {
  auto s = open();
  try {
    RunScope run(*s, "eval", "{}", 1);
    throw Error("the model server went away");
  } catch (const Error&) {
  }
  {
    RunScope run(*s, "eval", "{}", 2);
    run.end("ok", R"({"rouge1": 0.5})");
  }
  const auto runs = s->runs();
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].status, "failed");
  EXPECT_FALSE(runs[0].finished.empty());
  EXPECT_NE(runs[0].summary_json.find("error"), std::string::npos);
  EXPECT_EQ(runs[1].status, "ok");
  EXPECT_EQ(runs[1].summary_json, R"({"rouge1": 0.5})");
}

TEST_P(StoreContract, BlobsKeepEveryByte) {
  auto s = open();
  EXPECT_FALSE(s->blob_get("bm25:x").has_value());
  std::string bytes("a\0b\xFF\x00z", 6);
  s->blob_put("bm25:x", bytes);
  EXPECT_EQ(s->blob_get("bm25:x"), bytes);
  s->blob_put("bm25:x", "v2");
  EXPECT_EQ(s->blob_get("bm25:x"), "v2");
  s->blob_put("empty", "");
  EXPECT_EQ(s->blob_get("empty"), "");
  std::string all;
  for (int round = 0; round < 2; ++round)
    for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  s->blob_put("all", all);
  EXPECT_EQ(s->blob_get("all"), all);
}

// blob_keys lists exactly the keys that start with the prefix, in byte order: a '%' or '_'
// in the prefix is itself (no LIKE pattern), and a key that only sorts after it is not one.
TEST_P(StoreContract, BlobKeysListExactlyThePrefixsKeysInByteOrder) {
  auto s = open();
  for (const char* k : {"serve/dense/1/m/b", "serve/dense/1/m/a", "serve/dense/1/n/a", "serve/dense/10/m/a",
                        "serve/dense/2/m/a", "a_b/1", "axb/1", "a%c/1", "abc/1", "zz"})
    s->blob_put(k, "v");
  EXPECT_EQ(s->blob_keys("serve/dense/1/"),
            (std::vector<std::string>{"serve/dense/1/m/a", "serve/dense/1/m/b", "serve/dense/1/n/a"}));
  EXPECT_EQ(s->blob_keys("serve/dense/1/m/"), (std::vector<std::string>{"serve/dense/1/m/a", "serve/dense/1/m/b"}));
  EXPECT_EQ(s->blob_keys("a_"), (std::vector<std::string>{"a_b/1"}));
  EXPECT_EQ(s->blob_keys("a%"), (std::vector<std::string>{"a%c/1"}));
  EXPECT_TRUE(s->blob_keys("serve/dense/3/").empty());
  EXPECT_TRUE(s->blob_keys("zzz").empty());
  EXPECT_EQ(s->blob_keys("").size(), 10u);
  EXPECT_TRUE(s->blob_delete("serve/dense/1/m/a"));
  EXPECT_EQ(s->blob_keys("serve/dense/1/m/"), (std::vector<std::string>{"serve/dense/1/m/b"}));
}

TEST_P(StoreContract, ABlobIsDeletedOnceAndAUsersStatisticsBlobGoesWithEveryChangeToTheirDocuments) {
  auto s = open();
  s->blob_put("k", "v");
  EXPECT_TRUE(s->blob_delete("k"));
  EXPECT_FALSE(s->blob_get("k").has_value());
  EXPECT_FALSE(s->blob_delete("k"));
  const auto a = s->tenant_create("acme"), b = s->tenant_create("globex");
  s->documents_put(a, {{"ann", "d1", "ann's note", ""}, {"bob", "d1", "bob's note", ""}});
  s->documents_put(b, {{"ann", "d1", "globex's ann", ""}});
  const auto stats = [&](TenantId t, const std::string& u) { return attune::store::profile_stats_blob_key(t, u); };
  const auto put_all = [&] {
    for (const auto& [t, u] : std::vector<std::pair<TenantId, std::string>>{{a, "ann"}, {a, "bob"}, {b, "ann"}})
      s->blob_put(stats(t, u), "statistics of " + u);
  };
  const auto present = [&](TenantId t, const std::string& u) { return s->blob_get(stats(t, u)).has_value(); };
  // A put for ann removes ann's statistics in tenant a only.
  put_all();
  s->documents_put(a, {{"ann", "d2", "another note", ""}});
  EXPECT_FALSE(present(a, "ann"));
  EXPECT_TRUE(present(a, "bob"));
  EXPECT_TRUE(present(b, "ann"));
  // A corpus document changes no user's statistics.
  put_all();
  s->documents_put(a, {{"", "c1", "shared", ""}});
  EXPECT_TRUE(present(a, "ann"));
  // Deleting a document that is not there changes nothing; one that is removes them.
  EXPECT_FALSE(s->document_delete(a, "bob", "nope"));
  EXPECT_TRUE(present(a, "bob"));
  EXPECT_TRUE(s->document_delete(a, "bob", "d1"));
  EXPECT_FALSE(present(a, "bob"));
  EXPECT_TRUE(present(a, "ann"));
  // Deleting a user removes theirs, and counts it among the rows that went.
  put_all();
  EXPECT_EQ(s->user_delete(a, "ann"), 3u);  // d1, d2 and the statistics
  EXPECT_FALSE(present(a, "ann"));
  EXPECT_TRUE(present(a, "bob"));
  EXPECT_TRUE(present(b, "ann"));
}

// Each role used alone through its own interface, as a component given only that role
// would: the answer when absent, a write, the read back.
void use_datasets(DatasetStore& datasets, const data::Dataset& ds) {
  EXPECT_TRUE(datasets.datasets().empty());
  EXPECT_FALSE(datasets.load_dataset(ds.task, ds.split).has_value());
  EXPECT_FALSE(datasets.import_dataset(ds).already_present);
  ASSERT_EQ(datasets.datasets().size(), 1u);
  auto back = datasets.load_dataset(ds.task, ds.split);
  ASSERT_TRUE(back);
  expect_same(ds, *back);
}

void use_cache(LlmCache& cache) {
  const CacheKey key{"m", "score", "p", "t"};
  EXPECT_EQ(cache.cache_size(), 0u);
  EXPECT_FALSE(cache.cache_get({key})[0].has_value());
  cache.cache_put({{key, "-1.5"}});
  EXPECT_EQ(cache.cache_get({key})[0], "-1.5");
  EXPECT_EQ(cache.cache_size(), 1u);
}

void use_feedback(FeedbackLog& log) {
  EXPECT_TRUE(log.feedback_get("d", "doc", "m").empty());
  log.feedback_put({FeedbackRecord{"d", "q1", "doc", "d1", "m", "o", 0.5}});
  auto got = log.feedback_get("d", "doc", "m");
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].item, "d1");
  EXPECT_EQ(got[0].value, 0.5);
}

void use_runs(RunLog& runs) {
  EXPECT_TRUE(runs.runs().empty());
  auto id = runs.run_begin("eval", "{}", 3);
  runs.run_end(id, "ok", "{}");
  auto all = runs.runs();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].id, id);
  EXPECT_EQ(all[0].status, "ok");
  EXPECT_THROW(runs.run_end(id + 1, "ok", "{}"), Error);
}

void use_blobs(BlobStore& blobs) {
  const std::string bytes("a\0b", 3);
  EXPECT_FALSE(blobs.blob_get("k").has_value());
  blobs.blob_put("k", bytes);
  EXPECT_EQ(blobs.blob_get("k"), bytes);
}

// A Store& converts to each role; each role sees none of the others' writes (every one
// starts from its empty answer) and writes only its own table.
TEST_P(StoreContract, EachRoleThroughItsOwnInterface) {
  auto s = open();
  use_datasets(*s, small_dataset());
  use_cache(*s);
  use_feedback(*s);
  use_runs(*s);
  use_blobs(*s);
  for (const char* t : {"datasets", "llm_cache", "feedback", "runs", "blobs"}) EXPECT_EQ(raw_count(t), 1) << t;
}

TEST_P(StoreContract, SurvivesReopening) {
  auto ds = small_dataset();
  std::int64_t run;
  TenantId tenant;
  {
    auto s = open();
    s->import_dataset(ds);
    s->cache_put({{CacheKey{"m", "generate", "p", ""}, "v"}});
    s->feedback_put({FeedbackRecord{"d", "q1", "doc", "d1", "m", "o", 1.5}});
    run = s->run_begin("import", "{}", 7);
    s->blob_put("k", "blob");
    tenant = s->tenant_create("acme");
    s->documents_put(tenant, {{"u", "d1", "text", ""}});
  }
  auto s = open();
  auto back = s->load_dataset("lamp4", "dev");
  ASSERT_TRUE(back);
  expect_same(ds, *back);
  EXPECT_TRUE(s->import_dataset(ds).already_present);
  EXPECT_EQ(s->cache_get({CacheKey{"m", "generate", "p", ""}})[0], "v");
  EXPECT_EQ(s->feedback_get("d", "doc", "m").at(0).value, 1.5);
  EXPECT_EQ(s->runs().at(0).id, run);
  EXPECT_EQ(s->blob_get("k"), "blob");
  EXPECT_EQ(s->tenant_find("acme"), tenant);
  EXPECT_EQ(s->document_seq(tenant), 1u);
  EXPECT_EQ(s->documents_of(tenant).size(), 1u);
}

TEST_P(StoreContract, TenantsKeysAndRevocation) {
  auto s = open();
  const auto a = s->tenant_create("acme");
  const auto b = s->tenant_create("globex");
  EXPECT_NE(a, b);
  EXPECT_THROW(s->tenant_create("acme"), attune::UsageError);
  EXPECT_EQ(s->tenant_find("globex"), b);
  EXPECT_FALSE(s->tenant_find("initech").has_value());
  s->key_add(a, "atk_aaaa", "hash-a1");
  s->key_add(a, "atk_bbbb", "hash-a2");
  s->key_add(b, "atk_cccc", "hash-b1");
  EXPECT_EQ(s->key_tenant("hash-a1"), a);
  EXPECT_EQ(s->key_tenant("hash-b1"), b);
  EXPECT_FALSE(s->key_tenant("hash-zz").has_value());
  EXPECT_EQ(s->key_revoke("atk_aaaa", ""), 1u);
  EXPECT_FALSE(s->key_tenant("hash-a1").has_value());
  EXPECT_EQ(s->key_tenant("hash-a2"), a);  // the tenant's other key still works
  EXPECT_EQ(s->key_revoke("atk_aaaa", ""), 0u);  // revoked once
  EXPECT_EQ(s->key_revoke("", "hash-b1"), 1u);
  const auto keys = s->key_list();
  ASSERT_EQ(keys.size(), 3u);
  EXPECT_EQ(keys[0].tenant, "acme");
  EXPECT_EQ(keys[0].prefix, "atk_aaaa");
  EXPECT_TRUE(is_timestamp(keys[0].revoked)) << keys[0].revoked;
  EXPECT_TRUE(is_timestamp(keys[0].created)) << keys[0].created;
  EXPECT_TRUE(keys[1].revoked.empty());
  EXPECT_EQ(keys[2].tenant, "globex");
  const auto list = s->tenant_list();
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].name, "acme");
  EXPECT_TRUE(is_timestamp(list[0].created)) << list[0].created;
  EXPECT_EQ(list[0].active_keys, 1u);
  EXPECT_EQ(list[1].active_keys, 0u);
}

// Names sort by their bytes (SQLite's BINARY collation), whatever the database's locale.
TEST_P(StoreContract, ListsSortNamesByTheirBytes) {
  auto s = open();
  for (const char* name : {"beta", "Zeta", "alpha", "_x", "\xC3\xA9t\xC3\xA9"}) s->tenant_create(name);
  std::vector<std::string> names;
  for (const auto& t : s->tenant_list()) names.push_back(t.name);
  EXPECT_EQ(names, (std::vector<std::string>{"Zeta", "_x", "alpha", "beta", "\xC3\xA9t\xC3\xA9"}));
}

TEST_P(StoreContract, ServeRowsStayWithTheirTenantAndAUserIsRemovedWithAllThatCameFromThem) {
  auto s = open();
  const auto a = s->tenant_create("acme");
  const auto b = s->tenant_create("globex");
  s->documents_put(a, {{"ann", "d1", "ann's note", "2026-01-02"}, {"bob", "d1", "bob's note", ""}, {"", "c1", "shared", ""}});
  s->documents_put(b, {{"ann", "d1", "another tenant's ann", ""}});
  EXPECT_EQ(s->documents_of(a).size(), 3u);
  ASSERT_EQ(s->documents_of(b).size(), 1u);
  EXPECT_EQ(s->documents_of(b)[0].text, "another tenant's ann");
  s->documents_put(a, {{"ann", "d1", "ann's note, edited", ""}});  // replaces
  EXPECT_EQ(s->documents_of(a).size(), 3u);
  const auto list = s->tenant_list();
  EXPECT_EQ(list[0].users, 2u);
  EXPECT_EQ(list[0].documents, 3u);

  attune::store::ServeRequest r{"req-1", "ann", "notes", "", "", "bm25#1", {"d1", "c1"}, ""};
  s->request_put(a, r);
  ASSERT_TRUE(s->request_get(a, "req-1").has_value());
  EXPECT_EQ(s->request_get(a, "req-1")->documents, (std::vector<std::string>{"d1", "c1"}));
  EXPECT_TRUE(is_timestamp(s->request_get(a, "req-1")->created));
  EXPECT_FALSE(s->request_get(b, "req-1").has_value());  // another tenant's request id is unknown there
  EXPECT_THROW(s->request_put(a, r), attune::Error);     // an id is used once
  s->feedback_add(a, {{"req-1", "doc", "d1", 1.0, "", ""}, {"req-1", "list", "", 0.5, "", ""}});
  EXPECT_EQ(s->feedback_of(a).size(), 2u);
  EXPECT_EQ(s->tenant_list()[0].requests, 1u);
  EXPECT_EQ(s->tenant_list()[0].feedback, 2u);
  // Feedback through another tenant on this request is refused, and nothing of the call is written.
  EXPECT_THROW(s->feedback_add(b, {{"req-1", "doc", "d1", 1.0, "", ""}}), attune::Error);
  EXPECT_THROW(s->feedback_add(a, {{"req-1", "doc", "d1", 1.0, "", ""}, {"req-9", "doc", "d1", 1.0, "", ""}}),
               attune::Error);
  EXPECT_TRUE(s->feedback_of(b).empty());
  EXPECT_EQ(s->feedback_of(a).size(), 2u);

  EXPECT_TRUE(s->document_delete(a, "bob", "d1"));
  EXPECT_FALSE(s->document_delete(a, "bob", "d1"));
  EXPECT_FALSE(s->document_delete(b, "ann", "c1"));
  // ann: 1 document, 1 request, 2 feedback records; the corpus and the other tenant stay.
  EXPECT_EQ(s->user_delete(a, "ann"), 4u);
  EXPECT_FALSE(s->request_get(a, "req-1").has_value());
  EXPECT_TRUE(s->feedback_of(a).empty());
  ASSERT_EQ(s->documents_of(a).size(), 1u);
  EXPECT_EQ(s->documents_of(a)[0].id, "c1");
  EXPECT_EQ(s->documents_of(b).size(), 1u);
  EXPECT_THROW(s->user_delete(a, ""), attune::UsageError);
}

TEST_P(StoreContract, DocumentsComeByUserThenInTheOrderTheyWerePut) {
  auto s = open();
  const auto t = s->tenant_create("acme");
  s->documents_put(t, {{"u", "z", "1", ""}, {"u", "a", "2", ""}, {"", "c", "3", ""}, {"u", "m", "4", ""}});
  s->documents_put(t, {{"B", "x", "5", ""}});
  s->documents_put(t, {{"u", "z", "6", ""}});  // replaced: it moves to the end of its user's
  std::vector<std::string> got;
  for (const auto& d : s->documents_of(t)) got.push_back(d.user + "/" + d.id + "=" + d.text);
  EXPECT_EQ(got, (std::vector<std::string>{"/c=3", "B/x=5", "u/a=2", "u/m=4", "u/z=6"}));
}

std::string describe(const std::vector<DocumentChange>& changes) {
  std::string out;
  for (const auto& c : changes) {
    const char* op = c.op == DocumentChange::Op::Put ? "put" : c.op == DocumentChange::Op::Delete ? "delete" : "delete_user";
    out += std::to_string(c.seq) + ":" + op + ":" + c.doc.user + "/" + c.doc.id;
    if (c.op == DocumentChange::Op::Put) out += "=" + c.doc.text + "@" + c.doc.date;
    out += " ";
  }
  return out;
}

TEST_P(StoreContract, EveryDocumentWriteTakesTheNextCounterAndLogsItsChanges) {
  auto s = open();
  const auto a = s->tenant_create("acme");
  const auto b = s->tenant_create("globex");
  EXPECT_EQ(s->document_seq(a), 0u);
  EXPECT_EQ(s->document_seq(a + b + 100), 0u);  // no such tenant
  EXPECT_TRUE(s->document_changes(a, 0).empty());

  s->documents_put(a, {{"ann", "d1", "one", "2026-01-02"}, {"", "c1", "corpus", ""}});
  EXPECT_EQ(s->document_seq(a), 1u);
  EXPECT_EQ(describe(s->document_changes(a, 0)), "1:put:ann/d1=one@2026-01-02 1:put:/c1=corpus@ ");
  s->documents_put(a, {{"ann", "d2", "two", ""}});
  EXPECT_EQ(s->document_seq(a), 2u);
  EXPECT_TRUE(s->document_delete(a, "ann", "d1"));
  EXPECT_EQ(s->document_seq(a), 3u);
  EXPECT_FALSE(s->document_delete(a, "ann", "d1"));  // nothing removed: no write, no counter
  EXPECT_EQ(s->document_seq(a), 3u);
  // d1's put is left out: its document is gone, and its removal follows.
  EXPECT_EQ(describe(s->document_changes(a, 0)), "1:put:/c1=corpus@ 2:put:ann/d2=two@ 3:delete:ann/d1 ");
  EXPECT_EQ(describe(s->document_changes(a, 2)), "3:delete:ann/d1 ");
  EXPECT_TRUE(s->document_changes(a, 3).empty());

  // A put carries the document as it is now, even the put of an earlier text.
  s->documents_put(a, {{"bob", "d1", "v1", ""}});
  s->documents_put(a, {{"bob", "d1", "v2", ""}});
  EXPECT_EQ(describe(s->document_changes(a, 3)), "4:put:bob/d1=v2@ 5:put:bob/d1=v2@ ");

  EXPECT_EQ(s->user_delete(a, "ann"), 1u);
  EXPECT_EQ(s->document_seq(a), 6u);
  EXPECT_EQ(describe(s->document_changes(a, 5)), "6:delete_user:ann/ ");
  EXPECT_EQ(describe(s->document_changes(a, 0)),
            "1:put:/c1=corpus@ 3:delete:ann/d1 4:put:bob/d1=v2@ 5:put:bob/d1=v2@ 6:delete_user:ann/ ");

  // The other tenant has a counter and a log of its own.
  EXPECT_EQ(s->document_seq(b), 0u);
  EXPECT_TRUE(s->document_changes(b, 0).empty());
  s->documents_put(b, {{"ann", "d1", "b's", ""}});
  EXPECT_EQ(s->document_seq(b), 1u);
  EXPECT_EQ(describe(s->document_changes(b, 0)), "1:put:ann/d1=b's@ ");
  EXPECT_EQ(s->document_seq(a), 6u);

  // Writes for a tenant that does not exist are refused, and write nothing.
  EXPECT_THROW(s->documents_put(a + b + 100, {{"u", "d", "t", ""}}), attune::Error);
  EXPECT_THROW(s->user_delete(a + b + 100, "u"), attune::Error);
  EXPECT_EQ(raw_count("serve_documents"), 3);
}

// The change log is kept bounded: pruning removes the changes up to a counter (never past
// the tenant's own) and records that floor, which never goes down; other tenants keep theirs.
TEST_P(StoreContract, PruningTheChangeLogRemovesOldChangesAndRaisesTheFloor) {
  auto s = open();
  const auto a = s->tenant_create("acme");
  const auto b = s->tenant_create("globex");
  for (int i = 1; i <= 5; ++i) s->documents_put(a, {{"ann", "d" + std::to_string(i), "t", ""}, {"", "c", std::to_string(i), ""}});
  s->documents_put(b, {{"bob", "x", "y", ""}});
  EXPECT_EQ(s->document_changes_floor(a), 0u);
  EXPECT_EQ(s->document_changes_prune(a, 3), 6u);  // two rows a write
  EXPECT_EQ(s->document_changes_floor(a), 3u);
  EXPECT_EQ(describe(s->document_changes(a, 0)), "4:put:ann/d4=t@ 4:put:/c=5@ 5:put:ann/d5=t@ 5:put:/c=5@ ");
  EXPECT_EQ(s->document_changes_prune(a, 2), 0u);  // below the floor: nothing, and it stays
  EXPECT_EQ(s->document_changes_floor(a), 3u);
  EXPECT_EQ(s->document_changes_prune(a, 99), 4u);  // clamped to the counter, 5
  EXPECT_EQ(s->document_changes_floor(a), 5u);
  EXPECT_TRUE(s->document_changes(a, 0).empty());
  // The documents themselves are untouched; new writes are logged above the floor.
  EXPECT_EQ(s->documents_of(a).size(), 6u);
  s->documents_put(a, {{"ann", "d6", "t", ""}});
  EXPECT_EQ(describe(s->document_changes(a, 5)), "6:put:ann/d6=t@ ");
  // The other tenant: its log and floor as they were.
  EXPECT_EQ(s->document_changes_floor(b), 0u);
  EXPECT_EQ(describe(s->document_changes(b, 0)), "1:put:bob/x=y@ ");
  // A second connection sees the floor (the store keeps it).
  auto again = open();
  EXPECT_EQ(again->document_changes_floor(a), 5u);
  EXPECT_THROW(s->document_changes_prune(a + b + 100, 1), attune::Error);
}

// Two connections writing one tenant's documents at once (two replicas): every write gets
// its own counter, with no gap, and each counter's change is there.
TEST_P(StoreContract, WritersOnTwoConnectionsTakeDistinctCounters) {
  auto first = open();
  auto second = open();
  const auto t = first->tenant_create("acme");
  constexpr int kWrites = 40;
  std::vector<std::thread> threads;
  for (Store* s : {first.get(), second.get()})
    threads.emplace_back([s, t, name = std::to_string(reinterpret_cast<std::uintptr_t>(s))] {
      for (int i = 0; i < kWrites; ++i) s->documents_put(t, {{"u", name + "-" + std::to_string(i), "x", ""}});
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(first->document_seq(t), 2u * kWrites);
  const auto changes = second->document_changes(t, 0);
  ASSERT_EQ(changes.size(), 2u * kWrites);
  for (std::size_t i = 0; i < changes.size(); ++i) EXPECT_EQ(changes[i].seq, i + 1);
}

TEST_P(StoreContract, ALeaseHasOneHolderUntilItExpiresOrIsReleased) {
  auto s = open();
  EXPECT_TRUE(s->lease_acquire("learner", "replica-1", 0.3));
  EXPECT_FALSE(s->lease_acquire("learner", "replica-2", 0.3));
  EXPECT_TRUE(s->lease_acquire("other", "replica-2", 0.3));  // another lease is another name
  EXPECT_TRUE(s->lease_acquire("learner", "replica-1", 0.3));  // renewed by its holder
  std::this_thread::sleep_for(std::chrono::milliseconds(450));
  EXPECT_TRUE(s->lease_acquire("learner", "replica-2", 60));  // expired: anyone takes it
  EXPECT_FALSE(s->lease_acquire("learner", "replica-1", 60));
  s->lease_release("learner", "replica-1");  // not its holder: nothing happens
  EXPECT_FALSE(s->lease_acquire("learner", "replica-1", 60));
  s->lease_release("learner", "replica-2");
  EXPECT_TRUE(s->lease_acquire("learner", "replica-1", 60));
  EXPECT_EQ(raw_count("leases"), 2);
}

TEST_P(StoreContract, ALeaseIsSharedByConnections) {
  auto a = open();
  auto b = open();
  EXPECT_TRUE(a->lease_acquire("learner", "replica-a", 60));
  EXPECT_FALSE(b->lease_acquire("learner", "replica-b", 60));
  a->lease_release("learner", "replica-a");
  EXPECT_TRUE(b->lease_acquire("learner", "replica-b", 60));
}

TEST_P(StoreContract, ConcurrentCallsFromThreads) {
  auto s = open();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        CacheKey k{"m", "generate", "t" + std::to_string(t) + "-" + std::to_string(i), ""};
        s->cache_put({{k, std::to_string(i)}});
        EXPECT_EQ(s->cache_get({k})[0], std::to_string(i));
        s->feedback_put({FeedbackRecord{"d", k.prompt, "doc", "x", "m", "", double(i)}});
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(s->cache_size(), 200u);
  EXPECT_EQ(s->feedback_get("d", "doc", "m").size(), 200u);
}

// Two connections putting the same keys in opposite orders at once: no call fails (no
// deadlock reaches the caller) and every key ends with one of the values put.
TEST_P(StoreContract, TwoWritersOfTheSameKeysInOppositeOrders) {
  auto first = open();
  auto second = open();
  const CacheKey x{"m", "score", "x", ""}, y{"m", "score", "y", ""};
  std::vector<std::thread> threads;
  const FeedbackRecord f{"d", "q1", "doc", "x", "m", "", 1}, g{"d", "q1", "doc", "y", "m", "", 2};
  threads.emplace_back([&] {
    for (int i = 0; i < 100; ++i) {
      first->cache_put({{x, "1"}, {y, "1"}});
      first->feedback_put({f, g});
    }
  });
  threads.emplace_back([&] {
    for (int i = 0; i < 100; ++i) {
      second->cache_put({{y, "2"}, {x, "2"}});
      second->feedback_put({g, f});
    }
  });
  for (auto& th : threads) th.join();
  EXPECT_EQ(first->cache_size(), 2u);
  EXPECT_EQ(first->feedback_get("d", "doc", "m").size(), 2u);
}

TEST_P(StoreContract, TwoConnectionsToOneStore) {
  auto a = open();
  auto b = open();
  a->cache_put({{CacheKey{"m", "score", "p", "t"}, "1.5"}});
  EXPECT_EQ(b->cache_get({CacheKey{"m", "score", "p", "t"}})[0], "1.5");
  b->import_dataset(small_dataset());
  EXPECT_TRUE(a->import_dataset(small_dataset()).already_present);
  const auto t = a->tenant_create("acme");
  EXPECT_EQ(b->tenant_find("acme"), t);
  EXPECT_THROW(b->tenant_create("acme"), attune::UsageError);
}

// The same dataset imported by two connections at once: one imports it, the other finds it.
TEST_P(StoreContract, TwoConnectionsImportingOneDatasetAtOnce) {
  auto first = open();
  auto second = open();
  ImportResult results[2];
  std::vector<std::thread> threads;
  int i = 0;
  for (Store* s : {first.get(), second.get()}) threads.emplace_back([s, &r = results[i++]] { r = s->import_dataset(small_dataset()); });
  for (auto& th : threads) th.join();
  EXPECT_NE(results[0].already_present, results[1].already_present);
  EXPECT_EQ(results[0].dataset_id, results[1].dataset_id);
  EXPECT_EQ(results[0].documents, results[1].documents);
  EXPECT_EQ(raw_count("datasets"), 1);
  EXPECT_EQ(raw_count("examples"), 4);
}

// The real commit_subject train split (2,500 questions x up to 64 profile items).
TEST_P(StoreContract, ImportCommitSubjectTrain) {
  fs::path dir = fs::path(ATTUNE_SHARED_DIR) / "data" / "git";
  if (!fs::exists(dir / "commit_subject" / "train_questions.json"))
    GTEST_SKIP() << "no " << dir << " (shared data absent)";
  auto t0 = std::chrono::steady_clock::now();
  data::Dataset ds = data::load_split(dir, "commit_subject", "train");
  auto t1 = std::chrono::steady_clock::now();
  auto s = open();
  ImportResult r = s->import_dataset(ds);
  auto t2 = std::chrono::steady_clock::now();
  auto back = s->load_dataset("commit_subject", "train");
  auto t3 = std::chrono::steady_clock::now();
  EXPECT_EQ(r.examples, 2500u);
  EXPECT_EQ(r.users, 2500u);
  std::size_t docs = 0;
  for (const auto& ex : ds.examples) docs += ex.profile.size();
  EXPECT_EQ(r.documents, docs);
  ASSERT_TRUE(back);
  expect_same(ds, *back);
  EXPECT_TRUE(s->import_dataset(ds).already_present);
  auto secs = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
  std::cout << GetParam() << ": commit_subject train: read " << secs(t0, t1) << " s, import " << secs(t1, t2)
            << " s (" << docs << " documents), load " << secs(t2, t3) << " s\n";
  RecordProperty("import_seconds", std::to_string(secs(t1, t2)));
#ifdef NDEBUG  // timings mean something only in an optimised build
  EXPECT_LT(secs(t1, t2), 20.0);  // generous; a few seconds expected
#endif
}

}  // namespace
}  // namespace attune::store
