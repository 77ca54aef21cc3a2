// The serving engine (service.h): per-tenant documents in memory, loaded from the store on
// first use and changed only after the store has committed the change.
#include "attune/serve/service.h"

#include "attune/feedback/user_feedback.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <set>
#include <shared_mutex>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "attune/core/file.h"
#include "attune/core/sha256.h"
#include "attune/core/strings.h"
#include "attune/index/corpus_index.h"
#include "attune/retrieval/first_stage.h"
#include "attune/retrieval/profile_bm25.h"
#include "attune/retrieval/spec.h"
#include "attune/tasks/task.h"

namespace attune::serve {

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// A BlobStore whose keys all start with `prefix` (a tenant's scope in the shared store).
class ScopedBlobs final : public store::BlobStore {
 public:
  ScopedBlobs(store::BlobStore& inner, std::string prefix) : inner_(inner), prefix_(std::move(prefix)) {}
  std::optional<std::string> blob_get(const std::string& key) override { return inner_.blob_get(prefix_ + key); }
  void blob_put(const std::string& key, const std::string& value) override { inner_.blob_put(prefix_ + key, value); }
  bool blob_delete(const std::string& key) override { return inner_.blob_delete(prefix_ + key); }
  std::vector<std::string> blob_keys(const std::string& prefix) override {
    auto keys = inner_.blob_keys(prefix_ + prefix);
    for (auto& k : keys) k.erase(0, prefix_.size());
    return keys;
  }

 private:
  store::BlobStore& inner_;
  std::string prefix_;
};

std::string random_hex(std::size_t bytes) {
  std::ifstream f("/dev/urandom", std::ios::binary);
  std::string raw(bytes, '\0');
  if (!f.read(raw.data(), static_cast<std::streamsize>(bytes)))
    throw Error("cannot read /dev/urandom: no random source for keys and request ids");
  static const char* kHex = "0123456789abcdef";
  std::string out;
  out.reserve(bytes * 2);
  for (unsigned char c : raw) {
    out.push_back(kHex[c >> 4]);
    out.push_back(kHex[c & 15]);
  }
  return out;
}

// Where the last promoted model of a slot is recorded: "serve/model/ID" for the tenant's
// default slot (as before agents existed), "serve/model/ID/AGENT" for an agent's.
std::string model_blob_key(TenantId id, const std::string& agent) {
  return "serve/model/" + std::to_string(id) + (agent.empty() ? "" : "/" + agent);
}

// What a call served with a spec it named in "retriever" records as its model version;
// learning skips such requests (another policy ranked them).
constexpr std::string_view kFixedSuffix = "@request";

// The store's lease that decides which replica learns.
constexpr const char* kLearnerLease = "serve-learner";

// Where a slot's learning progress is kept: the "doc" feedback records its last round read.
std::string learned_blob_key(TenantId id, const std::string& agent) {
  return "serve/learned/" + std::to_string(id) + (agent.empty() ? "" : "/" + agent);
}

std::string canonical(const std::string& spec) { return retrieval::to_string(retrieval::parse_retriever_spec(spec)); }

// A stable hash of a request id: which requests a learning round holds back.
std::uint64_t fnv1a(std::string_view s) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace

void Service::set_personal_similarity(std::shared_ptr<const retrieval::Retriever> similarity) {
  personal_similarity_ = std::move(similarity);
}

void Service::set_curator(std::shared_ptr<llm::LanguageModel> model) {
  std::lock_guard lock(curator_mu_);
  curator_ = std::move(model);
}

std::map<std::string, std::uint64_t> Service::filings() {
  std::lock_guard lock(curator_mu_);
  return filings_;
}

ConversationFeedbackResult Service::conversation_feedback(TenantId tenant, const std::string& user, const std::string& id,
                                                          const std::string& conversation) {
  std::lock_guard lock(curator_mu_);
  if (!curator_)
    throw ApiError(503, "", "user feedback is off on this server: its config names no user_feedback.llm");
  feedback::UserFeedbackOptions o;
  o.evidence_k = config_.user_feedback.evidence_k;
  o.retries = config_.user_feedback.retries;
  // Evidence: the tenant's shared corpus only (personal = false): whether feedback may be
  // shared is judged against what every user of the tenant shares.
  const auto search = [&](const std::string& text, std::size_t k) {
    RetrieveRequest r;
    r.query = text.substr(0, config_.limits.max_query_bytes);
    r.k = k;
    r.personal = false;
    std::vector<feedback::Evidence> ev;
    for (const auto& d : retrieve(tenant, r).documents) ev.push_back({d.id, d.text});
    return ev;
  };
  const auto d = feedback::curate_user_feedback(*curator_, conversation, search, o);
  ConversationFeedbackResult res;
  res.filing = feedback::to_string(d.filing);
  res.summary = d.summary;
  res.evidence = d.evidence;
  res.model_calls = d.model_calls;
  if (d.filing == feedback::Filing::Shared || d.filing == feedback::Filing::Personal) {
    store::ServeDocument doc;
    doc.id = "uf-" + id;
    doc.text = d.summary.substr(0, config_.limits.max_document_bytes);
    put_documents(tenant, d.filing == feedback::Filing::Shared ? "" : user, {doc});
    res.document_id = doc.id;
  }
  ++filings_[res.filing];
  return res;
}

std::string new_api_key() { return "atk_" + random_hex(20); }
std::string key_prefix(std::string_view key) { return std::string(key.substr(0, 12)); }
std::string key_hash(std::string_view key) { return sha256_hex(key); }

// What serves one agent of a tenant ("" = calls that name none): its configured spec, the
// model learning promoted, and the version counting promotions. Guarded by its tenant's mu.
struct Service::Slot {
  std::string agent, task, model;  // model: the agent's language model token (ium)
  std::string base;  // the configured spec (the first stage of learnt models)
  std::string spec;  // what serves now: base, or a promoted model's
  std::shared_ptr<const retrieval::Retriever> retriever;
  std::uint64_t version = 1;
  std::string model_version() const { return spec + "@v" + std::to_string(version); }
};

// One tenant's state. `mu` is shared by readers (retrieve, rerank) and taken alone by writers
// (document changes, the corpus index's rebuild, a promotion).
struct Service::Tenant {
  TenantId id = 0;
  std::string scope;  // "ID/": prefixed to user names to make retrieval-layer users
  std::shared_mutex mu;
  std::unordered_map<std::string, std::vector<Document>> users;
  std::vector<Document> corpus;
  std::unique_ptr<index::CorpusIndex> corpus_index;  // null when stale (rebuilt at the next query)
  // The corpus's own first stage under a spec that has one (dense:DIR: the passages embedded,
  // retrieval/first_stage.h), and that spec; null when stale or not asked for yet.
  std::unique_ptr<retrieval::CorpusFirstStage> corpus_stage;
  std::string corpus_stage_spec;
  // Counts the corpus's changes (read without t.mu by the stage builder, to give up a build
  // of a corpus that changed meanwhile).
  std::atomic<std::uint64_t> corpus_gen{0};
  // Per user, their BM25 statistics, for queries that rank only their documents with plain
  // bm25 (exactly as bm25 over them would); dropped when their documents change.
  std::unordered_map<std::string, std::shared_ptr<const retrieval::ProfileBm25>> profile_bm25;
  std::map<std::string, Slot> slots;  // by agent; "" always present
  std::uint64_t seq = 0;  // the store's document change counter this state has applied (sync)
};

Service::Service(store::Store& store, ServeConfig config) : store_(store), config_(std::move(config)) {
  {
    char host[256] = {};
    if (gethostname(host, sizeof host - 1) != 0) std::snprintf(host, sizeof host, "unknown-host");
    replica_id_ = std::string(host) + ":" + std::to_string(getpid()) + ":" + random_hex(4);
  }
  // Parse every spec now, so a typo stops the server at start, not at its first request.
  const auto check = [&](const std::string& spec) {
    (void)retrieval::make_retriever(retrieval::parse_retriever_spec(spec), config_.seed);
  };
  check(config_.retriever);
  for (const auto& [name, a] : config_.agents)
    if (!a.retriever.empty()) check(a.retriever);
  for (const auto& [name, tc] : config_.tenants) {
    if (!tc.retriever.empty()) check(tc.retriever);
    for (const auto& [agent, a] : tc.agents)
      if (!a.retriever.empty()) check(a.retriever);
  }
  if (!config_.personal.encoder.empty()) {
    const fs::path dir = config_.personal.encoder;
    const auto modules = dir / "modules.json";
    if (!fs::is_directory(dir))
      throw UsageError("personal.encoder: " + dir.string() + " is not a folder (a dense encoder's)");
    bool normalises = false;
    try {
      for (const auto& m : json::parse(read_file(modules)))
        if (m.contains("type") && m.at("type").is_string()) {
          const auto type = m.at("type").get<std::string>();
          normalises = normalises || (type.size() >= 9 && type.compare(type.size() - 9, 9, "Normalize") == 0);
        }
    } catch (const std::exception& e) {
      throw UsageError("personal.encoder: cannot read " + modules.string() + " (" + e.what() +
                       "), so whether the encoder L2-normalises is unknown and personal.threshold would not be a cosine");
    }
    if (!normalises)
      throw UsageError("personal.encoder: " + dir.string() + " does not L2-normalise its embeddings (no Normalize module "
                       "in modules.json): its scores are dot products, not the cosines personal.threshold is read against");
    personal_similarity_ = std::shared_ptr<const retrieval::Retriever>(
        retrieval::make_retriever(retrieval::parse_retriever_spec("dense:" + dir.string()), config_.seed));
  }
  for (const auto& spec : config_.retrievers)
    allowed_[canonical(spec)] = std::shared_ptr<const retrieval::Retriever>(
        retrieval::make_retriever(retrieval::parse_retriever_spec(spec), config_.seed));
  // The replica thread: syncs with the store every sync_seconds and, while learning is on,
  // keeps (or tries to take) the learner lease every lease_seconds / 3.
  if (config_.sync_seconds > 0 || config_.learn.on) {
    const double sync_every = config_.sync_seconds > 0 ? config_.sync_seconds : 1e9;
    const double lease_every = config_.learn.on ? config_.learn.lease_seconds / 3 : 1e9;
    bg_ = std::thread([this, sync_every, lease_every] {
      using clock = std::chrono::steady_clock;
      auto next_sync = clock::now() + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(sync_every));
      // With learning off a replica never takes the lease (learn_step, called by hand, still does).
      auto next_lease = config_.learn.on ? clock::now() : clock::time_point::max();
      std::unique_lock lock(bg_mu_);
      while (!bg_stop_) {
        bg_cv_.wait_until(lock, std::min(next_sync, next_lease), [&] { return bg_stop_; });
        if (bg_stop_) break;
        lock.unlock();
        const auto now = clock::now();
        try {
          if (now >= next_lease) {
            (void)renew_learner_lease();
            next_lease = now + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(lease_every));
          }
          if (now >= next_sync) {
            (void)sync();
            next_sync = now + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(sync_every));
          }
        } catch (const std::exception& e) {  // a store briefly unreachable: tried again at the next tick
          std::fprintf(stderr, "serve: replica sync failed (tried again in %.3g s): %s\n", std::min(sync_every, lease_every),
                       e.what());
          next_sync = std::max(next_sync, now + std::chrono::seconds(1));
          next_lease = std::max(next_lease, now + std::chrono::seconds(1));
        }
        lock.lock();
      }
    });
  }
}

