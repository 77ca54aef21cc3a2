#pragma once
// What `attune report` reads: `attune eval --out F` JSON files and `attune train` output
// folders, parsed once into typed records. Every reader throws UsageError naming the file
// and the field at fault ("eval.json: field \"results.bm25.rouge-1\": not a number"); a
// value the report shows is never guessed or defaulted silently.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace attune::report {

// A metric of an eval table, in the table's column order (the first is the primary one:
// the oracle bounds and selection success are measured by it).
struct Metric {
  std::string name;
  bool higher_is_better = true;  // false for mae and rmse (tasks/spec_task.cpp)
};

// An oracle bound of one row (eval --oracle N: best/worst single document among the top N;
// --oracle-orders: best/worst order of the top k).
struct OracleBound {
  std::size_t depth = 0;  // N, or k for the orders
  std::string metric;
  double best = 0, worst = 0;
};

// One row of the eval table: a retriever or a selector.
struct EvalRow {
  std::string spec;
  std::vector<std::optional<double>> values;  // one per EvalRun::metrics; nullopt: null in the file
  std::vector<std::string> example_ids;       // per_example order
  // per_example values: [metric][example]; nullopt where the file has null or no entry.
  std::vector<std::vector<std::optional<double>>> per_example;
  std::vector<std::string> chosen;  // selector rows: the pool member chosen per example; else empty
  std::optional<OracleBound> oracle, orders;
};

// significance[a][b][metric]: does row a beat row b on the metric.
struct Comparison {
  std::size_t a = 0, b = 0;  // row indices
  std::size_t metric = 0;    // index into EvalRun::metrics
  std::string test;          // "paired-t" or "mcnemar"
  double p = 1;
  bool better = false;  // a's value is the better one (then it beats b when p < alpha)
};

// One method of a selection table (the selector first, then QPP predictors and oracles).
struct SelectionMethod {
  std::string name;
  double success = 0;
  std::vector<std::optional<double>> values;  // one per EvalRun::metrics
  std::optional<double> p_vs_selector;
  std::vector<double> chosen_share;  // one per pool member
};

// eval's `selection` entry for one RSPG selector.
struct Selection {
  std::string selector;  // the selector row's spec
  std::vector<std::string> pool;
  std::vector<SelectionMethod> methods;
  bool qpp_normalized = true;
};

// eval --list-overlap: how alike two rows' lists are.
struct Overlap {
  std::size_t a = 0, b = 0;           // row indices
  double jaccard = 0;                 // mean over examples of the top-k sets' Jaccard
  std::optional<double> kendall_tau;  // nullopt: no example had two untied documents
  std::size_t examples = 0, tau_examples = 0;
};

struct EvalRun {
  std::string file;  // as given
  std::string task, split, llm;
  std::size_t k = 0;
  std::uint64_t seed = 0;
  std::optional<std::size_t> examples;  // per row (files without "examples": unknown)
  double alpha = 0.05;       // eval's significance level (files without "alpha": eval's default)
  std::vector<Metric> metrics;
  std::vector<EvalRow> rows;
  bool has_per_example = false;
  std::vector<Comparison> comparisons;
  std::vector<Selection> selections;
  std::vector<Overlap> overlaps;
  bool has_overlap = false;  // the file has "list_overlap" (possibly empty: one row)

  // The letters of the rows that row `r` beats on metric `m` at p < alpha ("bd").
  std::string beats(std::size_t r, std::size_t m) const;
};

// Reads an `attune eval --out` file. UsageError naming the file and field when it cannot be
// read, is not JSON, or a field is missing or of the wrong type.
EvalRun read_eval(const std::filesystem::path& file);

// One epoch of a training run (train::fit's record).
struct Epoch {
  std::size_t epoch = 0;
  double loss = 0;
  std::vector<std::pair<std::string, double>> dev;  // dev values by name ("dev_top1"), file order
};

// Per-query feedback statistics of a training run, when attune_train.json records them as
// `"feedback": {"kind": "doc", "spread": [per training query: the largest minus the
// smallest utility among its candidates (doc) or pool members (retriever)], ...}`.
struct FeedbackStats {
  std::string kind;
  std::vector<double> spread;
};

// One training run: a folder with attune_train.json (and, when present, attune_model.json
// and RSPG's selector.json).
struct TrainRun {
  std::string dir;  // as given, plus the sub-folder for runs found one level down (IUM's iter-N)
  std::string method;
  std::string data;
  std::string device;
  std::optional<std::uint64_t> seed;
  std::optional<std::size_t> steps, total_steps, best_epoch, dev_examples;
  std::optional<double> seconds;                            // seconds_this_run
  std::vector<Epoch> epochs;                                // empty: the run records none (pretrain-encoder)
  std::vector<std::pair<std::string, double>> initial_dev;  // "init_dev_top1" -> value, file order
  std::optional<bool> complete;                             // attune_model.json "complete"
  std::vector<std::string> pool;                            // selector.json "pool" (RSPG)
  std::string selector_variant;                             // selector.json "variant"
  // Everything else the file records, flattened to dotted keys with JSON values as text
  // ("options.lr" -> "0.001", "initial_prior.weight" -> "-0.004"): shown as-is.
  std::vector<std::pair<std::string, std::string>> options, other;
  std::optional<FeedbackStats> feedback;
};

// Reads the training runs of `dir`: the folder itself when it holds attune_train.json,
// else each of its sub-folders that does (by name, numbers in order: IUM's iter-2 before
// iter-10).
// UsageError naming the folder (none found) or the file and field (malformed).
std::vector<TrainRun> read_train(const std::filesystem::path& dir);

}  // namespace attune::report
