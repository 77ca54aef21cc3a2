// The SQLite store: import (idempotent, all-or-nothing), load round trip, LLM cache,
// feedback upserts, runs, blobs, each role through its own interface, reopening, errors.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>

#include "attune/core/error.h"
#include "attune/store/store.h"

namespace attune::store {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "attune-store-test-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  fs::path operator/(const std::string& name) const { return path_ / name; }

 private:
  fs::path path_;
};

// Rows of a table, read with a separate raw connection (what is really in the file).
std::int64_t raw_count(const fs::path& db, const std::string& table) {
  sqlite3* h = nullptr;
  EXPECT_EQ(sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  std::string sql = "SELECT COUNT(*) FROM " + table;
  EXPECT_EQ(sqlite3_prepare_v2(h, sql.c_str(), -1, &st, nullptr), SQLITE_OK) << sqlite3_errmsg(h);
  std::int64_t n = -1;
  if (sqlite3_step(st) == SQLITE_ROW) n = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  sqlite3_close(h);
  return n;
}

std::string raw_pragma(const fs::path& db, const std::string& pragma) {
  sqlite3* h = nullptr;
  sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READONLY, nullptr);
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(h, ("PRAGMA " + pragma).c_str(), -1, &st, nullptr);
  std::string out;
  if (sqlite3_step(st) == SQLITE_ROW) out = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
  sqlite3_finalize(st);
  sqlite3_close(h);
  return out;
}

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

TEST(SqliteStore, OpensWithWalForeignKeysAndSchemaVersion) {
  TempDir dir;
  auto path = dir / "a.db";
  { auto s = open_sqlite(path); }
  EXPECT_EQ(raw_pragma(path, "journal_mode"), "wal");
  EXPECT_EQ(raw_pragma(path, "user_version"), "3");
  for (const char* t : {"datasets", "users", "documents", "examples", "llm_cache", "feedback", "runs", "blobs", "tenants",
                        "api_keys", "serve_documents", "serve_requests", "serve_feedback"})
    EXPECT_EQ(raw_count(path, t), 0) << t;
}

TEST(SqliteStore, ImportAndLoadRoundTrip) {
  TempDir dir;
  auto s = open_sqlite(dir / "a.db");
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

TEST(SqliteStore, ImportTwiceIsANoOp) {
  TempDir dir;
  auto path = dir / "a.db";
  auto s = open_sqlite(path);
  auto ds = small_dataset();
  ImportResult first = s->import_dataset(ds);
  auto docs = raw_count(path, "documents");
  ImportResult second = s->import_dataset(ds);
  EXPECT_TRUE(second.already_present);
  EXPECT_EQ(second.dataset_id, first.dataset_id);
  EXPECT_EQ(second.users, first.users);
  EXPECT_EQ(second.documents, first.documents);
  EXPECT_EQ(second.examples, first.examples);
  EXPECT_EQ(s->datasets().size(), 1u);
  EXPECT_EQ(raw_count(path, "documents"), docs);
  EXPECT_EQ(raw_count(path, "examples"), 4);
  EXPECT_EQ(raw_count(path, "users"), 3);
}

TEST(SqliteStore, NewContentIsANewDatasetAndLoadTakesTheNewest) {
  TempDir dir;
  auto s = open_sqlite(dir / "a.db");
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

TEST(SqliteStore, FailedImportRollsBackEverything) {
  TempDir dir;
  auto path = dir / "a.db";
  auto s = open_sqlite(path);
  // A good dataset first: it must survive the failed import untouched.
  auto good = small_dataset("good");
  good.split = "train";
  s->import_dataset(good);
  const auto users = raw_count(path, "users"), examples = raw_count(path, "examples"),
             documents = raw_count(path, "documents");

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
  EXPECT_EQ(raw_count(path, "datasets"), 1);
  EXPECT_EQ(raw_count(path, "users"), users);
  EXPECT_EQ(raw_count(path, "examples"), examples);
  EXPECT_EQ(raw_count(path, "documents"), documents);
  // The store is still usable, and the fixed dataset imports.
  bad.examples.pop_back();
  EXPECT_FALSE(s->import_dataset(bad).already_present);
  auto back = s->load_dataset("lamp4", "train");
  ASSERT_TRUE(back);
  expect_same(good, *back);
}

TEST(SqliteStore, CacheHitAndMiss) {
  TempDir dir;
  auto s = open_sqlite(dir / "a.db");
  CacheKey a{"m1", "generate", "prompt a", "{beams:4}"};
  CacheKey b{"m1", "score", "prompt a", "target"};
  CacheKey c{"m2", "generate", "prompt a", "{beams:4}"};  // another model: another key
  EXPECT_EQ(s->cache_size(), 0u);
  s->cache_put({{a, "answer a"}, {b, "-3.25"}});
  EXPECT_EQ(s->cache_size(), 2u);
  auto got = s->cache_get({a, c, b});
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0], "answer a");
  EXPECT_FALSE(got[1].has_value());
  EXPECT_EQ(got[2], "-3.25");
  s->cache_put({{a, "answer a2"}});  // replace
  EXPECT_EQ(s->cache_size(), 2u);
  EXPECT_EQ(s->cache_get({a})[0], "answer a2");
  EXPECT_TRUE(s->cache_get({}).empty());
}

