// What only the PostgreSQL store has: its database (attune_meta), the refusal of other
// programs' databases and of newer schemas, URLs whose passwords never reach a message, a
// connection made again after the server dropped it; and open_store's choice of backend.
// What every store does is in test_store_contract.cpp, run against PostgreSQL there too.
// Tests that need the server skip without it (the postgres fixture, tests/store/postgres.sh).
#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

#include "attune/core/error.h"
#include "attune/store/store.h"
#include "fixtures/postgres.h"
#include "temp_dir.h"

namespace attune::store {
namespace {

using fixtures::PostgresDatabase;

std::string open_error(const std::string& url) {
  try {
    open_postgresql(url);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

#define NEED_POSTGRES(db)                                 \
  auto db = fixtures::postgres_database();                \
  if (!db) GTEST_SKIP() << fixtures::kNoPostgres

TEST(PostgresStore, ANewDatabaseGetsTheSchemaAndAttunesMark) {
  NEED_POSTGRES(db);
  { auto s = open_postgresql(db->url()); }
  EXPECT_EQ(db->exec("SELECT value FROM attune_meta WHERE key='application'"), "attune");
  EXPECT_EQ(db->exec("SELECT value FROM attune_meta WHERE key='schema_version'"), "4");
  for (const char* t : {"datasets", "users", "documents", "examples", "llm_cache", "feedback", "runs", "blobs", "tenants",
                        "api_keys", "serve_documents", "serve_requests", "serve_feedback", "serve_changes", "leases"})
    EXPECT_EQ(db->exec(std::string("SELECT COUNT(*) FROM ") + t), "0") << t;
  // Opening it again changes nothing.
  { auto s = open_postgresql(db->url()); }
  EXPECT_EQ(db->exec("SELECT COUNT(*) FROM attune_meta"), "2");
}

TEST(PostgresStore, ForeignDatabaseWithItsOwnTableIsRefusedAndLeftAlone) {
  NEED_POSTGRES(db);
  db->exec("CREATE TABLE notes (id SERIAL PRIMARY KEY, body TEXT); INSERT INTO notes (body) VALUES ('hi')");
  const std::string msg = open_error(db->url());
  EXPECT_NE(msg.find("cannot open store " + db->url()), std::string::npos) << msg;
  EXPECT_NE(msg.find("not an attune store"), std::string::npos) << msg;
  EXPECT_NE(msg.find("notes"), std::string::npos) << msg;
  EXPECT_NE(msg.find("another program's database"), std::string::npos) << msg;
  // Nothing was added: still only the foreign table, with its row.
  EXPECT_EQ(db->exec("SELECT COUNT(*) FROM pg_tables WHERE schemaname='public'"), "1");
  EXPECT_EQ(db->exec("SELECT COUNT(*) FROM notes"), "1");
}

TEST(PostgresStore, AnotherApplicationsAttuneMetaIsRefused) {
  NEED_POSTGRES(db);
  db->exec("CREATE TABLE attune_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL); "
           "INSERT INTO attune_meta VALUES ('application', 'tuner')");
  const std::string msg = open_error(db->url());
  EXPECT_NE(msg.find("not an attune store"), std::string::npos) << msg;
  EXPECT_NE(msg.find("\"tuner\""), std::string::npos) << msg;
}

TEST(PostgresStore, NewerSchemaIsRefused) {
  NEED_POSTGRES(db);
  { auto s = open_postgresql(db->url()); }
  db->exec("UPDATE attune_meta SET value='99' WHERE key='schema_version'");
  const std::string msg = open_error(db->url());
  EXPECT_NE(msg.find("schema version 99 is newer than this attune's (4)"), std::string::npos) << msg;
}

// Two replicas starting at once on a new database: both open it, one creates the schema
// (under the advisory lock), the other finds it made. (Not a contract test: two SQLite
// connections creating one new file at once can still fail, see sqlite_store.cpp.)
TEST(PostgresStore, TwoStoresOpeningAFreshDatabaseAtOnce) {
  NEED_POSTGRES(db);
  for (int round = 0; round < 5; ++round) {
    if (round > 0) db->exec("DROP SCHEMA public CASCADE; CREATE SCHEMA public");
    std::unique_ptr<Store> stores[2];
    std::string errors[2];
    std::vector<std::thread> threads;
    for (int i = 0; i < 2; ++i)
      threads.emplace_back([&, i] {
        try {
          stores[i] = open_postgresql(db->url());
        } catch (const std::exception& e) {
          errors[i] = e.what();
        }
      });
    for (auto& th : threads) th.join();
    ASSERT_TRUE(stores[0] && stores[1]) << errors[0] << " | " << errors[1];
    stores[0]->blob_put("k", "v");
    EXPECT_EQ(stores[1]->blob_get("k"), "v");
    EXPECT_EQ(db->exec("SELECT COUNT(*) FROM attune_meta"), "2");
  }
}

// A URL's password is never in a message: not as written, not percent-decoded.
TEST(PostgresStore, NoPasswordInTheMessages) {
  for (const char* url : {"postgresql://u:secretpw@127.0.0.1:1/x", "postgres://u:secretpw@127.0.0.1:1/x",
                          "postgresql://u@127.0.0.1:1/x?password=secretpw", "postgresql://u:secret%40pw@127.0.0.1:1/x",
                          "postgresql://u@127.0.0.1:1/x?connect_timeout=5&password=secretpw"}) {
    const std::string msg = open_error(url);
    EXPECT_NE(msg.find("cannot open store postgres"), std::string::npos) << msg;
    EXPECT_NE(msg.find("u@127.0.0.1:1/x"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("secret"), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;  // one line
  }
  // libpq quotes a URL it cannot parse: the URL as shown, even with a short password.
  const std::string bad = open_error("postgresql://u:pw@[::1/x");
  EXPECT_NE(bad.find("cannot open store postgresql://u@[::1/x"), std::string::npos) << bad;
  EXPECT_EQ(bad.find(":pw"), std::string::npos) << bad;
  // libpq would read these differently from what they seem to say; refused, still unshown.
  for (const char* url : {"postgresql://u:sec@retpw@127.0.0.1:1/x", "postgresql://u:sec/retpw@127.0.0.1:1/x"}) {
    const std::string msg = open_error(url);
    EXPECT_NE(msg.find("cannot open store postgresql://u@127.0.0.1:1/x"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("sec"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("retpw"), std::string::npos) << msg;
  }
}

TEST(PostgresStore, AnUnknownDatabaseIsAClearError) {
  NEED_POSTGRES(db);
  const std::string url = fixtures::postgres_url_for(db->url(), "attune_no_such_db");
  const std::string msg = open_error(url);
  EXPECT_NE(msg.find("cannot open store " + url), std::string::npos) << msg;
  EXPECT_NE(msg.find("attune_no_such_db"), std::string::npos) << msg;
}

// The server ends the store's connection (a restart, a failover): the call that finds it
// gone fails, and the next one connects again.
TEST(PostgresStore, ALostConnectionIsMadeAgain) {
  NEED_POSTGRES(db);
  auto s = open_postgresql(db->url());
  s->blob_put("k", "v");
  PostgresDatabase::run(fixtures::postgres_server_url(),
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname='" + db->name() + "'");
  try {
    (void)s->blob_get("k");
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("store " + db->url()), std::string::npos) << e.what();
  }
  EXPECT_EQ(s->blob_get("k"), "v");
  s->blob_put("k", "w");
  EXPECT_EQ(s->blob_get("k"), "w");
}

// A store opens up to pool_size connections (default 4; attune's own URL parameter, which
// libpq never sees), as many as concurrent calls need, and each call uses one alone: calls
// from several threads all land, and the server counts the connections.
TEST(PostgresStore, ConcurrentCallsShareAPoolOfConnectionsSizedByTheUrl) {
  NEED_POSTGRES(db);
  const auto with = [&](const std::string& param) {
    return db->url() + (db->url().find('?') == std::string::npos ? "?" : "&") + param;
  };
  const auto connections = [&] {
    return std::stoi(PostgresDatabase::run(fixtures::postgres_server_url(),
                                           "SELECT COUNT(*) FROM pg_stat_activity WHERE datname='" + db->name() +
                                               "' AND application_name='attune'"));
  };
  for (const std::size_t size : {std::size_t{1}, std::size_t{3}}) {
    {
      auto s = open_postgresql(with("pool_size=" + std::to_string(size)));
      std::vector<std::thread> threads;
      for (int t = 0; t < 6; ++t)
        threads.emplace_back([&, t] {
          for (int i = 0; i < 40; ++i) {
            const std::string key = "t" + std::to_string(t) + "/" + std::to_string(i);
            s->blob_put(key, key);
            EXPECT_EQ(s->blob_get(key), key);
          }
        });
      for (auto& th : threads) th.join();
      for (int t = 0; t < 6; ++t)
        for (int i = 0; i < 40; ++i) {
          const std::string key = "t" + std::to_string(t) + "/" + std::to_string(i);
          ASSERT_EQ(s->blob_get(key), key);
        }
      const int n = connections();
      EXPECT_LE(n, static_cast<int>(size)) << "pool_size " << size;
      if (size == 1) EXPECT_EQ(n, 1);
      else EXPECT_GE(n, 2) << "six threads of calls ran on one connection";
    }
    for (int i = 0; i < 100 && connections() > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_EQ(connections(), 0) << "a closed store left connections open";
  }
  for (const char* bad : {"pool_size=0", "pool_size=65", "pool_size=x", "pool_size="}) {
    const std::string msg = open_error(with(bad));
    EXPECT_NE(msg.find("pool_size must be a whole number from 1 to 64"), std::string::npos) << bad << ": " << msg;
  }
}

// Texts PostgreSQL cannot hold are refused with a message rather than cut short.
TEST(PostgresStore, ATextWithANulByteIsRefused) {
  NEED_POSTGRES(db);
  auto s = open_postgresql(db->url());
  try {
    s->cache_put({{CacheKey{"m", "score", "p", ""}, std::string("a\0b", 3)}});
    FAIL() << "expected attune::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("NUL"), std::string::npos) << e.what();
  }
  EXPECT_EQ(s->cache_size(), 0u);
}

TEST(OpenStore, APostgresqlUrlOrAFilesPath) {
  EXPECT_TRUE(is_postgresql_url("postgresql://host/db"));
  EXPECT_TRUE(is_postgresql_url("postgres://u@host:5433/db?sslmode=require"));
  EXPECT_FALSE(is_postgresql_url("store.db"));
  EXPECT_FALSE(is_postgresql_url("/var/lib/attune/postgresql.db"));
  EXPECT_FALSE(is_postgresql_url("postgresql:/host/db"));
  EXPECT_FALSE(is_postgresql_url(""));

  TempDir dir;
  const auto path = (dir / "a.db").string();
  open_store(path)->blob_put("k", "sqlite");
  EXPECT_EQ(open_sqlite(path)->blob_get("k"), "sqlite");
  // A PostgreSQL URL is never taken for a file name.
  EXPECT_NE(open_error("postgresql://u@127.0.0.1:1/x").find("cannot open store"), std::string::npos);
  try {
    open_store("postgresql://u@127.0.0.1:1/x");
    FAIL() << "expected attune::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot open store postgresql://u@127.0.0.1:1/x"), std::string::npos) << e.what();
  }

  auto db = fixtures::postgres_database();
  if (!db) return;  // the rest needs the server
  open_store(db->url())->blob_put("k", "postgresql");
  EXPECT_EQ(open_postgresql(db->url())->blob_get("k"), "postgresql");
}

}  // namespace
}  // namespace attune::store
