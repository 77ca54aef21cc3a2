// The PostgreSQL implementation of attune::store::Store (store.h): the store several
// `attune serve` replicas share. Same semantics as sqlite_store.cpp, the reference. One
// connection, guarded by a mutex; every write method is one transaction (a killed process
// leaves all of a call or none of it); reads that need one snapshot run in a REPEATABLE
// READ transaction. Unlike SQLite, writers of different rows run at the same time here, so
// statements that could race another replica are written to settle it in the database
// (ON CONFLICT, row locks) rather than by reading first.
#include <libpq-fe.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstring>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <set>
#include <regex>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "attune/core/error.h"
#include "attune/store/store.h"

namespace attune::store {

using nlohmann::json;

namespace {

// Bump when the schema changes, and add a migration from the previous version in
// open_schema(). PostgreSQL stores start at version 4, the SQLite store's version with the
// same tables (sqlite_store.cpp: kSchemaVersion).
constexpr int kSchemaVersion = 4;
// attune_meta's application of an attune store.
constexpr const char* kApplication = "attune";
// The pg_advisory_xact_lock key under which a fresh database gets its schema: "ATUN".
constexpr std::int64_t kSchemaLock = 0x4154554e;
// The one under which feedback_put writes ("ATUF").
constexpr std::int64_t kFeedbackLock = 0x41545546;

// The tables of sqlite_store.cpp (kSchema, kServeSchema, kAgentColumn, kReplicaSchema) at
// schema version 4, in PostgreSQL's types, plus attune_meta (what SQLite keeps in PRAGMA
// application_id and user_version). "user" is a reserved word here, so it is quoted
// everywhere. Where SQLite orders by rowid, a BIGSERIAL column does.
constexpr const char* kSchema = R"sql(
CREATE TABLE attune_meta (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
CREATE TABLE datasets (
  id           BIGSERIAL PRIMARY KEY,
  task         TEXT    NOT NULL,
  split        TEXT    NOT NULL,
  content_hash TEXT    NOT NULL,
  has_outputs  BOOLEAN NOT NULL,
  sources      TEXT    NOT NULL,              -- JSON array of the files read
  users        BIGINT  NOT NULL,
  documents    BIGINT  NOT NULL,
  examples     BIGINT  NOT NULL,
  imported     TEXT    NOT NULL,
  UNIQUE (task, split, content_hash)
);
CREATE TABLE users (
  id         BIGSERIAL PRIMARY KEY,
  dataset_id BIGINT NOT NULL REFERENCES datasets(id) ON DELETE CASCADE,
  name       TEXT   NOT NULL,
  UNIQUE (dataset_id, name)
);
CREATE TABLE examples (
  id         BIGSERIAL PRIMARY KEY,
  dataset_id BIGINT NOT NULL REFERENCES datasets(id) ON DELETE CASCADE,
  position   BIGINT NOT NULL,                 -- order in the source file
  ext_id     TEXT   NOT NULL,                 -- the example id of the source
  user_id    BIGINT NOT NULL REFERENCES users(id),
  input      TEXT   NOT NULL,
  output     TEXT   NOT NULL,
  gold_docs  TEXT   NOT NULL,                 -- JSON array of document ids
  agent      TEXT   NOT NULL,
  UNIQUE (dataset_id, ext_id),
  UNIQUE (dataset_id, position)
);
CREATE TABLE documents (
  id         BIGSERIAL PRIMARY KEY,
  example_id BIGINT NOT NULL REFERENCES examples(id) ON DELETE CASCADE,
  position   BIGINT NOT NULL,                 -- order in the profile
  doc_id     TEXT   NOT NULL,
  owner      TEXT   NOT NULL,
  text       TEXT   NOT NULL,
  fields     TEXT   NOT NULL,                 -- JSON object {name: value}
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
  id      BIGSERIAL PRIMARY KEY,              -- first-put order (an upsert keeps it)
  dataset TEXT NOT NULL,
  example TEXT NOT NULL,
  kind    TEXT NOT NULL,
  item    TEXT NOT NULL,
  model   TEXT NOT NULL,
  output  TEXT NOT NULL,
  value   DOUBLE PRECISION NOT NULL,
  updated TEXT NOT NULL,
  UNIQUE (dataset, example, kind, item, model)
);
CREATE INDEX feedback_by_kind ON feedback (dataset, kind, model);
CREATE TABLE runs (
  id       BIGSERIAL PRIMARY KEY,
  verb     TEXT   NOT NULL,
  args     TEXT   NOT NULL,                   -- JSON
  seed     BIGINT NOT NULL,                   -- uint64 stored as its int64 bit pattern
  status   TEXT   NOT NULL,                   -- "running" until run_end
  summary  TEXT   NOT NULL,                   -- JSON
  started  TEXT   NOT NULL,
  finished TEXT   NOT NULL                    -- "" while running
);
CREATE TABLE blobs (
  key     TEXT  PRIMARY KEY,
  value   BYTEA NOT NULL,
  updated TEXT  NOT NULL
);
CREATE TABLE tenants (
  id      BIGSERIAL PRIMARY KEY,
  name    TEXT   NOT NULL UNIQUE,
  created TEXT   NOT NULL,
  doc_seq BIGINT NOT NULL DEFAULT 0           -- the document change counter (DocumentChange::seq)
);
CREATE TABLE api_keys (
  id        BIGSERIAL PRIMARY KEY,
  tenant_id BIGINT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
  prefix    TEXT NOT NULL,
  hash      TEXT NOT NULL UNIQUE,             -- SHA-256 of the key, hex; the key itself is never stored
  created   TEXT NOT NULL,
  revoked   TEXT NOT NULL DEFAULT ''
);
CREATE TABLE serve_documents (
  tenant_id BIGINT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
  "user"    TEXT   NOT NULL,                  -- '' = the tenant's shared corpus
  doc_id    TEXT   NOT NULL,
  text      TEXT   NOT NULL,
  date      TEXT   NOT NULL,
  updated   TEXT   NOT NULL,
  ord       BIGSERIAL,                        -- SQLite's rowid: a replaced document moves to the end
  PRIMARY KEY (tenant_id, "user", doc_id)
);
CREATE TABLE serve_requests (
  tenant_id     BIGINT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
  id            TEXT NOT NULL,
  "user"        TEXT NOT NULL,
  query         TEXT NOT NULL,
  task          TEXT NOT NULL,
  model_version TEXT NOT NULL,
  documents     TEXT NOT NULL,                -- JSON array of the served ids
  created       TEXT NOT NULL,
  agent         TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (tenant_id, id)
);
CREATE INDEX serve_requests_by_user ON serve_requests (tenant_id, "user");
CREATE TABLE serve_feedback (
  seq        BIGSERIAL PRIMARY KEY,
  tenant_id  BIGINT NOT NULL,
  request_id TEXT NOT NULL,
  kind       TEXT NOT NULL,
  item       TEXT NOT NULL,
  value      DOUBLE PRECISION NOT NULL,
  output     TEXT NOT NULL,
  reference  TEXT NOT NULL,
  created    TEXT NOT NULL,
  FOREIGN KEY (tenant_id, request_id) REFERENCES serve_requests(tenant_id, id) ON DELETE CASCADE
);
CREATE INDEX serve_feedback_by_request ON serve_feedback (tenant_id, request_id);
CREATE TABLE serve_changes (
  id        BIGSERIAL PRIMARY KEY,            -- SQLite's rowid: the order within one write
  tenant_id BIGINT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
  seq       BIGINT NOT NULL,                  -- tenants.doc_seq of the write
  op        TEXT NOT NULL,                    -- put, delete, delete_user
  "user"    TEXT NOT NULL,
  doc_id    TEXT NOT NULL                     -- '' for delete_user
);
CREATE INDEX serve_changes_by_seq ON serve_changes (tenant_id, seq);
CREATE TABLE leases (
  name    TEXT PRIMARY KEY,
  holder  TEXT NOT NULL,
  expires DOUBLE PRECISION NOT NULL           -- Unix seconds, by the server's clock
);
)sql";

// SQLite's kNow, "YYYY-MM-DDTHH:MM:SS.sssZ" in UTC, so both stores' outputs look the same.
// statement_timestamp(): like SQLite's 'now', one value for the whole statement.
#define ATTUNE_PG_NOW "to_char(statement_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')"
// The server's clock in Unix seconds, for leases: every replica reads the same clock.
#define ATTUNE_PG_EPOCH "extract(epoch from clock_timestamp())::double precision"

// Sorts texts by their bytes, as SQLite does, whatever the database's collation.
#define ATTUNE_PG_BYTES " COLLATE \"C\""

// --- URLs in messages --------------------------------------------------------------------

std::string percent_decode(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out += static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

// A connection URL split into what may be shown and the passwords it holds.
struct RedactedUrl {
  std::string shown;                   // the URL without any password
  std::vector<std::string> passwords;  // as written and percent-decoded, to scrub from messages
  bool ambiguous = false;              // a password libpq would split differently (see below)
};

// postgresql://user:secret@host/db -> postgresql://user@host/db, and a password=... query
// parameter left out; a keyword/value string ("host=... password=...") loses its password
// pair. Never shows a password, even one written wrongly.
RedactedUrl redact(const std::string& url) {
  RedactedUrl r;
  const std::size_t scheme = url.find("://");
  if (scheme == std::string::npos) {
    static const std::regex kPair(R"(\s*\bpassword\s*=\s*('([^'\\]|\\.)*'|\S*))");
    std::smatch m;
    std::string s = url;
    while (std::regex_search(s, m, kPair)) {
      std::string v = m[1].str();
      if (v.size() >= 2 && v.front() == '\'') v = v.substr(1, v.size() - 2);
      r.passwords.push_back(v);
      s = m.prefix().str() + m.suffix().str();
    }
    r.shown = s;
    return r;
  }
  const std::size_t start = scheme + 3;
  std::size_t query = url.find('?', start);
  std::string head = url.substr(0, query);
  std::string tail = query == std::string::npos ? "" : url.substr(query + 1);
  // The credentials end at the last '@' before the query: a password with an unescaped '@'
  // or '/' still ends up left out (libpq would misread such a URL; see `ambiguous`).
  const std::size_t at = head.rfind('@');
  if (at != std::string::npos && at >= start) {
    const std::size_t colon = head.find(':', start);
    if (colon != std::string::npos && colon < at) {
      const std::string pw = head.substr(colon + 1, at - colon - 1);
      r.passwords.push_back(pw);
      r.passwords.push_back(percent_decode(pw));
      const std::size_t slash = head.find('/', start);
      r.ambiguous = head.find('@', start) != at || (slash != std::string::npos && slash < at);
      head.erase(colon, at - colon);
    }
  }
  std::string kept;
  std::size_t pos = 0;
  while (query != std::string::npos && pos <= tail.size()) {
    std::size_t amp = tail.find('&', pos);
    if (amp == std::string::npos) amp = tail.size();
    const std::string param = tail.substr(pos, amp - pos);
    if (param.rfind("password=", 0) == 0) {
      r.passwords.push_back(param.substr(9));
      r.passwords.push_back(percent_decode(param.substr(9)));
    } else if (!param.empty()) {
      kept += (kept.empty() ? "" : "&") + param;
    }
    pos = amp + 1;
  }
  r.shown = head + (kept.empty() ? "" : "?" + kept);
  return r;
}

// One line, whatever libpq wrote: its messages end in a newline, and some have a second
// line ("Connection refused\n\tIs the server running on that host ...?"), kept as a sentence.
std::string one_line(const std::string& s) {
  std::string out;
  std::size_t pos = 0;
  while (pos <= s.size()) {
    std::size_t nl = s.find('\n', pos);
    if (nl == std::string::npos) nl = s.size();
    std::string line = s.substr(pos, nl - pos);
    for (char& c : line)
      if (c == '\t' || c == '\r') c = ' ';
    const std::size_t a = line.find_first_not_of(' '), b = line.find_last_not_of(' ');
    if (a != std::string::npos) {
      line = line.substr(a, b - a + 1);
      if (!out.empty()) out += std::string(std::strchr(".:;?!", out.back()) ? "" : ".") + " ";
      out += line;
    }
    pos = nl + 1;
  }
  return out;
}

// attune's own parameter of a connection URL, pool_size=N (connections a store may open;
// default 4), taken out before libpq reads the URL (libpq refuses a parameter it does not
// know). A keyword/value string has no query: the default.
struct PoolUrl {
  std::string url;  // for libpq
  std::size_t pool_size = 4;
};
PoolUrl take_pool_size(const std::string& url) {
  PoolUrl out{url, 4};
  const std::size_t q = url.find('?');
  if (url.find("://") == std::string::npos || q == std::string::npos) return out;
  std::string kept;
  std::size_t pos = q + 1;
  while (pos <= url.size()) {
    std::size_t amp = url.find('&', pos);
    if (amp == std::string::npos) amp = url.size();
    const std::string param = url.substr(pos, amp - pos);
    if (param.rfind("pool_size=", 0) == 0) {
      const std::string v = param.substr(10);
      std::size_t n = 0;
      const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
      if (ec != std::errc() || end != v.data() + v.size() || n < 1 || n > 64)
        throw UsageError("cannot open store " + redact(url).shown + ": pool_size must be a whole number from 1 to 64, not \"" +
                         v + "\"");
      out.pool_size = n;
    } else if (!param.empty()) {
      kept += (kept.empty() ? "" : "&") + param;
    }
    pos = amp + 1;
  }
  out.url = url.substr(0, q) + (kept.empty() ? "" : "?" + kept);
  return out;
}

// Where a tenant's change-log floor is kept (document_changes_prune; the same key as SQLite's).
std::string changes_floor_key(std::int64_t tenant) { return "serve/changes-floor/" + std::to_string(tenant); }

// --- Parameters and results --------------------------------------------------------------

// One statement parameter, in text format except for bytes (binary: a BYTEA value as is).
struct Param {
  std::string value;
  bool null = false;
  bool binary = false;

  Param(const std::string& s) : value(s) {}
  Param(std::string_view s) : value(s) {}
  Param(const char* s) : value(s) {}
  Param(std::int64_t v) : value(std::to_string(v)) {}
  Param(int v) : value(std::to_string(v)) {}
  Param(double v) {
    // The shortest text that reads back as the same double.
    if (std::isnan(v)) value = "NaN";
    else if (std::isinf(v)) value = v > 0 ? "Infinity" : "-Infinity";
    else {
      char buf[32];
      value.assign(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
    }
  }
  static Param bytes(std::string_view s) {
    Param p(s);
    p.binary = true;
    return p;
  }
  static Param none() {
    Param p("");
    p.null = true;
    return p;
  }
};

// A statement's result; cleared on destruction.
class Result {
 public:
  explicit Result(PGresult* r) : r_(r) {}
  ~Result() { PQclear(r_); }
  Result(Result&& o) noexcept : r_(o.r_) { o.r_ = nullptr; }
  Result(const Result&) = delete;
  Result& operator=(const Result&) = delete;

  int rows() const { return PQntuples(r_); }
  bool is_null(int row, int col) const { return PQgetisnull(r_, row, col) != 0; }
  std::string text(int row, int col) const {
    return std::string(PQgetvalue(r_, row, col), static_cast<std::size_t>(PQgetlength(r_, row, col)));
  }
  std::int64_t int64(int row, int col) const {
    const char* p = PQgetvalue(r_, row, col);
    std::int64_t v = 0;
    std::from_chars(p, p + PQgetlength(r_, row, col), v);
    return v;
  }
  double real(int row, int col) const {
    const std::string s = text(row, col);
    if (s == "NaN") return std::nan("");
    if (s == "Infinity") return HUGE_VAL;
    if (s == "-Infinity") return -HUGE_VAL;
    double v = 0;
    std::from_chars(s.data(), s.data() + s.size(), v);  // not strtod: no locale's decimal comma
    return v;
  }
  bool boolean(int row, int col) const { return PQgetvalue(r_, row, col)[0] == 't'; }
  // Rows an INSERT, UPDATE or DELETE wrote.
  std::size_t affected() const { return static_cast<std::size_t>(std::strtoull(PQcmdTuples(r_), nullptr, 10)); }
  std::string status() const { return PQcmdStatus(r_); }
  PGresult* get() const { return r_; }

 private:
  PGresult* r_;
};

// A failed statement: Error with the server's SQLSTATE kept, for the retry of deadlocks.
class PgError : public Error {
 public:
  PgError(const std::string& what, std::string sqlstate) : Error(what), sqlstate_(std::move(sqlstate)) {}
  const std::string& sqlstate() const { return sqlstate_; }

 private:
  std::string sqlstate_;
};

// The connection and its error reporting.
class Conn {
 public:
  explicit Conn(const std::string& url) : url_(url), redacted_(redact(url)) {
    prefix_ = "cannot open store " + redacted_.shown;
  }
  ~Conn() {
    if (pg_) PQfinish(pg_);
  }
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;

  void open() {
    if (redacted_.ambiguous)
      throw Error(prefix_ + ": its password has an '@' or '/' that is not written %40 or %2F");
    // The URL is expanded as the connection's parameters; the ones after it override its own:
    // attune sends UTF-8.
    const char* keys[] = {"dbname", "client_encoding", "fallback_application_name", nullptr};
    const char* values[] = {url_.c_str(), "UTF8", "attune", nullptr};
    pg_ = PQconnectdbParams(keys, values, /*expand_dbname=*/1);
    if (!pg_) throw Error(prefix_ + ": out of memory");
    if (PQstatus(pg_) != CONNECTION_OK) throw Error(prefix_ + ": " + scrub(PQerrorMessage(pg_)));
    setup();
  }
  // Messages say "store URL: ..." once the store is open.
  void opened() { prefix_ = "store " + redacted_.shown; }
  const std::string& shown() const { return redacted_.shown; }
  const std::string& prefix() const { return prefix_; }

  // Before each call: a connection found broken (the server restarted, the network dropped)
  // is made again, once; a transaction an earlier call left open is ended.
  void ready() {
    if (PQstatus(pg_) != CONNECTION_OK) {
      PQreset(pg_);
      if (PQstatus(pg_) != CONNECTION_OK)
        throw Error(prefix_ + ": the connection was lost and cannot be made again: " + scrub(PQerrorMessage(pg_)));
      setup();
    }
    if (PQtransactionStatus(pg_) != PQTRANS_IDLE) rollback_quietly();
  }

  // Runs one statement with parameters ($1, $2, ...); binary_result: every column in binary
  // format (BYTEA as its bytes). Throws PgError with the server's message.
  Result exec(const std::string& sql, const std::vector<Param>& params = {}, bool binary_result = false) {
    std::vector<const char*> values(params.size());
    std::vector<int> lengths(params.size()), formats(params.size());
    for (std::size_t i = 0; i < params.size(); ++i) {
      const Param& p = params[i];
      if (!p.binary && p.value.find('\0') != std::string::npos)
        throw Error(prefix_ + ": a text has a NUL byte, which PostgreSQL cannot store");
      values[i] = p.null ? nullptr : p.value.c_str();
      lengths[i] = static_cast<int>(p.value.size());
      formats[i] = p.binary ? 1 : 0;
    }
    Result r(PQexecParams(pg_, sql.c_str(), static_cast<int>(params.size()), nullptr, values.data(), lengths.data(),
                          formats.data(), binary_result ? 1 : 0));
    check(r);
    return r;
  }
  // Several statements without parameters (the schema).
  void exec_script(const char* sql) {
    Result r(PQexec(pg_, sql));
    check(r);
  }
  void rollback_quietly() { PQclear(PQexec(pg_, "ROLLBACK")); }

 private:
  // Settings of the session, again after a reset: doubles as text lose nothing (the
  // default before PostgreSQL 12 printed 15 digits); notices (e.g. "there is no transaction
  // in progress") are not printed to stderr.
  void setup() {
    PQsetNoticeProcessor(pg_, [](void*, const char*) {}, nullptr);
    exec("SET extra_float_digits = 3");
  }

  void check(const Result& r) {
    PGresult* raw = r.get();
    const ExecStatusType st = raw ? PQresultStatus(raw) : PGRES_FATAL_ERROR;
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) return;
    std::string msg, state;
    if (raw && PQresultErrorField(raw, PG_DIAG_MESSAGE_PRIMARY)) {
      msg = PQresultErrorField(raw, PG_DIAG_MESSAGE_PRIMARY);
      if (const char* d = PQresultErrorField(raw, PG_DIAG_MESSAGE_DETAIL)) msg += std::string(" (") + d + ")";
      if (const char* s = PQresultErrorField(raw, PG_DIAG_SQLSTATE)) state = s;
    } else {
      msg = PQerrorMessage(pg_);  // no answer from the server: the connection's own message
    }
    throw PgError(prefix_ + ": " + scrub(msg), state);
  }

  // A message without any password of the URL in it, on one line. libpq quotes a URL it
  // cannot parse whole: that becomes the URL as shown.
  std::string scrub(std::string msg) const {
    for (std::size_t p; !url_.empty() && (p = msg.find(url_)) != std::string::npos;)
      msg.replace(p, url_.size(), redacted_.shown);
    for (const auto& pw : redacted_.passwords) {
      if (pw.size() < 4) continue;  // a shorter one would blank out parts of words
      for (std::size_t p; (p = msg.find(pw)) != std::string::npos;) msg.replace(p, pw.size(), "***");
    }
    return one_line(msg);
  }

  std::string url_;
  RedactedUrl redacted_;
  std::string prefix_;
  PGconn* pg_ = nullptr;
};

// The store's connections: opened as concurrent calls need them, up to pool_size, each
// used by one call at a time. A call that finds them all busy waits for one. Calls on
// different connections run at once in the server; each is still its own transaction.
class Pool {
 public:
  Pool(const std::string& url, std::size_t size) : url_(url), size_(size) {
    auto first = std::make_unique<Conn>(url_);
    first->open();
    shown_ = first->shown();
    idle_.push_back(first.get());
    all_.push_back(std::move(first));
  }
  // The URL as messages show it (no password).
  const std::string& shown() const { return shown_; }
  // Messages of every connection, made now or later, say "store URL: ..." from now on.
  void opened() {
    std::lock_guard lock(mu_);
    opened_ = true;
    for (auto& c : all_) c->opened();
  }
  Conn* acquire() {
    std::unique_lock lock(mu_);
    while (idle_.empty() && all_.size() >= size_) cv_.wait(lock);
    if (!idle_.empty()) {
      Conn* c = idle_.back();
      idle_.pop_back();
      return c;
    }
    auto c = std::make_unique<Conn>(url_);
    c->open();  // under the lock: rare (at most pool_size times), and a failure leaves the pool as it was
    if (opened_) c->opened();
    all_.push_back(std::move(c));
    return all_.back().get();
  }
  void release(Conn* c) {
    {
      std::lock_guard lock(mu_);
      idle_.push_back(c);
    }
    cv_.notify_one();
  }
 private:
  std::string url_, shown_;
  std::size_t size_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<Conn>> all_;
  std::vector<Conn*> idle_;
  bool opened_ = false;
};

// The connection the calling thread's current call holds (Session), per thread: a store
// method reaches it through db().
thread_local Conn* tl_conn = nullptr;

// One call's hold on a connection of the pool, made ready; given back at the end of the
// call. Sessions nest across stores (the previous connection is restored), never within one.
class Session {
 public:
  explicit Session(Pool& pool) : pool_(pool), conn_(pool.acquire()), prev_(tl_conn) {
    tl_conn = conn_;
    try {
      conn_->ready();
    } catch (...) {
      tl_conn = prev_;
      pool_.release(conn_);
      throw;
    }
  }
  ~Session() {
    tl_conn = prev_;
    pool_.release(conn_);
  }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

 private:
  Pool& pool_;
  Conn* conn_;
  Conn* prev_;
};

// BEGIN ... COMMIT; rolls back when left without commit() (an exception).
class Transaction {
 public:
  enum class Kind { Write, Snapshot };
  explicit Transaction(Conn& db, Kind kind = Kind::Write) : db_(db) {
    db_.exec(kind == Kind::Write ? "BEGIN" : "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
  }
  ~Transaction() {
    if (!done_) db_.rollback_quietly();
  }
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  void commit() {
    // COMMIT of a transaction a failed statement aborted answers ROLLBACK, not an error.
    const Result r = db_.exec("COMMIT");
    done_ = true;
    if (r.status() != "COMMIT") throw Error(db_.prefix() + ": the transaction was rolled back");
  }

 private:
  Conn& db_;
  bool done_ = false;
};

std::string dump(const json& j, const char* what) {
  try {
    return j.dump(-1, ' ', false, json::error_handler_t::strict);
  } catch (const json::exception&) {
    throw Error(std::string("cannot store ") + what + ": invalid UTF-8 in a string");
  }
}

// A PostgreSQL array literal of texts, for "= ANY($1::text[])".
std::string text_array(const std::vector<std::string>& items) {
  std::string out = "{";
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i) out += ',';
    out += '"';
    for (char c : items[i]) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    out += '"';
  }
  return out + "}";
}

// "$a,$b,...": the placeholders of one row of a multi-row VALUES.
std::string placeholders(int first, int count) {
  std::string out;
  for (int i = 0; i < count; ++i) out += (i ? ",$" : "$") + std::to_string(first + i);
  return out;
}

class PostgresStore final : public Store {
 public:
  explicit PostgresStore(const PoolUrl& url) : pool_(url.url, url.pool_size) {
    {
      Session s(pool_);
      open_schema();
    }
    pool_.opened();
  }