TEST(SqliteStore, CacheKeyDigest) {
  CacheKey a{"m", "generate", "ab", "c"};
  CacheKey b{"m", "generate", "a", "bc"};
  EXPECT_EQ(a.digest().size(), 32u);
  EXPECT_EQ(a.digest(), (CacheKey{"m", "generate", "ab", "c"}).digest());
  EXPECT_NE(a.digest(), b.digest());  // parts are length-prefixed
}

TEST(SqliteStore, FeedbackUpsert) {
  TempDir dir;
  auto path = dir / "a.db";
  auto s = open_sqlite(path);
  FeedbackRecord r{"lamp4/dev/h1", "q1", "doc", "d1", "m1", "an output", 0.5};
  FeedbackRecord r2{"lamp4/dev/h1", "q1", "doc", "d2", "m1", "other", 0.25};
  FeedbackRecord other_model{"lamp4/dev/h1", "q1", "doc", "d1", "m2", "x", 1.0};
  FeedbackRecord other_kind{"lamp4/dev/h1", "q1", "likelihood", "d1", "m1", "", -7.5};
  s->feedback_put({r, r2, other_model, other_kind});
  r.value = 0.75;
  r.output = "a better output";
  s->feedback_put({r});
  EXPECT_EQ(raw_count(path, "feedback"), 4);
  auto got = s->feedback_get("lamp4/dev/h1", "doc", "m1");
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].item, "d1");
  EXPECT_EQ(got[0].example, "q1");
  EXPECT_EQ(got[0].value, 0.75);
  EXPECT_EQ(got[0].output, "a better output");
  EXPECT_EQ(got[0].dataset, "lamp4/dev/h1");
  EXPECT_EQ(got[0].kind, "doc");
  EXPECT_EQ(got[0].model, "m1");
  EXPECT_EQ(got[1].item, "d2");
  EXPECT_EQ(got[1].value, 0.25);
  EXPECT_EQ(s->feedback_get("lamp4/dev/h1", "doc", "m2").size(), 1u);
  auto lik = s->feedback_get("lamp4/dev/h1", "likelihood", "m1");
  ASSERT_EQ(lik.size(), 1u);
  EXPECT_EQ(lik[0].value, -7.5);
  EXPECT_TRUE(s->feedback_get("other", "doc", "m1").empty());
}

TEST(SqliteStore, Runs) {
  TempDir dir;
  auto s = open_sqlite(dir / "a.db");
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
  EXPECT_FALSE(runs[0].started.empty());
  EXPECT_FALSE(runs[0].finished.empty());
  EXPECT_LE(runs[0].started, runs[0].finished);
  EXPECT_EQ(runs[1].status, "running");
  EXPECT_EQ(runs[1].seed, big_seed);
  EXPECT_EQ(runs[1].finished, "");
  EXPECT_THROW(s->run_end(9999, "ok", "{}"), Error);
}

