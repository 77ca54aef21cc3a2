#pragma once
// The engine state of `attune serve` (ARCHITECTURE.md, serve layer): tenants' documents in
// memory, each tenant's retriever, and the typed operations the HTTP handlers call. It knows
// nothing of HTTP: http.h parses requests into the structs below and maps errors to statuses.
//
// Isolation is structural, not a check in a handler. Every operation takes the TenantId that
// authenticate() returned for the caller's key, reads only that tenant's in-memory state and
// store rows (tenant_store.h filters every statement on it), and ranks a query of user U as
// the retrieval-layer user "TENANT/U": a document of any other user of any tenant carries
// another owner, and Retriever::rank refuses it (PrivacyError) before it could be served.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <vector>

#include "attune/core/types.h"
#include "attune/core/error.h"
#include "attune/store/store.h"

namespace attune::retrieval {
class Retriever;
class ProfileBm25;
}
namespace attune::llm {
class LanguageModel;
}

namespace attune::serve {

using store::TenantId;

// An error the API answers with its own status (401, 404, 409, 413, 429, ...); `field`
// names the request field at fault ("" when none). UsageError is a 400 naming no field,
// FieldError<UsageError> a 400 naming its field, PrivacyError a 403, anything else a 500.
class ApiError : public Error {
 public:
  ApiError(int status, std::string field, const std::string& message)
      : Error(message), status_(status), field_(std::move(field)) {}
  int status() const { return status_; }
  const std::string& field() const { return field_; }

