#pragma once
// The embedded store, all six roles in one object: datasets (users, documents, examples),
// the LLM call cache, feedback records, runs, named blobs (the corpus index), and the
// server's tenants, keys, documents, requests and feedback (tenant_store.h). SQLite in
// WAL mode; every write method is one transaction, so a killed process leaves either all
// of a call or none. A Store object may be used from several threads (calls are serialized
// inside). Code that needs one role takes that role's interface; a Store& converts to each.
#include <filesystem>
#include <memory>

#include "attune/store/blob_store.h"
#include "attune/store/dataset_store.h"
#include "attune/store/feedback_log.h"
#include "attune/store/llm_cache.h"
#include "attune/store/run_log.h"
#include "attune/store/tenant_store.h"

namespace attune::store {

class Store : public DatasetStore, public LlmCache, public FeedbackLog, public RunLog, public BlobStore, public TenantStore {
 public:
  ~Store() override = default;
};

// Opens (creating if needed) a SQLite store; Error naming the path when it cannot.
std::unique_ptr<Store> open_sqlite(const std::filesystem::path& path);

// Opens a PostgreSQL store (libpq): `url` is a connection URI, postgresql://[user[:password]@]
// host[:port]/dbname[?param=value...] (postgres:// too), the store several `attune serve`
// replicas share. Creates the schema in a database that has no tables; refuses another
// program's database and a schema newer than this attune's. Error (the URL with any password
// left out) when it cannot connect. The store opens up to pool_size connections (attune's
// own query parameter, taken out before libpq reads the URL; 1 to 64, default 4) as
// concurrent calls need them; each call uses one alone and is one transaction. UsageError
// for a bad pool_size.
std::unique_ptr<Store> open_postgresql(const std::string& url);

// True for a spec open_store opens with PostgreSQL: one starting postgresql:// or postgres://.
bool is_postgresql_url(const std::string& spec);
// A PostgreSQL URL (is_postgresql_url) or a SQLite file's path.
std::unique_ptr<Store> open_store(const std::string& spec);
// The spec as logs may show it: a PostgreSQL URL without any password; a path as it is.
std::string store_display_name(const std::string& spec);

}  // namespace attune::store
