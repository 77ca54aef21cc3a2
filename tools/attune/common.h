#pragma once
// Option groups and printing shared by the CLI verbs (the factories behind them are the
// engine layer's). Strings are parsed here, once, and errors name the offending value.
#include <CLI/CLI.hpp>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "attune/core/run_control.h"
#include "attune/engine/data_spec.h"
#include "attune/engine/models.h"
#include "attune/engine/sources.h"
#include "attune/llm/language_model.h"

namespace attune::cli {

// --data, --task, --split, --questions, --outputs, --background.
struct DataOptions : engine::DataSpec {
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
  Device device;                 // neural models (--device auto | cpu | cuda | cuda:N, parsed once)
  std::string dtype = "float32"; // neural models: float32 | float16 | bfloat16
  void add(CLI::App& app);
  engine::ModelOptions models() const { return {device, dtype}; }
  // --store, checked: UsageError for "" (an unset shell variable) and in-memory databases
  // (":memory:", "file::memory:", mode=memory), which would discard every LLM call and
  // feedback record of the run while reporting success.
  const std::string& store_file() const;
  // The run's seed, threads and progress into a job's RunControl (its batch and limit are the verb's).
  void apply(RunControl& run) const {
    run.seed = seed;
    run.threads = threads;
    run.progress = !quiet;
  }
};

// The engine's factories, under the names the verbs use.
using engine::load_dataset;
using engine::load_task;
using engine::Sources;
using engine::train_outputs;

// The language model's counters (LanguageModel::counters: requests, retries, cache hits,
// ...) as a JSON object, for run summaries; and as one line on stderr ("llm: 120 requests,
// 3 retries, ...") unless quiet or the model has none.
nlohmann::json llm_counters_json(const llm::LanguageModel& model);
void print_llm_counters(const llm::LanguageModel& model, bool quiet);

// Replaces `--config FILE` in a verb's arguments by the file's options (config_file.cpp: a
// TOML subset, key = value; the command line wins). UsageError naming the file and line.
std::vector<std::string> expand_config(const std::vector<std::string>& args);

inline constexpr const char* kDescription = "attune: learn which documents actually help a language model, and serve them";
inline constexpr const char* kVersion = "attune 0.1.0";
// --no-repeat-ngram's help, the same for every verb that generates with it.
inline constexpr const char* kNoRepeatNgramHelp =
    "no n-gram of this many tokens generated twice in one answer (0 = off; the prompt does not count, so copying from it "
    "stays free); local: models only";

// Parses argv (after --config expansion) into `app` and runs the chosen verb: the exit code
// (0, 2 for usage errors, 1 for runtime errors, one line on stderr naming the option of a
// FieldError). A failed write to stdout is an error (exit 1).
int run_app(CLI::App& app, int& rc, int argc, char** argv);

// Refuses generation options `model` cannot honour, before any work: the shared checks
// (llm::validate_generate_options), then a generate call with no prompts, which asks the
// model nothing and lets a backend refuse what it cannot do (local: max_new_tokens at or
// past its context). The errors name the field; run_app adds the option.
void check_generate_options(llm::LanguageModel& model, const llm::GenerateOptions& g);

// What --threads does besides sizing attune's own pools (attune-torch: torch's threads).
void on_threads_option(std::function<void(std::size_t)> hook);
// --threads accepts 0 (all cores) .. kMaxThreads: more workers than that only add memory and
// contention on any machine attune runs on.
inline constexpr std::size_t kMaxThreads = 256;

// Checks every number option of `app` and of its subcommands where the text is read, so no
// value wraps or is read in another base: whole numbers (CLI11 type INT, UINT) must be plain
// decimal digits, with a leading '-' only for signed options ("-1" for a count, "0x10" and
// "1e3" are refused; leading zeros are decimal, "010" = 10, not octal 8); real numbers
// (FLOAT) must be finite and in decimal notation ("nan", "inf", "1e999" and hex floats are
// refused). The usage error names the option and the value. run_app calls it before parsing.
void check_number_options(CLI::App& app);

// The verbs; each returns an exit code.
void add_rank(CLI::App& app, int& rc);
void add_eval(CLI::App& app, int& rc);
void add_metrics(CLI::App& app, int& rc);
void add_feedback(CLI::App& app, int& rc);
void add_judge(CLI::App& app, int& rc);
void add_import(CLI::App& app, int& rc);
void add_demo(CLI::App& app, int& rc);
void add_sample(CLI::App& app, int& rc);
void add_train_tokenizer(CLI::App& app, int& rc);  // cmd_train_tokenizer.cpp
void add_tenant(CLI::App& app, int& rc);           // cmd_tenant.cpp
void add_import_git(CLI::App& app, int& rc);       // cmd_import_git.cpp
void add_report(CLI::App& app, int& rc);           // cmd_report.cpp

// "a,b,c" -> {"a", "b", "c"} (empty pieces kept).
std::vector<std::string> split_commas(const std::string& s);
// A comma-separated list of positive whole numbers ("1,2,4"), the value of `option`:
// UsageError naming the option and the value otherwise (an empty list included).
std::vector<std::size_t> positive_counts(const std::string& option, const std::string& value);
// A comma list of finite decimal reals ("1,0.5,1"), as check_number_options reads one real;
// a UsageError naming the option and the value otherwise.
std::vector<double> real_list(const std::string& option, const std::string& value);
// Text training sources (train-tokenizer, train-lm): .jsonl / .ndjson files hold one JSON
// object a line whose string `fields` are texts; any other file holds one text a line.
bool is_jsonl_file(const std::filesystem::path& p);
// Feeds every text of `path` to `add`, counting them in `added`, until `added` reaches `room`
// (0 = no limit); returns how many JSONL lines held none of the fields. With `join`, a JSONL
// line's present fields are one text, joined by a space in `fields` order (a commit's subject
// and description as one document); without, each field is a text of its own. InputError
// naming the file and line for a JSONL line that is not a JSON object, or a file that cannot
// be read.
std::size_t read_text_source(const std::filesystem::path& path, const std::vector<std::string>& fields, std::size_t room,
                             const std::function<void(std::string_view)>& add, std::size_t& added, bool join = false);
// One line of a text source: its texts (as read_text_source gives them) and, for JSONL with a
// key field, that field's string value (none where the line lacks it or it is not a string).
struct TextRecord {
  std::vector<std::string> texts;
  std::optional<std::string> key;
};
// Calls on_record for every line that holds a text, in file order, until it returns false;
// returns how many JSONL lines held none of the fields. Errors as read_text_source.
std::size_t for_each_text_record(const std::filesystem::path& path, const std::vector<std::string>& fields, bool join,
                                 const std::string& key_field, const std::function<bool(const TextRecord&)>& on_record);
void add_generate(CLI::App& app, int& rc);
void add_score(CLI::App& app, int& rc);
void add_serve_llm(CLI::App& app, int& rc);  // cmd_serve_llm.cpp
void add_serve(CLI::App& app, int& rc);      // cmd_serve.cpp
void add_user_feedback(CLI::App& app, int& rc);  // cmd_user_feedback.cpp

// Synthetic sample data (data/sample): LaMP-schema commit_subject data for `users` users.
void write_sample(const std::filesystem::path& out, std::uint64_t seed, std::size_t users);

// An agent of an agents file (paper 002: a task answered by one language model with k
// documents): {"agents": [{"name", "task", "llm", "k"}, ...]} (k defaults to 5).
struct Agent {
  std::string name, task, llm;
  std::size_t k = 5;
};
// The agents of `file`, in order; UsageError naming the file and the agent for a missing or
// malformed field, a k below 1, two agents of one name, or no agent.
std::vector<Agent> read_agents(const std::string& file);

}  // namespace attune::cli