void Service::stop_background(bool release) {
  {
    std::lock_guard lock(bg_mu_);
    bg_stop_ = true;
  }
  bg_cv_.notify_all();
  if (bg_.joinable()) bg_.join();
  if (release && leader_) {
    try {
      store_.lease_release(kLearnerLease, replica_id_);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "serve: could not give the learner lease up (it expires by itself): %s\n", e.what());
    }
    leader_ = false;
  }
}

bool Service::renew_learner_lease() {
  const bool have = store_.lease_acquire(kLearnerLease, replica_id_, config_.learn.lease_seconds);
  if (leader_.exchange(have) != have && config_.learn.on)
    std::fprintf(stderr, "serve: replica %s %s the learner lease\n", replica_id_.c_str(), have ? "holds" : "lost");
  return have;
}

std::size_t Service::sync() {
  std::vector<Tenant*> loaded;
  {
    std::lock_guard lock(mu_);
    for (auto& [id, t] : tenants_) loaded.push_back(t.get());  // tenants are never unloaded
  }
  std::size_t applied = 0;
  for (Tenant* t : loaded) {
    std::uint64_t at = 0;
    {
      std::shared_lock lock(t->mu);
      at = t->seq;
    }
    if (store_.document_seq(t->id) > at) {
      // Read and applied under the exclusive lock: this replica's own writes (which take it
      // too) cannot fall between the read and the apply, so what memory holds after is
      // exactly the store's state at the read.
      std::unique_lock lock(t->mu);
      const auto changes = store_.document_changes(t->id, t->seq);
      // The floor after the changes: if it is at or below what this replica had applied,
      // nothing after that was pruned before the read. Above it, the log lost changes this
      // replica never saw (it lagged by more than change_log_keep writes): load everything.
      if (store_.document_changes_floor(t->id) > t->seq) {
        load_documents(*t);
        ++replica_reloads_;
        std::fprintf(stderr, "serve: tenant %lld: the change log was pruned past this replica's place; loaded its "
                     "documents again\n", static_cast<long long>(t->id));
        continue;  // models: at the next sync
      }
      const std::uint64_t before = synced_changes_;
      apply_changes(*t, changes);
      applied += synced_changes_ - before;
    }
    sync_models(*t);
  }
  prune_change_log(loaded);
  return applied;
}

// Keeps each loaded tenant's change log to its last change_log_keep writes, at most once a
// minute (any replica may: pruning is idempotent and the floor never goes down).
void Service::prune_change_log(const std::vector<Tenant*>& loaded) {
  if (config_.change_log_keep == 0) return;
  const auto now = std::chrono::steady_clock::now();
  {
    std::lock_guard lock(bg_mu_);
    if (pruned_at_ && now - *pruned_at_ < std::chrono::seconds(60)) return;
    pruned_at_ = now;
  }
  for (Tenant* t : loaded) {
    const std::uint64_t seq = store_.document_seq(t->id);
    if (seq > config_.change_log_keep) pruned_changes_ += store_.document_changes_prune(t->id, seq - config_.change_log_keep);
  }
}

// Replays changes in counter order. A change this replica made itself (memory already has
// it) changes nothing, so the corpus index is only rebuilt when another replica changed the corpus.
void Service::apply_changes(Tenant& t, const std::vector<store::DocumentChange>& changes) {
  using Op = store::DocumentChange::Op;
  std::unordered_map<std::string, std::size_t> corpus_at;  // id -> position, built at the first corpus change
  bool mapped = false;
  const auto map_corpus = [&] {
    if (mapped) return;
    corpus_at.clear();
    corpus_at.reserve(t.corpus.size());
    for (std::size_t i = 0; i < t.corpus.size(); ++i) corpus_at.emplace(t.corpus[i].id, i);
    mapped = true;
  };
  // Users whose stored BM25 statistics go after the replay. The store removed them with each
  // change; this replica, lagging, may have written them again from its older documents
  // since. Removed once per user, not once per change.
  std::set<std::string> stale_stats;
  for (const auto& c : changes) {
    t.seq = std::max(t.seq, c.seq);
    const auto& d = c.doc;
    bool changed = false;
    if (c.op == Op::DeleteUser) {
      changed = t.users.erase(d.user) > 0;
      t.profile_bm25.erase(d.user);
      if (changed) stale_stats.insert(d.user);
    } else if (d.user.empty()) {
      map_corpus();
      const auto it = corpus_at.find(d.id);
      if (c.op == Op::Delete) {
        if (it != corpus_at.end()) {
          t.corpus.erase(t.corpus.begin() + static_cast<std::ptrdiff_t>(it->second));
          mapped = false;  // positions after it moved
          changed = true;
        }
      } else if (it == corpus_at.end() || t.corpus[it->second].text != d.text ||
                 t.corpus[it->second].date.value_or("") != d.date) {
        Document doc;
        doc.id = d.id;
        doc.text = d.text;
        if (!d.date.empty()) doc.date = d.date;
        if (it != corpus_at.end()) {
          t.corpus[it->second] = std::move(doc);
        } else {
          corpus_at.emplace(d.id, t.corpus.size());
          t.corpus.push_back(std::move(doc));
        }
        changed = true;
      }
      if (changed) corpus_changed(t);
    } else {
      const auto u = t.users.find(d.user);
      std::vector<Document>* list = u == t.users.end() ? nullptr : &u->second;
      const auto pos = list ? std::find_if(list->begin(), list->end(), [&](const Document& x) { return x.id == d.id; })
                            : std::vector<Document>::iterator{};
      const bool present = list && pos != list->end();
      if (c.op == Op::Delete) {
        if (present) {
          list->erase(pos);
          if (list->empty()) t.users.erase(u);
          changed = true;
        }
      } else if (!present || pos->text != d.text || pos->date.value_or("") != d.date) {
        Document doc;
        doc.id = d.id;
        doc.text = d.text;
        if (!d.date.empty()) doc.date = d.date;
        doc.owner = t.scope + d.user;
        if (present) *pos = std::move(doc);
        else t.users[d.user].push_back(std::move(doc));
        changed = true;
      }
      if (changed) {
        t.profile_bm25.erase(d.user);
        stale_stats.insert(d.user);  // nothing of an old text stays
      }
    }
    if (changed) ++synced_changes_;
  }
  for (const auto& user : stale_stats) store_.blob_delete(store::profile_stats_blob_key(t.id, user));
}

