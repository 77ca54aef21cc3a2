// What only the SQLite store has: its file (WAL, application_id, user_version), the
// migrations of files earlier attunes wrote, and the refusal of other programs' databases.
// What every store does is in test_store_contract.cpp, run against SQLite there too.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <filesystem>
#include <thread>
#include <fstream>

#include "attune/core/error.h"
#include "attune/store/store.h"
#include "sqlite_raw.h"
#include "temp_dir.h"

namespace attune::store {
namespace {

namespace fs = std::filesystem;

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

TEST(SqliteStore, OpensWithWalForeignKeysAndSchemaVersion) {
  TempDir dir;
  auto path = dir / "a.db";
  { auto s = open_sqlite(path); }
  EXPECT_EQ(raw_pragma(path, "journal_mode"), "wal");
  EXPECT_EQ(raw_pragma(path, "user_version"), "4");
  for (const char* t : {"datasets", "users", "documents", "examples", "llm_cache", "feedback", "runs", "blobs", "tenants",
                        "api_keys", "serve_documents", "serve_requests", "serve_feedback", "serve_changes", "leases"})
    EXPECT_EQ(raw_count(path, t), 0) << t;
}

// Two processes (here threads, each with its own connection) opening one new store at the
// same moment both get it: switching to WAL is retried while the other holds the file, and
// the check of what the file is reads one snapshot (it once saw the other's tables without
// its schema version, and called the store "not an attune store").
TEST(SqliteStore, TwoConnectionsOpeningANewFileAtOnceBothSucceed) {
  TempDir dir;
  for (int round = 0; round < 60; ++round) {
    const auto path = dir / ("s" + std::to_string(round) + ".db");
    std::string errors[2];
    std::thread other([&] {
      try {
        (void)open_sqlite(path);
      } catch (const std::exception& e) {
        errors[1] = e.what();
      }
    });
    try {
      (void)open_sqlite(path);
    } catch (const std::exception& e) {
      errors[0] = e.what();
    }
    other.join();
    ASSERT_EQ(errors[0] + errors[1], "") << "round " << round;
  }
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
  raw_exec(path, "DROP TABLE serve_changes; DROP TABLE leases; DROP TABLE serve_feedback; DROP TABLE serve_requests; "
                 "DROP TABLE serve_documents; DROP TABLE api_keys; DROP TABLE tenants; PRAGMA user_version=1;");
  ASSERT_EQ(raw_pragma(path, "user_version"), "1");
  {
    auto s = open_sqlite(path);
    EXPECT_EQ(s->blob_get("k"), "kept");
    const auto t = s->tenant_create("acme");
    s->documents_put(t, {{"u1", "d1", "text", ""}});
    EXPECT_EQ(s->documents_of(t).size(), 1u);
  }
  EXPECT_EQ(raw_pragma(path, "user_version"), "4");
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
  raw_exec(path, "ALTER TABLE serve_requests DROP COLUMN agent; DROP TABLE serve_changes; DROP TABLE leases; "
                 "ALTER TABLE tenants DROP COLUMN doc_seq; PRAGMA user_version=2;");
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
  EXPECT_EQ(raw_pragma(path, "user_version"), "4");
}

TEST(SqliteStore, AVersion3StoreGainsTheReplicaTablesAndKeepsItsDocuments) {
  TempDir dir;
  auto path = dir / "v3.db";
  {
    auto s = open_sqlite(path);
    const auto t = s->tenant_create("acme");
    s->documents_put(t, {{"u1", "d1", "text", ""}});
  }
  // What attune wrote before replicas shared a store: no change counter, log or leases.
  raw_exec(path, "DROP TABLE serve_changes; DROP TABLE leases; ALTER TABLE tenants DROP COLUMN doc_seq; "
                 "PRAGMA user_version=3;");
  {
    auto s = open_sqlite(path);
    const auto t = *s->tenant_find("acme");
    EXPECT_EQ(s->documents_of(t).size(), 1u);
    EXPECT_EQ(s->document_seq(t), 0u);  // the documents from before have no changes to replay
    EXPECT_TRUE(s->document_changes(t, 0).empty());
    s->documents_put(t, {{"u1", "d2", "text", ""}});
    EXPECT_EQ(s->document_seq(t), 1u);
    EXPECT_EQ(s->document_changes(t, 0).size(), 1u);
    EXPECT_TRUE(s->lease_acquire("learner", "me", 10));
  }
  EXPECT_EQ(raw_pragma(path, "user_version"), "4");
}

}  // namespace
}  // namespace attune::store
