#pragma once
// The CLI verbs of the neural half (they link torch through the models/train layers).
#include <CLI/CLI.hpp>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>

#include "attune/feedback/collect.h"
#include "attune/train/fit_options.h"
#include "attune/train/workflows.h"
#include "common.h"

namespace attune::cli {

// attune pretrain-encoder: Contriever-style contrastive pretraining of a small BERT encoder.
void add_train_lm(CLI::App& app, int& rc);  // cmd_train_lm.cpp
void add_pretrain_encoder(CLI::App& app, int& rc);
// attune train: ROPG-RL / ROPG-KD, RSPG-Pre/Post and Pearl from language-model feedback.
void add_train(CLI::App& app, int& rc);

// The options every `attune train` method shares (cmd_train.cpp parses them).
struct TrainArgs {
  std::string method;
  std::string llm = "reference";
  std::string out;
  std::string init;                     // the encoder to start from
  std::string initial = "bm25";         // the initial retriever (top-l candidates)
  std::size_t top_l = 16;
  std::string dev_split = "dev";        // "" = no dev split
  std::size_t limit = 0, dev_limit = 0; // first N train / dev examples (0 = all)
  std::size_t feedback_max_length = 0;  // feedback prompt budget (0 = the kind's default)
  std::size_t max_new_tokens = llm::GenerateOptions{}.max_new_tokens;  // feedback generations (eval's --max-new-tokens)
  std::string decode = llm::GenerateOptions{}.decode;                  // feedback generations (eval's --decode)
  bool resume = false;
  bool double_softmax = false;
  // Unset = the method's own default (RopgOptions, RspgOptions, PearlOptions); what is set
  // is checked by the options' validate() (messages name the field, the CLI adds the flag).
  std::optional<double> target_temperature;  // KD / RSPG target softmax temperature (papers: 1)
  std::optional<std::string> policy_scale;     // ROPG-KD: fixed | fitted
  bool freeze_embeddings = false;              // ROPG/LUF: the word embeddings stay as loaded
  std::optional<double> policy_temperature;  // ROPG: pi = softmax(score / tau) (default: the encoder's own)
  std::optional<std::string> target_normalization;  // KD / RSPG targets: zscore | none
  std::string protocol = "rerank";           // ROPG: how the trained folder retrieves (rerank | dense)
  std::optional<std::string> initial_prior;  // ROPG: learned | none (default: learned with --protocol rerank)
  bool keep_flat = false;                    // ROPG-KD: train on equal-utility queries too (the paper's)
  bool document_dates = false;
  std::string document_fields;               // ROPG: "F1,F2": candidates read with " F: value" (date: --document-dates)
  std::optional<std::string> luf_weights;    // LUF: "STRICT,FLACCID,HARD" loss weights
  std::optional<double> luf_gamma;           // LUF: the hard-negative margin
  bool luf_in_batch = false, luf_relevance_batches = false;  // LUF: paper 004 Eq. 2's B and Eq. 1
  std::optional<std::string> kd_target;      // ROPG-KD: utility | likelihood               // ROPG: candidates read with " date: DATE" (000 / LaMP code)
  std::optional<std::size_t> epochs, batch_size, micro_batch, checkpoint_every;
  std::optional<double> lr, warmup, clip;
  std::optional<std::size_t> query_max_length, doc_max_length;
};

// The shared hyper-parameters that were given override the method's own defaults in `o`
// (RopgOptions::fit, RspgOptions::fit, PearlOptions::fit), and the run's own options
// (output folder, seed, device, resume, quiet) are set.
void apply_fit_options(const TrainArgs& a, const RunOptions& r, train::FitOptions& o);

// A split of the run as the train:: workflows read it, with what it owns: the dataset
// (loaded from `d`) and the candidate sources of `specs` (engine::make_sources).
struct WorkflowSplit {
  data::Dataset dataset;
  engine::Sources sources;
  std::size_t limit = 0;
  train::SplitSource view() const { return {&dataset, sources.base.get(), sources.lookup(), limit}; }
};
WorkflowSplit load_workflow_split(const DataOptions& d, const tasks::Task& task, store::Store& st, const RunOptions& r,
                                  const std::vector<std::string>& specs, std::size_t limit);
// The dev split of a training run (--dev-split, "" = none): null without one.
std::unique_ptr<WorkflowSplit> load_dev_split(const DataOptions& d, const TrainArgs& a, const tasks::Task& task,
                                              store::Store& st, const RunOptions& r, const std::vector<std::string>& specs);
// The workflow's bench: the task, model, store and tokenizer, the run's threads and progress,
// and --max-new-tokens for the generations feedback scores.
train::Bench make_bench(const tasks::Task& task, llm::LanguageModel& model, store::Store& st, const text::Tokenizer& tok,
                        const RunOptions& r, const TrainArgs& a);

// --NAME whose value, when given, sets `value` (unset: the method's default).
template <class T>
CLI::Option* add_optional(CLI::App* app, const std::string& name, std::optional<T>& value, const std::string& help) {
  return app->add_option_function<T>(name, [&value](const T& v) { value = v; }, help);
}

// A method's runner: called after the shared options are parsed and checked.
using TrainRunner = std::function<void(const DataOptions&, const RunOptions&, const TrainArgs&)>;
// Each registers its own options on the train subcommand and returns its runner.
TrainRunner add_rspg_options(CLI::App* train);   // cmd_train_rspg.cpp
TrainRunner add_pearl_options(CLI::App* train);  // cmd_train_pearl.cpp
TrainRunner add_purple_options(CLI::App* train); // cmd_train_purple.cpp
TrainRunner add_ium_options(CLI::App* train);    // cmd_train_ium.cpp

}  // namespace attune::cli
