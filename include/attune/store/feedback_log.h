#pragma once
// The feedback role of the store: the utility records that feedback collectors write and
// learners read. Implementations may be called from several threads; every put is one
// transaction (all of its records or none).
#include <string>
#include <vector>

namespace attune::store {

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

class FeedbackLog {
 public:
  virtual ~FeedbackLog() = default;

  // Writes the records in one transaction; a record replaces one with the same
  // (dataset, example, kind, item, model).
  virtual void feedback_put(const std::vector<FeedbackRecord>& records) = 0;
  // The records of one dataset, kind and model, in the order they were first put; empty
  // when none.
  virtual std::vector<FeedbackRecord> feedback_get(const std::string& dataset, const std::string& kind,
                                                   const std::string& model) = 0;
};

}  // namespace attune::store
