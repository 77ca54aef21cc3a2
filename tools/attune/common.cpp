#include "common.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "attune/core/error.h"
#include "attune/core/file.h"
#include "attune/retrieval/spec.h"

namespace fs = std::filesystem;

namespace attune::cli {

void DataOptions::add(CLI::App& app, bool need_split, bool need_task) {
  auto* dat = app.add_option("--data", data, "dataset directory: DIR/<task>/{split}_questions.json or a corpus directory");
  auto* t = app.add_option("--task", task, "task: lamp1..lamp7, commit_subject, commit_area, commit_pick, qa, factcheck, slot");
  if (need_task) t->required();
  if (need_split) app.add_option("--split", split, "split: train, dev or test")->capture_default_str();
  auto* q = app.add_option("--questions", questions, "an official LaMP questions file (instead of --data)");
  auto* o = app.add_option("--outputs", outputs, "the outputs file that goes with --questions");
  // Two sources of examples: refused (exit 2) rather than one silently ignored.
  dat->excludes(q);
  q->excludes(dat);
  o->needs(q);
  app.add_option("--labels", labels,
                 "classification tasks: a JSON label list (default: labels.json beside --questions or in DIR/<task>/, "
                 "else the task's built-in list)");
  app.add_option("--background", background,
                 "outputs file the reference reader fits its background on (default: DIR/<task>/train_outputs.json)");
}

namespace {
std::function<void(std::size_t)>& threads_hook() {
  static std::function<void(std::size_t)> hook;
  return hook;
}
}  // namespace

void on_threads_option(std::function<void(std::size_t)> hook) { threads_hook() = std::move(hook); }

void RunOptions::add(CLI::App& app) {
  app.add_option("--store", store, "SQLite store")->capture_default_str();
  app.add_option("--seed", seed, "seed for everything random (recorded with the run)")->capture_default_str();
  app.add_option("--threads", threads,
                 "worker threads, and the threads torch runs one model operator on (0 = all cores; torch: one per "
                 "physical core unless OMP_NUM_THREADS is set)")
      ->capture_default_str()
      ->check(CLI::Range(0, 4096))
      ->each([](const std::string& v) {
        if (threads_hook()) threads_hook()(std::stoul(v));
      });
  app.add_option("--tokenizer", tokenizer,
                 "tokenizer the prompt budget is counted in: whitespace, whitespace-noeos, or a model folder / "
                 "tokenizer.json (default: the local: model's own, else whitespace)");
  app.add_option_function<std::string>(
         "--device", [this](const std::string& v) { device = Device::parse(v); }, "where neural models run: auto, cpu, cuda, cuda:N")
      ->default_str("auto");
  app.add_option("--dtype", dtype, "neural model precision: float32, float16, bfloat16")->capture_default_str();
  app.add_flag("--quiet", quiet, "no progress on stderr");
  app.add_flag_function(
      "--allow-incomplete", [](std::int64_t) { retrieval::allow_incomplete_models(true); },
      "accept trained folders whose training run did not finish as retriever specs (their best epoch so far)");
}

const std::string& RunOptions::store_file() const {
  if (store.empty())
    throw FieldError<UsageError>("store", "--store is empty (an unset shell variable?): name the SQLite file that keeps "
                                          "the run's feedback, caches and records");
  const bool memory = store == ":memory:" || store.rfind("file::memory:", 0) == 0 ||
                      (store.rfind("file:", 0) == 0 && store.find("mode=memory") != std::string::npos);
  if (memory)
    throw FieldError<UsageError>("store", "--store " + store + " is an in-memory database: everything the run computes "
                                          "(LLM calls, feedback) would be lost at exit; name a file");
  return store;
}

nlohmann::json llm_counters_json(const llm::LanguageModel& model) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [name, value] : model.counters()) {
    if (value == std::floor(value) && std::fabs(value) < 9e15)
      j[name] = static_cast<long long>(value);
    else
      j[name] = value;
  }
  return j;
}

void print_llm_counters(const llm::LanguageModel& model, bool quiet) {
  const auto counters = model.counters();
  if (quiet || counters.empty()) return;
  std::string line = "llm:";
  for (std::size_t i = 0; i < counters.size(); ++i) {
    std::string name = counters[i].first;
    std::replace(name.begin(), name.end(), '_', ' ');
    char buf[64];
    const double v = counters[i].second;
    if (v == std::floor(v) && std::fabs(v) < 9e15)
      std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v));
    else
      std::snprintf(buf, sizeof buf, "%.2f", v);
    line += (i ? ", " : " ") + std::string(buf) + " " + name;
  }
  std::fprintf(stderr, "%s\n", line.c_str());
}

}  // namespace attune::cli
