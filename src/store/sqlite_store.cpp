// The SQLite implementation of attune::store::Store (store.h). One connection, guarded by a
// mutex; WAL journal so readers in other processes never block on a writer; every write
// method is one transaction (a killed process leaves all of a call or none of it).
#include <sqlite3.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <thread>
#include <mutex>
#include <set>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "attune/core/error.h"
#include "attune/store/store.h"

namespace attune::store {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Bump when the schema changes, and add a migration from the previous version in migrate().
// 1: datasets, cache, feedback, runs, blobs. 2: + the server's tables (kServeSchema).
// 3: + serve_requests.agent (kAgentColumn). 4: + replicas (kReplicaSchema).
constexpr int kSchemaVersion = 4;
// PRAGMA application_id of an attune store: "ATUN". Stores from before it was set have 0
// and attune's tables (kTables); they are accepted and marked on the next open.
constexpr std::int64_t kApplicationId = 0x4154554e;
// The tables of kSchema, sorted.
constexpr const char* kTables[] = {"blobs", "datasets", "documents", "examples", "feedback", "llm_cache", "runs", "users"};

constexpr const char* kSchema = R"sql(
CREATE TABLE datasets (
  id           INTEGER PRIMARY KEY,
  task         TEXT    NOT NULL,
  split        TEXT    NOT NULL,
  content_hash TEXT    NOT NULL,
  has_outputs  INTEGER NOT NULL,
  sources      TEXT    NOT NULL,              -- JSON array of the files read
  users        INTEGER NOT NULL,
  documents    INTEGER NOT NULL,
  examples     INTEGER NOT NULL,
  imported     TEXT    NOT NULL,
  UNIQUE (task, split, content_hash)
);
CREATE TABLE users (
  id         INTEGER PRIMARY KEY,
  dataset_id INTEGER NOT NULL REFERENCES datasets(id) ON DELETE CASCADE,
  name       TEXT    NOT NULL,
  UNIQUE (dataset_id, name)
);
CREATE TABLE examples (
  id         INTEGER PRIMARY KEY,
  dataset_id INTEGER NOT NULL REFERENCES datasets(id) ON DELETE CASCADE,
  position   INTEGER NOT NULL,                -- order in the source file
  ext_id     TEXT    NOT NULL,                -- the example id of the source
  user_id    INTEGER NOT NULL REFERENCES users(id),
  input      TEXT    NOT NULL,
  output     TEXT    NOT NULL,
  gold_docs  TEXT    NOT NULL,                -- JSON array of document ids
  agent      TEXT    NOT NULL,
  UNIQUE (dataset_id, ext_id),
  UNIQUE (dataset_id, position)
);
CREATE TABLE documents (
  id         INTEGER PRIMARY KEY,
  example_id INTEGER NOT NULL REFERENCES examples(id) ON DELETE CASCADE,
  position   INTEGER NOT NULL,                -- order in the profile
  doc_id     TEXT    NOT NULL,
  owner      TEXT    NOT NULL,
  text       TEXT    NOT NULL,
  fields     TEXT    NOT NULL,                -- JSON object {name: value}
  date       TEXT,                            -- "YYYY-MM-DD" or NULL
  UNIQUE (example_id, position)
);
CREATE TABLE llm_cache (
  digest  TEXT PRIMARY KEY,                   -- CacheKey::digest()
  model   TEXT NOT NULL,
  kind    TEXT NOT NULL,
  value   TEXT NOT NULL,
  created TEXT NOT NULL
);
CREATE TABLE feedback (
  id      INTEGER PRIMARY KEY,
  dataset TEXT NOT NULL,
  example TEXT NOT NULL,
  kind    TEXT NOT NULL,
  item    TEXT NOT NULL,
  model   TEXT NOT NULL,
  output  TEXT NOT NULL,
  value   REAL NOT NULL,
  updated TEXT NOT NULL,
  UNIQUE (dataset, example, kind, item, model)
);
CREATE INDEX feedback_by_kind ON feedback (dataset, kind, model);
CREATE TABLE runs (
  id       INTEGER PRIMARY KEY,
  verb     TEXT    NOT NULL,
  args     TEXT    NOT NULL,                  -- JSON
  seed     INTEGER NOT NULL,                  -- uint64 stored as its int64 bit pattern
  status   TEXT    NOT NULL,                  -- "running" until run_end
  summary  TEXT    NOT NULL,                  -- JSON
  started  TEXT    NOT NULL,
  finished TEXT    NOT NULL                   -- "" while running
);
CREATE TABLE blobs (
  key     TEXT PRIMARY KEY,
  value   BLOB NOT NULL,
  updated TEXT NOT NULL
);
)sql";

// Schema version 2: what `attune serve` and `attune tenant` keep (tenant_store.h). Every row
// below tenants names its tenant, and every statement filters on it.
constexpr const char* kServeSchema = R"sql(
CREATE TABLE tenants (
  id      INTEGER PRIMARY KEY,
  name    TEXT NOT NULL UNIQUE,
  created TEXT NOT NULL
);
CREATE TABLE api_keys (
  id        INTEGER PRIMARY KEY,
  tenant_id INTEGER NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
  prefix    TEXT NOT NULL,
  hash      TEXT NOT NULL UNIQUE,               -- SHA-256 of the key, hex; the key itself is never stored
  created   TEXT NOT NULL,
  revoked   TEXT NOT NULL DEFAULT ''
);
CREATE TABLE serve_documents (
  tenant_id INTEGER NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
  user      TEXT NOT NULL,                      -- '' = the tenant's shared corpus
  doc_id    TEXT NOT NULL,
  text      TEXT NOT NULL,
  date      TEXT NOT NULL,
  updated   TEXT NOT NULL,
  PRIMARY KEY (tenant_id, user, doc_id)
);
CREATE TABLE serve_requests (
  tenant_id     INTEGER NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
  id            TEXT NOT NULL,
  user          TEXT NOT NULL,
  query         TEXT NOT NULL,
  task          TEXT NOT NULL,
  model_version TEXT NOT NULL,
  documents     TEXT NOT NULL,                  -- JSON array of the served ids
  created       TEXT NOT NULL,
  PRIMARY KEY (tenant_id, id)
);
CREATE INDEX serve_requests_by_user ON serve_requests (tenant_id, user);
CREATE TABLE serve_feedback (
  seq        INTEGER PRIMARY KEY,
  tenant_id  INTEGER NOT NULL,
  request_id TEXT NOT NULL,
  kind       TEXT NOT NULL,
  item       TEXT NOT NULL,
  value      REAL NOT NULL,
  output     TEXT NOT NULL,
  reference  TEXT NOT NULL,
  created    TEXT NOT NULL,
  FOREIGN KEY (tenant_id, request_id) REFERENCES serve_requests(tenant_id, id) ON DELETE CASCADE
);
CREATE INDEX serve_feedback_by_request ON serve_feedback (tenant_id, request_id);
)sql";