// Swaps in a model version another replica promoted (newer than the one served, on the same base).
void Service::sync_models(Tenant& t) {
  std::vector<std::pair<std::string, std::uint64_t>> served;  // agent, version
  {
    std::shared_lock lock(t.mu);
    for (const auto& [agent, sl] : t.slots) served.emplace_back(agent, sl.version);
  }
  for (const auto& [agent, version] : served) {
    const auto blob = store_.blob_get(model_blob_key(t.id, agent));
    if (!blob) continue;
    const json m = json::parse(*blob, nullptr, false);
    if (m.is_discarded() || !m.contains("spec") || !m.contains("version") || !m.contains("base")) continue;
    const auto v = m["version"].get<std::uint64_t>();
    if (v <= version) continue;
    std::string base;
    {
      std::shared_lock lock(t.mu);
      base = t.slots.at(agent).base;
    }
    if (m["base"] != base) continue;  // learnt on another base retriever: does not apply here
    const std::string spec = m["spec"].get<std::string>();
    std::shared_ptr<const retrieval::Retriever> next;
    try {  // made without a lock: loading a model folder takes a while
      next = std::shared_ptr<const retrieval::Retriever>(
          retrieval::make_retriever(retrieval::parse_retriever_spec(spec), config_.seed));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "serve: tenant %lld%s%s: cannot load the model version %llu another replica promoted (%s), "
                           "still serving version %llu: %s\n",
                   static_cast<long long>(t.id), agent.empty() ? "" : ", agent ", agent.c_str(),
                   static_cast<unsigned long long>(v), spec.c_str(), static_cast<unsigned long long>(version), e.what());
      continue;
    }
    std::unique_lock lock(t.mu);
    Slot& sl = t.slots.at(agent);
    if (sl.version >= v) continue;
    sl.spec = spec;
    sl.version = v;
    sl.retriever = std::move(next);
  }
}

Service::Slot& Service::slot(Tenant& t, const std::string& agent) {
  const auto it = t.slots.find(agent);
  if (it != t.slots.end()) return it->second;
  std::string names;
  for (const auto& [name, s] : t.slots)
    if (!name.empty()) names += (names.empty() ? "" : ", ") + name;
  throw FieldError<UsageError>("agent", "unknown agent \"" + agent + "\" (" +
                                            (names.empty() ? std::string("this tenant has no agents; the config's "
                                                                         "\"agents\" declares them")
                                                           : "this tenant's agents: " + names) + ")");
}

Service::~Service() {
  stop_stage_builder();
  stop_background(true);
}

std::optional<TenantId> Service::authenticate(std::string_view key) {
  if (key.empty() || key.size() > 256) return std::nullopt;
  return store_.key_tenant(key_hash(key));
}

Service::Tenant& Service::tenant(TenantId id) {
  std::lock_guard lock(mu_);
  auto it = tenants_.find(id);
  if (it != tenants_.end()) return *it->second;
  auto t = std::make_unique<Tenant>();
  t->id = id;
  t->scope = std::to_string(id) + "/";
  std::string name;
  for (const auto& info : store_.tenant_list())
    if (info.id == id) name = info.name;
  const auto named = config_.tenants.find(name);
  const TenantConfig* tc = named != config_.tenants.end() ? &named->second : nullptr;
  const std::string tenant_spec = canonical(tc && !tc->retriever.empty() ? tc->retriever : config_.retriever);
  std::map<std::string, AgentConfig> agents = config_.agents;
  if (tc)
    for (const auto& [a, ac] : tc->agents) agents[a] = ac;
  agents.emplace("", AgentConfig{});
  for (const auto& [agent, ac] : agents) {
    Slot sl;
    sl.agent = agent;
    sl.task = ac.task;
    sl.model = ac.model.empty() ? agent : ac.model;
    sl.base = ac.retriever.empty() ? tenant_spec : canonical(ac.retriever);
    sl.spec = sl.base;
    // The last promoted model, if learning promoted one (learn_step writes it before swapping).
    if (const auto blob = store_.blob_get(model_blob_key(id, agent))) {
      const json m = json::parse(*blob, nullptr, false);
      if (m.is_discarded() || !m.contains("spec") || !m.contains("version") || !m.contains("base"))
        throw Error("store: the promoted model record of tenant " + std::to_string(id) +
                    (agent.empty() ? "" : ", agent " + agent) + " is malformed: " + *blob);
      if (m["base"] == sl.base) {  // a model learnt on another base retriever does not apply
        sl.spec = m["spec"].get<std::string>();
        sl.version = m["version"].get<std::uint64_t>();
      }
    }
    sl.retriever = retrieval::make_retriever(retrieval::parse_retriever_spec(sl.spec), config_.seed);
    t->slots.emplace(agent, std::move(sl));
  }
  load_documents(*t);
  return *tenants_.emplace(id, std::move(t)).first->second;
}

std::shared_ptr<const retrieval::ProfileBm25> Service::profile_statistics(Tenant& t, const std::string& user,
                                                                          const std::vector<Document>& docs) {
  const std::string key = store::profile_stats_blob_key(t.id, user);
  const std::string fingerprint = retrieval::ProfileBm25::fingerprint(docs);
  if (const auto blob = store_.blob_get(key); blob && blob->size() > fingerprint.size() && blob->starts_with(fingerprint)) {
    try {
      auto kept = std::make_shared<const retrieval::ProfileBm25>(docs, std::string_view(*blob).substr(fingerprint.size()));
      ++profile_stats_loaded_;
      return kept;
    } catch (const PrivacyError&) {
      throw;
    } catch (const Error& e) {  // damaged bytes: built again below, and overwritten
      std::fprintf(stderr, "serve: tenant %lld: the stored BM25 statistics of a user are unreadable (%s); built again\n",
                   static_cast<long long>(t.id), e.what());
    }
  }
  auto built = std::make_shared<const retrieval::ProfileBm25>(docs);
  ++profile_stats_built_;
  store_.blob_put(key, fingerprint + built->statistics());
  return built;
}

// The tenant's documents as the store holds them now, replacing what memory had (the caller
// holds t.mu exclusively, or t is not shared yet).
void Service::load_documents(Tenant& t) {
  // The counter first: a change made between the two reads is replayed by the next sync
  // (replaying a change memory already has changes nothing).
  t.seq = store_.document_seq(t.id);
  t.users.clear();
  t.corpus.clear();
  t.profile_bm25.clear();
  for (auto& d : store_.documents_of(t.id)) {
    Document doc;
    doc.id = std::move(d.id);
    doc.text = std::move(d.text);
    if (!d.date.empty()) doc.date = std::move(d.date);
    if (d.user.empty()) {
      t.corpus.push_back(std::move(doc));
    } else {
      doc.owner = t.scope + d.user;
      t.users[d.user].push_back(std::move(doc));
    }
  }
  corpus_changed(t);
}