  ImportResult import_dataset(const data::Dataset& ds) override {
    auto lock = session();
    ImportResult res;
    write([&] {
      res = ImportResult{};
      auto find = [&] {
        return db().exec("SELECT id, users, documents, examples FROM datasets WHERE task=$1 AND split=$2 AND content_hash=$3",
                        {ds.task, ds.split, ds.content_hash});
      };
      auto present = [&](const Result& r) {
        res.dataset_id = r.int64(0, 0);
        res.already_present = true;
        res.users = static_cast<std::size_t>(r.int64(0, 1));
        res.documents = static_cast<std::size_t>(r.int64(0, 2));
        res.examples = static_cast<std::size_t>(r.int64(0, 3));
        return false;  // the transaction rolls back: nothing written
      };
      if (const Result r = find(); r.rows() > 0) return present(r);
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
      // ON CONFLICT: another replica importing the same dataset at the same time wins, and
      // this call answers already_present as if it had come second.
      const Result ins = db().exec(
          "INSERT INTO datasets (task, split, content_hash, has_outputs, sources, users, documents, examples, imported) "
          "VALUES ($1,$2,$3,$4,$5,$6,$7,$8," ATTUNE_PG_NOW ") ON CONFLICT (task, split, content_hash) DO NOTHING "
          "RETURNING id",
          {ds.task, ds.split, ds.content_hash, ds.has_outputs ? "true" : "false", dump(sources, "the dataset's sources"),
           static_cast<std::int64_t>(res.users), static_cast<std::int64_t>(res.documents),
           static_cast<std::int64_t>(res.examples)});
      if (ins.rows() == 0) {
        if (const Result r = find(); r.rows() > 0) return present(r);
        throw Error(db().prefix() + ": cannot import " + ds.task + "/" + ds.split + ": the dataset row was not written");
      }
      res.dataset_id = ins.int64(0, 0);

      // Users many at a time (ids mapped back by name: RETURNING's order is not promised).
      constexpr std::size_t kRows = 1000;
      for (std::size_t b = 0; b < user_order.size(); b += kRows) {
        std::string sql = "INSERT INTO users (dataset_id, name) VALUES ";
        std::vector<Param> params{res.dataset_id};
        for (std::size_t i = b; i < std::min(user_order.size(), b + kRows); ++i) {
          sql += (i > b ? ",($1,$" : "($1,$") + std::to_string(params.size() + 1) + ")";
          params.emplace_back(*user_order[i]);
        }
        const Result r = db().exec(sql + " RETURNING id, name", params);
        for (int i = 0; i < r.rows(); ++i) user_ids[r.text(i, 1)] = r.int64(i, 0);
      }

      // One statement per example (its id names its documents), then its documents in one;
      // an error names the example.
      for (std::size_t i = 0; i < ds.examples.size(); ++i) {
        const auto& ex = ds.examples[i];
        try {
          json gold = json::array();
          for (const auto& g : ex.gold_docs) gold.push_back(g);
          const Result e = db().exec(
              "INSERT INTO examples (dataset_id, position, ext_id, user_id, input, output, gold_docs, agent) "
              "VALUES ($1,$2,$3,$4,$5,$6,$7,$8) RETURNING id",
              {res.dataset_id, static_cast<std::int64_t>(i), ex.id, user_ids.at(ex.user), ex.input, ex.output,
               dump(gold, "gold_docs"), ex.agent});
          const std::int64_t ex_row = e.int64(0, 0);
          for (std::size_t b = 0; b < ex.profile.size(); b += kRows) {
            std::string sql = "INSERT INTO documents (example_id, position, doc_id, owner, text, fields, date) VALUES ";
            std::vector<Param> params{ex_row};
            for (std::size_t j = b; j < std::min(ex.profile.size(), b + kRows); ++j) {
              const auto& d = ex.profile[j];
              json fields = json::object();
              for (const auto& [k, v] : d.fields) fields[k] = v;
              sql += (j > b ? ",($1," : "($1,") + placeholders(static_cast<int>(params.size()) + 1, 6) + ")";
              params.emplace_back(static_cast<std::int64_t>(j));
              params.emplace_back(d.id);
              params.emplace_back(d.owner);
              params.emplace_back(d.text);
              params.emplace_back(dump(fields, "document fields"));
              params.push_back(d.date ? Param(*d.date) : Param::none());
            }
            db().exec(sql, params);
          }
        } catch (const Error& e) {
          throw Error("cannot import " + ds.task + "/" + ds.split + ", example " + std::to_string(i) + " (id \"" +
                      ex.id + "\"), nothing was imported: " + e.what());
        }
      }
      return true;
    });
    return res;
  }

