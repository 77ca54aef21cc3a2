// attune metrics: scores predictions against golds; JSON {metric: value} on stdout.
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "attune/core/error.h"
#include "common.h"

namespace attune::cli {

namespace {

// Predictions: JSONL {"id","output"} per line.
std::unordered_map<std::string, std::string> read_predictions(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open");
  std::unordered_map<std::string, std::string> out;
  std::string line;
  std::size_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      throw InputError(path, "line " + std::to_string(n), "", std::string("invalid JSON: ") + e.what());
    }
    if (!j.is_object()) throw InputError(path, "line " + std::to_string(n), "", "expected an object");
    if (!j.contains("id") || !j["id"].is_string()) throw InputError(path, "line " + std::to_string(n), "id", "expected a string");
    const std::string id = j["id"];
    if (!j.contains("output") || !j["output"].is_string())
      throw InputError(path, "line " + std::to_string(n) + " (id \"" + id + "\")", "output", "expected a string");
    if (!out.emplace(id, j["output"].get<std::string>()).second)
      throw InputError(path, "line " + std::to_string(n) + " (id \"" + id + "\")", "id", "duplicate id");
  }
  return out;
}

}  // namespace

void add_metrics(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand("metrics", "score predictions (JSONL {id, output}) against a golds file");
  auto task_name = std::make_shared<std::string>();
  auto preds = std::make_shared<std::string>();
  auto golds = std::make_shared<std::string>();
  auto labels = std::make_shared<std::string>();
  cmd->add_option("--task", *task_name, "task name")->required();
  cmd->add_option("--predictions", *preds, "JSONL file, one {\"id\", \"output\"} per line")->required();
  cmd->add_option("--golds", *golds, "a LaMP outputs file ({\"golds\": [...]}) or a QA JSONL file")->required();
  cmd->add_option("--labels", *labels, "a JSON label list (commit_area's labels.json, slot's sections)");
  cmd->callback([=, &rc] {
    std::vector<std::string> label_list;
    if (!labels->empty()) {
      std::ifstream in(*labels);
      if (!in) throw Error(*labels + ": cannot open");
      try {
        label_list = nlohmann::json::parse(in).get<std::vector<std::string>>();
      } catch (const nlohmann::json::exception& e) {
        throw InputError(*labels, "", "", std::string("expected a JSON array of strings: ") + e.what());
      }
    }
    auto task = tasks::make_task(*task_name, label_list);
    // Golds: an outputs file, or a QA JSONL file.
    std::vector<std::pair<std::string, std::string>> gold;
    const std::string g = *golds;
    if (g.size() > 6 && g.substr(g.size() - 6) == ".jsonl") {
      for (auto& ex : data::read_qa_jsonl(g, *task_name, "").examples) gold.emplace_back(ex.id, ex.output);
    } else {
      std::ifstream in(g, std::ios::binary);
      if (!in) throw Error(g + ": cannot open");
      nlohmann::json j;
      try {
        j = nlohmann::json::parse(in);
      } catch (const nlohmann::json::exception& e) {
        throw InputError(g, "", "", std::string("invalid JSON: ") + e.what());
      }
      if (!j.is_object() || !j.contains("golds") || !j["golds"].is_array())
        throw InputError(g, "", "golds", "expected an array of {id, output}");
      std::size_t i = 0;
      for (const auto& x : j["golds"]) {
        const std::string rec = "record " + std::to_string(i++);
        if (!x.is_object() || !x.contains("id") || !x["id"].is_string()) throw InputError(g, rec, "id", "expected a string");
        if (!x.contains("output") || !x["output"].is_string()) throw InputError(g, rec, "output", "expected a string");
        gold.emplace_back(x["id"], x["output"]);
      }
    }
    auto pred = read_predictions(*preds);
    std::vector<std::string> outs, gs;
    for (auto& [id, out] : gold) {
      auto it = pred.find(id);
      if (it == pred.end()) throw InputError(*preds, "id \"" + id + "\"", "", "no prediction for this gold id");
      outs.push_back(it->second);
      gs.push_back(out);
    }
    if (pred.size() != gold.size()) {
      std::unordered_map<std::string, int> known;
      for (auto& [id, out] : gold) known[id] = 1;
      for (auto& [id, out] : pred)
        if (!known.count(id)) throw InputError(*preds, "id \"" + id + "\"", "", "prediction for an id that is not in the golds");
    }
    nlohmann::json res = nlohmann::json::object();
    for (auto& [k, v] : task->aggregate(outs, gs)) res[k] = v;
    std::puts(res.dump().c_str());
    rc = 0;
  });
}

}  // namespace attune::cli
