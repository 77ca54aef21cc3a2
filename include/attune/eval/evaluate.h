#pragma once
// End-to-end evaluation: for each retriever, retrieve k documents per example, build the
// prompt, generate, and score against the gold; then paired significance tests between
// every pair of retrievers (paired t-test for continuous metrics, McNemar for 0/1 ones).
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "attune/data/dataset.h"
#include "attune/llm/language_model.h"
#include "attune/retrieval/candidates.h"
#include "attune/tasks/task.h"
#include "attune/text/tokenizer.h"

namespace attune::eval {

struct EvalOptions {
  std::vector<std::string> retrievers = {"none", "bm25"};
  std::size_t k = 4;                  // documents in each prompt (000: 4)
  std::size_t max_length = 256;       // prompt budget (LAMP.md: 256 for evaluation)
  bool reference_quirks = true;
  llm::GenerateOptions generate;
  std::uint64_t seed = 0;
  std::size_t threads = 0;
  std::size_t batch = 32;
  bool progress = true;
  std::size_t limit = 0;              // only the first N examples (0 = all)
  double alpha = 0.05;                // significance level of the table's marks
  // Where each retriever's candidates come from: null (or a null answer) = the `source`
  // given to evaluate(). The CLI gives dense:DIR its own dense first stage on corpus tasks.
  // Each distinct source is asked once per example, after a prefetch of all examples.
  std::function<const retrieval::CandidateSource*(const std::string& spec)> source_for;
};

struct ExampleResult {
  ExampleId id;
  std::string output;
  tasks::MetricValues metrics;
  std::vector<DocId> retrieved;
};

struct RetrieverResult {
  std::string spec;
  tasks::MetricValues metrics;  // task metrics, plus "r@5" on corpus tasks with gold docs
  std::vector<ExampleResult> examples;
};

// Retriever `better` vs `worse` on `metric`: better's value is better, with p-value p.
struct Comparison {
  std::string a, b, metric, test;
  double statistic = 0, p_value = 1;
  bool a_better = false;
};

struct EvalReport {
  std::string task, split, llm;
  std::size_t k = 0;
  std::uint64_t seed = 0;
  std::size_t examples = 0;
  std::vector<tasks::MetricInfo> metrics;
  std::vector<RetrieverResult> results;
  std::vector<Comparison> comparisons;  // every ordered pair (a, b), a != b
  double alpha = 0.05;
  double seconds = 0;
};

EvalReport evaluate(const data::Dataset& ds, const tasks::Task& task, const retrieval::CandidateSource& source,
                    llm::LanguageModel& model, const text::Tokenizer& tok, const EvalOptions& opts);

// The table: one row per retriever, one column per metric; a letter per row, and after a
// value the letters of the rows it beats at p < alpha.
std::string format_table(const EvalReport& r);
// CLI.md's JSON: {"task","split","llm","k","results","per_example","significance",...}.
std::string to_json(const EvalReport& r);

}  // namespace attune::eval