  std::vector<DatasetInfo> datasets() override {
    auto lock = session();
    const Result q = db().exec("SELECT id, task, split, content_hash, users, documents, examples FROM datasets ORDER BY id");
    std::vector<DatasetInfo> out;
    for (int i = 0; i < q.rows(); ++i) {
      DatasetInfo d;
      d.id = q.int64(i, 0);
      d.task = q.text(i, 1);
      d.split = q.text(i, 2);
      d.content_hash = q.text(i, 3);
      d.users = static_cast<std::size_t>(q.int64(i, 4));
      d.documents = static_cast<std::size_t>(q.int64(i, 5));
      d.examples = static_cast<std::size_t>(q.int64(i, 6));
      out.push_back(std::move(d));
    }
    return out;
  }

  std::optional<data::Dataset> load_dataset(const std::string& task, const std::string& split) override {
    auto lock = session();
    Transaction tx(db(), Transaction::Kind::Snapshot);  // one consistent snapshot
    const Result q = db().exec(
        "SELECT id, content_hash, has_outputs, sources, examples FROM datasets WHERE task=$1 AND split=$2 "
        "ORDER BY id DESC LIMIT 1",
        {task, split});
    if (q.rows() == 0) return std::nullopt;
    data::Dataset ds;
    const std::int64_t id = q.int64(0, 0);
    ds.task = task;
    ds.split = split;
    ds.content_hash = q.text(0, 1);
    ds.has_outputs = q.boolean(0, 2);
    for (const auto& s : json::parse(q.text(0, 3))) ds.sources.emplace_back(s.get<std::string>());
    ds.examples.reserve(static_cast<std::size_t>(q.int64(0, 4)));

    std::unordered_map<std::int64_t, std::size_t> row_to_index;
    const Result ex = db().exec(
        "SELECT e.id, e.ext_id, u.name, e.input, e.output, e.gold_docs, e.agent FROM examples e "
        "JOIN users u ON u.id = e.user_id WHERE e.dataset_id=$1 ORDER BY e.position",
        {id});
    for (int i = 0; i < ex.rows(); ++i) {
      Example e;
      e.id = ex.text(i, 1);
      e.user = ex.text(i, 2);
      e.input = ex.text(i, 3);
      e.output = ex.text(i, 4);
      for (const auto& g : json::parse(ex.text(i, 5))) e.gold_docs.push_back(g.get<std::string>());
      e.agent = ex.text(i, 6);
      row_to_index.emplace(ex.int64(i, 0), ds.examples.size());
      ds.examples.push_back(std::move(e));
    }
    const Result doc = db().exec(
        "SELECT d.example_id, d.doc_id, d.owner, d.text, d.fields, d.date FROM documents d "
        "JOIN examples e ON e.id = d.example_id WHERE e.dataset_id=$1 ORDER BY d.example_id, d.position",
        {id});
    for (int i = 0; i < doc.rows(); ++i) {
      Document d;
      d.id = doc.text(i, 1);
      d.owner = doc.text(i, 2);
      d.text = doc.text(i, 3);
      json fields = json::parse(doc.text(i, 4));
      for (auto it = fields.begin(); it != fields.end(); ++it) d.fields.emplace(it.key(), it.value().get<std::string>());
      if (!doc.is_null(i, 5)) d.date = doc.text(i, 5);
      ds.examples[row_to_index.at(doc.int64(i, 0))].profile.push_back(std::move(d));
    }
    tx.commit();
    return ds;
  }

