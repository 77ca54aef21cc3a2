#pragma once
// End-to-end evaluation: for each retriever, retrieve k documents per example, build the
// prompt, generate, and score against the gold; then paired significance tests between
// every pair of retrievers (paired t-test for continuous metrics, McNemar for 0/1 ones).
// Selectors (RSPG) choose one retriever of a pool per example; they get a row of their own,
// and a selection report: success rate against the QPP predictors and the oracle bounds.
#include <cstdint>
#include <functional>
#include <span>
#include <optional>
#include <string>
#include <vector>

#include "attune/core/run_control.h"
#include "attune/core/types.h"
#include "attune/data/dataset.h"
#include "attune/llm/language_model.h"
#include "attune/retrieval/candidates.h"
#include "attune/tasks/task.h"
#include "attune/text/tokenizer.h"

namespace attune::eval {

// A selector (000 §5): per example, one score per member of its pool, from the example's
// input x (task.query), each member's prompt and (for RSPG-Post) the LLM's output for that
// prompt; the argmax is its choice.
struct SelectorSpec {
  std::string spec;               // the row's name
  std::vector<std::string> pool;  // retriever specs, each also in EvalOptions::retrievers
  std::function<std::vector<float>(std::string_view query, std::span<const std::string> prompts,
                                   std::span<const std::string> outputs)>
      score;
};

struct EvalOptions {
  std::vector<std::string> retrievers = {"none", "bm25"};
  std::size_t k = 4;                  // documents in each prompt (000: 4)
  std::size_t max_length = 256;       // prompt budget (LAMP.md: 256 for evaluation)
  bool reference_quirks = true;
  llm::GenerateOptions generate;
  RunControl run;                     // seed, threads, batch, progress, limit (first N examples)
  double alpha = 0.05;                // significance level of the table's marks
  // Where each retriever's candidates come from: null (or a null answer) = the `source`
  // given to evaluate(). The CLI gives dense:DIR its own dense first stage on corpus tasks.
  // Each distinct source is asked once per example, after a prefetch of all examples.
  std::function<const retrieval::CandidateSource*(const std::string& spec)> source_for;
  // Selectors, evaluated after the retrievers (UsageError when a pool member is not in
  // `retrievers`). The QPP baselines read each pool member's top qpp_k scores (0 = k).
  std::vector<SelectorSpec> selectors;
  std::size_t qpp_k = 0;
  double qpp_sigma_percent = 50;  // x of sigma_x%
  // The QPP baselines compare each pool member's predictor values z-scored over the
  // examples (per retriever), as the QPP literature compares retrievers whose scores have
  // different scales (BM25's tens against a cosine's fractions); false: the raw values,
  // which pick the retriever with the largest score scale for almost every input.
  bool qpp_normalize = true;
  // Oracle bounds beside every row (0 = none): for each example, each of the retriever's
  // top-`oracle_depth` documents alone in a prompt (k = 1, the same budget), answered and
  // scored by the primary metric; the row then reports the mean over examples of the best
  // and the worst of those single documents, i.e. what the best and the worst choice of one
  // document among what it retrieved would have scored. Costs up to R x n x depth more
  // generations (a prompt shared by two rows is generated once).
  std::size_t oracle_depth = 0;
  // The best-ordering oracle beside every row (false = none): for each example, every order
  // of the row's top-k documents (k! prompts, k at most kMaxOrderK), answered and scored by
  // the primary metric; the row reports the mean over examples of the best and the worst
  // order, i.e. what the best and the worst ordering of what it retrieved would have scored
  // (its own order is one of them). Needs k >= 2.
  bool oracle_orders = false;
  static constexpr std::size_t kMaxOrderK = 5;
  // How alike every pair of rows' retrieved lists are (false = not reported): per example,
  // the Jaccard of their top-k sets and the Kendall tau-b of their rankings; 002 reports
  // both for the lists different agents get from one reranker.
  bool list_overlap = false;