// Schema version 3: the agent (config's "agents") a request was served for; '' = none.
constexpr const char* kAgentColumn = "ALTER TABLE serve_requests ADD COLUMN agent TEXT NOT NULL DEFAULT ''";

// Schema version 4: what replicas sharing the store need. The tenant's document change
// counter and the change log replicas replay (tenant_store.h: DocumentChange), and leases.
constexpr const char* kReplicaSchema = R"sql(
ALTER TABLE tenants ADD COLUMN doc_seq INTEGER NOT NULL DEFAULT 0;
CREATE TABLE serve_changes (
  tenant_id INTEGER NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
  seq       INTEGER NOT NULL,                   -- tenants.doc_seq of the write
  op        TEXT NOT NULL,                      -- put, delete, delete_user
  user      TEXT NOT NULL,
  doc_id    TEXT NOT NULL                       -- '' for delete_user
);
CREATE INDEX serve_changes_by_seq ON serve_changes (tenant_id, seq);
CREATE TABLE leases (
  name    TEXT PRIMARY KEY,
  holder  TEXT NOT NULL,
  expires REAL NOT NULL                         -- Unix seconds, by the store's clock
);
)sql";

// The store's clock in Unix seconds (milliseconds kept).
constexpr const char* kEpoch = "((julianday('now') - 2440587.5) * 86400.0)";

constexpr const char* kNow = "strftime('%Y-%m-%dT%H:%M:%fZ','now')";

// Where a tenant's change-log floor is kept (document_changes_prune), and reading it back.
std::string changes_floor_key(TenantId tenant) { return "serve/changes-floor/" + std::to_string(tenant); }
std::uint64_t parse_changes_floor(const std::string& text, const std::string& where) {
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size())
    throw Error("store " + where + ": the change-log floor is malformed: \"" + text + "\"");
  return v;
}

class Db;

// A prepared statement; finalized on destruction.
class Stmt {
 public:
  Stmt(Db& db, const std::string& sql);
  ~Stmt() { sqlite3_finalize(st_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  Stmt& bind(int i, std::string_view s) {
    check(sqlite3_bind_text(st_, i, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT));
    return *this;
  }
  Stmt& bind(int i, std::int64_t v) {
    check(sqlite3_bind_int64(st_, i, v));
    return *this;
  }
  Stmt& bind(int i, double v) {
    check(sqlite3_bind_double(st_, i, v));
    return *this;
  }
  Stmt& bind_blob(int i, std::string_view s) {
    check(sqlite3_bind_blob(st_, i, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT));
    return *this;
  }
  Stmt& bind_null(int i) {
    check(sqlite3_bind_null(st_, i));
    return *this;
  }
  // True when a row is ready; false when done. Throws on error.
  bool step();
  // Runs to completion (for INSERT/UPDATE) and resets for the next use.
  void run() {
    while (step()) {
    }
    reset();
  }
  void reset() {
    sqlite3_reset(st_);
    sqlite3_clear_bindings(st_);
  }

  std::string text(int col) const {
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(st_, col));
    return p ? std::string(p, static_cast<std::size_t>(sqlite3_column_bytes(st_, col))) : std::string();
  }
  std::string blob(int col) const {
    const auto* p = static_cast<const char*>(sqlite3_column_blob(st_, col));
    return p ? std::string(p, static_cast<std::size_t>(sqlite3_column_bytes(st_, col))) : std::string();
  }
  bool is_null(int col) const { return sqlite3_column_type(st_, col) == SQLITE_NULL; }
  std::int64_t int64(int col) const { return sqlite3_column_int64(st_, col); }
  double real(int col) const { return sqlite3_column_double(st_, col); }

 private:
  void check(int rc);
  Db& db_;
  sqlite3_stmt* st_ = nullptr;
  std::string sql_;
};

// The connection and its error reporting.
class Db {
 public:
  explicit Db(fs::path path) : path_(std::move(path)) {}
  ~Db() {
    if (db_) sqlite3_close_v2(db_);
  }
  void open() {
    const std::string p = path_.string();
    if (p != ":memory:") {
      fs::path parent = path_.parent_path();
      std::error_code ec;
      if (!parent.empty() && !fs::is_directory(parent, ec))
        throw Error("cannot open store " + p + ": directory " + parent.string() + " does not exist");
      if (fs::is_directory(path_, ec)) throw Error("cannot open store " + p + ": it is a directory");
    }
    int rc = sqlite3_open_v2(p.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                             nullptr);
    if (rc != SQLITE_OK) {
      std::string msg = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
      throw Error("cannot open store " + p + ": " + msg);
    }
    sqlite3_extended_result_codes(db_, 1);
    sqlite3_busy_timeout(db_, 10000);
  }
  sqlite3* handle() { return db_; }
  const fs::path& path() const { return path_; }