  std::vector<std::optional<std::string>> cache_get(const std::vector<CacheKey>& keys) override {
    std::vector<std::optional<std::string>> out(keys.size());
    if (keys.empty()) return out;
    std::vector<std::string> digests;
    digests.reserve(keys.size());
    for (const auto& k : keys) digests.push_back(k.digest());
    auto lock = session();
    // One statement: one snapshot, one round trip.
    const Result q = db().exec("SELECT digest, value FROM llm_cache WHERE digest = ANY($1::text[])", {text_array(digests)});
    std::unordered_map<std::string, std::string> found;
    for (int i = 0; i < q.rows(); ++i) found.emplace(q.text(i, 0), q.text(i, 1));
    for (std::size_t i = 0; i < keys.size(); ++i)
      if (auto it = found.find(digests[i]); it != found.end()) out[i] = it->second;
    return out;
  }

  void cache_put(const std::vector<std::pair<CacheKey, std::string>>& entries) override {
    // Rows are written in digest order, so two replicas putting the same keys never wait on
    // each other in a cycle (a deadlock); stable: the later of two equal keys still wins.
    std::vector<std::pair<std::string, const std::pair<CacheKey, std::string>*>> sorted;
    sorted.reserve(entries.size());
    for (const auto& e : entries) sorted.emplace_back(e.first.digest(), &e);
    std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    auto lock = session();
    write_all([&] {
      for (const auto& [digest, e] : sorted) {
        const auto& [k, v] = *e;
        db().exec("INSERT INTO llm_cache (digest, model, kind, value, created) VALUES ($1,$2,$3,$4," ATTUNE_PG_NOW ") "
                 "ON CONFLICT (digest) DO UPDATE SET model=excluded.model, kind=excluded.kind, value=excluded.value, "
                 "created=excluded.created",
                 {digest, k.model, k.kind, v});
      }
    });
  }

