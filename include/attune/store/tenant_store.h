#pragma once
// The serving role of the store (`attune serve`, `attune tenant`): tenants and their API
// keys (hashed; the store never sees a key), each tenant's users' documents and shared
// corpus, the requests the server answered and the feedback sent about them. Every method
// takes the tenant it acts for, and every statement filters on it: nothing here can read or
// change another tenant's rows. Every write is one transaction (all of a call or none).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace attune::store {

using TenantId = std::int64_t;

// The blob (BlobStore) where the server keeps a user's BM25 statistics
// (retrieval::ProfileBm25). They are derived from the user's documents, so documents_put,
// document_delete and user_delete remove it in their own transaction whenever they touch
// that user's documents; the server writes it again at the user's next query.
inline std::string profile_stats_blob_key(TenantId tenant, const std::string& user) {
  return "serve/bm25/" + std::to_string(tenant) + "/" + user;
}

// The prefix of the blobs where the server caches the embeddings of a tenant's corpus for
// its corpus first stage (dense:DIR; chunks keyed by the model and their passages' content).
// Scoped by tenant, so that one tenant's cache never answers another's, even for the same
// passages. Chunks of passages the corpus no longer holds are not removed yet.
inline std::string corpus_stage_blob_prefix(TenantId tenant) { return "serve/dense/" + std::to_string(tenant) + "/"; }

struct TenantInfo {
  TenantId id = 0;
  std::string name;
  std::string created;
  std::size_t active_keys = 0, users = 0, documents = 0, requests = 0, feedback = 0;
};

struct ApiKeyInfo {
  std::string tenant;
  std::string prefix;   // the key's first characters, shown so a key can be named without it
  std::string created;
  std::string revoked;  // "" while active
};

// A document of a tenant: a user's own (user not empty) or the tenant's shared corpus (user "").
struct ServeDocument {
  std::string user;
  std::string id;
  std::string text;
  std::string date;  // "YYYY-MM-DD" or ""
};

// One answered retrieve call: what was served to whom, by which model version.
struct ServeRequest {
  std::string id;                      // the request_id given to the client
  std::string user;
  std::string query;
  std::string task;                    // "" when the call named none
  std::string agent;                   // the configured agent it was served for; "" = none
  std::string model_version;
  std::vector<std::string> documents;  // the ids served, best first
  std::string created;
};

// One feedback record about a served request. kind: "doc" (item = a served document id,
// value = its utility), "list" (item "", value = a reward for the whole list), "output"
// (item "", value = the task's reward of output against reference).
struct ServeFeedback {
  std::string request_id;
  std::string kind;
  std::string item;
  double value = 0;
  std::string output, reference;
};

// One change to a tenant's documents, as replicas sharing a store replay them
// (Service::sync): every write of documents_put, document_delete and user_delete adds its
// rows under one new value of the tenant's change counter.
struct DocumentChange {
  enum class Op { Put, Delete, DeleteUser };
  std::uint64_t seq = 0;  // the tenant's change counter of the write
  Op op = Op::Put;
  ServeDocument doc;      // user and id (id "" for DeleteUser); for Put, the document's text and date now
};

class TenantStore {
 public:
  virtual ~TenantStore() = default;

  // A new tenant; UsageError when the name is taken.
  virtual TenantId tenant_create(const std::string& name) = 0;
  virtual std::optional<TenantId> tenant_find(const std::string& name) = 0;
  virtual std::vector<TenantInfo> tenant_list() = 0;
  // Stores a key's hash (and its shown prefix) for a tenant.
  virtual void key_add(TenantId tenant, const std::string& prefix, const std::string& hash) = 0;
  // Revokes the active keys whose hash is `hash` or, when `hash` is empty, whose prefix is
  // `prefix`; returns how many were revoked.
  virtual std::size_t key_revoke(const std::string& prefix, const std::string& hash) = 0;
  // The tenant of an active key; nothing for an unknown or revoked one.
  virtual std::optional<TenantId> key_tenant(const std::string& hash) = 0;
  virtual std::vector<ApiKeyInfo> key_list() = 0;

  // Inserts or replaces documents (by tenant, user, id). Each user's profile_stats_blob_key
  // goes in the same transaction (so do document_delete's and user_delete's).
  virtual void documents_put(TenantId tenant, const std::vector<ServeDocument>& docs) = 0;
  // Removes one document; false when there was none.
  virtual bool document_delete(TenantId tenant, const std::string& user, const std::string& id) = 0;
  // Removes a user (not "") and everything derived from them: documents, requests and
  // the feedback about those requests. Returns how many rows went, all tables together.
  virtual std::size_t user_delete(TenantId tenant, const std::string& user) = 0;
  // Every document of the tenant (users' and corpus), for loading the server's index.
  virtual std::vector<ServeDocument> documents_of(TenantId tenant) = 0;
  // The tenant's change counter (0 before its first document write). Writes take it in
  // commit order: a reader that has seen counter n has seen every write numbered below n.
  virtual std::uint64_t document_seq(TenantId tenant) = 0;
  // The changes written after counter `after`, in counter order. A Put whose document was
  // removed since is left out (its removal follows); a Put carries the document as it is now.
  virtual std::vector<DocumentChange> document_changes(TenantId tenant, std::uint64_t after) = 0;
  // Keeps the change log bounded: removes the changes numbered `upto` and below (clamped to
  // the tenant's counter) and raises the tenant's floor to it, in one transaction; returns
  // the rows removed. The floor never goes down (an `upto` at or below it removes nothing).
  virtual std::size_t document_changes_prune(TenantId tenant, std::uint64_t upto) = 0;
  // The highest counter pruned (0: none). A replica that has applied less than the floor has
  // missed changes the log no longer holds, and must load the tenant's documents again.
  virtual std::uint64_t document_changes_floor(TenantId tenant) = 0;

  virtual void request_put(TenantId tenant, const ServeRequest& r) = 0;
  // The tenant's request with that id; nothing for another tenant's or an unknown id.
  virtual std::optional<ServeRequest> request_get(TenantId tenant, const std::string& id) = 0;
  // Appends feedback records (each names a request of this tenant; Error otherwise).
  virtual void feedback_add(TenantId tenant, const std::vector<ServeFeedback>& records) = 0;
  // The tenant's feedback records, in the order they came.
  virtual std::vector<ServeFeedback> feedback_of(TenantId tenant) = 0;

  // Leases: work exactly one of several replicas may do (the online learner). Takes or renews
  // the lease `name` for `holder` until ttl_seconds from now by the store's clock, when it is
  // free, expired or already holder's; true when holder has it now.
  virtual bool lease_acquire(const std::string& name, const std::string& holder, double ttl_seconds) = 0;
  // Ends holder's lease (nothing when another holds it).
  virtual void lease_release(const std::string& name, const std::string& holder) = 0;
};

}  // namespace attune::store