TEST(SqliteStore, ARunScopeLeftByAnErrorIsRecordedAsFailed) {
  TempDir dir;
  auto s = open_sqlite(dir / "a.db");
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

TEST(SqliteStore, Blobs) {
  TempDir dir;
  auto s = open_sqlite(dir / "a.db");
  EXPECT_FALSE(s->blob_get("bm25:x").has_value());
  std::string bytes("a\0b\xFF\x00z", 6);
  s->blob_put("bm25:x", bytes);
  EXPECT_EQ(s->blob_get("bm25:x"), bytes);
  s->blob_put("bm25:x", "v2");
  EXPECT_EQ(s->blob_get("bm25:x"), "v2");
  s->blob_put("empty", "");
  EXPECT_EQ(s->blob_get("empty"), "");
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
TEST(SqliteStore, EachRoleThroughItsOwnInterface) {
  TempDir dir;
  auto path = dir / "a.db";
  auto s = open_sqlite(path);
  use_datasets(*s, small_dataset());
  use_cache(*s);
  use_feedback(*s);
  use_runs(*s);
  use_blobs(*s);
  for (const char* t : {"datasets", "llm_cache", "feedback", "runs", "blobs"}) EXPECT_EQ(raw_count(path, t), 1) << t;
}

TEST(SqliteStore, SurvivesReopening) {
  TempDir dir;
  auto path = dir / "a.db";
  auto ds = small_dataset();
  std::int64_t run;
  {
    auto s = open_sqlite(path);
    s->import_dataset(ds);
    s->cache_put({{CacheKey{"m", "generate", "p", ""}, "v"}});
    s->feedback_put({FeedbackRecord{"d", "q1", "doc", "d1", "m", "o", 1.5}});
    run = s->run_begin("import", "{}", 7);
    s->blob_put("k", "blob");
  }
  auto s = open_sqlite(path);
  auto back = s->load_dataset("lamp4", "dev");
  ASSERT_TRUE(back);
  expect_same(ds, *back);
  EXPECT_TRUE(s->import_dataset(ds).already_present);
  EXPECT_EQ(s->cache_get({CacheKey{"m", "generate", "p", ""}})[0], "v");
  EXPECT_EQ(s->feedback_get("d", "doc", "m").at(0).value, 1.5);
  EXPECT_EQ(s->runs().at(0).id, run);
  EXPECT_EQ(s->blob_get("k"), "blob");
}

TEST(SqliteStore, PathInAMissingDirectoryIsAClearError) {
  TempDir dir;
  auto path = dir / "no-such-dir" / "store.db";
  try {
    open_sqlite(path);
    FAIL() << "expected attune::Error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find(path.string()), std::string::npos) << msg;
    EXPECT_NE(msg.find("does not exist"), std::string::npos) << msg;
  }
}

TEST(SqliteStore, NotADatabaseIsAClearError) {
  TempDir dir;
  auto path = dir / "notes.db";
  std::ofstream(path) << "these are not the bytes of a SQLite database, just some text that is long enough\n";
  try {
    open_sqlite(path);
    FAIL() << "expected attune::Error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find(path.string()), std::string::npos) << msg;
    EXPECT_NE(msg.find("not a database"), std::string::npos) << msg;
  }
}

TEST(SqliteStore, NewerSchemaIsRefused) {
  TempDir dir;
  auto path = dir / "a.db";
  { auto s = open_sqlite(path); }
  sqlite3* h = nullptr;
  sqlite3_open(path.c_str(), &h);
  sqlite3_exec(h, "PRAGMA user_version=99", nullptr, nullptr, nullptr);
  sqlite3_close(h);
  try {
    open_sqlite(path);
    FAIL() << "expected attune::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("schema version 99"), std::string::npos) << e.what();
  }
}

// A raw statement on the file, outside attune.
void raw_exec(const fs::path& db, const std::string& sql) {
  sqlite3* h = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
  char* err = nullptr;
  EXPECT_EQ(sqlite3_exec(h, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK) << (err ? err : "");
  sqlite3_free(err);
  sqlite3_close(h);
}

std::string open_error(const fs::path& path) {
  try {
    open_sqlite(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(SqliteStore, NewStoreIsMarkedAsAttunes) {
  TempDir dir;
  auto path = dir / "a.db";
  { auto s = open_sqlite(path); }
  EXPECT_EQ(raw_pragma(path, "application_id"), std::to_string(0x4154554e));
}

TEST(SqliteStore, ForeignDatabaseWithTablesIsRefusedAndLeftAlone) {
  TempDir dir;
  auto path = dir / "notes.sqlite";
  raw_exec(path, "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT); INSERT INTO notes (body) VALUES ('hi');");
  const std::string msg = open_error(path);
  EXPECT_NE(msg.find(path.string()), std::string::npos) << msg;
  EXPECT_NE(msg.find("not an attune store"), std::string::npos) << msg;
  EXPECT_NE(msg.find("notes"), std::string::npos) << msg;
  // Nothing was added: still only the foreign table, in its own journal mode.
  EXPECT_EQ(raw_count(path, "notes"), 1);
  EXPECT_EQ(raw_count(path, "sqlite_master"), 1);
  EXPECT_EQ(raw_pragma(path, "journal_mode"), "delete");
  EXPECT_EQ(raw_pragma(path, "application_id"), "0");
}

TEST(SqliteStore, ForeignDatabaseWithAUsersTableAndAVersionIsRefused) {
  TempDir dir;
  auto path = dir / "app.db";
  raw_exec(path, "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT); PRAGMA user_version=1;");
  const std::string msg = open_error(path);
  EXPECT_NE(msg.find("not an attune store"), std::string::npos) << msg;
  EXPECT_NE(msg.find("no table blobs"), std::string::npos) << msg;
}

TEST(SqliteStore, OtherApplicationIdIsRefused) {
  TempDir dir;
  auto path = dir / "other.db";
  raw_exec(path, "PRAGMA application_id=1234;");
  const std::string msg = open_error(path);
  EXPECT_NE(msg.find("not an attune store"), std::string::npos) << msg;
  EXPECT_NE(msg.find("its application_id is 0x000004d2"), std::string::npos) << msg;
}

TEST(SqliteStore, EmptyDatabaseFileBecomesAStore) {
  TempDir dir;
  auto path = dir / "empty.db";
  std::ofstream(path).close();  // 0 bytes: a valid, empty SQLite database
  { auto s = open_sqlite(path); s->blob_put("k", "v"); }
  EXPECT_EQ(open_sqlite(path)->blob_get("k"), "v");
}

TEST(SqliteStore, UnmarkedStoreOfAnEarlierAttuneStillOpensAndIsMarked) {
  TempDir dir;
  auto path = dir / "old.db";
  {
    auto s = open_sqlite(path);
    s->blob_put("k", "kept");
  }
  raw_exec(path, "PRAGMA application_id=0;");  // as written before the mark existed
  ASSERT_EQ(raw_pragma(path, "application_id"), "0");
  EXPECT_EQ(open_sqlite(path)->blob_get("k"), "kept");
  EXPECT_EQ(raw_pragma(path, "application_id"), std::to_string(0x4154554e));
}

TEST(SqliteStore, AVersion1StoreIsUpgradedInPlaceAndKeepsItsData) {
  TempDir dir;
  auto path = dir / "v1.db";
  {
    auto s = open_sqlite(path);
    s->blob_put("k", "kept");
  }
  // What attune wrote before the server's tables existed.
  raw_exec(path, "DROP TABLE serve_feedback; DROP TABLE serve_requests; DROP TABLE serve_documents; DROP TABLE api_keys; "
                 "DROP TABLE tenants; PRAGMA user_version=1;");
  ASSERT_EQ(raw_pragma(path, "user_version"), "1");
  {
    auto s = open_sqlite(path);
    EXPECT_EQ(s->blob_get("k"), "kept");
    const auto t = s->tenant_create("acme");
    s->documents_put(t, {{"u1", "d1", "text", ""}});
    EXPECT_EQ(s->documents_of(t).size(), 1u);
  }
  EXPECT_EQ(raw_pragma(path, "user_version"), "3");
  EXPECT_EQ(raw_count(path, "serve_documents"), 1);
}

TEST(SqliteStore, AVersion2StoreGainsTheAgentColumnAndKeepsItsRequests) {
  TempDir dir;
  auto path = dir / "v2.db";
  {
    auto s = open_sqlite(path);
    const auto t = s->tenant_create("acme");
    s->request_put(t, {"req_1", "u1", "q", "", "", "bm25@v1", {"user:d1"}, ""});
  }
  // What attune wrote before requests named their agent.
  raw_exec(path, "ALTER TABLE serve_requests DROP COLUMN agent; PRAGMA user_version=2;");
  {
    auto s = open_sqlite(path);
    const auto t = *s->tenant_find("acme");
    const auto old = s->request_get(t, "req_1");
    ASSERT_TRUE(old.has_value());
    EXPECT_EQ(old->agent, "");
    EXPECT_EQ(old->documents, std::vector<std::string>{"user:d1"});
    s->request_put(t, {"req_2", "u1", "q", "qa", "qa-bot", "bm25@v1", {"user:d1"}, ""});
    EXPECT_EQ(s->request_get(t, "req_2")->agent, "qa-bot");
  }
  EXPECT_EQ(raw_pragma(path, "user_version"), "3");
}

TEST(SqliteStore, TenantsKeysAndRevocation) {
  TempDir dir;
  auto s = open_sqlite(dir / "t.db");
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
  EXPECT_FALSE(keys[0].revoked.empty());
  EXPECT_TRUE(keys[1].revoked.empty());
  const auto list = s->tenant_list();
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].name, "acme");
  EXPECT_EQ(list[0].active_keys, 1u);
  EXPECT_EQ(list[1].active_keys, 0u);
}

TEST(SqliteStore, ServeRowsStayWithTheirTenantAndAUserIsRemovedWithAllThatCameFromThem) {
  TempDir dir;
  auto s = open_sqlite(dir / "t.db");
  const auto a = s->tenant_create("acme");
  const auto b = s->tenant_create("globex");
  s->documents_put(a, {{"ann", "d1", "ann's note", "2026-01-02"}, {"bob", "d1", "bob's note", ""}, {"", "c1", "shared", ""}});
  s->documents_put(b, {{"ann", "d1", "another tenant's ann", ""}});
  EXPECT_EQ(s->documents_of(a).size(), 3u);
  ASSERT_EQ(s->documents_of(b).size(), 1u);
  EXPECT_EQ(s->documents_of(b)[0].text, "another tenant's ann");
  s->documents_put(a, {{"ann", "d1", "ann's note, edited", ""}});  // replaces
  EXPECT_EQ(s->documents_of(a).size(), 3u);

  attune::store::ServeRequest r{"req-1", "ann", "notes", "", "", "bm25#1", {"d1", "c1"}, ""};
  s->request_put(a, r);
  ASSERT_TRUE(s->request_get(a, "req-1").has_value());
  EXPECT_EQ(s->request_get(a, "req-1")->documents, (std::vector<std::string>{"d1", "c1"}));
  EXPECT_FALSE(s->request_get(b, "req-1").has_value());  // another tenant's request id is unknown there
  s->feedback_add(a, {{"req-1", "doc", "d1", 1.0, "", ""}, {"req-1", "list", "", 0.5, "", ""}});
  EXPECT_EQ(s->feedback_of(a).size(), 2u);
  // Feedback through another tenant on this request is refused, and nothing of the call is written.
  EXPECT_THROW(s->feedback_add(b, {{"req-1", "doc", "d1", 1.0, "", ""}}), attune::Error);
  EXPECT_TRUE(s->feedback_of(b).empty());

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

TEST(SqliteStore, ConcurrentCallsFromThreads) {
  TempDir dir;
  auto s = open_sqlite(dir / "a.db");
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

TEST(SqliteStore, TwoConnectionsToOneFile) {
  TempDir dir;
  auto path = dir / "a.db";
  auto a = open_sqlite(path);
  auto b = open_sqlite(path);
  a->cache_put({{CacheKey{"m", "score", "p", "t"}, "1.5"}});
  EXPECT_EQ(b->cache_get({CacheKey{"m", "score", "p", "t"}})[0], "1.5");
  b->import_dataset(small_dataset());
  EXPECT_TRUE(a->import_dataset(small_dataset()).already_present);
}

// The real commit_subject train split (2,500 questions x up to 64 profile items).
TEST(SqliteStoreRealData, ImportCommitSubjectTrain) {
  fs::path dir = fs::path(ATTUNE_SHARED_DIR) / "data" / "git";
  if (!fs::exists(dir / "commit_subject" / "train_questions.json"))
    GTEST_SKIP() << "no " << dir << " (shared data absent)";
  auto t0 = std::chrono::steady_clock::now();
  data::Dataset ds = data::load_split(dir, "commit_subject", "train");
  auto t1 = std::chrono::steady_clock::now();
  TempDir tmp;
  auto s = open_sqlite(tmp / "a.db");
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
  std::cout << "commit_subject train: read " << secs(t0, t1) << " s, import " << secs(t1, t2) << " s ("
            << docs << " documents), load " << secs(t2, t3) << " s\n";
  RecordProperty("import_seconds", std::to_string(secs(t1, t2)));
#ifdef NDEBUG  // timings mean something only in an optimised build
  EXPECT_LT(secs(t1, t2), 20.0);  // generous; a few seconds expected
#endif
}

}  // namespace
}  // namespace attune::store