  std::size_t cache_size() override {
    auto lock = session();
    return static_cast<std::size_t>(db().exec("SELECT COUNT(*) FROM llm_cache").int64(0, 0));
  }

  void feedback_put(const std::vector<FeedbackRecord>& records) override {
    auto lock = session();
    write_all([&] {
      // One feedback_put at a time, whoever calls: new records take their ids (the order
      // feedback_get answers) in the order given, so rows cannot be sorted to keep two
      // replicas' batches from deadlocking, as cache_put does; they wait for each other.
      db().exec("SELECT pg_advisory_xact_lock($1)", {kFeedbackLock});
      for (const auto& r : records)
        db().exec("INSERT INTO feedback (dataset, example, kind, item, model, output, value, updated) "
                 "VALUES ($1,$2,$3,$4,$5,$6,$7," ATTUNE_PG_NOW ") "
                 "ON CONFLICT (dataset, example, kind, item, model) DO UPDATE SET "
                 "output=excluded.output, value=excluded.value, updated=excluded.updated",
                 {r.dataset, r.example, r.kind, r.item, r.model, r.output, r.value});
    });
  }

  std::vector<FeedbackRecord> feedback_get(const std::string& dataset, const std::string& kind,
                                           const std::string& model) override {
    auto lock = session();
    const Result q = db().exec(
        "SELECT example, item, output, value FROM feedback WHERE dataset=$1 AND kind=$2 AND model=$3 ORDER BY id",
        {dataset, kind, model});
    std::vector<FeedbackRecord> out;
    for (int i = 0; i < q.rows(); ++i) {
      FeedbackRecord r;
      r.dataset = dataset;
      r.kind = kind;
      r.model = model;
      r.example = q.text(i, 0);
      r.item = q.text(i, 1);
      r.output = q.text(i, 2);
      r.value = q.real(i, 3);
      out.push_back(std::move(r));
    }
    return out;
  }

