#include "attune/engine/data_spec.h"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <unordered_set>

#include "attune/core/error.h"
#include "attune/core/file.h"
#include "attune/core/strings.h"
#include "attune/data/golds.h"
#include "attune/tasks/labels.h"

namespace attune::engine {

namespace fs = std::filesystem;

data::Dataset load_dataset(const DataSpec& d) {
  if (!d.questions.empty() && !d.data.empty())
    throw FieldError<UsageError>("questions", "a dataset directory (--data " + d.data + ") and a questions file (--questions " +
                                                  d.questions + ") were both given: name one");
  data::Dataset ds;
  if (!d.questions.empty()) {
    std::optional<fs::path> outputs;
    if (!d.outputs.empty()) outputs = d.outputs;
    ds = data::read_lamp(d.questions, outputs, d.task, d.split);
  } else {
    if (d.data.empty()) throw FieldError<UsageError>("data", "name a dataset directory (or an official questions file)");
    ds = data::load_split(d.data, d.task, d.split);
  }
  if (ds.examples.empty())
    throw InputError(ds.sources.empty() ? d.data : ds.sources.front().string(), "", "",
                     "no examples: the " + d.task + " " + d.split + " split is empty");
  if (ds.has_outputs) check_gold_labels(ds, resolve_labels(d), d.task);
  return ds;
}

void check_gold_labels(const data::Dataset& ds, const LabelSet& labels, const std::string& task) {
  if (labels.labels.empty()) return;
  std::unordered_set<std::string> set(labels.labels.begin(), labels.labels.end());
  for (std::size_t i = 0; i < ds.examples.size(); ++i) {
    const std::string g = strip(ds.examples[i].output);
    if (set.count(g)) continue;
    const auto at = data::gold_place(ds, i);
    throw InputError(at.file, at.record, "output",
                     "gold \"" + g + "\" is not one of the " + std::to_string(labels.labels.size()) + " labels of " +
                         task + " (from " + labels.source +
                         "); the scores would be wrong: give the dataset's label list (labels.json, --labels)");
  }
}

std::vector<std::string> train_outputs(const DataSpec& d) {
  std::vector<std::string> out;
  if (d.data.empty() && d.background.empty()) return out;
  const fs::path lamp = d.background.empty() ? fs::path(d.data) / d.task / "train_outputs.json" : fs::path(d.background);
  if (!d.background.empty() && !fs::exists(lamp)) throw Error(lamp.string() + ": cannot open");
  if (fs::exists(lamp)) {
    // Only the outputs file: the training questions (tens of MB) are not needed.
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(read_file(lamp));
    } catch (const nlohmann::json::exception& e) {
      throw InputError(lamp.string(), "", "", std::string("invalid JSON: ") + e.what());
    }
    if (!j.is_object() || !j.contains("golds") || !j["golds"].is_array())
      throw InputError(lamp.string(), "", "golds", "expected an array of {id, output}");
    std::size_t i = 0;
    for (const auto& g : j["golds"]) {
      if (!g.is_object() || !g.contains("output") || !g["output"].is_string())
        throw InputError(lamp.string(), "record " + std::to_string(i), "output", "expected a string");
      out.push_back(g["output"].get<std::string>());
      ++i;
    }
    return out;
  }
  if (fs::exists(fs::path(d.data) / (d.task + "_train.jsonl"))) {
    auto ds = data::load_split(d.data, d.task, "train");
    for (auto& ex : ds.examples) out.push_back(ex.output);
  }
  return out;
}

LabelSet resolve_labels(const DataSpec& d) {
  const auto task = tasks::make_task(d.task);  // UsageError for an unknown task
  LabelSet out;
  if (!tasks::takes_labels(d.task)) {
    if (!d.labels.empty()) throw FieldError<UsageError>("labels", "task " + task->name() + " takes no label list");
    return out;
  }
  std::optional<fs::path> file;
  if (!d.labels.empty()) {
    file = d.labels;
  } else {
    fs::path beside;
    if (!d.questions.empty()) beside = fs::path(d.questions).parent_path() / "labels.json";
    else if (!d.data.empty()) beside = fs::path(d.data) / d.task / "labels.json";
    std::error_code ec;
    if (!beside.empty() && fs::exists(beside, ec)) file = beside;
  }
  if (file) {
    out.labels = data::read_label_list(*file);
    out.source = file->string();
  } else if (task->name() == "slot" && !(d.data.empty() && d.background.empty())) {
    std::set<std::string> seen;
    for (auto& o : train_outputs(d)) seen.insert(strip(o));
    out.labels.assign(seen.begin(), seen.end());
    out.source = "the sections of slot's training outputs";
  } else {
    out.labels = task->labels();
    out.source = "the built-in list of " + task->name();
  }
  return out;
}

std::unique_ptr<tasks::Task> load_task(const DataSpec& d) {
  const auto labels = resolve_labels(d);
  return tasks::make_task(d.task, labels.labels);
}

}  // namespace attune::engine