// The corpus's derived state is stale: its BM25 index and first stage go (rebuilt when asked
// for), and under a spec with a stage of its own the builder is asked for the new one at once.
// The caller holds t.mu exclusively (or t is not shared yet).
void Service::corpus_changed(Tenant& t) {
  t.corpus_index.reset();
  t.corpus_stage.reset();
  ++t.corpus_gen;
  if (config_.corpus_stage_background) request_stage(t, stage_spec(slot(t, "").spec));
}

std::string Service::stage_spec(const std::string& spec) const {
  std::lock_guard lock(stage_specs_mu_);
  if (const auto it = stage_specs_.find(spec); it != stage_specs_.end()) return it->second;
  std::string s;
  try {
    s = retrieval::first_stage_spec(spec);
  } catch (const std::exception& e) {
    // The spec was read when its retriever was made; a folder gone since leaves BM25's
    // candidates, and the answers say so ("corpus_first_stage": "bm25").
    std::fprintf(stderr, "serve: the first stage of %s: %s; BM25's corpus candidates instead\n", spec.c_str(), e.what());
  }
  return stage_specs_.emplace(spec, s).first->second;
}

void Service::request_stage(Tenant& t, const std::string& spec) {
  if (t.corpus.empty() || !retrieval::has_first_stage(spec)) return;
  std::lock_guard lock(stage_mu_);
  const std::uint64_t gen = t.corpus_gen.load();
  if (stage_stop_ || !stage_asked_.emplace(&t, spec, gen).second) return;
  std::erase_if(stage_asked_, [&](const auto& a) { return std::get<0>(a) == &t && std::get<2>(a) < gen; });
  stage_jobs_.push_back({&t, spec, gen});
  if (!stage_builder_.joinable()) stage_builder_ = std::thread([this] { build_stages(); });
  stage_cv_.notify_all();
}

void Service::build_stages() {
  for (;;) {
    StageJob job;
    {
      std::unique_lock lock(stage_mu_);
      stage_cv_.wait(lock, [&] { return stage_stop_ || !stage_jobs_.empty(); });
      if (stage_stop_) return;
      job = std::move(stage_jobs_.front());
      stage_jobs_.pop_front();
    }
    Tenant& t = *job.tenant;
    std::vector<std::string> texts;
    {
      std::shared_lock lock(t.mu);
      if (t.corpus_gen.load() != job.gen) continue;  // changed since: a newer job is queued
      texts.reserve(t.corpus.size());
      for (const auto& d : t.corpus) texts.push_back(d.text);
    }
    const auto cancelled = [&] { return stage_stopping_.load() || t.corpus_gen.load() != job.gen; };
    try {
      // Its embeddings are cached in the store under this tenant's own keys, chunk by chunk,
      // so a restart, or a build given up half-way, embeds only what no chunk holds yet.
      ScopedBlobs cache(store_, store::corpus_stage_blob_prefix(t.id));
      auto stage = retrieval::make_first_stage(job.spec, texts, &cache, cancelled);
      // What the cache holds for this encoder and this stage no longer reads (passages since
      // deleted or changed) goes, before the stage is handed over. A corpus change meanwhile
      // can cost the next build some embedding, never a wrong answer: a chunk's key is its content.
      if (!cancelled()) stage_cache_removed_ += stage->remove_stale_cache(cache);
      std::unique_lock lock(t.mu);
      if (t.corpus_gen.load() != job.gen) {
        ++stage_builds_cancelled_;
        continue;
      }
      corpus_passages_embedded_ += stage->passages_embedded();
      ++corpus_stages_built_;
      if (t.corpus_stage && t.corpus_stage_spec != job.spec) {
        // One stage a tenant: the spec it replaces may be asked for again.
        std::lock_guard asked(stage_mu_);
        stage_asked_.erase({&t, t.corpus_stage_spec, job.gen});
      }
      t.corpus_stage = std::move(stage);
      t.corpus_stage_spec = job.spec;
    } catch (const retrieval::FirstStageCancelled&) {
      ++stage_builds_cancelled_;
    } catch (const std::exception& e) {
      // Not asked again for this corpus generation: its queries keep BM25's candidates, and
      // say so; the next corpus change tries again.
      ++stage_builds_failed_;
      std::fprintf(stderr, "serve: tenant %lld: building the corpus first stage of %s failed: %s\n",
                   static_cast<long long>(t.id), job.spec.c_str(), e.what());
    }
  }
}

void Service::stop_stage_builder() {
  {
    std::lock_guard lock(stage_mu_);
    stage_stop_ = true;
  }
  stage_stopping_ = true;  // a build under way gives up at its next encoder call
  stage_cv_.notify_all();
  if (stage_builder_.joinable()) stage_builder_.join();
}