  std::int64_t run_begin(const std::string& verb, const std::string& args_json, std::uint64_t seed) override {
    auto lock = session();
    std::int64_t id = 0;
    write_all([&] {
      id = db().exec("INSERT INTO runs (verb, args, seed, status, summary, started, finished) "
                    "VALUES ($1,$2,$3,'running',''," ATTUNE_PG_NOW ",'') RETURNING id",
                    {verb, args_json, static_cast<std::int64_t>(seed)})
               .int64(0, 0);
    });
    return id;
  }

  void run_end(std::int64_t id, const std::string& status, const std::string& summary_json) override {
    auto lock = session();
    write_all([&] {
      const Result r = db().exec("UPDATE runs SET status=$1, summary=$2, finished=" ATTUNE_PG_NOW " WHERE id=$3",
                                {status, summary_json, id});
      if (r.affected() == 0) throw Error(db().prefix() + ": no run with id " + std::to_string(id));
    });
  }

  std::vector<RunRecord> runs() override {
    auto lock = session();
    const Result q = db().exec("SELECT id, verb, args, status, summary, seed, started, finished FROM runs ORDER BY id");
    std::vector<RunRecord> out;
    for (int i = 0; i < q.rows(); ++i) {
      RunRecord r;
      r.id = q.int64(i, 0);
      r.verb = q.text(i, 1);
      r.args_json = q.text(i, 2);
      r.status = q.text(i, 3);
      r.summary_json = q.text(i, 4);
      r.seed = static_cast<std::uint64_t>(q.int64(i, 5));
      r.started = q.text(i, 6);
      r.finished = q.text(i, 7);
      out.push_back(std::move(r));
    }
    return out;
  }

  std::optional<std::string> blob_get(const std::string& key) override {
    auto lock = session();
    const Result q = db().exec("SELECT value FROM blobs WHERE key=$1", {key}, /*binary_result=*/true);
    if (q.rows() == 0) return std::nullopt;
    return q.text(0, 0);  // binary format: the bytes as stored
  }

  void blob_put(const std::string& key, const std::string& value) override {
    auto lock = session();
    write_all([&] {
      db().exec("INSERT INTO blobs (key, value, updated) VALUES ($1,$2," ATTUNE_PG_NOW ") "
               "ON CONFLICT (key) DO UPDATE SET value=excluded.value, updated=excluded.updated",
               {key, Param::bytes(value)});
    });
  }

  bool blob_delete(const std::string& key) override {
    auto lock = session();
    bool gone = false;
    write_all([&] { gone = db().exec("DELETE FROM blobs WHERE key=$1", {key}).affected() > 0; });
    return gone;
  }

  std::vector<std::string> blob_keys(const std::string& prefix) override {
    auto lock = session();
    // left(), not LIKE: a prefix may hold '%' and '_'; COLLATE "C" orders by bytes.
    const Result q = db().exec("SELECT key FROM blobs WHERE left(key, length($1)) = $1 ORDER BY key COLLATE \"C\"", {prefix});
    std::vector<std::string> out;
    for (int i = 0; i < q.rows(); ++i) out.push_back(q.text(i, 0));
    return out;
  }

  // --- TenantStore (tenant_store.h) -------------------------------------------------------

  TenantId tenant_create(const std::string& name) override {
    auto lock = session();
    TenantId id = 0;
    write_all([&] {
      // ON CONFLICT rather than a look first: two replicas creating the name at once.
      const Result r = db().exec("INSERT INTO tenants (name, created) VALUES ($1," ATTUNE_PG_NOW ") "
                                "ON CONFLICT (name) DO NOTHING RETURNING id",
                                {name});
      if (r.rows() == 0) throw UsageError("tenant \"" + name + "\" exists already");
      id = r.int64(0, 0);
    });
    return id;
  }

  std::optional<TenantId> tenant_find(const std::string& name) override {
    return first_int("SELECT id FROM tenants WHERE name=$1", name);
  }

  std::vector<TenantInfo> tenant_list() override {
    auto lock = session();
    const Result q = db().exec(
        "SELECT t.id, t.name, t.created,"
        " (SELECT COUNT(*) FROM api_keys k WHERE k.tenant_id=t.id AND k.revoked=''),"
        " (SELECT COUNT(DISTINCT \"user\") FROM serve_documents d WHERE d.tenant_id=t.id AND d.\"user\"<>''),"
        " (SELECT COUNT(*) FROM serve_documents d WHERE d.tenant_id=t.id),"
        " (SELECT COUNT(*) FROM serve_requests r WHERE r.tenant_id=t.id),"
        " (SELECT COUNT(*) FROM serve_feedback f WHERE f.tenant_id=t.id)"
        " FROM tenants t ORDER BY t.name" ATTUNE_PG_BYTES);
    std::vector<TenantInfo> out;
    for (int i = 0; i < q.rows(); ++i) {
      TenantInfo t;
      t.id = q.int64(i, 0);
      t.name = q.text(i, 1);
      t.created = q.text(i, 2);
      t.active_keys = static_cast<std::size_t>(q.int64(i, 3));
      t.users = static_cast<std::size_t>(q.int64(i, 4));
      t.documents = static_cast<std::size_t>(q.int64(i, 5));
      t.requests = static_cast<std::size_t>(q.int64(i, 6));
      t.feedback = static_cast<std::size_t>(q.int64(i, 7));
      out.push_back(std::move(t));
    }
    return out;
  }

  void key_add(TenantId tenant, const std::string& prefix, const std::string& hash) override {
    auto lock = session();
    write_all([&] {
      db().exec("INSERT INTO api_keys (tenant_id, prefix, hash, created) VALUES ($1,$2,$3," ATTUNE_PG_NOW ")",
               {tenant, prefix, hash});
    });
  }

  std::size_t key_revoke(const std::string& prefix, const std::string& hash) override {
    auto lock = session();
    std::size_t n = 0;
    write_all([&] {
      n = db().exec(hash.empty() ? "UPDATE api_keys SET revoked=" ATTUNE_PG_NOW " WHERE prefix=$1 AND revoked=''"
                                : "UPDATE api_keys SET revoked=" ATTUNE_PG_NOW " WHERE hash=$1 AND revoked=''",
                   {hash.empty() ? prefix : hash})
              .affected();
    });
    return n;
  }

  std::optional<TenantId> key_tenant(const std::string& hash) override {
    return first_int("SELECT tenant_id FROM api_keys WHERE hash=$1 AND revoked=''", hash);
  }

  std::vector<ApiKeyInfo> key_list() override {
    auto lock = session();
    const Result q = db().exec("SELECT t.name, k.prefix, k.created, k.revoked FROM api_keys k JOIN tenants t ON t.id=k.tenant_id "
                              "ORDER BY t.name" ATTUNE_PG_BYTES ", k.id");
    std::vector<ApiKeyInfo> out;
    for (int i = 0; i < q.rows(); ++i) out.push_back({q.text(i, 0), q.text(i, 1), q.text(i, 2), q.text(i, 3)});
    return out;
  }

  void documents_put(TenantId tenant, const std::vector<ServeDocument>& docs) override {
    auto lock = session();
    write_all([&] {
      const std::int64_t seq = next_seq(tenant);
      std::set<std::string> users;  // whose statistics blob went already
      for (const auto& d : docs) {
        // ord=excluded.ord: a replaced document takes a new place at the end, as SQLite's
        // INSERT OR REPLACE gives it a new rowid.
        db().exec("INSERT INTO serve_documents (tenant_id, \"user\", doc_id, text, date, updated) "
                 "VALUES ($1,$2,$3,$4,$5," ATTUNE_PG_NOW ") ON CONFLICT (tenant_id, \"user\", doc_id) DO UPDATE SET "
                 "text=excluded.text, date=excluded.date, updated=excluded.updated, ord=excluded.ord",
                 {tenant, d.user, d.id, d.text, d.date});
        db().exec("INSERT INTO serve_changes (tenant_id, seq, op, \"user\", doc_id) VALUES ($1,$2,'put',$3,$4)",
                 {tenant, seq, d.user, d.id});
        if (!d.user.empty() && users.insert(d.user).second)
          db().exec("DELETE FROM blobs WHERE key=$1", {profile_stats_blob_key(tenant, d.user)});
      }
    });
  }