  // FieldError<UsageError> naming the field and its value: no retriever or one listed twice,
  // alpha outside (0, 1), qpp_sigma_percent outside [0, 100], bad generate (generate_check.h).
  void validate() const;
};

struct ExampleResult {
  ExampleId id;
  std::string output;
  tasks::MetricValues metrics;
  std::vector<DocId> retrieved;
  std::string chosen;  // selectors: the pool member whose prompt and output this is
};

// A row's oracle bounds (EvalOptions::oracle_depth) on the primary metric.
struct OracleBounds {
  std::size_t depth = 0;
  std::string metric;
  double best = 0, worst = 0;  // means over examples of the best / worst single document's value
};

// A row's best-ordering oracle (EvalOptions::oracle_orders) on the primary metric.
struct OrderBounds {
  std::size_t k = 0;
  std::string metric;
  double best = 0, worst = 0;  // means over examples of the best / worst order's value
  std::size_t prompts = 0;     // the orders generated for this row, over all examples
};

struct RetrieverResult {
  std::string spec;
  tasks::MetricValues metrics;  // task metrics, plus "r@5" on corpus tasks with gold docs
  std::vector<ExampleResult> examples;
  std::optional<OracleBounds> oracle;
  std::optional<OrderBounds> orders;
};

// Two rows' retrieved lists compared (EvalOptions::list_overlap), means over examples.
// Kendall tau-b is over the union of the two lists, a document missing from one list tied
// below that list's last; an example whose union has fewer than two documents has no tau
// (tau_examples counts those that do; kendall_tau is 0 when none does).
struct ListOverlap {
  std::string a, b;
  double jaccard = 0, kendall_tau = 0;
  std::size_t examples = 0, tau_examples = 0;
};
// One example's pair of lists. jaccard of two empty lists is 1 (they agree); kendall_tau_b
// is nullopt when the union has fewer than two documents or every pair is tied in a list.
double jaccard(std::span<const DocId> a, std::span<const DocId> b);
std::optional<double> kendall_tau_b(std::span<const DocId> a, std::span<const DocId> b);

// Retriever `better` vs `worse` on `metric`: better's value is better, with p-value p.
struct Comparison {
  std::string a, b, metric, test;
  double statistic = 0, p_value = 1;
  bool a_better = false;
};

// One way of choosing a retriever of a selector's pool per example.
struct SelectionMethod {
  std::string name;                 // the selector's spec, "wig", "nqc", "sigma_max", "sigma_50%",
                                    // "oracle_lower" or "oracle_upper"
  std::vector<std::size_t> chosen;  // per example, an index into the pool
  double success = 0;               // share of examples whose choice is among the pool's best by
                                    // the primary metric (ties: any of the best counts)
  tasks::MetricValues metrics;      // end to end, each example answered by its chosen retriever
  double p_vs_selector = 1;         // McNemar on per-example success, selector vs this method
};

struct SelectionReport {
  std::string selector;
  std::vector<std::string> pool;
  std::vector<SelectionMethod> methods;  // the selector first, then the QPP methods, then the oracles
  bool qpp_normalized = true;            // EvalOptions::qpp_normalize of the run
};

struct EvalReport {
  std::string task, split, llm;
  std::string generate;  // llm::GenerateOptions::canonical() of the run's generations
  std::size_t k = 0;
  std::uint64_t seed = 0;
  std::size_t examples = 0;
  std::vector<tasks::MetricInfo> metrics;
  std::vector<RetrieverResult> results;
  std::vector<Comparison> comparisons;  // every ordered pair (a, b), a != b
  std::vector<SelectionReport> selections;  // one per selector
  std::vector<ListOverlap> overlaps;        // every unordered pair of retriever rows (list_overlap)
  double alpha = 0.05;
  double seconds = 0;
};

EvalReport evaluate(const data::Dataset& ds, const tasks::Task& task, const retrieval::CandidateSource& source,
                    llm::LanguageModel& model, const text::Tokenizer& tok, const EvalOptions& opts);

// The table: one row per retriever (then per selector), one column per metric; a letter per
// row, and after a value the letters of the rows it beats at p < alpha. Then, per selector,
// its selection table (success rate and end-to-end metrics of every method).
std::string format_table(const EvalReport& r);
// CLI.md's JSON: {"task","split","llm","k","results","per_example","significance",...};
// results, per_example and selection list rows in the table's order.
std::string to_json(const EvalReport& r);

// ---- Several agents side by side (paper 002's Table 1): one reranker's rows evaluated for
// each agent (a task, its language model and k), then each row's primary metric per agent,
// its macro average, and significance on the agents' examples pooled.
struct AgentReport {
  std::string agent;              // the agent's name
  EvalReport report;              // its evaluation
  std::vector<std::string> rows;  // per row of the macro table: the spec this report names it by
};

struct MacroRow {
  std::string row;                // the row's name (the spec before the agent's fields were put in)
  std::vector<double> per_agent;  // each agent's primary metric, in the agents' order
  double macro = 0;               // their mean
};

struct MacroReport {
  std::vector<std::string> agents, metrics;  // each agent's name and primary metric
  bool higher_is_better = true;
  std::string test;  // "mcnemar" when every primary metric is 0/1 per example, else "paired-t"
  std::size_t examples = 0;  // pooled over the agents
  std::vector<MacroRow> rows;
  std::vector<Comparison> comparisons;  // every ordered pair of rows, metric "macro", on the pooled examples
  double alpha = 0.05;
};

// UsageError when there is no agent, a row is missing from an agent's report, or the agents'
// primary metrics disagree on which direction is better (their average would mean nothing).
MacroReport macro_average(const std::vector<AgentReport>& agents, const std::vector<std::string>& rows, double alpha = 0.05);
std::string format_macro_table(const MacroReport& m);
// {"agents": [{"agent", "report": to_json(...)}...], "macro": {"rows", "significance", ...}}.
std::string macro_to_json(const MacroReport& m, const std::vector<AgentReport>& agents);

}  // namespace attune::eval