RetrieveResponse Service::retrieve(TenantId id, const RetrieveRequest& r) {
  Tenant& t = tenant(id);
  Slot& sl = slot(t, r.agent);  // slots are fixed once the tenant is loaded; their fields are guarded by t.mu
  std::shared_ptr<const retrieval::Retriever> fixed;  // a spec the call named
  std::string fixed_spec;
  if (!r.retriever.empty()) {
    std::string c;
    try {
      c = canonical(r.retriever);
    } catch (const UsageError& e) {
      throw FieldError<UsageError>("retriever", std::string("not a retriever spec: ") + e.what());
    }
    const auto it = allowed_.find(c);
    if (it == allowed_.end()) {
      std::string list;
      for (const auto& [spec, ret] : allowed_) list += (list.empty() ? "" : ", ") + spec;
      throw FieldError<UsageError>("retriever", "retriever \"" + r.retriever + "\" is not one the config's \"retrievers\" "
                                                "allows (" + (list.empty() ? std::string("it allows none") : list) + ")");
    }
    fixed = it->second;
    fixed_spec = c;
  }
  // What a query of this kind needs built: the user's BM25 statistics (plain bm25 over their
  // documents alone) and the corpus index. Checked under the shared lock; built, when stale
  // after a change, under the exclusive one (rarely: requests otherwise never wait on each other).
  const auto profile_wanted = [&] {
    return (fixed ? fixed_spec : sl.spec) == "bm25" && r.personal && (!r.corpus || t.corpus.empty());
  };
  // A spec with a corpus first stage of its own (dense:DIR) searches the corpus with it;
  // any other keeps BM25's top corpus_candidates as the corpus's candidates.
  // A spec that reranks a dense:DIR (rerank(dense:DIR,L,R), or a learned model's folder that
  // expands to one) searches with that stage too.
  const std::string& active = fixed ? fixed_spec : sl.spec;
  const std::string stage = r.corpus ? stage_spec(active) : std::string();
  const bool own_stage = !stage.empty();
  const auto stage_stale = [&] { return own_stage && !t.corpus.empty() && (!t.corpus_stage || t.corpus_stage_spec != stage); };
  // In the background (the default) a stale stage is asked of the builder and the query gets
  // BM25's candidates meanwhile; otherwise this query builds it, and the tenant's wait.
  const bool stage_here = !config_.corpus_stage_background;
  const auto stale = [&] {
    return (profile_wanted() && t.users.count(r.user) && !t.profile_bm25.count(r.user)) ||
           (r.corpus && !t.corpus_index && !t.corpus.empty()) || (stage_here && stage_stale());
  };
  bool build = false;
  {
    std::shared_lock lock(t.mu);
    build = stale();
  }
  if (build) {
    std::unique_lock lock(t.mu);
    if (profile_wanted() && !t.profile_bm25.count(r.user)) {
      auto it = t.users.find(r.user);
      if (it != t.users.end()) t.profile_bm25[r.user] = profile_statistics(t, r.user, it->second);
    }
    if (r.corpus && !t.corpus_index && !t.corpus.empty()) {
      std::vector<std::string> texts;
      texts.reserve(t.corpus.size());
      for (const auto& d : t.corpus) texts.push_back(d.text);
      t.corpus_index = std::make_unique<index::CorpusIndex>(index::CorpusIndex::build(texts));
    }
    if (stage_here && stage_stale()) {
      // Built once per corpus version and spec; its embeddings are cached in the store under
      // this tenant's own keys, so a restart or a small corpus change embeds little or nothing.
      std::vector<std::string> texts;
      texts.reserve(t.corpus.size());
      for (const auto& d : t.corpus) texts.push_back(d.text);
      ScopedBlobs cache(store_, store::corpus_stage_blob_prefix(t.id));
      t.corpus_stage.reset();
      t.corpus_stage = retrieval::make_first_stage(stage, texts, &cache);
      t.corpus_stage_spec = stage;
      ++corpus_stages_built_;
      corpus_passages_embedded_ += t.corpus_stage->passages_embedded();
      stage_cache_removed_ += t.corpus_stage->remove_stale_cache(cache);
    }
  }
  RetrieveResponse out;
  std::vector<std::string> served;
  {
    std::shared_lock lock(t.mu);
    retrieval::Query q;
    q.id = "serve";
    q.user = t.scope + r.user;
    q.text = r.query;
    std::shared_ptr<const retrieval::ProfileBm25> profile;
    if (profile_wanted()) {
      const auto it = t.profile_bm25.find(r.user);
      if (it != t.profile_bm25.end()) profile = it->second;
    }
    if (profile) {  // the user's documents alone, with their statistics kept
      const Ranking ranking = profile->rank(q, r.k);  // checks the owner
      for (std::size_t i = 0; i < ranking.size(); ++i) {
        const auto& d = profile->docs()[ranking.indices[i]];
        out.documents.push_back({d.id, d.text, ranking.scores[i], "user"});
        served.push_back("user:" + d.id);
      }
    } else if (const auto own = t.users.find(r.user);
               r.personal && own != t.users.end() && !(r.corpus && t.corpus_index)) {
      // The user's documents alone, ranked where they are (no copy).
      const std::vector<Document>& candidates = own->second;
      const Ranking ranking = (fixed ? *fixed : *sl.retriever).rank(q, candidates, r.k);  // rank() checks every owner
      for (std::size_t i = 0; i < ranking.size(); ++i) {
        const auto& d = candidates[ranking.indices[i]];
        out.documents.push_back({d.id, d.text, ranking.scores[i], "user"});
        served.push_back("user:" + d.id);
      }
    } else {
      std::vector<Document> candidates;
      std::vector<char> from_corpus;
      if (r.personal) {
        auto it = t.users.find(r.user);
        if (it != t.users.end() && personal_similarity_ && r.corpus && t.corpus_index) {
          // Beside the shared corpus: only the user's documents similar enough to the query
          // (PersonalConfig), in their stored order.
          const auto& own = it->second;
          const Ranking sims = personal_similarity_->rank(q, own, own.size());  // checks every owner
          std::vector<char> admit(own.size(), 0);
          for (std::size_t i = 0; i < sims.size(); ++i)
            if (sims.scores[i] >= config_.personal.threshold) admit[sims.indices[i]] = 1;
          std::size_t admitted = 0;
          for (std::size_t i = 0; i < own.size(); ++i)
            if (admit[i]) {
              candidates.push_back(own[i]);
              from_corpus.push_back(0);
              ++admitted;
            }
          personal_admitted_ += admitted;
          personal_below_ += own.size() - admitted;
        } else if (it != t.users.end()) {
          for (const auto& d : it->second) {
            candidates.push_back(d);
            from_corpus.push_back(0);
          }
        }
      }
      if (own_stage && t.corpus_stage && t.corpus_stage_spec == stage) {
        for (const auto& [row, score] : t.corpus_stage->search(r.query, config_.corpus_candidates)) {
          candidates.push_back(t.corpus[row]);
          from_corpus.push_back(1);
        }
        out.corpus_first_stage = stage;
      } else if (r.corpus && t.corpus_index) {
        if (own_stage && !stage_here) request_stage(t, stage);  // being built, or asked for now
        for (const auto& h : t.corpus_index->search(r.query, config_.corpus_candidates)) {
          candidates.push_back(t.corpus[h.doc]);
          from_corpus.push_back(1);
        }
        out.corpus_first_stage = "bm25";
      }
      const Ranking ranking = (fixed ? *fixed : *sl.retriever).rank(q, candidates, r.k);  // rank() checks every owner
      for (std::size_t i = 0; i < ranking.size(); ++i) {
        const auto& d = candidates[ranking.indices[i]];
        const bool corpus = from_corpus[ranking.indices[i]];
        out.documents.push_back({d.id, d.text, ranking.scores[i], corpus ? "corpus" : "user"});
        served.push_back((corpus ? "corpus:" : "user:") + d.id);
      }
    }
    out.model_version = fixed ? fixed_spec + std::string(kFixedSuffix) : sl.model_version();
  }
  out.request_id = "req_" + random_hex(12);
  store::ServeRequest rec;
  rec.id = out.request_id;
  rec.user = r.user;
  rec.query = r.query;
  rec.task = r.task.empty() ? sl.task : r.task;
  rec.agent = r.agent;
  rec.model_version = out.model_version;
  rec.documents = std::move(served);
  store_.request_put(id, rec);  // committed before the client hears of the id
  ++retrieves_;
  return out;
}

std::size_t Service::feedback(TenantId id, const FeedbackRequest& f) {
  const auto req = store_.request_get(id, f.request_id);
  if (!req) throw ApiError(404, "request_id", "no request " + f.request_id + " of this tenant");
  std::vector<store::ServeFeedback> recs;
  for (std::size_t i = 0; i < f.utilities.size(); ++i) {
    const auto& u = f.utilities[i];
    const std::string field = "utilities[" + std::to_string(i) + "]";
    if (!std::isfinite(u.utility)) throw FieldError<UsageError>(field + ".utility", "utility must be a finite number");
    std::vector<std::string> matches;
    for (const auto& s : req->documents) {
      const auto colon = s.find(':');
      if (s.substr(colon + 1) == u.id && (u.source.empty() || s.substr(0, colon) == u.source)) matches.push_back(s);
    }
    if (matches.empty())
      throw FieldError<UsageError>(field + ".id", "document " + u.id + " was not served by request " + f.request_id);
    if (matches.size() > 1)
      throw FieldError<UsageError>(field + ".source", "document " + u.id +
                                                          " was served from the user's documents and the corpus: "
                                                          "name its source (\"user\" or \"corpus\")");
    recs.push_back({f.request_id, "doc", matches[0], u.utility, "", ""});
  }
  if (f.reward) {
    if (!std::isfinite(*f.reward)) throw FieldError<UsageError>("reward", "reward must be a finite number");
    recs.push_back({f.request_id, "list", "", *f.reward, "", ""});
  }
  if (f.output || f.reference) {
    if (!f.output || !f.reference)
      throw FieldError<UsageError>(f.output ? "reference" : "output", "output and reference come together");
    if (req->task.empty())
      throw FieldError<UsageError>("output", "request " + f.request_id +
                                                 " named no task, so there is no metric to score the output with: name "
                                                 "\"task\" in the retrieve call, or send utilities or a reward");
    const auto task = tasks::make_task(req->task);
    recs.push_back({f.request_id, "output", "", task->reward(*f.output, *f.reference), *f.output, *f.reference});
  }
  if (recs.empty()) throw UsageError("feedback names nothing: send utilities, a reward, or output with reference");
  store_.feedback_add(id, recs);  // one transaction: acknowledged only once committed
  feedback_records_ += recs.size();
  return recs.size();
}

Service::DocumentPage Service::list_documents(TenantId id, const std::string& user, const std::string& after,
                                              std::size_t limit) {
  Tenant& t = tenant(id);
  std::shared_lock lock(t.mu);
  const std::vector<Document>* list = &t.corpus;
  if (!user.empty()) {
    const auto it = t.users.find(user);
    if (it == t.users.end()) return {};
    list = &it->second;
  }
  // The page's documents by a partial sort of those after `after`: O(n log limit) a page.
  std::vector<const Document*> rest;
  for (const auto& d : *list)
    if (d.id > after) rest.push_back(&d);
  const auto by_id = [](const Document* a, const Document* b) { return a->id < b->id; };
  const std::size_t n = std::min(limit, rest.size());
  std::partial_sort(rest.begin(), rest.begin() + static_cast<std::ptrdiff_t>(n), rest.end(), by_id);
  DocumentPage page;
  page.total = list->size();
  page.more = rest.size() > n;
  for (std::size_t i = 0; i < n; ++i) {
    const Document& d = *rest[i];
    page.documents.push_back({user, d.id, d.text, d.date.value_or("")});
  }
  return page;
}