  bool document_delete(TenantId tenant, const std::string& user, const std::string& id) override {
    auto lock = session();
    bool gone = false;
    write_all([&] {
      lock_tenant(tenant);
      gone = db().exec("DELETE FROM serve_documents WHERE tenant_id=$1 AND \"user\"=$2 AND doc_id=$3", {tenant, user, id})
                 .affected() > 0;
      if (gone) {
        db().exec("INSERT INTO serve_changes (tenant_id, seq, op, \"user\", doc_id) VALUES ($1,$2,'delete',$3,$4)",
                 {tenant, next_seq(tenant), user, id});
        if (!user.empty()) db().exec("DELETE FROM blobs WHERE key=$1", {profile_stats_blob_key(tenant, user)});
      }
    });
    return gone;
  }

  std::size_t user_delete(TenantId tenant, const std::string& user) override {
    if (user.empty()) throw UsageError("user_delete: the shared corpus is not a user");
    auto lock = session();
    std::size_t n = 0;
    write_all([&] {
      n = 0;
      lock_tenant(tenant);
      for (const char* sql : {"DELETE FROM serve_feedback WHERE tenant_id=$1 AND request_id IN "
                              "(SELECT id FROM serve_requests WHERE tenant_id=$1 AND \"user\"=$2)",
                              "DELETE FROM serve_requests WHERE tenant_id=$1 AND \"user\"=$2",
                              "DELETE FROM serve_documents WHERE tenant_id=$1 AND \"user\"=$2"})
        n += db().exec(sql, {tenant, user}).affected();
      n += db().exec("DELETE FROM blobs WHERE key=$1", {profile_stats_blob_key(tenant, user)}).affected();
      db().exec("INSERT INTO serve_changes (tenant_id, seq, op, \"user\", doc_id) VALUES ($1,$2,'delete_user',$3,'')",
               {tenant, next_seq(tenant), user});
    });
    return n;
  }

  std::vector<ServeDocument> documents_of(TenantId tenant) override {
    auto lock = session();
    const Result q = db().exec("SELECT \"user\", doc_id, text, date FROM serve_documents WHERE tenant_id=$1 "
                              "ORDER BY \"user\"" ATTUNE_PG_BYTES ", ord",
                              {tenant});
    std::vector<ServeDocument> out;
    for (int i = 0; i < q.rows(); ++i) out.push_back({q.text(i, 0), q.text(i, 1), q.text(i, 2), q.text(i, 3)});
    return out;
  }

  std::uint64_t document_seq(TenantId tenant) override {
    auto lock = session();
    const Result q = db().exec("SELECT doc_seq FROM tenants WHERE id=$1", {tenant});
    return q.rows() > 0 ? static_cast<std::uint64_t>(q.int64(0, 0)) : 0;
  }

  std::vector<DocumentChange> document_changes(TenantId tenant, std::uint64_t after) override {
    auto lock = session();
    const Result q = db().exec(
        "SELECT c.seq, c.op, c.\"user\", c.doc_id, d.text, d.date FROM serve_changes c LEFT JOIN serve_documents d "
        "ON d.tenant_id=c.tenant_id AND d.\"user\"=c.\"user\" AND d.doc_id=c.doc_id "
        "WHERE c.tenant_id=$1 AND c.seq>$2 ORDER BY c.seq, c.id",
        {tenant, static_cast<std::int64_t>(after)});
    std::vector<DocumentChange> out;
    for (int i = 0; i < q.rows(); ++i) {
      DocumentChange c;
      c.seq = static_cast<std::uint64_t>(q.int64(i, 0));
      const std::string op = q.text(i, 1);
      c.op = op == "put" ? DocumentChange::Op::Put : op == "delete" ? DocumentChange::Op::Delete : DocumentChange::Op::DeleteUser;
      if (c.op == DocumentChange::Op::Put && q.is_null(i, 4)) continue;  // removed since
      c.doc = {q.text(i, 2), q.text(i, 3), q.text(i, 4), q.text(i, 5)};
      out.push_back(std::move(c));
    }
    return out;
  }

  // The floor is a row of blobs ("serve/changes-floor/ID"), as in SQLite. Pruners lock the
  // tenant's row first, so two replicas pruning at once take turns.
  std::size_t document_changes_prune(TenantId tenant, std::uint64_t upto) override {
    auto lock = session();
    std::size_t removed = 0;
    write([&] {
      removed = 0;
      const Result cur = db().exec("SELECT doc_seq FROM tenants WHERE id=$1 FOR NO KEY UPDATE", {tenant});
      if (cur.rows() == 0) throw Error(db().prefix() + ": no tenant " + std::to_string(tenant));
      const std::uint64_t to = std::min<std::uint64_t>(upto, static_cast<std::uint64_t>(cur.int64(0, 0)));
      if (to <= floor_of(tenant)) return false;
      removed = db().exec("DELETE FROM serve_changes WHERE tenant_id=$1 AND seq<=$2",
                          {tenant, static_cast<std::int64_t>(to)}).affected();
      db().exec("INSERT INTO blobs (key, value, updated) VALUES ($1,$2," ATTUNE_PG_NOW ") "
                "ON CONFLICT (key) DO UPDATE SET value=excluded.value, updated=excluded.updated",
                {changes_floor_key(tenant), Param::bytes(std::to_string(to))});
      return true;
    });
    return removed;
  }

  std::uint64_t document_changes_floor(TenantId tenant) override {
    auto lock = session();
    return floor_of(tenant);
  }

  bool lease_acquire(const std::string& name, const std::string& holder, double ttl_seconds) override {
    auto lock = session();
    bool have = false;
    write_all([&] {
      have = db().exec("INSERT INTO leases (name, holder, expires) VALUES ($1, $2, " ATTUNE_PG_EPOCH " + $3) "
                      "ON CONFLICT (name) DO UPDATE SET holder=excluded.holder, expires=excluded.expires "
                      "WHERE leases.holder=excluded.holder OR leases.expires < " ATTUNE_PG_EPOCH,
                      {name, holder, ttl_seconds})
                 .affected() > 0;
    });
    return have;
  }

  void lease_release(const std::string& name, const std::string& holder) override {
    auto lock = session();
    write_all([&] { db().exec("DELETE FROM leases WHERE name=$1 AND holder=$2", {name, holder}); });
  }

  void request_put(TenantId tenant, const ServeRequest& r) override {
    const std::string documents = dump(json(r.documents), "the served document ids");
    auto lock = session();
    write_all([&] {
      db().exec("INSERT INTO serve_requests (tenant_id, id, \"user\", query, task, agent, model_version, documents, "
               "created) VALUES ($1,$2,$3,$4,$5,$6,$7,$8," ATTUNE_PG_NOW ")",
               {tenant, r.id, r.user, r.query, r.task, r.agent, r.model_version, documents});
    });
  }