 private:
  int status_;
  std::string field_;
};

struct Limits {
  std::size_t max_body_bytes = 1 << 20;       // a larger body: 413
  std::size_t max_k = 100;
  std::size_t max_query_bytes = 4096;
  std::size_t max_documents_per_call = 1000;
  std::size_t max_document_bytes = 65536;
  std::size_t max_id_bytes = 256;             // user and document ids
  double requests_per_second = 0;             // per API key; 0 = unlimited
  double burst = 0;                           // the bucket's size; 0 = max(1, requests_per_second)
};

// Learning while serving: every interval_seconds the learner thread of `attune serve` asks
// Service::learn_step to retrain each model slot (a tenant's default, or one of its agents)
// that has min_new_feedback new per-document utilities since its last round, on all of its
// feedback so far (paper 002's online update), and promotes the result only when it beats
// the served model on held-back feedback.
struct LearnConfig {
  bool on = false;
  // The learner (tools/attune/cmd_serve.cpp builds it): "ropg-kd" (paper 000: a dense
  // reranker distilled from the utilities), "ium" (paper 002: a cross-encoder that reads
  // the agent's task and model tokens, trained pointwise on useful / not useful) or "luf"
  // (paper 004: the dense reranker trained on the judge's labels of what was served) or
  // "rspg" (paper 000: a selector among the retrievers of `pool`).
  std::string method = "ropg-kd";
  std::string init;                 // the encoder every round starts from (a dense: model folder)
  std::string dir = "serve-models"; // where each round's model folder goes: DIR/TENANT_ID[/AGENT]/vN
  std::size_t min_new_feedback = 256;  // new "doc" records before a slot is retrained
  double interval_seconds = 30;
  double dev_fraction = 0.2;        // requests held back (by a hash of the request id) to decide promotion
  std::size_t top_l = 20;           // the trained model reranks the base retriever's top top_l
  std::size_t epochs = 5;
  double lr = 1e-3;
  double positive_at = 0.5;         // ium: a document is useful (label 1) when its utility reaches this
  // luf (paper 004): the language model that judges each rated request's served documents
  // (answer / relevant with a score / irrelevant, feedback/judge.h); LUF's losses train the
  // dense reranker on those labels. The users' utilities still decide promotion.
  std::string judge;
  // rspg (paper 000 §5, RSPG-Pre): a selector that picks, per query, one retriever of `pool`
  // (at least 2 specs) and serves its ranking. Its targets: for each rated request, each
  // member's ranking of the served documents and the mean utility of its first selector_k;
  // it reads the query and those selector_k documents' texts (neural/selector.h).
  std::vector<std::string> pool;
  std::size_t selector_k = 1;
  // Replicas on one store: only the holder of the store's learner lease trains. It renews the
  // lease every third of this; a replica that stops renewing (killed) loses it after this many
  // seconds, and another replica with learning on takes over where the last round left off.
  double lease_seconds = 15;
};

// An agent (paper 002): an application of the tenant with its own task and language model,
// named by a retrieve call's "agent". It has its own retriever (by default the tenant's),
// its own model version, and learning trains its own model on its own feedback only.
struct AgentConfig {
  std::string retriever;  // "" = the tenant's
  std::string task;       // the default of a call's "task"; with model, the agent's IUM tokens
  std::string model;      // the agent's language model, as IUM names it ("" = the agent's name)
};

// User feedback (paper 004 §2.3; feedback/user_feedback.h): POST /v1/conversations/{id}/feedback
// files what a user asserted into the tenant's shared corpus, that user's personal documents,
// or nowhere, as the language model `llm` judges it (off when llm is "").
struct UserFeedbackConfig {
  std::string llm;            // a language model spec (the server builds it), e.g. openai:URL#MODEL
  std::size_t evidence_k = 3; // shared-corpus documents the judgement reads
  std::size_t retries = 2;    // more asks after a malformed verdict (then: filed nowhere)
};

// A user's documents beside the tenant's shared corpus (paper 004 §2.3 and Table 10: "the
// similarity threshold λ for retrieving personal user information is set to 0.5"). With an
// encoder, a retrieve call that ranks the user's documents together with the corpus admits
// only those whose cosine similarity with the query, under that encoder, reaches threshold;
// the admitted documents and the corpus candidates are then ranked together by the slot's
// retriever as before. A call over the user's documents alone (no corpus, or a tenant with
// none) keeps every one of them. The encoder must L2-normalise its embeddings (a Normalize
// module in its modules.json), so that the threshold is on a cosine: one that does not is
// refused at start.
struct PersonalConfig {
  std::string encoder;     // a dense encoder folder; "" = off (every personal document is a candidate)
  double threshold = 0.5;  // the least cosine similarity admitted, from -1 to 1
};

struct TenantConfig {
  std::string retriever;                     // "" = the deployment's
  std::map<std::string, AgentConfig> agents; // added to the deployment's (the same name replaces it)
};

// The deployment: `attune serve --config FILE` (JSON, docs/serve.md), every key optional:
//   {"retriever": "bm25", "retrievers": ["dense:DIR"],
//    "agents": {"qa-bot": {"task": "qa", "model": "reader75q", "retriever": "SPEC"}},
//    "tenants": {"acme": {"retriever": "rerank(bm25,20,cross:DIR)", "agents": {...}}},
//    "corpus_candidates": 100, "seed": 0, "limits": {"max_k": 100, ...},
//    "learn": {"on": true, "method": "ropg-kd", "init": "ENCODER_DIR", ...}}
struct ServeConfig {
  std::string retriever = "bm25";                // every tenant's, unless named below
  std::map<std::string, TenantConfig> tenants;   // by tenant name
  std::map<std::string, AgentConfig> agents;     // every tenant's agents
  // Specs a retrieve call may name in "retriever" (any other is refused: a spec can name a
  // model folder). What such a call is served with is fixed: nothing learns from its feedback.
  std::vector<std::string> retrievers;
  std::size_t corpus_candidates = 100;           // corpus BM25 hits a query's ranking sees
  // Dense retrievers encode the queries of concurrent requests together, at most this many a
  // forward pass (1: each alone). The server applies it (neural::set_query_micro_batch).
  std::size_t dense_micro_batch = 16;
  // A corpus first stage of its own (dense:DIR: every passage embedded, minutes for a large
  // corpus) is built in the background: when a tenant is loaded, after each change of its
  // corpus, and for a spec a query asks for. Until it is ready, queries get BM25's
  // corpus candidates and say so ("corpus_first_stage": "bm25"). false: the first query
  // after a change builds it while the tenant's requests wait.
  bool corpus_stage_background = true;
  std::uint64_t seed = 0;
  // Replicas on one store (several `attune serve` on one PostgreSQL, or several processes on
  // one SQLite file): every this many seconds a replica applies the document changes others
  // wrote and picks up the model versions another replica promoted (0: never; one replica).
  double sync_seconds = 1;
  // The store's document change log keeps each tenant's last this many writes (0: all); a
  // replica's sync prunes it at most once a minute. A replica that falls further behind than
  // this (stopped, or cut off from the store) loads the tenant's documents again at its next sync.
  std::size_t change_log_keep = 100000;
  Limits limits;
  LearnConfig learn;
  UserFeedbackConfig user_feedback;
  PersonalConfig personal;
};

// What POST /v1/conversations/{id}/feedback did.
struct ConversationFeedbackResult {
  std::string filing;       // shared, personal, rejected, no_information or failed
  std::string document_id;  // the document it became ("" unless shared or personal)
  std::string summary;      // what the model took the user to assert
  std::vector<std::string> evidence;  // the shared documents it was judged against
  std::size_t model_calls = 0;
};
// Reads a config file: InputError naming the file and the key for a bad value or an unknown key.
ServeConfig read_config(const std::filesystem::path& path);

struct RetrieveRequest {
  std::string user;   // whose documents may be served (with the tenant's corpus)
  std::string query;
  std::size_t k = 5;
  std::string task;   // optional: the task whose metric scores "output" feedback later (default: the agent's)
  std::string agent;  // optional: a configured agent, whose model serves the call
  std::string retriever;  // optional: one of the config's "retrievers", instead of the model
  bool personal = true, corpus = true;  // which documents to rank
};

struct ServedDocument {
  std::string id, text;
  double score = 0;
  std::string source;  // "user" or "corpus"
};

struct RetrieveResponse {
  std::string request_id, model_version;
  // What found the corpus's candidates: "bm25", or the spec whose first stage did
  // ("dense:DIR"); "" when the call searched no corpus.
  std::string corpus_first_stage;
  std::vector<ServedDocument> documents;
};

struct DocumentUtility {
  std::string id;
  double utility = 0;
  std::string source;  // "" unless the id was served from both sources
};

// POST /v1/feedback: at least one of utilities, reward, or output with reference.
struct FeedbackRequest {
  std::string request_id;
  std::vector<DocumentUtility> utilities;
  std::optional<double> reward;
  std::optional<std::string> output, reference;
};

// One query of a tenant's feedback as a learner reads it: the served documents that have a
// utility, in the order they were served (the serving model's ranking).
struct LearnQuery {
  std::string request_id, query;
  std::vector<std::string> docs;
  std::vector<double> utility;
  std::string user;                  // the retrieval-layer user ("TENANT/USER")
  std::vector<Document> documents;   // the rated documents themselves (docs are their texts)
};

// What a learner gets for one tenant's round, and what it answers.
struct LearnRound {
  TenantId tenant = 0;
  std::string agent;                // "" = the tenant's default slot
  std::string task, model;          // the agent's tokens (ium)
  std::string base;                 // the base retriever spec (its first stage)
  std::uint64_t version = 0;        // the version this round would become
  std::vector<LearnQuery> train, dev;
  std::filesystem::path out;        // the folder to write the model into
  std::uint64_t seed = 0;
};
struct LearnOutcome {
  std::string spec;                 // the retriever spec of the trained model ("" when it failed)
  std::string report;               // one line for the log
};
class Learner {
 public:
  virtual ~Learner() = default;
  virtual LearnOutcome learn(const LearnRound& round) = 0;
};

// What learn_step did for one tenant.
struct LearnReport {
  TenantId tenant = 0;
  std::string agent;
  std::size_t train = 0, dev = 0;
  double served_dev_top1 = 0;       // mean utility on dev of the first rated document of each served list
  double new_dev_top1 = 0;          // the same for the new model's ranking of each list (measured here, not by the learner)
  bool promoted = false;
  std::string model_version;        // after the round
  std::string report;
};

struct Counts {
  std::size_t tenants_loaded = 0, users = 0, documents = 0, corpus_documents = 0;
  std::map<std::pair<TenantId, std::string>, std::uint64_t> model_versions;  // of the tenants loaded, by agent ("" = default)
  std::map<TenantId, std::uint64_t> backlog;  // per-document records no learning round has read yet (learning on)
  std::uint64_t retrieves = 0, feedback_records = 0, learn_rounds = 0, promotions = 0;
  std::uint64_t synced_changes = 0;  // document changes of other replicas applied (sync)
  // Personal documents a call weighed against personal.threshold: admitted, and left out.
  std::uint64_t personal_admitted = 0, personal_below_threshold = 0;
  std::uint64_t replica_reloads = 0;  // tenants loaded again because the change log was pruned past this replica
  std::uint64_t pruned_changes = 0;   // change-log rows this replica pruned
  // Users' BM25 statistics read back from the store (no document tokenised), and built from
  // the documents (then written to the store).
  std::uint64_t profile_stats_loaded = 0, profile_stats_built = 0;
  // Corpus first stages built (dense:DIR over a tenant's corpus), and the passages they ran
  // through the model (those found in the store's cache are not counted).
  std::uint64_t corpus_stages_built = 0, corpus_passages_embedded = 0;
  // Builds given up (the corpus changed meanwhile, or the server stopped) and failed.
  std::uint64_t corpus_stage_builds_cancelled = 0, corpus_stage_builds_failed = 0;
  // Cached entries a newly built stage removed: embeddings of passages no longer in the corpus.
  std::uint64_t corpus_stage_cache_removed = 0;
  bool learner_lease = false;        // whether this replica held the learner lease at its last try
};

class Service {
 public:
  // The store must outlive the service. Specs are parsed here (UsageError for a bad one).
  // A tenant starts on the last model version promoted for it (kept in the store's blobs).
  Service(store::Store& store, ServeConfig config);
  ~Service();
  Service(const Service&) = delete;
  Service& operator=(const Service&) = delete;