std::optional<store::ServeDocument> Service::get_document(TenantId id, const std::string& user, const std::string& doc_id) {
  Tenant& t = tenant(id);
  std::shared_lock lock(t.mu);
  const std::vector<Document>* list = &t.corpus;
  if (!user.empty()) {
    const auto it = t.users.find(user);
    if (it == t.users.end()) return std::nullopt;
    list = &it->second;
  }
  for (const auto& d : *list)
    if (d.id == doc_id) return store::ServeDocument{user, d.id, d.text, d.date.value_or("")};
  return std::nullopt;
}

void Service::put_documents(TenantId id, const std::string& user, const std::vector<store::ServeDocument>& docs) {
  Tenant& t = tenant(id);
  std::unique_lock lock(t.mu);
  std::vector<store::ServeDocument> rows = docs;
  for (auto& d : rows) d.user = user;
  store_.documents_put(id, rows);  // committed first: memory never holds what the store lacks
  auto& list = user.empty() ? t.corpus : t.users[user];
  std::unordered_map<std::string, std::size_t> at;  // id -> position, once a call (a corpus is large)
  at.reserve(list.size());
  for (std::size_t i = 0; i < list.size(); ++i) at.emplace(list[i].id, i);
  for (const auto& d : rows) {
    Document doc;
    doc.id = d.id;
    doc.text = d.text;
    if (!d.date.empty()) doc.date = d.date;
    if (!user.empty()) doc.owner = t.scope + user;
    if (const auto it = at.find(d.id); it != at.end()) {
      list[it->second] = std::move(doc);
    } else {
      at.emplace(doc.id, list.size());
      list.push_back(std::move(doc));
    }
  }
  if (user.empty()) corpus_changed(t);
  else t.profile_bm25.erase(user);
}

bool Service::delete_document(TenantId id, const std::string& user, const std::string& doc) {
  Tenant& t = tenant(id);
  std::unique_lock lock(t.mu);
  if (!store_.document_delete(id, user, doc)) return false;
  if (user.empty()) {
    std::erase_if(t.corpus, [&](const Document& d) { return d.id == doc; });
    corpus_changed(t);
  } else {
    auto it = t.users.find(user);
    if (it != t.users.end()) {
      std::erase_if(it->second, [&](const Document& d) { return d.id == doc; });
      if (it->second.empty()) t.users.erase(it);
    }
    t.profile_bm25.erase(user);
  }
  return true;
}

std::size_t Service::delete_user(TenantId id, const std::string& user) {
  Tenant& t = tenant(id);
  std::unique_lock lock(t.mu);
  const std::size_t n = store_.user_delete(id, user);
  t.users.erase(user);
  t.profile_bm25.erase(user);
  return n;
}

std::vector<std::pair<std::size_t, double>> Service::rerank(TenantId id, const std::string& query,
                                                            const std::vector<std::string>& documents, std::size_t top_n) {
  Tenant& t = tenant(id);
  std::vector<Document> candidates(documents.size());
  for (std::size_t i = 0; i < documents.size(); ++i) {
    candidates[i].id = std::to_string(i);
    candidates[i].text = documents[i];
    candidates[i].owner = t.scope;  // the caller's own documents, of no stored user
  }
  retrieval::Query q;
  q.id = "rerank";
  q.user = t.scope;
  q.text = query;
  std::shared_lock lock(t.mu);
  const Ranking ranking = t.slots.at("").retriever->rank(q, candidates, top_n);
  std::vector<std::pair<std::size_t, double>> out;
  for (std::size_t i = 0; i < ranking.size(); ++i) out.emplace_back(ranking.indices[i], ranking.scores[i]);
  return out;
}

std::string Service::model_version(TenantId id, const std::string& agent) {
  Tenant& t = tenant(id);
  Slot& sl = slot(t, agent);
  std::shared_lock lock(t.mu);
  return sl.model_version();
}

Counts Service::counts() {
  Counts c;
  {
    std::lock_guard lock(mu_);
    c.tenants_loaded = tenants_.size();
    for (auto& [id, t] : tenants_) {
      std::shared_lock tl(t->mu);
      c.users += t->users.size();
      for (const auto& [u, docs] : t->users) c.documents += docs.size();
      c.corpus_documents += t->corpus.size();
      for (const auto& [agent, sl] : t->slots) c.model_versions[{id, agent}] = sl.version;
    }
  }
  if (config_.learn.on) {  // the store's counts, read without holding mu_ (every request's tenant lookup takes it)
    std::lock_guard ll(learn_mu_);
    for (const auto& info : store_.tenant_list()) {
      const auto seen = learned_total_.find(info.id);
      c.backlog[info.id] = info.feedback - std::min<std::size_t>(info.feedback, seen == learned_total_.end() ? 0 : seen->second);
    }
  }
  c.retrieves = retrieves_;
  c.personal_admitted = personal_admitted_;
  c.replica_reloads = replica_reloads_;
  c.profile_stats_loaded = profile_stats_loaded_;
  c.profile_stats_built = profile_stats_built_;
  c.corpus_stages_built = corpus_stages_built_;
  c.corpus_stage_builds_cancelled = stage_builds_cancelled_;
  c.corpus_stage_builds_failed = stage_builds_failed_;
  c.corpus_stage_cache_removed = stage_cache_removed_;
  c.corpus_passages_embedded = corpus_passages_embedded_;
  c.pruned_changes = pruned_changes_;
  c.personal_below_threshold = personal_below_;
  c.feedback_records = feedback_records_;
  c.learn_rounds = learn_rounds_;
  c.promotions = promotions_;
  c.synced_changes = synced_changes_;
  c.learner_lease = leader_;
  return c;
}

// The mean utility of the top document each retriever ranks first among a query's rated
// documents: the one measure promotion compares, whatever the learner reported.
double Service::top1(const retrieval::Retriever& ret, const std::vector<LearnQuery>& qs) {
  if (qs.empty()) return 0;
  double sum = 0;
  for (const auto& lq : qs) {
    retrieval::Query q;
    q.id = lq.request_id;
    q.user = lq.user;
    q.text = lq.query;
    const Ranking r = ret.rank(q, lq.documents, 1);
    if (r.size()) sum += lq.utility.at(r.indices[0]);
  }
  return sum / static_cast<double>(qs.size());
}

