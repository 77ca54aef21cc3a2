#include "common.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <nlohmann/json.hpp>

#include "attune/core/error.h"
#include "attune/core/file.h"
#include "attune/llm/generate_check.h"
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

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// A whole number in decimal digits ('-' first only when `is_signed`); leading zeros are
// dropped so that CLI11's base-0 conversion cannot read "010" as octal. "" when it is fine,
// else what is wrong.
std::string check_whole(std::string& v, bool is_signed) {
  const std::string shown = v;
  std::size_t i = (is_signed && !v.empty() && v[0] == '-') ? 1 : 0;
  const bool ok = v.size() > i && std::all_of(v.begin() + static_cast<std::ptrdiff_t>(i), v.end(), is_digit);
  if (!ok)
    return (is_signed ? "expected a whole number in decimal digits, got \"" : "expected a whole number >= 0 in decimal digits, got \"") +
           shown + "\"";
  std::size_t z = i;
  while (z + 1 < v.size() && v[z] == '0') ++z;
  v.erase(i, z - i);
  if (v == "-0") v = "0";
  // CLI11 reads past 64 bits as the largest value (strtoull saturates): refuse it here.
  errno = 0;
  if (is_signed)
    (void)std::strtoll(v.c_str(), nullptr, 10);
  else
    (void)std::strtoull(v.c_str(), nullptr, 10);
  if (errno == ERANGE) return "\"" + shown + "\" is out of range";
  return "";
}

// A finite real number in decimal notation: [-+]digits[.digits][e[-+]digits] (digits on at
// least one side of the point).
std::string check_real(const std::string& v) {
  std::size_t i = 0;
  if (i < v.size() && (v[i] == '-' || v[i] == '+')) ++i;
  std::size_t mantissa = 0;
  while (i < v.size() && is_digit(v[i])) ++i, ++mantissa;
  if (i < v.size() && v[i] == '.') {
    ++i;
    while (i < v.size() && is_digit(v[i])) ++i, ++mantissa;
  }
  bool ok = mantissa > 0;
  if (ok && i < v.size() && (v[i] == 'e' || v[i] == 'E')) {
    ++i;
    if (i < v.size() && (v[i] == '-' || v[i] == '+')) ++i;
    std::size_t exponent = 0;
    while (i < v.size() && is_digit(v[i])) ++i, ++exponent;
    ok = exponent > 0;
  }
  ok = ok && i == v.size() && std::isfinite(std::strtod(v.c_str(), nullptr));
  return ok ? "" : "expected a finite number in decimal notation (e.g. 0.5, 1e-5), got \"" + v + "\"";
}

void check_numbers_of(CLI::App& app) {
  for (CLI::Option* opt : app.get_options()) {
    // The type, without the descriptions of validators already attached ("UINT:INT in [0 - 256]").
    const std::string full = opt->get_type_name(), type = full.substr(0, full.find(':'));
    if (type == "INT" || type == "UINT") {
      const bool is_signed = type == "INT";
      // transform(): first in the option's chain, before ranges and hooks read the text.
      opt->transform(CLI::Validator([is_signed](std::string& v) { return check_whole(v, is_signed); }, "", "decimal"));
    } else if (type == "FLOAT") {
      opt->transform(CLI::Validator([](std::string& v) { return check_real(v); }, "", "finite"));
    }
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) check_numbers_of(*sub);
}

}  // namespace

void check_number_options(CLI::App& app) { check_numbers_of(app); }

