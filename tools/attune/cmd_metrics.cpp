// attune metrics: scores predictions against golds; JSON {metric: value} on stdout.
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "attune/core/error.h"
#include "attune/data/golds.h"
#include "common.h"

namespace attune::cli {

void add_metrics(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand("metrics", "score predictions (JSONL {id, output}) against a golds file");
  auto task_name = std::make_shared<std::string>();
  auto preds = std::make_shared<std::string>();
  auto golds = std::make_shared<std::string>();
  auto labels = std::make_shared<std::string>();
  cmd->add_option("--task", *task_name, "task name")->required();
  cmd->add_option("--predictions", *preds, "JSONL file, one {\"id\", \"output\"} per line")->required();
  cmd->add_option("--golds", *golds, "a LaMP outputs file ({\"golds\": [...]}) or a QA JSONL file")->required();
  cmd->add_option("--labels", *labels,
                  "classification tasks: a JSON label list (default: labels.json beside the golds, else the task's "
                  "built-in list; slot: the sections of train outputs beside a QA JSONL golds file)");
  cmd->callback([=, &rc] {
    // Golds: a QA JSONL file (its directory is a corpus directory: labels as `--data DIR`
    // finds them), or a LaMP outputs file (labels.json beside it).
    const std::string g = *golds;
    const bool jsonl = g.size() > 6 && g.substr(g.size() - 6) == ".jsonl";
    engine::DataSpec spec;
    spec.task = *task_name;
    spec.labels = *labels;
    if (jsonl) spec.data = std::filesystem::path(g).parent_path().string();
    else spec.questions = g;
    if (jsonl && spec.data.empty()) spec.data = ".";
    const auto label_set = engine::resolve_labels(spec);  // UsageError for an unknown task
    auto task = tasks::make_task(*task_name, label_set.labels);
    const data::Dataset gold = jsonl ? data::read_qa_jsonl(g, *task_name, "") : data::read_golds(g, *task_name, "");
    if (gold.examples.empty()) throw InputError(g, "", "", "no golds: nothing to score");
    engine::check_gold_labels(gold, label_set, task->name());
    const auto pred = data::read_predictions(*preds);
    std::unordered_map<std::string, const data::Prediction*> by_id;
    for (const auto& p : pred) by_id.emplace(p.id, &p);
    std::vector<std::string> outs, gs;
    for (std::size_t i = 0; i < gold.examples.size(); ++i) {
      const auto& ex = gold.examples[i];
      auto it = by_id.find(ex.id);
      if (it == by_id.end())
        throw InputError(*preds, "", "", "no prediction for the gold id \"" + ex.id + "\" (" + g + ": " + data::gold_place(gold, i).record + ")");
      outs.push_back(it->second->output);
      gs.push_back(ex.output);
    }
    if (pred.size() != gold.examples.size()) {
      std::unordered_map<std::string, int> known;
      for (const auto& ex : gold.examples) known[ex.id] = 1;
      for (const auto& p : pred)
        if (!known.count(p.id)) throw InputError(*preds, p.record, "id", "a prediction for an id that is not in the golds " + g);
    }
    nlohmann::json res = nlohmann::json::object();
    for (auto& [k, v] : task->aggregate(outs, gs)) res[k] = v;
    std::puts(res.dump().c_str());
    rc = 0;
  });
}

}  // namespace attune::cli
