// attune tenant add|revoke|list: the tenants of `attune serve` and their API keys. A key is
// printed once, when it is made; the store keeps only its SHA-256 and its first characters.
#include <cstdio>
#include <filesystem>

#include "attune/core/error.h"
#include "attune/serve/service.h"
#include "attune/store/store.h"
#include "common.h"

namespace attune::cli {

namespace {

// A tenant name: letters, digits, '.', '_' and '-', 1 to 64 of them (it appears in configs and logs).
void check_tenant_name(const std::string& name) {
  if (name.empty() || name.size() > 64) throw UsageError("tenant name \"" + name + "\": 1 to 64 characters");
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-'))
      throw UsageError("tenant name \"" + name + "\": only letters, digits, '.', '_' and '-'");
}

}  // namespace

void add_tenant(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand("tenant", "the tenants of `attune serve` and their API keys: add, revoke, list");
  cmd->require_subcommand(1);
  auto store = std::make_shared<RunOptions>();
  // add creates the store; revoke and list refuse one that does not exist (a mistyped path
  // would otherwise list nothing, as if there were no tenants).
  const auto open = [store](bool create) {
    if (!create && !store::is_postgresql_url(store->store_file()) && !std::filesystem::exists(store->store_file()))
      throw UsageError("--store " + store->store + ": no such store (attune tenant add creates one)");
    return store::open_store(store->store_file());
  };

  auto* add = cmd->add_subcommand("add", "create a tenant (or, with --key-only, a new key of an existing one) and print "
                                         "its API key, once");
  auto name = std::make_shared<std::string>();
  auto key_only = std::make_shared<bool>(false);
  add->add_option("NAME", *name, "the tenant's name (letters, digits, '.', '_', '-')")->required();
  add->add_option("--store", store->store, "the store `attune serve` runs on (a SQLite file or a postgresql:// URL)")->capture_default_str();
  add->add_flag("--key-only", *key_only, "add a key to an existing tenant (e.g. before revoking the old one)");
  add->callback([=, &rc] {
    check_tenant_name(*name);
    auto st = open(true);
    store::TenantId id = 0;
    if (*key_only) {
      const auto found = st->tenant_find(*name);
      if (!found) throw UsageError("no tenant \"" + *name + "\" in " + store::store_display_name(store->store) + " (attune tenant list)");
      id = *found;
    } else {
      id = st->tenant_create(*name);
    }
    const std::string key = serve::new_api_key();
    st->key_add(id, serve::key_prefix(key), serve::key_hash(key));
    std::printf("%s\n", key.c_str());
    std::fprintf(stderr, "tenant %s: API key %s... (shown once; the store keeps only its hash)\n", name->c_str(),
                 serve::key_prefix(key).c_str());
    rc = 0;
  });

  auto* revoke = cmd->add_subcommand("revoke", "revoke an API key, named by the key or by its prefix (attune tenant list)");
  auto which = std::make_shared<std::string>();
  revoke->add_option("KEY", *which, "the key, or its first 12 characters as `tenant list` shows them")->required();
  revoke->add_option("--store", store->store, "the store `attune serve` runs on (a SQLite file or a postgresql:// URL)")->capture_default_str();
  revoke->callback([=, &rc] {
    auto st = open(false);
    const bool whole = which->size() > 12;
    const std::size_t n = whole ? st->key_revoke("", serve::key_hash(*which)) : st->key_revoke(*which, "");
    if (n == 0) throw UsageError("no active key " + *which + (whole ? std::string() : "...") + " in " + store::store_display_name(store->store));
    std::printf("revoked %zu key%s\n", n, n == 1 ? "" : "s");
    rc = 0;
  });

  auto* list = cmd->add_subcommand("list", "list tenants, their keys (by prefix) and what they hold");
  list->add_option("--store", store->store, "the store `attune serve` runs on (a SQLite file or a postgresql:// URL)")->capture_default_str();
  list->callback([=, &rc] {
    auto st = open(false);
    const auto keys = st->key_list();
    for (const auto& t : st->tenant_list()) {
      std::printf("%s: %zu active key%s, %zu users, %zu documents, %zu requests, %zu feedback records (since %s)\n",
                  t.name.c_str(), t.active_keys, t.active_keys == 1 ? "" : "s", t.users, t.documents, t.requests,
                  t.feedback, t.created.c_str());
      for (const auto& k : keys)
        if (k.tenant == t.name)
          std::printf("  %s... created %s%s\n", k.prefix.c_str(), k.created.c_str(),
                      k.revoked.empty() ? "" : (", revoked " + k.revoked).c_str());
    }
    rc = 0;
  });
}

}  // namespace attune::cli