void RunOptions::add(CLI::App& app) {
  app.add_option("--store", store, "the store: a SQLite file, or a postgresql:// URL")->capture_default_str();
  app.add_option("--seed", seed, "seed for everything random (recorded with the run)")->capture_default_str();
  app.add_option("--threads", threads,
                 "worker threads, and the threads torch runs one model operator on (0 = all cores; torch: one per "
                 "physical core unless OMP_NUM_THREADS is set)")
      ->capture_default_str()
      ->check(CLI::Range(std::size_t{0}, kMaxThreads))
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

void check_generate_options(llm::LanguageModel& model, const llm::GenerateOptions& g) {
  llm::validate_generate_options(g);
  model.generate(std::span<const llm::Prompt>{}, g);
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

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string part;
  while (std::getline(in, part, ',')) out.push_back(part);
  return out;
}

std::vector<std::size_t> positive_counts(const std::string& option, const std::string& value) {
  std::vector<std::size_t> out;
  for (const auto& k : split_commas(value)) {
    std::size_t v = 0, used = 0;
    try {
      v = std::stoul(k, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != k.size() || k.empty() || v == 0)
      throw UsageError(option + " " + value + ": expected positive whole numbers, e.g. 1,2,4");
    out.push_back(v);
  }
  if (out.empty()) throw UsageError(option + " " + value + ": expected positive whole numbers, e.g. 1,2,4");
  return out;
}

std::vector<double> real_list(const std::string& option, const std::string& value) {
  std::vector<double> out;
  for (const auto& k : split_commas(value)) {
    if (const auto bad = check_real(k); !bad.empty()) throw UsageError(option + " " + value + ": " + bad);
    out.push_back(std::strtod(k.c_str(), nullptr));
  }
  if (out.empty()) throw UsageError(option + " " + value + ": expected numbers separated by commas, e.g. 1,0.5,1");
  return out;
}

bool is_jsonl_file(const fs::path& p) {
  const auto e = p.extension().string();
  return e == ".jsonl" || e == ".ndjson";
}

std::size_t for_each_text_record(const fs::path& path, const std::vector<std::string>& fields, bool join,
                                 const std::string& key_field, const std::function<bool(const TextRecord&)>& on_record) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path.string(), "", "", "cannot be read");
  std::string line;
  std::size_t lineno = 0, empty = 0;
  const bool jsonl = is_jsonl_file(path);
  TextRecord r;
  std::string joined;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.empty() || line == "\r") continue;
    r.texts.clear();
    r.key.reset();
    if (!jsonl) {
      r.texts.emplace_back(line);
      if (!on_record(r)) break;
      continue;
    }
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object())
      throw InputError(path.string(), "line " + std::to_string(lineno), "", "not a JSON object (a .jsonl file holds one a line)");
    joined.clear();
    for (const auto& f : fields) {
      auto it = j.find(f);
      if (it == j.end() || !it->is_string() || it->get_ref<const std::string&>().empty()) continue;
      const auto& t = it->get_ref<const std::string&>();
      if (!join) {
        r.texts.emplace_back(t);
        continue;
      }
      if (!joined.empty()) joined += ' ';
      joined += t;
    }
    if (join && !joined.empty()) r.texts.emplace_back(joined);
    if (r.texts.empty()) {
      ++empty;
      continue;
    }
    if (!key_field.empty())
      if (auto it = j.find(key_field); it != j.end() && it->is_string()) r.key = it->get_ref<const std::string&>();
    if (!on_record(r)) break;
  }
  return empty;
}

std::size_t read_text_source(const fs::path& path, const std::vector<std::string>& fields, std::size_t room,
                             const std::function<void(std::string_view)>& add, std::size_t& added, bool join) {
  if (room && added >= room) return 0;
  return for_each_text_record(path, fields, join, "", [&](const TextRecord& r) {
    for (const auto& t : r.texts) {
      add(t);
      ++added;
      if (room && added >= room) return false;
    }
    return true;
  });
}

std::vector<Agent> read_agents(const std::string& file) {
  std::ifstream in(file);
  if (!in) throw UsageError("--agents " + file + ": no such file");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw UsageError("--agents " + file + ": not JSON (" + e.what() + ")");
  }
  if (!j.is_object() || !j.contains("agents") || !j["agents"].is_array() || j["agents"].empty())
    throw UsageError("--agents " + file + ": expected {\"agents\": [{\"name\", \"task\", \"llm\", \"k\"}, ...]} with at least one agent");
  std::vector<Agent> out;
  for (std::size_t i = 0; i < j["agents"].size(); ++i) {
    const auto& a = j["agents"][i];
    const auto field = [&](const char* k) {
      if (!a.is_object() || !a.contains(k) || !a[k].is_string() || a[k].get<std::string>().empty())
        throw UsageError("--agents " + file + ": agent " + std::to_string(i + 1) + " needs a non-empty string \"" + k + "\"");
      return a[k].get<std::string>();
    };
    Agent g{field("name"), field("task"), field("llm"), 5};
    if (a.contains("k")) {
      if (!a["k"].is_number_unsigned() || a["k"].get<std::size_t>() == 0)
        throw UsageError("--agents " + file + ": agent " + g.name + ": \"k\" must be a whole number >= 1");
      g.k = a["k"].get<std::size_t>();
    }
    for (const auto& o : out)
      if (o.name == g.name) throw UsageError("--agents " + file + ": two agents are named \"" + g.name + "\"");
    out.push_back(g);
  }
  return out;
}

}  // namespace attune::cli
