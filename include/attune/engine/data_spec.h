#pragma once
// Where a run's examples come from, and the task read from there: a dataset directory
// (LaMP layout, or a corpus task's directory) or official LaMP files named directly.
#include <memory>
#include <string>
#include <vector>

#include "attune/data/dataset.h"
#include "attune/tasks/task.h"

namespace attune::engine {

struct DataSpec {
  std::string data;                // dataset directory: DATA/<task>/{split}_questions.json or a corpus directory
  std::string task;                // lamp1..lamp7, commit_subject, commit_area, commit_pick, qa, factcheck, slot
  std::string split = "dev";       // train, dev or test
  std::string questions, outputs;  // an official LaMP questions file (and its outputs) instead of `data`
  std::string background;          // an outputs file the reference reader fits (default: the task's train outputs)
  std::string labels;              // a JSON label list for classification tasks (default: see resolve_labels)
};

// The label list a classification task scores against, and where it came from.
struct LabelSet {
  std::vector<std::string> labels;  // empty: the task takes none (or slot without a list: strings compared)
  std::string source;               // "FILE", or "the built-in list of commit_area", ... (for messages)
};
// The effective label list, first found of: `labels` (UsageError, field "labels", for a task
// that is not a classification); labels.json beside `questions` (with --questions) or in
// DATA/<task>/ (with --data); slot: the distinct sections of the training outputs; the
// task's built-in list. Empty for tasks that take no labels.
LabelSet resolve_labels(const DataSpec& d);
// The task, with the labels of resolve_labels.
std::unique_ptr<tasks::Task> load_task(const DataSpec& d);
// The split's examples. UsageError (field "data") when neither data nor questions is set,
// (field "questions") when both are. InputError naming the file when it holds no examples,
// and naming the gold's record and field "output" when a gold is not one of the labels of
// resolve_labels.
data::Dataset load_dataset(const DataSpec& d);
// InputError naming the gold file, the record and field "output" for the first gold of `ds`
// (stripped) that is not in `labels`; nothing when `labels` is empty.
void check_gold_labels(const data::Dataset& ds, const LabelSet& labels, const std::string& task);
// The task's training outputs (the reference reader's background): `background` when set
// (InputError when it cannot be read), else DATA/<task>/train_outputs.json, else the
// outputs of a corpus task's train split; empty when there are none.
std::vector<std::string> train_outputs(const DataSpec& d);

}  // namespace attune::engine