  std::optional<ServeRequest> request_get(TenantId tenant, const std::string& id) override {
    auto lock = session();
    const Result q = db().exec("SELECT id, \"user\", query, task, model_version, documents, created, agent "
                              "FROM serve_requests WHERE tenant_id=$1 AND id=$2",
                              {tenant, id});
    if (q.rows() == 0) return std::nullopt;
    ServeRequest r;
    r.id = q.text(0, 0);
    r.user = q.text(0, 1);
    r.query = q.text(0, 2);
    r.task = q.text(0, 3);
    r.model_version = q.text(0, 4);
    r.documents = json::parse(q.text(0, 5)).get<std::vector<std::string>>();
    r.created = q.text(0, 6);
    r.agent = q.text(0, 7);
    return r;
  }

  void feedback_add(TenantId tenant, const std::vector<ServeFeedback>& records) override {
    auto lock = session();
    write_all([&] {
      for (const auto& f : records)  // the foreign key refuses a request of another tenant (and the transaction rolls back)
        db().exec("INSERT INTO serve_feedback (tenant_id, request_id, kind, item, value, output, reference, created) "
                 "VALUES ($1,$2,$3,$4,$5,$6,$7," ATTUNE_PG_NOW ")",
                 {tenant, f.request_id, f.kind, f.item, f.value, f.output, f.reference});
    });
  }

  std::vector<ServeFeedback> feedback_of(TenantId tenant) override {
    auto lock = session();
    const Result q = db().exec("SELECT request_id, kind, item, value, output, reference FROM serve_feedback "
                              "WHERE tenant_id=$1 ORDER BY seq",
                              {tenant});
    std::vector<ServeFeedback> out;
    for (int i = 0; i < q.rows(); ++i)
      out.push_back({q.text(i, 0), q.text(i, 1), q.text(i, 2), q.real(i, 3), q.text(i, 4), q.text(i, 5)});
    return out;
  }

 private:
  // The lock every call holds, taken with the connection made ready.
  std::unique_ptr<Session> session() { return std::make_unique<Session>(pool_); }
  // The connection of the current call (session()).
  Conn& db() {
    if (!tl_conn) throw Error("internal error: a PostgreSQL store call without its session");
    return *tl_conn;
  }

  // Runs body in one write transaction and commits when it returns true (false: roll back,
  // nothing to write). Two transactions that lock rows in opposite orders (two replicas'
  // batches of the same keys) can deadlock, which SQLite's single writer never does: the
  // server aborts one, and it is run again, up to three times. body must start from nothing.
  template <class Body>
  void write(Body&& body) {
    for (int attempt = 1;; ++attempt) {
      try {
        Transaction tx(db());
        if (body()) tx.commit();
        return;
      } catch (const PgError& e) {
        const bool retry = e.sqlstate() == "40P01" || e.sqlstate() == "40001";  // deadlock, serialization failure
        if (!retry || attempt == 3) throw;
      }
    }
  }
  template <class Body>
  void write_all(Body&& body) {
    write([&] {
      body();
      return true;
    });
  }

  // The tenant's next change counter, taken inside the caller's write transaction. The row
  // lock it takes is held until the commit, so writes of one tenant commit in counter order.
  std::int64_t next_seq(TenantId tenant) {
    const Result r = db().exec("UPDATE tenants SET doc_seq = doc_seq + 1 WHERE id=$1 RETURNING doc_seq", {tenant});
    if (r.rows() == 0) throw Error(db().prefix() + ": no tenant " + std::to_string(tenant));
    return r.int64(0, 0);
  }
  // Takes next_seq's row lock before a write that only then knows whether it changes
  // anything: every writer locks the tenant before its documents, so two never deadlock.
  void lock_tenant(TenantId tenant) { db().exec("SELECT 1 FROM tenants WHERE id=$1 FOR NO KEY UPDATE", {tenant}); }

  // document_changes_floor inside the caller's session.
  std::uint64_t floor_of(TenantId tenant) {
    const Result q = db().exec("SELECT value FROM blobs WHERE key=$1", {changes_floor_key(tenant)}, /*binary_result=*/true);
    if (q.rows() == 0) return 0;
    const std::string text = q.text(0, 0);
    std::uint64_t v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size())
      throw Error(db().prefix() + ": the change-log floor is malformed: \"" + text + "\"");
    return v;
  }

  // The first column of the first row of a query with one text parameter; nothing without a row.
  std::optional<std::int64_t> first_int(const char* sql, const std::string& arg) {
    auto lock = session();
    const Result q = db().exec(sql, {arg});
    if (q.rows() == 0) return std::nullopt;
    return q.int64(0, 0);
  }

  [[noreturn]] void not_ours(const std::string& why) {
    throw Error("cannot open store " + pool_.shown() + ": not an attune store (" + why +
                "); attune does not add its tables to another program's database: name a new database for the store");
  }

  // What the database is: refuses another program's database and stores from a newer
  // attune; true when it has no tables (it gets the schema).
  bool check_database() {
    const Result t = db().exec("SELECT tablename FROM pg_tables WHERE schemaname = current_schema() "
                              "ORDER BY tablename" ATTUNE_PG_BYTES);
    if (t.rows() == 0) return true;
    std::vector<std::string> tables;
    for (int i = 0; i < t.rows(); ++i) tables.push_back(t.text(i, 0));
    if (!std::binary_search(tables.begin(), tables.end(), std::string("attune_meta"))) {
      std::string list;
      for (std::size_t i = 0; i < tables.size() && i < 5; ++i) list += (i ? ", " : "") + tables[i];
      if (tables.size() > 5) list += ", ...";
      not_ours("it has the tables " + list + " but no attune_meta");
    }
    std::unordered_map<std::string, std::string> meta;
    const Result m = db().exec("SELECT key, value FROM attune_meta");
    for (int i = 0; i < m.rows(); ++i) meta[m.text(i, 0)] = m.text(i, 1);
    if (meta["application"] != kApplication)
      not_ours(meta["application"].empty() ? std::string("its attune_meta names no application")
                                           : "its attune_meta names the application \"" + meta["application"] + "\"");
    const std::string& text = meta["schema_version"];
    int v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size())
      not_ours("its attune_meta has the schema_version \"" + text + "\"");
    if (v > kSchemaVersion)
      throw Error("cannot open store " + pool_.shown() + ": schema version " + std::to_string(v) +
                  " is newer than this attune's (" + std::to_string(kSchemaVersion) + ")");
    if (v < kSchemaVersion)
      throw Error("cannot open store " + pool_.shown() + ": schema version " + std::to_string(v) +
                  " is older than any attune store in PostgreSQL (they start at " + std::to_string(kSchemaVersion) + ")");
    return false;
  }

  // Creates the schema in a database without tables, under an advisory lock so two replicas
  // opening a fresh database at once do not both create it (the second finds it done).
  // Refuses another program's database and a store from a newer attune (check_database).
  void open_schema() {
    if (!check_database()) return;
    Transaction tx(db());
    db().exec("SELECT pg_advisory_xact_lock($1)", {kSchemaLock});
    // READ COMMITTED: this statement sees what another replica committed while we waited.
    if (!check_database()) return;  // the transaction rolls back, releasing the lock
    db().exec_script(kSchema);
    db().exec("INSERT INTO attune_meta (key, value) VALUES ('application', $1), ('schema_version', $2)",
             {kApplication, std::to_string(kSchemaVersion)});
    tx.commit();
  }

  Pool pool_;
};

}  // namespace

std::unique_ptr<Store> open_postgresql(const std::string& url) { return std::make_unique<PostgresStore>(take_pool_size(url)); }

std::string store_display_name(const std::string& spec) {
  return is_postgresql_url(spec) ? redact(spec).shown : spec;
}

}  // namespace attune::store
