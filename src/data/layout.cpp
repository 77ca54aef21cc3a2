// The --data directory layout of CLI.md: LaMP task folders and corpus directories.
#include <algorithm>

#include "attune/core/error.h"
#include "attune/data/dataset.h"

namespace attune::data {

namespace fs = std::filesystem;

Dataset load_split(const fs::path& data_dir, const std::string& task, const std::string& split) {
  std::error_code ec;
  if (!fs::is_directory(data_dir, ec))
    throw InputError(data_dir.string(), "", "", "no such data directory");
  const fs::path questions = data_dir / task / (split + "_questions.json");
  const fs::path outputs = data_dir / task / (split + "_outputs.json");
  const fs::path jsonl = data_dir / (task + "_" + split + ".jsonl");
  if (fs::exists(questions, ec))
    return read_lamp(questions, fs::exists(outputs, ec) ? std::optional<fs::path>(outputs) : std::nullopt,
                     task, split);
  if (fs::exists(jsonl, ec)) return read_qa_jsonl(jsonl, task, split);
  throw InputError(data_dir.string(), "", "",
                   "no data for task \"" + task + "\" split \"" + split + "\": looked for " +
                       questions.string() + " (LaMP layout) and " + jsonl.string() + " (corpus layout)");
}

fs::path find_corpus(const fs::path& data_dir) {
  std::error_code ec;
  if (!fs::is_directory(data_dir, ec))
    throw InputError(data_dir.string(), "", "", "no such data directory");
  std::vector<fs::path> found;
  for (const auto& entry : fs::directory_iterator(data_dir, ec)) {
    const std::string name = entry.path().filename().string();
    const std::string suffix = "_corpus.jsonl";
    if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0 &&
        entry.is_regular_file())
      found.push_back(entry.path());
  }
  if (ec) throw InputError(data_dir.string(), "", "", "cannot list the directory: " + ec.message());
  if (found.empty()) throw InputError(data_dir.string(), "", "", "no *_corpus.jsonl file in this directory");
  if (found.size() > 1) {
    std::sort(found.begin(), found.end());
    std::string list;
    for (const auto& p : found) list += (list.empty() ? "" : ", ") + p.filename().string();
    throw InputError(data_dir.string(), "", "", "more than one *_corpus.jsonl file (" + list + "); expected one");
  }
  return found.front();
}

}  // namespace attune::data