std::vector<LearnReport> Service::learn_step(Learner& learner) {
  std::vector<LearnReport> reports;
  const LearnConfig& lc = config_.learn;
  if (!renew_learner_lease()) return reports;  // another replica learns
  (void)sync();  // what other replicas changed and promoted: rounds build on the versions served now
  for (const auto& info : store_.tenant_list()) {
    // All records new since the last read bound the new "doc" ones: fewer than any slot
    // still needs, and the tenant's feedback is not even read.
    const auto need = need_.find(info.id);
    if (info.feedback < learned_total_[info.id] + (need == need_.end() ? lc.min_new_feedback : need->second)) continue;
    const auto records = store_.feedback_of(info.id);
    Tenant& t = tenant(info.id);
    // The requests the doc records name, once each; those served with a spec the call named
    // are left out (another policy ranked them).
    std::map<std::string, std::optional<store::ServeRequest>> requests;
    std::map<std::string, std::size_t> docs;  // by agent
    // Utilities by agent, request and served key ("user:ID" / "corpus:ID"); a later record replaces an earlier one.
    std::map<std::string, std::map<std::string, std::map<std::string, double>>> by_agent;
    for (const auto& r : records) {
      if (r.kind != "doc") continue;
      auto [it, fresh] = requests.try_emplace(r.request_id);
      if (fresh) {
        it->second = store_.request_get(info.id, r.request_id);
        if (it->second && it->second->model_version.ends_with(kFixedSuffix)) it->second.reset();
      }
      if (!it->second) continue;  // removed with its user, or served by a named spec
      ++docs[it->second->agent];
      by_agent[it->second->agent][r.request_id][r.item] = r.value;
    }
    {
      std::lock_guard ll(learn_mu_);
      learned_total_[info.id] = records.size();
    }
    for (auto& [agent, by_request] : by_agent) {
      const auto key = std::make_pair(info.id, agent);
      // How far learning got, as the store records it: this replica's or the one before it.
      std::size_t at = 0;
      if (const auto b = store_.blob_get(learned_blob_key(info.id, agent))) at = std::stoull(*b);
      {
        std::lock_guard ll(learn_mu_);
        learned_at_[key] = at;
      }
      if (docs[agent] < at + lc.min_new_feedback) continue;
      const auto slot_it = t.slots.find(agent);
      if (slot_it == t.slots.end()) continue;  // an agent the config no longer declares
      Slot& sl = slot_it->second;
      LearnRound round;
      round.tenant = info.id;
      round.agent = agent;
      round.seed = config_.seed;
      std::string served_spec;
      {
        std::shared_lock lock(t.mu);
        round.base = sl.base;
        round.task = sl.task;
        round.model = sl.model;
        round.version = sl.version + 1;
        served_spec = sl.model_version();
        for (const auto& [rid, utils] : by_request) {
          const auto& req = *requests.at(rid);
          LearnQuery q;
          q.request_id = rid;
          q.query = req.query;
          q.user = t.scope + req.user;
          for (const auto& served : req.documents) {  // in served order
            const auto u = utils.find(served);
            if (u == utils.end()) continue;
            const auto colon = served.find(':');
            const std::string id = served.substr(colon + 1);
            const std::vector<Document>* list = nullptr;
            if (served.compare(0, colon, "corpus") == 0) {
              list = &t.corpus;
            } else if (auto it = t.users.find(req.user); it != t.users.end()) {
              list = &it->second;
            }
            if (!list) continue;
            const auto d = std::find_if(list->begin(), list->end(), [&](const Document& x) { return x.id == id; });
            if (d == list->end()) continue;  // deleted since
            q.docs.push_back(d->text);
            q.documents.push_back(*d);
            q.utility.push_back(u->second);
          }
          if (q.docs.size() < 2) continue;
          const bool dev = static_cast<double>(fnv1a(rid) % 10000) < lc.dev_fraction * 10000;
          (dev ? round.dev : round.train).push_back(std::move(q));
        }
      }
      // Recorded once the round is over (below): a replica killed mid-round leaves it to the next learner.
      const auto record_progress = [&] {
        {
          std::lock_guard ll(learn_mu_);
          learned_at_[key] = docs[agent];
        }
        store_.blob_put(learned_blob_key(info.id, agent), std::to_string(docs[agent]));
      };
      LearnReport rep;
      rep.tenant = info.id;
      rep.agent = agent;
      rep.train = round.train.size();
      rep.dev = round.dev.size();
      for (const auto& q : round.dev) rep.served_dev_top1 += q.utility.front();  // the served order's top document
      if (!round.dev.empty()) rep.served_dev_top1 /= static_cast<double>(round.dev.size());
      rep.model_version = served_spec;
      if (round.train.empty() || round.dev.empty()) {
        rep.report = "too few queries with two or more rated documents (" + std::to_string(rep.train) + " train, " +
                     std::to_string(rep.dev) + " held back)";
        record_progress();
        reports.push_back(rep);
        continue;
      }
      round.out = std::filesystem::path(lc.dir) / std::to_string(info.id);
      if (!agent.empty()) round.out /= agent;
      round.out /= "v" + std::to_string(round.version);
      ++learn_rounds_;
      LearnOutcome out;
      std::shared_ptr<const retrieval::Retriever> next;
      try {
        // No lock held: requests go on being served by the current version.
        out = learner.learn(round);
        if (!out.spec.empty()) {
          next = std::shared_ptr<const retrieval::Retriever>(
              retrieval::make_retriever(retrieval::parse_retriever_spec(out.spec), config_.seed));
          rep.new_dev_top1 = top1(*next, round.dev);
        }
      } catch (const std::exception& e) {
        rep.report = std::string("the learner failed: ") + e.what();
        if (renew_learner_lease()) record_progress();
        reports.push_back(rep);
        continue;
      }
      rep.report = out.report;
      // A replica that lost the lease while it trained (stalled past lease_seconds) records
      // and promotes nothing: the replica that holds it now learns this feedback.
      if (!renew_learner_lease()) {
        rep.report += "; lost the learner lease meanwhile: nothing promoted or recorded";
        reports.push_back(rep);
        return reports;
      }
      record_progress();
      // Promote only a model that beats what is served on the held-back feedback.
      if (next && rep.new_dev_top1 > rep.served_dev_top1) {
        std::unique_lock lock(t.mu);
        store_.blob_put(model_blob_key(info.id, agent),
                        json({{"spec", out.spec}, {"version", round.version}, {"base", sl.base}}).dump());
        sl.spec = out.spec;
        sl.version = round.version;
        sl.retriever = std::move(next);
        rep.promoted = true;
        rep.model_version = sl.model_version();
        ++promotions_;
      }
      reports.push_back(rep);
    }
    // What the next read waits for: the fewest new records that could bring a slot to its
    // threshold (a slot with no feedback yet needs min_new_feedback).
    std::size_t fewest = lc.min_new_feedback;
    for (const auto& [agent, n] : docs) {
      const std::size_t at = learned_at_[{info.id, agent}];
      fewest = std::min(fewest, std::max<std::size_t>(1, at + lc.min_new_feedback - std::min(n, at + lc.min_new_feedback)));
    }
    need_[info.id] = fewest;
  }
  return reports;
}

