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

  // Inserts or replaces documents (by tenant, user, id).
  virtual void documents_put(TenantId tenant, const std::vector<ServeDocument>& docs) = 0;
  // Removes one document; false when there was none.
  virtual bool document_delete(TenantId tenant, const std::string& user, const std::string& id) = 0;
  // Removes a user (not "") and everything derived from them: documents, requests and
  // the feedback about those requests. Returns how many rows went, all tables together.
  virtual std::size_t user_delete(TenantId tenant, const std::string& user) = 0;
  // Every document of the tenant (users' and corpus), for loading the server's index.
  virtual std::vector<ServeDocument> documents_of(TenantId tenant) = 0;

  virtual void request_put(TenantId tenant, const ServeRequest& r) = 0;
  // The tenant's request with that id; nothing for another tenant's or an unknown id.
  virtual std::optional<ServeRequest> request_get(TenantId tenant, const std::string& id) = 0;
  // Appends feedback records (each names a request of this tenant; Error otherwise).
  virtual void feedback_add(TenantId tenant, const std::vector<ServeFeedback>& records) = 0;
  // The tenant's feedback records, in the order they came.
  virtual std::vector<ServeFeedback> feedback_of(TenantId tenant) = 0;
};

}  // namespace attune::store
