#include "attune/engine/data_spec.h"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "attune/core/error.h"
#include "attune/core/file.h"
#include "attune/core/strings.h"

namespace attune::engine {

namespace fs = std::filesystem;

data::Dataset load_dataset(const DataSpec& d) {
  if (!d.questions.empty()) {
    std::optional<fs::path> outputs;
    if (!d.outputs.empty()) outputs = d.outputs;
    return data::read_lamp(d.questions, outputs, d.task, d.split);
  }
  if (d.data.empty()) throw FieldError<UsageError>("data", "name a dataset directory (or an official questions file)");
  return data::load_split(d.data, d.task, d.split);
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

std::unique_ptr<tasks::Task> load_task(const DataSpec& d) {
  std::vector<std::string> labels;
  if (!d.data.empty()) {
    const fs::path lf = fs::path(d.data) / d.task / "labels.json";
    if (fs::exists(lf)) {
      try {
        labels = nlohmann::json::parse(read_file(lf)).get<std::vector<std::string>>();
      } catch (const nlohmann::json::exception& e) {
        throw InputError(lf.string(), "", "", std::string("expected a JSON array of strings: ") + e.what());
      }
    } else if (d.task == "slot") {
      std::set<std::string> seen;
      for (auto& o : train_outputs(d)) seen.insert(strip(o));
      labels.assign(seen.begin(), seen.end());
    }
  }
  return tasks::make_task(d.task, labels);
}

}  // namespace attune::engine
