#pragma once
// Option groups and loaders shared by the CLI verbs. Strings are parsed here, once, and
// errors name the offending value.
#include <CLI/CLI.hpp>
#include <cstdint>
#include <filesystem>
#include <memory>
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
// --llm SPEC: reference | local:DIR | openai:URL#MODEL. `task` may be null for verbs
// without one (generate, score); the reference reader then has no label set.
std::unique_ptr<llm::LanguageModel> make_llm(const std::string& spec, const DataOptions& d, const tasks::Task* task,
                                             const RunOptions& run);

// The tokenizer prompt budgets are counted in (RunOptions::tokenizer, defaulting to the
// local model's tokenizer).
std::unique_ptr<text::Tokenizer> budget_tokenizer(const RunOptions& run, const std::string& llm_spec);

// Writes text to a file atomically (temp file + rename); Error naming the path.
void write_file(const std::filesystem::path& path, const std::string& text);

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
