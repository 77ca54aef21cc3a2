#pragma once
// Feedback collectors: turn language-model calls into utility records in the store's
// feedback log.
//  - doc:        u(d) = reward(M(phi_p(x, [d])), y) for each of the top-l documents of the
//                initial retriever (000 §4; k = 1, max_length 512).
//  - retriever:  reward(M(phi_p(x, R(x)[:k])), y) for each retriever R of a pool (RSPG's
//                target; k = 4, max_length 256).
//  - likelihood: log p_M(y | phi_p(x, [d])) for each top-l document, plus the item ""
//                for the prompt without documents (Pearl, PURPLE).
// Answers come through llm::CachedModel, keyed by model id + prompt + target, so a repeated
// run asks the model nothing and a killed run resumes where it stopped. Work is spread over
// threads; each batch of records is written in one transaction.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "attune/data/dataset.h"
#include "attune/llm/language_model.h"
#include "attune/retrieval/candidates.h"
#include "attune/store/feedback_log.h"
#include "attune/store/llm_cache.h"
#include "attune/tasks/task.h"
#include "attune/text/tokenizer.h"

#include "attune/core/run_control.h"

namespace attune::store {
class Store;
}  // namespace attune::store

namespace attune::feedback {

enum class Kind { Doc, Retriever, Likelihood };
Kind parse_kind(const std::string& s);  // "doc" | "retriever" | "likelihood"; UsageError otherwise
std::string kind_name(Kind k);

struct CollectOptions {
  Kind kind = Kind::Doc;
  std::string initial_retriever = "bm25";  // ranks the top-l candidates (doc, likelihood)
  std::size_t top_l = 16;                  // 000: l = 16
  std::vector<std::string> retrievers = {"none", "recency", "bm25"};  // the pool (retriever kind)
  std::size_t k = 4;                       // documents per prompt (retriever kind)
  std::size_t max_length = 0;              // prompt budget; 0 = the kind's default (512 / 256)
  bool reference_quirks = true;
  llm::GenerateOptions generate;
  RunControl run;                          // seed, threads, batch, progress, limit (first N examples)
  // Where a retriever's candidates come from (by spec: initial_retriever, or each of the
  // pool): null (or a null answer) = the `source` given to collect(). See eval::EvalOptions.
  std::function<const retrieval::CandidateSource*(const std::string& spec)> source_for;

  // FieldError<UsageError> naming the field and its value: top_l 0 (doc, likelihood), an empty
  // pool or one listing a retriever twice (retriever), bad generate options (generate_check.h),
  // a decoding other than free for likelihood feedback (it generates nothing).
  void validate() const;
};

struct Summary {
  std::size_t examples = 0, records = 0, model_calls = 0, cache_hits = 0;
  double mean_value = 0, seconds = 0;
};

// The store's key of a dataset ("task/split/hash").
std::string dataset_key(const data::Dataset& ds);

// The model a feedback record of `kind` is filed under: the model's id, and for the kinds that
// generate (doc, retriever) with a decoding other than free, ";decode=NAME" after it. Records of
// copy and free decoding are different feedback and must not replace each other; free decoding
// keeps the bare id, so the records of stores written before --decode existed are still found.
// Every writer and reader of generated feedback names the model through this.
std::string feedback_model(const std::string& model_id, Kind kind, const llm::GenerateOptions& generate);

// `model` is the bare model; its answers are cached in `cache` and the records written to
// `log` (one store or two). Golds are required.
Summary collect(const data::Dataset& ds, const tasks::Task& task, const retrieval::CandidateSource& source,
                llm::LanguageModel& model, store::LlmCache& cache, store::FeedbackLog& log,
                const text::Tokenizer& tok, const CollectOptions& opts);
// The same, with the cache and the log of one store.
Summary collect(const data::Dataset& ds, const tasks::Task& task, const retrieval::CandidateSource& source,
                llm::LanguageModel& model, store::Store& store, const text::Tokenizer& tok,
                const CollectOptions& opts);

}  // namespace attune::feedback
