#include "common.h"

#include "attune/models/local_lm.h"
#include "attune/models/runtime.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <unistd.h>

#include "attune/core/error.h"
#include "attune/core/hash.h"
#include "attune/core/strings.h"
#include "attune/llm/openai.h"
#include "attune/llm/reference.h"
#include "attune/neural/dense_corpus.h"
#include "attune/retrieval/retriever.h"

namespace fs = std::filesystem;

namespace attune::cli {

void DataOptions::add(CLI::App& app, bool need_split, bool need_task) {
  app.add_option("--data", data, "dataset directory: DIR/<task>/{split}_questions.json or a corpus directory");
  auto* t = app.add_option("--task", task, "task: lamp1..lamp7, commit_subject, commit_area, commit_pick, qa, factcheck, slot");
  if (need_task) t->required();
  if (need_split) app.add_option("--split", split, "split: train, dev or test")->capture_default_str();
  app.add_option("--questions", questions, "an official LaMP questions file (instead of --data)");
  app.add_option("--outputs", outputs, "the outputs file that goes with --questions");
  app.add_option("--background", background,
                 "outputs file the reference reader fits its background on (default: DIR/<task>/train_outputs.json)");
}

void RunOptions::add(CLI::App& app) {
  app.add_option("--store", store, "SQLite store")->capture_default_str();
  app.add_option("--seed", seed, "seed for everything random (recorded with the run)")->capture_default_str();
  app.add_option("--threads", threads,
                 "worker threads, and the threads torch runs one model operator on (0 = all cores; torch: one per "
                 "physical core unless OMP_NUM_THREADS is set)")
      ->capture_default_str()
      ->check(CLI::Range(0, 4096))
      ->each([](const std::string& v) { models::set_torch_threads(std::stoul(v)); });
  app.add_option("--tokenizer", tokenizer,
                 "tokenizer the prompt budget is counted in: whitespace, whitespace-noeos, or a model folder / "
                 "tokenizer.json (default: the local: model's own, else whitespace)");
  app.add_option("--device", device, "where neural models run: auto, cpu, cuda, cuda:N")->capture_default_str();
  app.add_option("--dtype", dtype, "neural model precision: float32, float16, bfloat16")->capture_default_str();
  app.add_flag("--quiet", quiet, "no progress on stderr");
}

namespace {

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw Error(p.string() + ": cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

data::Dataset load_dataset(const DataOptions& d) {
  if (!d.questions.empty()) {
    std::optional<fs::path> outputs;
    if (!d.outputs.empty()) outputs = d.outputs;
    return data::read_lamp(d.questions, outputs, d.task, d.split);
  }
  if (d.data.empty()) throw UsageError("name a dataset with --data DIR (or --questions FILE)");
  return data::load_split(d.data, d.task, d.split);
}

std::vector<std::string> train_outputs(const DataOptions& d) {
  std::vector<std::string> out;
  if (d.data.empty() && d.background.empty()) return out;
  const fs::path lamp = d.background.empty() ? fs::path(d.data) / d.task / "train_outputs.json" : fs::path(d.background);
  if (!d.background.empty() && !fs::exists(lamp)) throw Error(lamp.string() + ": cannot open");
  if (fs::exists(lamp)) {
    // Only the outputs file: the training questions (tens of MB) are not needed.
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(read_text(lamp));
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

std::unique_ptr<tasks::Task> load_task(const DataOptions& d) {
  std::vector<std::string> labels;
  if (!d.data.empty()) {
    const fs::path lf = fs::path(d.data) / d.task / "labels.json";
    if (fs::exists(lf)) {
      try {
        labels = nlohmann::json::parse(read_text(lf)).get<std::vector<std::string>>();
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

std::unique_ptr<retrieval::CandidateSource> make_source(const DataOptions& d, const tasks::Task& task,
                                                        store::Store& store, bool quiet, std::size_t n) {
  if (!task.uses_corpus()) return std::make_unique<retrieval::ProfileCandidates>(task);
  if (d.data.empty()) throw UsageError("task " + task.name() + " searches a corpus: name its directory with --data");
  const fs::path corpus_file = data::find_corpus(d.data);
  auto corpus = data::read_corpus_jsonl(corpus_file);
  Hasher h;
  h.add("corpus-bm25-v1").add(task.name());
  std::vector<std::string> texts;
  texts.reserve(corpus.size());
  for (auto& doc : corpus) {
    doc.text = task.document_text(doc);
    h.add(doc.id).add(doc.text);
    texts.push_back(doc.text);
  }
  const std::string key = "bm25:" + h.hex();
  index::CorpusIndex idx;
  if (auto blob = store.blob_get(key)) {
    idx = index::CorpusIndex::deserialize(*blob);
  } else {
    if (!quiet) std::fprintf(stderr, "building the BM25 index of %s (%zu passages), once\n", corpus_file.c_str(), corpus.size());
    idx = index::CorpusIndex::build(texts);
    store.blob_put(key, idx.serialize());
  }
  return std::make_unique<retrieval::CorpusCandidates>(task, std::move(corpus), std::move(idx), n);
}

std::vector<std::string> dense_dirs(const std::string& spec) {
  if (starts_with(spec, "dense:")) return {spec.substr(6)};
  // A folder trained by `attune train` (ROPG) is a dense retriever too.
  if (!starts_with(spec, "rrf(") && retrieval::trained_model_kind(spec) == "dense") return {spec};
  std::vector<std::string> out;
  if (starts_with(spec, "rrf(") && spec.size() > 5 && spec.back() == ')')
    for (const auto& part : retrieval::split_specs(std::string_view(spec).substr(4, spec.size() - 5)))
      for (auto& dir : dense_dirs(part)) out.push_back(std::move(dir));
  return out;
}

const retrieval::CandidateSource& Sources::for_spec(const std::string& spec) const {
  auto it = by_spec.find(spec);
  return it == by_spec.end() ? *base : *it->second;
}

std::function<const retrieval::CandidateSource*(const std::string&)> Sources::lookup() const {
  return [this](const std::string& spec) { return &for_spec(spec); };
}

Sources make_sources(const DataOptions& d, const tasks::Task& task, store::Store& store, const RunOptions& run,
                     const std::vector<std::string>& specs, std::size_t n) {
  Sources out;
  out.base = make_source(d, task, store, run.quiet, n);
  const auto* bm25 = dynamic_cast<const retrieval::CorpusCandidates*>(out.base.get());
  if (!bm25) return out;  // per-profile task: dense: ranks the profile with exact inner products
  std::map<std::string, const retrieval::CandidateSource*> by_dir;
  models::EncoderOptions eo;
  eo.device = run.device;
  neural::DenseCorpusOptions dopts;
  dopts.n = n;
  dopts.progress = !run.quiet;
  for (const auto& spec : specs) {
    // rerank(A,L,R) reranks what A ranks: A's candidates (a Pearl folder expands to one).
    std::string first = retrieval::expand_spec(spec);
    for (std::string a; !(a = retrieval::rerank_initial(first)).empty();) first = retrieval::expand_spec(a);
    const auto dirs = dense_dirs(first);
    if (dirs.empty() || out.by_spec.count(spec)) continue;
    std::vector<const retrieval::CandidateSource*> parts;
    for (const auto& dir : dirs) {
      auto& src = by_dir[dir];
      if (!src) {
        if (!fs::is_directory(dir)) throw UsageError("retriever \"" + spec + "\": no such model folder \"" + dir + "\"");
        out.owned.push_back(neural::DenseCorpusCandidates::open(task, bm25->corpus(), dir, &store, eo, dopts));
        src = out.owned.back().get();
      }
      parts.push_back(src);
    }
    if (starts_with(first, "dense:")) {
      out.by_spec[spec] = parts.front();  // its own dense top-n
    } else {
      parts.insert(parts.begin(), out.base.get());  // rrf(...): BM25's top-n, then the dense ones
      out.owned.push_back(std::make_unique<retrieval::UnionCandidates>(parts));
      out.by_spec[spec] = out.owned.back().get();
    }
  }
  return out;
}

std::unique_ptr<llm::LanguageModel> make_llm(const std::string& spec, const DataOptions& d, const tasks::Task* task,
                                             const RunOptions& run) {
  if (spec == "reference") {
    auto background = train_outputs(d);
    if (background.empty())
      throw Error("the reference reader fits its background on the task's training outputs, and " +
                  (d.data.empty() ? std::string("neither --data nor --background was given")
                                  : "none were found in " + d.data + " for task " + d.task +
                                        " (name an outputs file with --background)"));
    return std::make_unique<llm::ReferenceReader>(background, task ? task->labels() : std::vector<std::string>{});
  }
  if (starts_with(spec, "local:")) {
    const std::string dir = spec.substr(6);
    if (dir.empty()) throw UsageError("language model \"" + spec + "\": expected local:MODEL_DIR");
    if (!fs::is_directory(dir)) throw UsageError("language model \"" + spec + "\": no such folder \"" + dir + "\"");
    models::LocalOptions o;
    o.device = run.device;
    o.dtype = run.dtype;
    return models::LocalModel::load(dir, o);
  }
  if (starts_with(spec, "openai:")) return llm::make_openai_model(spec);  // key from ATTUNE_API_KEY
  throw UsageError("unknown language model \"" + spec + "\" (expected reference, local:MODEL_DIR or openai:BASE_URL#MODEL)");
}

std::unique_ptr<text::Tokenizer> budget_tokenizer(const RunOptions& run, const std::string& llm_spec) {
  if (!run.tokenizer.empty()) return text::make_tokenizer(run.tokenizer);
  if (starts_with(llm_spec, "local:") && fs::is_directory(llm_spec.substr(6))) return text::make_tokenizer("hf:" + llm_spec.substr(6));
  return text::make_tokenizer("whitespace");
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

void write_file(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.string() + ".tmp" + std::to_string(getpid());
  {
    std::ofstream out(tmp, std::ios::binary);
    if (!out) throw Error(path.string() + ": cannot write");
    out << text;
    if (!out) throw Error(path.string() + ": write failed");
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) throw Error(path.string() + ": " + ec.message());
}

}  // namespace attune::cli
