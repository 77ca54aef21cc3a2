#pragma once
// The embedded store: datasets, users, documents, examples, the LLM call cache, feedback
// records, runs, and named blobs (the corpus index). SQLite in WAL mode; every write
// method is one transaction, so a killed process leaves either all of a call or none.
// A Store object may be used from several threads (calls are serialized inside).
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "attune/data/dataset.h"

namespace attune::store {

struct ImportResult {
  std::int64_t dataset_id = 0;
  bool already_present = false;  // same task, split and content hash: nothing written
  std::size_t users = 0, documents = 0, examples = 0;
};

struct DatasetInfo {
  std::int64_t id = 0;
  std::string task, split, content_hash;
  std::size_t users = 0, documents = 0, examples = 0;
};

// One cached language-model answer. Keyed by (model id, kind, prompt, target-or-options).
struct CacheKey {
  std::string model;   // LanguageModel::info().id
  std::string kind;    // "generate" or "score"
  std::string prompt;
  std::string target;  // score: the target; generate: the options' canonical string
  std::string digest() const;  // 128-bit hash hex of the four parts
};

// One utility record (feedback layer). kind: "doc" (per-document utility), "retriever"
// (per-retriever utility), "likelihood" (log p(gold | prompt with item)).
struct FeedbackRecord {
  std::string dataset;   // dataset key (task/split/content hash)
  std::string example;   // example id
  std::string kind;
  std::string item;      // document id, retriever spec, or "" (no document)
  std::string model;     // LLM id
  std::string output;    // what the LLM generated ("" for likelihood)
  double value = 0;      // reward / metric / log-likelihood
};

struct RunRecord {
  std::int64_t id = 0;
  std::string verb, args_json, status, summary_json;
  std::uint64_t seed = 0;
  std::string started, finished;
};

class Store {
 public:
  virtual ~Store() = default;

  // Writes a dataset (its users, documents and examples) in one transaction; a dataset
  // with the same task, split and content hash is left untouched (already_present).
  virtual ImportResult import_dataset(const data::Dataset& ds) = 0;
  virtual std::vector<DatasetInfo> datasets() = 0;
  // Reads a dataset back (examples with their profiles); nullopt when absent.
  virtual std::optional<data::Dataset> load_dataset(const std::string& task, const std::string& split) = 0;

  // LLM cache. get_many returns one optional per key, in order.
  virtual std::vector<std::optional<std::string>> cache_get(const std::vector<CacheKey>& keys) = 0;
  virtual void cache_put(const std::vector<std::pair<CacheKey, std::string>>& entries) = 0;
  virtual std::size_t cache_size() = 0;

  // Feedback records; put replaces a record with the same (dataset, example, kind, item, model).
  virtual void feedback_put(const std::vector<FeedbackRecord>& records) = 0;
  virtual std::vector<FeedbackRecord> feedback_get(const std::string& dataset, const std::string& kind,
                                                   const std::string& model) = 0;

  // Runs: every CLI run that computes something records its verb, arguments and seed.
  virtual std::int64_t run_begin(const std::string& verb, const std::string& args_json, std::uint64_t seed) = 0;
  virtual void run_end(std::int64_t id, const std::string& status, const std::string& summary_json) = 0;
  virtual std::vector<RunRecord> runs() = 0;

  // Named binary blobs (e.g. "bm25:<corpus hash>").
  virtual std::optional<std::string> blob_get(const std::string& key) = 0;
  virtual void blob_put(const std::string& key, const std::string& value) = 0;
};

// Opens (creating if needed) a SQLite store; Error naming the path when it cannot.
std::unique_ptr<Store> open_sqlite(const std::filesystem::path& path);

}  // namespace attune::store