  const ServeConfig& config() const { return config_; }
  // The tenant of an active key (SHA-256 compared, the key is never stored); nothing otherwise.
  std::optional<TenantId> authenticate(std::string_view key);

  // Ranks the user's documents and the tenant's corpus (its BM25 top corpus_candidates) with
  // the tenant's retriever, records the request (so feedback can name it) and answers.
  RetrieveResponse retrieve(TenantId tenant, const RetrieveRequest& r);
  // Checks every record against the request it names (404 for an unknown id, 400 for a
  // document that was not served), then commits them in one transaction; returns how many.
  std::size_t feedback(TenantId tenant, const FeedbackRequest& f);
  // Inserts or replaces documents of `user` ("" = the tenant's corpus), in one transaction.
  void put_documents(TenantId tenant, const std::string& user, const std::vector<store::ServeDocument>& docs);
  bool delete_document(TenantId tenant, const std::string& user, const std::string& id);
  // Removes the user's documents, requests and feedback; returns the rows removed.
  std::size_t delete_user(TenantId tenant, const std::string& user);
  // Reading back what is stored: the documents of `user` ("" = the tenant's corpus) in id
  // order (bytewise), the first `limit` whose id is after `after` ("" = from the start), with
  // how many there are in all; and one document by id (nullopt: none). A user with no
  // documents has none, not an error.
  struct DocumentPage {
    std::vector<store::ServeDocument> documents;
    std::size_t total = 0;  // the user's (or the corpus's) documents in all
    bool more = false;      // documents after the last one of this page
  };
  DocumentPage list_documents(TenantId tenant, const std::string& user, const std::string& after, std::size_t limit);
  std::optional<store::ServeDocument> get_document(TenantId tenant, const std::string& user, const std::string& id);
  // Ranks documents a client sends (Cohere's /v1/rerank): nothing is stored or learnt.
  std::vector<std::pair<std::size_t, double>> rerank(TenantId tenant, const std::string& query,
                                                      const std::vector<std::string>& documents, std::size_t top_n);
  std::string model_version(TenantId tenant, const std::string& agent = "");
  Counts counts();
  // One learning round for every tenant with enough new feedback (LearnConfig). Training runs
  // without holding any lock, so requests are served meanwhile by the current version; a
  // promoted model is recorded in the store first, then swapped in whole.
  // Replicas: only the holder of the store's learner lease runs a round; without it this
  // returns nothing. The lease is taken (or renewed) here and again before a promotion, so a
  // replica that lost it meanwhile promotes nothing. How far learning got (the feedback
  // records each slot's last round read) is kept in the store, so a replica taking over goes
  // on from there: the same feedback is never learnt twice, and none is lost.
  std::vector<LearnReport> learn_step(Learner& learner);
  // Applies the document changes other replicas wrote since the last sync, and swaps in model
  // versions they promoted; returns the changes applied. The server's own thread calls it
  // every sync_seconds; a test may call it at once.
  std::size_t sync();
  // Tries to take or renew the learner lease (learn_step does; so does the server's thread
  // every lease_seconds / 3 while learning is on); true when this replica holds it.
  bool renew_learner_lease();
  // Stops the server's thread. release = true gives the learner lease up, so another replica
  // takes over at once (a clean stop; the destructor does this); false leaves it to expire, as
  // a killed replica would.
  void stop_background(bool release);
  const std::string& replica_id() const { return replica_id_; }
  // User feedback: the model that curates it (UserFeedbackConfig; attune serve builds it from
  // the config's spec). Without one, conversation_feedback answers 503.
  void set_curator(std::shared_ptr<llm::LanguageModel> model);
  // The similarity personal.threshold is read against: the constructor makes dense:ENCODER
  // from the config's personal.encoder; a test may set another retriever whose scores are
  // cosines (before the first request; nothing guards it afterwards).
  void set_personal_similarity(std::shared_ptr<const retrieval::Retriever> similarity);
  // Summarises `conversation` (user `user`, conversation `id`), judges it against the
  // tenant's shared corpus and the model's knowledge, and files it: "shared" into the
  // tenant's corpus, "personal" into the user's documents (both as document "uf-ID", so the
  // same conversation sent again replaces its document), anything else nowhere. Only a
  // verdict that parses as "correct, shared" reaches the shared corpus.
  ConversationFeedbackResult conversation_feedback(TenantId tenant, const std::string& user, const std::string& id,
                                                   const std::string& conversation);

