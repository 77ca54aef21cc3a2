#pragma once
// Option groups and loaders shared by the CLI verbs. Strings are parsed here, once, and
// errors name the offending value.
#include <CLI/CLI.hpp>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "attune/data/dataset.h"
#include "attune/llm/language_model.h"
#include "attune/retrieval/candidates.h"
#include "attune/store/store.h"
#include "attune/tasks/task.h"
#include "attune/text/tokenizer.h"

namespace attune::cli {

struct DataOptions {
  std::string data;
  std::string task;
  std::string split = "dev";
  std::string questions, outputs;  // official LaMP files named directly
  std::string background;          // outputs file the reference reader fits (default: train outputs)
  void add(CLI::App& app, bool need_split = true, bool need_task = true);
};

struct RunOptions {
  std::string store = "attune.db";
  std::uint64_t seed = 0;
  std::size_t threads = 0;
  bool quiet = false;
  // The prompt budget's tokenizer; "" = the local: model's own tokenizer when --llm is
  // local:DIR, else "whitespace".
  std::string tokenizer;
  std::string device = "auto";   // neural models: auto | cpu | cuda | cuda:N
  std::string dtype = "float32"; // neural models: float32 | float16 | bfloat16
  void add(CLI::App& app);
};

// The task, with labels read from the data directory where the task needs them
// (commit_area: labels.json; slot: the sections of the training outputs).
std::unique_ptr<tasks::Task> load_task(const DataOptions& d);
data::Dataset load_dataset(const DataOptions& d);
// The training outputs of the task (the reference reader's background); empty if none.
std::vector<std::string> train_outputs(const DataOptions& d);
// Profile candidates, or corpus BM25 top-n (index built once and kept in the store).
std::unique_ptr<retrieval::CandidateSource> make_source(const DataOptions& d, const tasks::Task& task,
                                                        store::Store& store, bool quiet, std::size_t n = 100);

// The candidate sources of one run, by retriever spec. Per-profile tasks: the profile for
// every retriever. Corpus tasks: the BM25 top-100 (`base`) for every retriever, except
// dense:DIR, which gets its own dense top-100 over the whole corpus (DenseCorpusCandidates,
// embeddings cached in the store), and rrf(...) with a dense:DIR part, which gets the union
// of the BM25 and dense top-100s (BM25's first, deduplicated by id).
struct Sources {
  std::unique_ptr<retrieval::CandidateSource> base;
  std::map<std::string, const retrieval::CandidateSource*> by_spec;  // overrides of base
  std::vector<std::unique_ptr<retrieval::CandidateSource>> owned;     // dense first stages, unions
  const retrieval::CandidateSource& for_spec(const std::string& spec) const;
  // For eval::EvalOptions::source_for / feedback::CollectOptions::source_for.
  std::function<const retrieval::CandidateSource*(const std::string&)> lookup() const;
};
Sources make_sources(const DataOptions& d, const tasks::Task& task, store::Store& store, const RunOptions& run,
                     const std::vector<std::string>& specs, std::size_t n = 100);
// The model folders of the dense:DIR parts of a spec (inside rrf(...) too). make_sources
// applies it to the first stage of rerank(A,L,R) specs.
std::vector<std::string> dense_dirs(const std::string& spec);
// --llm SPEC: reference | local:DIR | openai:URL#MODEL. `task` may be null for verbs
// without one (generate, score); the reference reader then has no label set.
std::unique_ptr<llm::LanguageModel> make_llm(const std::string& spec, const DataOptions& d, const tasks::Task* task,
                                             const RunOptions& run);

// The tokenizer prompt budgets are counted in (RunOptions::tokenizer, defaulting to the
// local model's tokenizer).
std::unique_ptr<text::Tokenizer> budget_tokenizer(const RunOptions& run, const std::string& llm_spec);

// The language model's counters (LanguageModel::counters: requests, retries, cache hits,
// ...) as a JSON object, for run summaries; and as one line on stderr ("llm: 120 requests,
// 3 retries, ...") unless quiet or the model has none.
nlohmann::json llm_counters_json(const llm::LanguageModel& model);
void print_llm_counters(const llm::LanguageModel& model, bool quiet);

// Writes text to a file atomically (temp file + rename); Error naming the path.
void write_file(const std::filesystem::path& path, const std::string& text);

// Replaces `--config FILE` in a verb's arguments by the file's options (config_file.cpp: a
// TOML subset, key = value; the command line wins). UsageError naming the file and line.
std::vector<std::string> expand_config(const std::vector<std::string>& args);

// The verbs; each returns an exit code.
void add_rank(CLI::App& app, int& rc);
void add_eval(CLI::App& app, int& rc);
void add_metrics(CLI::App& app, int& rc);
void add_feedback(CLI::App& app, int& rc);
void add_import(CLI::App& app, int& rc);
void add_demo(CLI::App& app, int& rc);
void add_sample(CLI::App& app, int& rc);
void add_generate(CLI::App& app, int& rc);
void add_score(CLI::App& app, int& rc);

// Synthetic sample data (data/sample): LaMP-schema commit_subject data for `users` users.
void write_sample(const std::filesystem::path& out, std::uint64_t seed, std::size_t users);

}  // namespace attune::cli