ServeConfig read_config(const std::filesystem::path& path) {
  std::ifstream f(path);
  if (!f) throw UsageError("--config " + path.string() + ": cannot read it");
  const json j = json::parse(f, nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw InputError(path.string(), "", "", "not a JSON object");
  ServeConfig c;
  const auto bad = [&](const std::string& key, const std::string& why) { return InputError(path.string(), "", key, why); };
  const auto count = [&](const json& v, const std::string& key, std::size_t lo, std::size_t hi) {
    if (!v.is_number_unsigned() || v.get<std::uint64_t>() < lo || v.get<std::uint64_t>() > hi)
      throw bad(key, "expected a whole number from " + std::to_string(lo) + " to " + std::to_string(hi));
    return static_cast<std::size_t>(v.get<std::uint64_t>());
  };
  const auto spec = [&](const json& v, const std::string& key) {
    if (!v.is_string() || v.get<std::string>().empty()) throw bad(key, "expected a retriever spec (a string)");
    try {
      (void)retrieval::parse_retriever_spec(v.get<std::string>());
    } catch (const UsageError& e) {
      throw bad(key, e.what());
    }
    return v.get<std::string>();
  };
  // {"NAME": {"task", "model", "retriever"}}: names as the API's ids, plain (they name folders).
  const auto agents = [&](const json& v, const std::string& key) {
    if (!v.is_object()) throw bad(key, "expected an object {agent: {\"task\", \"model\", \"retriever\"}}");
    std::map<std::string, AgentConfig> out;
    for (const auto& [name, av] : v.items()) {
      const std::string k = key + "." + name;
      if (name.empty() || name.size() > 64 ||
          !std::all_of(name.begin(), name.end(), [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_' || ch == '.'; }) ||
          name[0] == '.')
        throw bad(k, "an agent's name is 1 to 64 letters, digits, '-', '_' and '.', not starting with '.'");
      if (!av.is_object()) throw bad(k, "expected an object {\"task\", \"model\", \"retriever\"}");
      AgentConfig a;
      for (const auto& [ak, avv] : av.items()) {
        const std::string kk = k + "." + ak;
        if (ak == "retriever") {
          a.retriever = spec(avv, kk);
        } else if (ak == "task" || ak == "model") {
          if (!avv.is_string() || avv.get<std::string>().empty()) throw bad(kk, "expected a non-empty string");
          (ak == "task" ? a.task : a.model) = avv.get<std::string>();
          if (ak == "task") {
            try {
              (void)tasks::make_task(a.task);
            } catch (const std::exception& e) {
              throw bad(kk, e.what());
            }
          }
        } else {
          throw bad(kk, "unknown key (an agent takes task, model and retriever)");
        }
      }
      out[name] = a;
    }
    return out;
  };
  for (const auto& [key, v] : j.items()) {
    if (key == "retriever") {
      c.retriever = spec(v, key);
    } else if (key == "retrievers") {
      if (!v.is_array()) throw bad(key, "expected an array of retriever specs");
      for (std::size_t i = 0; i < v.size(); ++i) c.retrievers.push_back(spec(v[i], key + "[" + std::to_string(i) + "]"));
    } else if (key == "agents") {
      c.agents = agents(v, key);
    } else if (key == "tenants") {
      if (!v.is_object()) throw bad(key, "expected an object {tenant: {\"retriever\": SPEC, \"agents\": {...}}}");
      for (const auto& [name, tv] : v.items()) {
        const std::string k = "tenants." + name;
        if (!tv.is_object()) throw bad(k, "expected an object {\"retriever\": SPEC, \"agents\": {...}}");
        TenantConfig& tc = c.tenants[name];
        for (const auto& [tk, tvv] : tv.items()) {
          if (tk == "retriever") tc.retriever = spec(tvv, k + ".retriever");
          else if (tk == "agents") tc.agents = agents(tvv, k + ".agents");
          else throw bad(k + "." + tk, "unknown key (a tenant takes \"retriever\" and \"agents\")");
        }
      }
    } else if (key == "corpus_candidates") {
      c.corpus_candidates = count(v, key, 1, 10000);
    } else if (key == "sync_seconds") {
      if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0 || v.get<double>() > 86400)
        throw bad(key, "expected a number of seconds from 0 (never) to 86400");
      c.sync_seconds = v.get<double>();
    } else if (key == "change_log_keep") {
      c.change_log_keep = count(v, key, 0, std::size_t{1} << 40);
    } else if (key == "dense_micro_batch") {
      c.dense_micro_batch = count(v, key, 1, 1024);
    } else if (key == "corpus_stage_background") {
      if (!v.is_boolean()) throw bad(key, "expected true or false");
      c.corpus_stage_background = v.get<bool>();
    } else if (key == "seed") {
      if (!v.is_number_unsigned()) throw bad(key, "expected a whole number");
      c.seed = v.get<std::uint64_t>();
    } else if (key == "limits") {
      if (!v.is_object()) throw bad(key, "expected an object");
      for (const auto& [lk, lv] : v.items()) {
        const std::string k = "limits." + lk;
        if (lk == "max_body_bytes") c.limits.max_body_bytes = count(lv, k, 1024, std::size_t{1} << 30);
        else if (lk == "max_k") c.limits.max_k = count(lv, k, 1, 100000);
        else if (lk == "max_query_bytes") c.limits.max_query_bytes = count(lv, k, 1, std::size_t{1} << 20);
        else if (lk == "max_documents_per_call") c.limits.max_documents_per_call = count(lv, k, 1, 1000000);
        else if (lk == "max_document_bytes") c.limits.max_document_bytes = count(lv, k, 1, std::size_t{1} << 26);
        else if (lk == "max_id_bytes") c.limits.max_id_bytes = count(lv, k, 1, 4096);
        else if (lk == "requests_per_second" || lk == "burst") {
          if (!lv.is_number() || !std::isfinite(lv.get<double>()) || lv.get<double>() < 0)
            throw bad(k, "expected a number, 0 or more");
          (lk == "burst" ? c.limits.burst : c.limits.requests_per_second) = lv.get<double>();
        } else {
          throw bad(k, "unknown limit (max_body_bytes, max_k, max_query_bytes, max_documents_per_call, "
                       "max_document_bytes, max_id_bytes, requests_per_second, burst)");
        }
      }
    } else if (key == "learn") {
      if (!v.is_object()) throw bad(key, "expected an object");
      for (const auto& [lk, lv] : v.items()) {
        const std::string k = "learn." + lk;
        const auto text = [&] {
          if (!lv.is_string() || lv.get<std::string>().empty()) throw bad(k, "expected a non-empty string");
          return lv.get<std::string>();
        };
        const auto number = [&](double lo, double hi) {
          if (!lv.is_number() || !std::isfinite(lv.get<double>()) || lv.get<double>() < lo || lv.get<double>() > hi)
            throw bad(k, "expected a number from " + json(lo).dump() + " to " + json(hi).dump());
          return lv.get<double>();
        };
        if (lk == "on") {
          if (!lv.is_boolean()) throw bad(k, "expected true or false");
          c.learn.on = lv.get<bool>();
        } else if (lk == "method") {
          c.learn.method = text();
          if (c.learn.method != "ropg-kd" && c.learn.method != "ium" && c.learn.method != "luf" && c.learn.method != "rspg")
            throw bad(k, "the server learns with \"ropg-kd\", \"ium\", \"luf\" or \"rspg\"");
        } else if (lk == "init") c.learn.init = text();
        else if (lk == "judge") c.learn.judge = text();
        else if (lk == "dir") c.learn.dir = text();
        else if (lk == "min_new_feedback") c.learn.min_new_feedback = count(lv, k, 1, 100000000);
        else if (lk == "interval_seconds") c.learn.interval_seconds = number(0.1, 86400);
        else if (lk == "lease_seconds") c.learn.lease_seconds = number(0.3, 86400);
        else if (lk == "dev_fraction") c.learn.dev_fraction = number(0.01, 0.9);
        else if (lk == "top_l") c.learn.top_l = count(lv, k, 2, 1000);
        else if (lk == "epochs") c.learn.epochs = count(lv, k, 1, 1000);
        else if (lk == "lr") c.learn.lr = number(0, 1);
        else if (lk == "positive_at") c.learn.positive_at = number(-1e9, 1e9);
        else if (lk == "selector_k") c.learn.selector_k = count(lv, k, 1, 100);
        else if (lk == "pool") {
          if (!lv.is_array() || lv.size() < 2) throw bad(k, "expected an array of at least 2 retriever specs");
          c.learn.pool.clear();
          for (const auto& e : lv) {
            if (!e.is_string() || e.get<std::string>().empty()) throw bad(k, "expected retriever specs (non-empty strings)");
            c.learn.pool.push_back(e.get<std::string>());
          }
          if (const auto twice = retrieval::first_repeated_spec(c.learn.pool); !twice.empty())
            throw bad(k, "lists \"" + twice + "\" twice: a selector chooses among different retrievers");
        } else
          throw bad(k, "unknown key (on, method, init, dir, min_new_feedback, interval_seconds, dev_fraction, top_l, "
                       "epochs, lr, positive_at, judge, lease_seconds, pool, selector_k)");
      }
    } else if (key == "user_feedback") {
      if (!v.is_object()) throw bad(key, "expected an object");
      for (const auto& [uk, uv] : v.items()) {
        const std::string k = "user_feedback." + uk;
        if (uk == "llm") {
          if (!uv.is_string() || uv.get<std::string>().empty()) throw bad(k, "expected a language model spec");
          c.user_feedback.llm = uv.get<std::string>();
        } else if (uk == "evidence_k") {
          c.user_feedback.evidence_k = count(uv, k, 1, 100);
        } else if (uk == "retries") {
          c.user_feedback.retries = count(uv, k, 0, 10);
        } else {
          throw bad(k, "unknown key (llm, evidence_k, retries)");
        }
      }
    } else if (key == "personal") {
      if (!v.is_object()) throw bad(key, "expected an object {\"encoder\": DIR, \"threshold\": 0.5}");
      bool threshold = false;
      for (const auto& [pk, pv] : v.items()) {
        const std::string k = "personal." + pk;
        if (pk == "encoder") {
          if (!pv.is_string() || pv.get<std::string>().empty()) throw bad(k, "expected a dense encoder folder");
          c.personal.encoder = pv.get<std::string>();
        } else if (pk == "threshold") {
          if (!pv.is_number() || !std::isfinite(pv.get<double>()) || pv.get<double>() < -1 || pv.get<double>() > 1)
            throw bad(k, "expected a cosine similarity from -1 to 1");
          c.personal.threshold = pv.get<double>();
          threshold = true;
        } else {
          throw bad(k, "unknown key (encoder, threshold)");
        }
      }
      if (threshold && c.personal.encoder.empty())
        throw bad("personal.threshold", "needs personal.encoder, the encoder whose cosine it is read against");
    } else {
      throw bad(key, "unknown key (retriever, retrievers, agents, tenants, corpus_candidates, dense_micro_batch, sync_seconds, change_log_keep, "
                    "seed, limits, learn, user_feedback, personal)");
    }
  }
  return c;
}

}  // namespace attune::serve