 private:
  struct Tenant;
  struct Slot;
  Tenant& tenant(TenantId id);
  static Slot& slot(Tenant& t, const std::string& agent);
  static double top1(const retrieval::Retriever& ret, const std::vector<LearnQuery>& qs);
  store::Store& store_;
  ServeConfig config_;
  std::map<std::pair<TenantId, std::string>, std::size_t> learned_at_;  // doc records seen at each slot's last round (learn_step only)
  std::map<TenantId, std::size_t> learned_total_;  // all the tenant's records at its last read
  std::map<TenantId, std::size_t> need_;           // new records before the next read (learn_step only)
  std::map<std::string, std::shared_ptr<const retrieval::Retriever>> allowed_;  // config.retrievers, by canonical spec
  std::mutex mu_;  // guards tenants_
  std::map<TenantId, std::unique_ptr<Tenant>> tenants_;
  std::mutex learn_mu_;  // guards learned_at_ / learned_total_ (learn_step and counts)
  std::atomic<std::uint64_t> retrieves_{0}, feedback_records_{0}, learn_rounds_{0}, promotions_{0};
  void apply_changes(Tenant& t, const std::vector<store::DocumentChange>& changes);
  void load_documents(Tenant& t);
  void corpus_changed(Tenant& t);
  // A user's BM25 statistics: read from the store when it holds them for exactly these
  // documents (ProfileBm25::fingerprint), else built and written there. Under t.mu, exclusive.
  std::shared_ptr<const retrieval::ProfileBm25> profile_statistics(Tenant& t, const std::string& user,
                                                                   const std::vector<Document>& docs);
  std::atomic<std::uint64_t> profile_stats_loaded_{0}, profile_stats_built_{0};
  std::atomic<std::uint64_t> corpus_stages_built_{0}, corpus_passages_embedded_{0};
  std::atomic<std::uint64_t> stage_builds_cancelled_{0}, stage_builds_failed_{0}, stage_cache_removed_{0};
  // The corpus first stages' builder (ServeConfig::corpus_stage_background): one thread,
  // started at the first job, building one stage at a time. Tenants are never unloaded, so a
  // job holds its tenant by pointer.
  struct StageJob {
    Tenant* tenant = nullptr;
    std::string spec;
    std::uint64_t gen = 0;  // the tenant's corpus generation the job was asked for
  };
  // Asks for t's stage under `spec` unless it is built, queued or failed for this corpus
  // generation (the caller holds t.mu, shared or exclusive). No-op for a spec without one.
  void request_stage(Tenant& t, const std::string& spec);
  // retrieval::first_stage_spec of a slot's spec, kept (a folder's is read once).
  std::string stage_spec(const std::string& spec) const;
  mutable std::mutex stage_specs_mu_;
  mutable std::map<std::string, std::string> stage_specs_;
  void build_stages();  // the builder thread's loop
  void stop_stage_builder();
  std::mutex stage_mu_;  // guards the four below
  std::condition_variable stage_cv_;
  std::deque<StageJob> stage_jobs_;
  std::set<std::tuple<Tenant*, std::string, std::uint64_t>> stage_asked_;  // queued, building, built or failed
  bool stage_stop_ = false;
  std::atomic<bool> stage_stopping_{false};
  std::thread stage_builder_;
  void prune_change_log(const std::vector<Tenant*>& loaded);
  std::optional<std::chrono::steady_clock::time_point> pruned_at_;  // guarded by bg_mu_
  std::atomic<std::uint64_t> replica_reloads_{0}, pruned_changes_{0};
  void sync_models(Tenant& t);
  std::string replica_id_;                 // this replica's name in the learner lease
  std::atomic<bool> leader_{false};
  std::atomic<std::uint64_t> synced_changes_{0};
  std::mutex bg_mu_;                       // guards bg_stop_ (the background thread's wake-up)
  std::condition_variable bg_cv_;
  bool bg_stop_ = false;
  std::thread bg_;                         // sync every sync_seconds; lease renewal while learning is on
  std::shared_ptr<llm::LanguageModel> curator_;
  std::mutex curator_mu_;  // one curation at a time: a model need not be thread-safe
  std::map<std::string, std::uint64_t> filings_;  // by filing (guarded by curator_mu_)
  std::shared_ptr<const retrieval::Retriever> personal_similarity_;  // null: personal documents are not thresholded
  std::atomic<std::uint64_t> personal_admitted_{0}, personal_below_{0};

 public:
  std::map<std::string, std::uint64_t> filings();  // user feedback filed so far, by filing, for /metrics
};

// A fresh API key: "atk_" and 40 hex digits from the kernel's random source.
std::string new_api_key();
// What the store keeps of a key: its first 12 characters, shown to name it, and its SHA-256.
std::string key_prefix(std::string_view key);
std::string key_hash(std::string_view key);

}  // namespace attune::serve
