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
};

// The task, with labels read from the data directory where the task needs them
// (commit_area: labels.json; slot: the sections of the training outputs).
std::unique_ptr<tasks::Task> load_task(const DataSpec& d);
// The split's examples. UsageError (field "data") when neither data nor questions is set.
data::Dataset load_dataset(const DataSpec& d);
// The task's training outputs (the reference reader's background): `background` when set
// (InputError when it cannot be read), else DATA/<task>/train_outputs.json, else the
// outputs of a corpus task's train split; empty when there are none.
std::vector<std::string> train_outputs(const DataSpec& d);

}  // namespace attune::engine