  [[noreturn]] void fail(const std::string& what) {
    throw Error("store " + path_.string() + ": " + what + ": " + sqlite3_errmsg(db_));
  }
  void exec(const char* sql) {
    char* err = nullptr;
    if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
      std::string msg = err ? err : sqlite3_errmsg(db_);
      sqlite3_free(err);
      throw Error("store " + path_.string() + ": " + msg);
    }
  }
  std::int64_t last_rowid() { return sqlite3_last_insert_rowid(db_); }
  int changes() { return sqlite3_changes(db_); }

 private:
  fs::path path_;
  sqlite3* db_ = nullptr;
};

Stmt::Stmt(Db& db, const std::string& sql) : db_(db), sql_(sql) {
  if (sqlite3_prepare_v2(db.handle(), sql.c_str(), static_cast<int>(sql.size()), &st_, nullptr) != SQLITE_OK)
    db.fail("cannot prepare \"" + sql + "\"");
}

bool Stmt::step() {
  int rc = sqlite3_step(st_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  std::string msg = sqlite3_errmsg(db_.handle());
  sqlite3_reset(st_);
  throw Error("store " + db_.path().string() + ": " + msg);
}

void Stmt::check(int rc) {
  if (rc != SQLITE_OK) db_.fail("cannot bind a parameter of \"" + sql_ + "\"");
}

// BEGIN IMMEDIATE ... COMMIT; rolls back when left without commit() (an exception).
class Transaction {
 public:
  explicit Transaction(Db& db, bool write = true) : db_(db) { db_.exec(write ? "BEGIN IMMEDIATE" : "BEGIN"); }
  ~Transaction() {
    if (!done_) sqlite3_exec(db_.handle(), "ROLLBACK", nullptr, nullptr, nullptr);
  }
  void commit() {
    db_.exec("COMMIT");
    done_ = true;
  }

 private:
  Db& db_;
  bool done_ = false;
};

std::string dump(const json& j, const char* what) {
  try {
    return j.dump(-1, ' ', false, json::error_handler_t::strict);
  } catch (const json::exception&) {
    throw Error(std::string("cannot store ") + what + ": invalid UTF-8 in a string");
  }
}

class SqliteStore final : public Store {
 public:
  explicit SqliteStore(const fs::path& path) : db_(path) {
    db_.open();
    // journal_mode answers "wal" (or "memory" for ":memory:"); the others are plain settings.
    try {
      (void)user_version();
    } catch (const Error&) {  // e.g. "file is not a database"
      throw Error("cannot open store " + db_.path().string() + ": " + sqlite3_errmsg(db_.handle()));
    }
    (void)check_file_snapshot();  // another program's database is refused before anything is written to it
    // Switching to WAL needs a moment alone with the file and does not wait on the busy
    // timeout: a second connection opening a new store at the same time is told "locked" at
    // once. Retried for as long as the busy timeout would wait.
    for (int attempt = 0;; ++attempt) {
      const int rc = sqlite3_exec(db_.handle(), "PRAGMA journal_mode=WAL", nullptr, nullptr, nullptr);
      if (rc == SQLITE_OK) break;
      if ((rc & 0xff) != SQLITE_BUSY && (rc & 0xff) != SQLITE_LOCKED) db_.fail("cannot switch to WAL");
      if (attempt >= 1000) db_.fail("cannot switch to WAL: another connection keeps the file busy");
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    db_.exec("PRAGMA foreign_keys=ON");
    db_.exec("PRAGMA synchronous=NORMAL");
    migrate();
  }

  ImportResult import_dataset(const data::Dataset& ds) override {
    std::lock_guard lock(mu_);
    Transaction tx(db_);
    ImportResult res;
    {
      Stmt find(db_, "SELECT id, users, documents, examples FROM datasets WHERE task=? AND split=? AND content_hash=?");
      find.bind(1, ds.task).bind(2, ds.split).bind(3, ds.content_hash);
      if (find.step()) {
        res.dataset_id = find.int64(0);
        res.already_present = true;
        res.users = static_cast<std::size_t>(find.int64(1));
        res.documents = static_cast<std::size_t>(find.int64(2));
        res.examples = static_cast<std::size_t>(find.int64(3));
        return res;  // the transaction rolls back: nothing written
      }
    }
    // Users in order of first appearance.
    std::vector<const std::string*> user_order;
    std::unordered_map<std::string, std::int64_t> user_ids;
    for (const auto& ex : ds.examples)
      if (user_ids.emplace(ex.user, 0).second) user_order.push_back(&ex.user);
    for (const auto& ex : ds.examples) res.documents += ex.profile.size();
    res.users = user_order.size();
    res.examples = ds.examples.size();

    json sources = json::array();
    for (const auto& p : ds.sources) sources.push_back(p.string());
    Stmt ins_ds(db_, std::string("INSERT INTO datasets (task, split, content_hash, has_outputs, sources, users, "
                                 "documents, examples, imported) VALUES (?,?,?,?,?,?,?,?,") + kNow + ")");
    ins_ds.bind(1, ds.task).bind(2, ds.split).bind(3, ds.content_hash)
        .bind(4, std::int64_t{ds.has_outputs ? 1 : 0}).bind(5, dump(sources, "the dataset's sources"))
        .bind(6, static_cast<std::int64_t>(res.users)).bind(7, static_cast<std::int64_t>(res.documents))
        .bind(8, static_cast<std::int64_t>(res.examples));
    ins_ds.run();
    res.dataset_id = db_.last_rowid();

    Stmt ins_user(db_, "INSERT INTO users (dataset_id, name) VALUES (?,?)");
    for (const std::string* u : user_order) {
      ins_user.bind(1, res.dataset_id).bind(2, *u);
      ins_user.run();
      user_ids[*u] = db_.last_rowid();
    }

    Stmt ins_ex(db_,
                "INSERT INTO examples (dataset_id, position, ext_id, user_id, input, output, gold_docs, agent) "
                "VALUES (?,?,?,?,?,?,?,?)");
    Stmt ins_doc(db_,
                 "INSERT INTO documents (example_id, position, doc_id, owner, text, fields, date) "
                 "VALUES (?,?,?,?,?,?,?)");
    for (std::size_t i = 0; i < ds.examples.size(); ++i) {
      const auto& ex = ds.examples[i];
      try {
        json gold = json::array();
        for (const auto& g : ex.gold_docs) gold.push_back(g);
        ins_ex.bind(1, res.dataset_id).bind(2, static_cast<std::int64_t>(i)).bind(3, ex.id)
            .bind(4, user_ids.at(ex.user)).bind(5, ex.input).bind(6, ex.output)
            .bind(7, dump(gold, "gold_docs")).bind(8, ex.agent);
        ins_ex.run();
        const std::int64_t ex_row = db_.last_rowid();
        for (std::size_t j = 0; j < ex.profile.size(); ++j) {
          const auto& d = ex.profile[j];
          json fields = json::object();
          for (const auto& [k, v] : d.fields) fields[k] = v;
          ins_doc.bind(1, ex_row).bind(2, static_cast<std::int64_t>(j)).bind(3, d.id).bind(4, d.owner)
              .bind(5, d.text).bind(6, dump(fields, "document fields"));
          if (d.date) ins_doc.bind(7, *d.date);
          else ins_doc.bind_null(7);
          ins_doc.run();
        }
      } catch (const Error& e) {
        throw Error("cannot import " + ds.task + "/" + ds.split + ", example " + std::to_string(i) + " (id \"" +
                    ex.id + "\"), nothing was imported: " + e.what());
      }
    }
    tx.commit();
    return res;
  }

  std::vector<DatasetInfo> datasets() override {
    std::lock_guard lock(mu_);
    Stmt q(db_, "SELECT id, task, split, content_hash, users, documents, examples FROM datasets ORDER BY id");
    std::vector<DatasetInfo> out;
    while (q.step()) {
      DatasetInfo d;
      d.id = q.int64(0);
      d.task = q.text(1);
      d.split = q.text(2);
      d.content_hash = q.text(3);
      d.users = static_cast<std::size_t>(q.int64(4));
      d.documents = static_cast<std::size_t>(q.int64(5));
      d.examples = static_cast<std::size_t>(q.int64(6));
      out.push_back(std::move(d));
    }
    return out;
  }

  std::optional<data::Dataset> load_dataset(const std::string& task, const std::string& split) override {
    std::lock_guard lock(mu_);
    Transaction tx(db_, /*write=*/false);  // one consistent snapshot
    Stmt q(db_,
           "SELECT id, content_hash, has_outputs, sources, examples FROM datasets WHERE task=? AND split=? "
           "ORDER BY id DESC LIMIT 1");
    q.bind(1, task).bind(2, split);
    if (!q.step()) return std::nullopt;
    data::Dataset ds;
    const std::int64_t id = q.int64(0);
    ds.task = task;
    ds.split = split;
    ds.content_hash = q.text(1);
    ds.has_outputs = q.int64(2) != 0;
    for (const auto& s : json::parse(q.text(3))) ds.sources.emplace_back(s.get<std::string>());
    ds.examples.reserve(static_cast<std::size_t>(q.int64(4)));

    std::unordered_map<std::int64_t, std::size_t> row_to_index;
    Stmt ex(db_,
            "SELECT e.id, e.ext_id, u.name, e.input, e.output, e.gold_docs, e.agent FROM examples e "
            "JOIN users u ON u.id = e.user_id WHERE e.dataset_id=? ORDER BY e.position");
    ex.bind(1, id);
    while (ex.step()) {
      Example e;
      e.id = ex.text(1);
      e.user = ex.text(2);
      e.input = ex.text(3);
      e.output = ex.text(4);
      for (const auto& g : json::parse(ex.text(5))) e.gold_docs.push_back(g.get<std::string>());
      e.agent = ex.text(6);
      row_to_index.emplace(ex.int64(0), ds.examples.size());
      ds.examples.push_back(std::move(e));
    }
    Stmt doc(db_,
             "SELECT example_id, doc_id, owner, text, fields, date FROM documents WHERE example_id IN "
             "(SELECT id FROM examples WHERE dataset_id=?) ORDER BY example_id, position");
    doc.bind(1, id);
    while (doc.step()) {
      Document d;
      d.id = doc.text(1);
      d.owner = doc.text(2);
      d.text = doc.text(3);
      json fields = json::parse(doc.text(4));
      for (auto it = fields.begin(); it != fields.end(); ++it) d.fields.emplace(it.key(), it.value().get<std::string>());
      if (!doc.is_null(5)) d.date = doc.text(5);
      ds.examples[row_to_index.at(doc.int64(0))].profile.push_back(std::move(d));
    }
    tx.commit();
    return ds;
  }

  std::vector<std::optional<std::string>> cache_get(const std::vector<CacheKey>& keys) override {
    std::lock_guard lock(mu_);
    std::vector<std::optional<std::string>> out;
    out.reserve(keys.size());
    Transaction tx(db_, /*write=*/false);
    Stmt q(db_, "SELECT value FROM llm_cache WHERE digest=?");
    for (const auto& k : keys) {
      q.bind(1, k.digest());
      if (q.step()) out.emplace_back(q.text(0));
      else out.emplace_back(std::nullopt);
      q.reset();
    }
    tx.commit();
    return out;
  }

  void cache_put(const std::vector<std::pair<CacheKey, std::string>>& entries) override {
    std::lock_guard lock(mu_);
    Transaction tx(db_);
    Stmt ins(db_, std::string("INSERT OR REPLACE INTO llm_cache (digest, model, kind, value, created) "
                              "VALUES (?,?,?,?,") + kNow + ")");
    for (const auto& [k, v] : entries) {
      ins.bind(1, k.digest()).bind(2, k.model).bind(3, k.kind).bind(4, v);
      ins.run();
    }
    tx.commit();
  }

  std::size_t cache_size() override {
    std::lock_guard lock(mu_);
    Stmt q(db_, "SELECT COUNT(*) FROM llm_cache");
    q.step();
    return static_cast<std::size_t>(q.int64(0));
  }

  void feedback_put(const std::vector<FeedbackRecord>& records) override {
    std::lock_guard lock(mu_);
    Transaction tx(db_);
    Stmt ins(db_, std::string("INSERT INTO feedback (dataset, example, kind, item, model, output, value, updated) "
                              "VALUES (?,?,?,?,?,?,?,") + kNow + ") "
                              "ON CONFLICT (dataset, example, kind, item, model) DO UPDATE SET "
                              "output=excluded.output, value=excluded.value, updated=excluded.updated");
    for (const auto& r : records) {
      ins.bind(1, r.dataset).bind(2, r.example).bind(3, r.kind).bind(4, r.item).bind(5, r.model)
          .bind(6, r.output).bind(7, r.value);
      ins.run();
    }
    tx.commit();
  }

  std::vector<FeedbackRecord> feedback_get(const std::string& dataset, const std::string& kind,
                                           const std::string& model) override {
    std::lock_guard lock(mu_);
    Stmt q(db_,
           "SELECT example, item, output, value FROM feedback WHERE dataset=? AND kind=? AND model=? ORDER BY id");
    q.bind(1, dataset).bind(2, kind).bind(3, model);
    std::vector<FeedbackRecord> out;
    while (q.step()) {
      FeedbackRecord r;
      r.dataset = dataset;
      r.kind = kind;
      r.model = model;
      r.example = q.text(0);
      r.item = q.text(1);
      r.output = q.text(2);
      r.value = q.real(3);
      out.push_back(std::move(r));
    }
    return out;
  }

  std::int64_t run_begin(const std::string& verb, const std::string& args_json, std::uint64_t seed) override {
    std::lock_guard lock(mu_);
    Transaction tx(db_);
    Stmt ins(db_, std::string("INSERT INTO runs (verb, args, seed, status, summary, started, finished) "
                              "VALUES (?,?,?,'running','',") + kNow + ",'')");
    ins.bind(1, verb).bind(2, args_json).bind(3, static_cast<std::int64_t>(seed));
    ins.run();
    std::int64_t id = db_.last_rowid();
    tx.commit();
    return id;
  }

  void run_end(std::int64_t id, const std::string& status, const std::string& summary_json) override {
    std::lock_guard lock(mu_);
    Transaction tx(db_);
    Stmt up(db_, std::string("UPDATE runs SET status=?, summary=?, finished=") + kNow + " WHERE id=?");
    up.bind(1, status).bind(2, summary_json).bind(3, id);
    up.run();
    if (db_.changes() == 0) throw Error("store " + db_.path().string() + ": no run with id " + std::to_string(id));
    tx.commit();
  }

  std::vector<RunRecord> runs() override {
    std::lock_guard lock(mu_);
    Stmt q(db_, "SELECT id, verb, args, status, summary, seed, started, finished FROM runs ORDER BY id");
    std::vector<RunRecord> out;
    while (q.step()) {
      RunRecord r;
      r.id = q.int64(0);
      r.verb = q.text(1);
      r.args_json = q.text(2);
      r.status = q.text(3);
      r.summary_json = q.text(4);
      r.seed = static_cast<std::uint64_t>(q.int64(5));
      r.started = q.text(6);
      r.finished = q.text(7);
      out.push_back(std::move(r));
    }
    return out;
  }

  std::optional<std::string> blob_get(const std::string& key) override {
    std::lock_guard lock(mu_);
    Stmt q(db_, "SELECT value FROM blobs WHERE key=?");
    q.bind(1, key);
    if (!q.step()) return std::nullopt;
    return q.blob(0);
  }

  void blob_put(const std::string& key, const std::string& value) override {
    std::lock_guard lock(mu_);
    Transaction tx(db_);
    Stmt ins(db_, std::string("INSERT OR REPLACE INTO blobs (key, value, updated) VALUES (?,?,") + kNow + ")");
    ins.bind(1, key).bind_blob(2, value);
    ins.run();
    tx.commit();
  }

  bool blob_delete(const std::string& key) override {
    std::lock_guard lock(mu_);
    Stmt del(db_, "DELETE FROM blobs WHERE key=?");
    del.bind(1, key);
    del.run();
    return db_.changes() > 0;
  }

  std::vector<std::string> blob_keys(const std::string& prefix) override {
    std::lock_guard lock(mu_);
    // The key's index in byte order (BINARY collation) from the prefix on, until a key no
    // longer starts with it (no LIKE: a prefix may hold '%' and '_').
    Stmt q(db_, "SELECT key FROM blobs WHERE key >= ? ORDER BY key");
    q.bind(1, prefix);
    std::vector<std::string> out;
    while (q.step()) {
      std::string key = q.text(0);
      if (key.compare(0, prefix.size(), prefix) != 0) break;
      out.push_back(std::move(key));
    }
    return out;
  }

  // --- TenantStore (tenant_store.h) -------------------------------------------------------

  TenantId tenant_create(const std::string& name) override {
    std::lock_guard lock(mu_);
    Transaction tx(db_);
    {
      Stmt q(db_, "SELECT 1 FROM tenants WHERE name=?");
      q.bind(1, name);
      if (q.step()) throw UsageError("tenant \"" + name + "\" exists already");
    }
    Stmt ins(db_, std::string("INSERT INTO tenants (name, created) VALUES (?,") + kNow + ")");
    ins.bind(1, name);
    ins.run();
    const TenantId id = db_.last_rowid();
    tx.commit();
    return id;
  }

  std::optional<TenantId> tenant_find(const std::string& name) override {
    return first_int("SELECT id FROM tenants WHERE name=?", name);
  }

  std::vector<TenantInfo> tenant_list() override {
    std::lock_guard lock(mu_);
    Stmt q(db_,
           "SELECT t.id, t.name, t.created,"
           " (SELECT COUNT(*) FROM api_keys k WHERE k.tenant_id=t.id AND k.revoked=''),"
           " (SELECT COUNT(DISTINCT user) FROM serve_documents d WHERE d.tenant_id=t.id AND d.user<>''),"
           " (SELECT COUNT(*) FROM serve_documents d WHERE d.tenant_id=t.id),"
           " (SELECT COUNT(*) FROM serve_requests r WHERE r.tenant_id=t.id),"
           " (SELECT COUNT(*) FROM serve_feedback f WHERE f.tenant_id=t.id)"
           " FROM tenants t ORDER BY t.name");
    std::vector<TenantInfo> out;
    while (q.step()) {
      TenantInfo t;
      t.id = q.int64(0);
      t.name = q.text(1);
      t.created = q.text(2);
      t.active_keys = static_cast<std::size_t>(q.int64(3));
      t.users = static_cast<std::size_t>(q.int64(4));
      t.documents = static_cast<std::size_t>(q.int64(5));
      t.requests = static_cast<std::size_t>(q.int64(6));
      t.feedback = static_cast<std::size_t>(q.int64(7));
      out.push_back(std::move(t));
    }
    return out;
  }

  void key_add(TenantId tenant, const std::string& prefix, const std::string& hash) override {
    std::lock_guard lock(mu_);
    Transaction tx(db_);
    Stmt ins(db_, std::string("INSERT INTO api_keys (tenant_id, prefix, hash, created) VALUES (?,?,?,") + kNow + ")");
    ins.bind(1, tenant).bind(2, prefix).bind(3, hash);
    ins.run();
    tx.commit();
  }

  std::size_t key_revoke(const std::string& prefix, const std::string& hash) override {
    std::lock_guard lock(mu_);
    Transaction tx(db_);
    Stmt up(db_, hash.empty() ? std::string("UPDATE api_keys SET revoked=") + kNow + " WHERE prefix=? AND revoked=''"
                              : std::string("UPDATE api_keys SET revoked=") + kNow + " WHERE hash=? AND revoked=''");
    up.bind(1, hash.empty() ? prefix : hash);
    up.run();
    const auto n = static_cast<std::size_t>(db_.changes());
    tx.commit();
    return n;
  }

  std::optional<TenantId> key_tenant(const std::string& hash) override {
    return first_int("SELECT tenant_id FROM api_keys WHERE hash=? AND revoked=''", hash);
  }

  std::vector<ApiKeyInfo> key_list() override {
    std::lock_guard lock(mu_);
    Stmt q(db_, "SELECT t.name, k.prefix, k.created, k.revoked FROM api_keys k JOIN tenants t ON t.id=k.tenant_id "
                "ORDER BY t.name, k.id");
    std::vector<ApiKeyInfo> out;
    while (q.step()) out.push_back({q.text(0), q.text(1), q.text(2), q.text(3)});
    return out;
  }

  void documents_put(TenantId tenant, const std::vector<ServeDocument>& docs) override {
    std::lock_guard lock(mu_);
    Transaction tx(db_);
    Stmt ins(db_, std::string("INSERT OR REPLACE INTO serve_documents (tenant_id, user, doc_id, text, date, updated) "
                              "VALUES (?,?,?,?,?,") + kNow + ")");
    const std::int64_t seq = next_seq(tenant);
    Stmt log(db_, "INSERT INTO serve_changes (tenant_id, seq, op, user, doc_id) VALUES (?,?,'put',?,?)");
    Stmt stats(db_, "DELETE FROM blobs WHERE key=?");
    std::set<std::string> users;
    for (const auto& d : docs) {
      ins.bind(1, tenant).bind(2, d.user).bind(3, d.id).bind(4, d.text).bind(5, d.date);
      ins.run();
      log.bind(1, tenant).bind(2, seq).bind(3, d.user).bind(4, d.id);
      log.run();
      if (!d.user.empty() && users.insert(d.user).second) {
        stats.bind(1, profile_stats_blob_key(tenant, d.user));
        stats.run();
      }
    }
    tx.commit();
  }

  bool document_delete(TenantId tenant, const std::string& user, const std::string& id) override {
    std::lock_guard lock(mu_);
    Transaction tx(db_);
    Stmt del(db_, "DELETE FROM serve_documents WHERE tenant_id=? AND user=? AND doc_id=?");
    del.bind(1, tenant).bind(2, user).bind(3, id);
    del.run();
    const bool gone = db_.changes() > 0;
    if (gone) {
      Stmt log(db_, "INSERT INTO serve_changes (tenant_id, seq, op, user, doc_id) VALUES (?,?,'delete',?,?)");
      log.bind(1, tenant).bind(2, next_seq(tenant)).bind(3, user).bind(4, id);
      log.run();
      if (!user.empty()) {
        Stmt stats(db_, "DELETE FROM blobs WHERE key=?");
        stats.bind(1, profile_stats_blob_key(tenant, user));
        stats.run();
      }
    }
    tx.commit();
    return gone;
  }

  std::size_t user_delete(TenantId tenant, const std::string& user) override {
    if (user.empty()) throw UsageError("user_delete: the shared corpus is not a user");
    std::lock_guard lock(mu_);
    Transaction tx(db_);
    std::size_t n = 0;
    for (const char* sql : {"DELETE FROM serve_feedback WHERE tenant_id=?1 AND request_id IN "
                            "(SELECT id FROM serve_requests WHERE tenant_id=?1 AND user=?2)",
                            "DELETE FROM serve_requests WHERE tenant_id=?1 AND user=?2",
                            "DELETE FROM serve_documents WHERE tenant_id=?1 AND user=?2"}) {
      Stmt del(db_, sql);
      del.bind(1, tenant).bind(2, user);
      del.run();
      n += static_cast<std::size_t>(db_.changes());
    }
    Stmt stats(db_, "DELETE FROM blobs WHERE key=?");
    stats.bind(1, profile_stats_blob_key(tenant, user));
    stats.run();
    n += static_cast<std::size_t>(db_.changes());
    Stmt log(db_, "INSERT INTO serve_changes (tenant_id, seq, op, user, doc_id) VALUES (?,?,'delete_user',?,'')");
    log.bind(1, tenant).bind(2, next_seq(tenant)).bind(3, user);
    log.run();
    tx.commit();
    return n;
  }

  std::vector<ServeDocument> documents_of(TenantId tenant) override {
    std::lock_guard lock(mu_);
    Stmt q(db_, "SELECT user, doc_id, text, date FROM serve_documents WHERE tenant_id=? ORDER BY user, rowid");
    q.bind(1, tenant);
    std::vector<ServeDocument> out;
    while (q.step()) out.push_back({q.text(0), q.text(1), q.text(2), q.text(3)});
    return out;
  }

  std::uint64_t document_seq(TenantId tenant) override {
    std::lock_guard lock(mu_);
    Stmt q(db_, "SELECT doc_seq FROM tenants WHERE id=?");
    q.bind(1, tenant);
    return q.step() ? static_cast<std::uint64_t>(q.int64(0)) : 0;
  }

  std::vector<DocumentChange> document_changes(TenantId tenant, std::uint64_t after) override {
    std::lock_guard lock(mu_);
    Stmt q(db_, "SELECT c.seq, c.op, c.user, c.doc_id, d.text, d.date FROM serve_changes c LEFT JOIN serve_documents d "
                "ON d.tenant_id=c.tenant_id AND d.user=c.user AND d.doc_id=c.doc_id "
                "WHERE c.tenant_id=? AND c.seq>? ORDER BY c.seq, c.rowid");
    q.bind(1, tenant).bind(2, static_cast<std::int64_t>(after));
    std::vector<DocumentChange> out;
    while (q.step()) {
      DocumentChange c;
      c.seq = static_cast<std::uint64_t>(q.int64(0));
      const std::string op = q.text(1);
      c.op = op == "put" ? DocumentChange::Op::Put : op == "delete" ? DocumentChange::Op::Delete : DocumentChange::Op::DeleteUser;
      if (c.op == DocumentChange::Op::Put && q.is_null(4)) continue;  // removed since
      c.doc = {q.text(2), q.text(3), q.text(4), q.text(5)};
      out.push_back(std::move(c));
    }
    return out;
  }

  // The floor is a row of blobs ("serve/changes-floor/ID"): no new table, and a reader of
  // an older version meets nothing it does not know.
  std::size_t document_changes_prune(TenantId tenant, std::uint64_t upto) override {
    std::lock_guard lock(mu_);
    Transaction tx(db_);
    Stmt cur(db_, "SELECT doc_seq FROM tenants WHERE id=?");
    cur.bind(1, tenant);
    if (!cur.step()) throw Error("store: no tenant " + std::to_string(tenant));
    upto = std::min<std::uint64_t>(upto, static_cast<std::uint64_t>(cur.int64(0)));
    if (upto <= floor_of(tenant)) return 0;
    Stmt del(db_, "DELETE FROM serve_changes WHERE tenant_id=? AND seq<=?");
    del.bind(1, tenant).bind(2, static_cast<std::int64_t>(upto));
    del.run();
    const auto removed = static_cast<std::size_t>(db_.changes());
    Stmt ins(db_, std::string("INSERT OR REPLACE INTO blobs (key, value, updated) VALUES (?,?,") + kNow + ")");
    ins.bind(1, changes_floor_key(tenant)).bind_blob(2, std::to_string(upto));
    ins.run();
    tx.commit();
    return removed;
  }

  std::uint64_t document_changes_floor(TenantId tenant) override {
    std::lock_guard lock(mu_);
    return floor_of(tenant);
  }

  bool lease_acquire(const std::string& name, const std::string& holder, double ttl_seconds) override {
    std::lock_guard lock(mu_);
    Transaction tx(db_);
    Stmt up(db_, std::string("INSERT INTO leases (name, holder, expires) VALUES (?1, ?2, ") + kEpoch +
                     " + ?3) ON CONFLICT(name) DO UPDATE SET holder=excluded.holder, expires=excluded.expires "
                     "WHERE leases.holder=excluded.holder OR leases.expires < " + kEpoch);
    up.bind(1, name).bind(2, holder).bind(3, ttl_seconds);
    up.run();
    const bool have = db_.changes() > 0;
    tx.commit();
    return have;
  }

  void lease_release(const std::string& name, const std::string& holder) override {
    std::lock_guard lock(mu_);
    Transaction tx(db_);
    Stmt del(db_, "DELETE FROM leases WHERE name=? AND holder=?");
    del.bind(1, name).bind(2, holder);
    del.run();
    tx.commit();
  }

  void request_put(TenantId tenant, const ServeRequest& r) override {
    std::lock_guard lock(mu_);
    Transaction tx(db_);
    Stmt ins(db_, std::string("INSERT INTO serve_requests (tenant_id, id, user, query, task, agent, model_version, "
                              "documents, created) VALUES (?,?,?,?,?,?,?,?,") + kNow + ")");
    ins.bind(1, tenant).bind(2, r.id).bind(3, r.user).bind(4, r.query).bind(5, r.task).bind(6, r.agent)
        .bind(7, r.model_version).bind(8, dump(json(r.documents), "the served document ids"));
    ins.run();
    tx.commit();
  }

  std::optional<ServeRequest> request_get(TenantId tenant, const std::string& id) override {
    std::lock_guard lock(mu_);
    Stmt q(db_, "SELECT id, user, query, task, model_version, documents, created, agent FROM serve_requests "
                "WHERE tenant_id=? AND id=?");
    q.bind(1, tenant).bind(2, id);
    if (!q.step()) return std::nullopt;
    ServeRequest r;
    r.id = q.text(0);
    r.user = q.text(1);
    r.query = q.text(2);
    r.task = q.text(3);
    r.model_version = q.text(4);
    r.documents = json::parse(q.text(5)).get<std::vector<std::string>>();
    r.created = q.text(6);
    r.agent = q.text(7);
    return r;
  }

  void feedback_add(TenantId tenant, const std::vector<ServeFeedback>& records) override {
    std::lock_guard lock(mu_);
    Transaction tx(db_);
    Stmt ins(db_, std::string("INSERT INTO serve_feedback (tenant_id, request_id, kind, item, value, output, reference, "
                              "created) VALUES (?,?,?,?,?,?,?,") + kNow + ")");
    for (const auto& f : records) {
      ins.bind(1, tenant).bind(2, f.request_id).bind(3, f.kind).bind(4, f.item).bind(5, f.value).bind(6, f.output)
          .bind(7, f.reference);
      ins.run();  // the foreign key refuses a request of another tenant (and the transaction rolls back)
    }
    tx.commit();
  }

  std::vector<ServeFeedback> feedback_of(TenantId tenant) override {
    std::lock_guard lock(mu_);
    Stmt q(db_, "SELECT request_id, kind, item, value, output, reference FROM serve_feedback WHERE tenant_id=? "
                "ORDER BY seq");
    q.bind(1, tenant);
    std::vector<ServeFeedback> out;
    while (q.step()) out.push_back({q.text(0), q.text(1), q.text(2), q.real(3), q.text(4), q.text(5)});
    return out;
  }

 private:
  // document_changes_floor without the lock (the caller holds it).
  std::uint64_t floor_of(TenantId tenant) {
    Stmt q(db_, "SELECT value FROM blobs WHERE key=?");
    q.bind(1, changes_floor_key(tenant));
    if (!q.step()) return 0;
    return parse_changes_floor(q.blob(0), db_.path().string());
  }

  // The tenant's next change counter, taken inside the caller's write transaction.
  std::int64_t next_seq(TenantId tenant) {
    Stmt up(db_, "UPDATE tenants SET doc_seq = doc_seq + 1 WHERE id=? RETURNING doc_seq");
    up.bind(1, tenant);
    if (!up.step()) throw Error("store " + db_.path().string() + ": no tenant " + std::to_string(tenant));
    const std::int64_t seq = up.int64(0);
    up.run();
    return seq;
  }

  // The first column of the first row of a query with one text parameter; nothing without a row.
  std::optional<std::int64_t> first_int(const char* sql, const std::string& arg) {
    std::lock_guard lock(mu_);
    Stmt q(db_, sql);
    q.bind(1, arg);
    if (!q.step()) return std::nullopt;
    return q.int64(0);
  }

  std::int64_t pragma_int(const char* name) {
    Stmt q(db_, std::string("PRAGMA ") + name);
    q.step();
    return q.int64(0);
  }
  int user_version() { return static_cast<int>(pragma_int("user_version")); }

  // The tables of the file (SQLite's own left out), sorted.
  std::vector<std::string> table_names() {
    Stmt q(db_, "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name");
    std::vector<std::string> out;
    while (q.step()) out.push_back(q.text(0));
    return out;
  }

  [[noreturn]] void not_ours(const std::string& why) {
    throw Error("cannot open store " + db_.path().string() + ": not an attune store (" + why +
                "); attune does not add its tables to another program's database: name a new file for the store");
  }

  // What the file is: refuses another program's database and stores from a newer attune;
  // true when it needs writing (a fresh file gets the schema, an unmarked attune store its mark).
  bool check_file() {
    const std::int64_t app = pragma_int("application_id");
    const int v = user_version();
    if (app != 0 && app != kApplicationId) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "0x%08llx", static_cast<unsigned long long>(static_cast<std::uint32_t>(app)));
      not_ours(std::string("its application_id is ") + buf + ", attune's is 0x4154554e");
    }
    if (app == 0) {
      const auto tables = table_names();
      if (!tables.empty()) {
        // Stores written before the mark existed: attune's tables and a schema version.
        std::vector<std::string> missing;
        for (const char* t : kTables)
          if (!std::binary_search(tables.begin(), tables.end(), std::string(t))) missing.push_back(t);
        if (v == 0 || !missing.empty()) {
          std::string list;
          for (std::size_t i = 0; i < tables.size() && i < 5; ++i) list += (i ? ", " : "") + tables[i];
          if (tables.size() > 5) list += ", ...";
          not_ours("it has the tables " + list + " but not attune's schema" +
                   (missing.empty() ? std::string(" version") : " (no table " + missing.front() + ")"));
        }
      } else if (v != 0) {
        not_ours("an empty database with user_version " + std::to_string(v));
      }
    }
    if (v > kSchemaVersion)
      throw Error("cannot open store " + db_.path().string() + ": schema version " + std::to_string(v) +
                  " is newer than this attune's (" + std::to_string(kSchemaVersion) + ")");
    return app != kApplicationId || v != kSchemaVersion;
  }

  // check_file's reads in one snapshot: another connection creating the schema meanwhile
  // commits its tables, version and mark at once, and a check must not see only some of them.
  bool check_file_snapshot() {
    Transaction tx(db_, /*write=*/false);
    const bool need = check_file();
    tx.commit();
    return need;
  }

  // Creates the schema in a fresh file and marks it as attune's (PRAGMA application_id),
  // under a write lock so two processes opening a new store at once do not both create it;
  // marks a store of an earlier attune that has the schema but no mark. Refuses another
  // program's database and a store from a newer attune (check_file).
  void migrate() {
    if (!check_file_snapshot()) return;
    Transaction tx(db_);
    if (!check_file()) return;  // another process did it meanwhile (the transaction rolls back)
    const int v = user_version();
    if (v == 0) db_.exec(kSchema);
    if (v < 2) db_.exec(kServeSchema);  // a fresh file, or a version-1 store upgraded in place
    if (v < 3) db_.exec(kAgentColumn);   // and a version-2 one
    if (v < 4) db_.exec(kReplicaSchema);
    if (v != kSchemaVersion) db_.exec(("PRAGMA user_version=" + std::to_string(kSchemaVersion)).c_str());
    db_.exec(("PRAGMA application_id=" + std::to_string(kApplicationId)).c_str());
    tx.commit();
  }

  std::mutex mu_;
  Db db_;
};

}  // namespace

std::unique_ptr<Store> open_sqlite(const fs::path& path) { return std::make_unique<SqliteStore>(path); }

}  // namespace attune::store
