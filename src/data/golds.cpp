// Golds alone, predictions, label lists, and where a gold was read (golds.h).
#include "attune/data/golds.h"

#include <unordered_map>
#include <unordered_set>

#include "attune/core/error.h"
#include "attune/core/file.h"
#include "attune/core/hash.h"
#include "attune/core/strings.h"
#include "json_input.h"

namespace attune::data {

namespace fs = std::filesystem;
using detail::FieldReader;
using detail::json_quote;
using detail::json;
using detail::type_name;

namespace {

bool is_jsonl(const fs::path& p) { return p.extension() == ".jsonl"; }

}  // namespace

Dataset read_golds(const fs::path& outputs, const std::string& task, const std::string& split) {
  Dataset ds;
  ds.task = task;
  ds.split = split;
  ds.has_outputs = true;
  ds.sources.push_back(outputs);
  std::string bytes = read_file(outputs);
  ds.content_hash = Hasher().add(std::uint64_t{3}).add(bytes).add(task).add(split).hex();
  json root = detail::parse_json(bytes, outputs, detail::Layout::kGoldsObject);
  detail::for_each_gold(root, outputs.string(), [&](std::size_t, std::string id, std::string output, const FieldReader&) {
    Example ex;
    ex.id = std::move(id);
    ex.user = ex.id;
    ex.output = std::move(output);
    ds.examples.push_back(std::move(ex));
  });
  return ds;
}

std::vector<Prediction> read_predictions(const fs::path& file) {
  const std::string bytes = read_file(file);
  const std::string name = file.string();
  std::vector<Prediction> out;
  std::unordered_map<std::string, std::size_t> first;  // id -> line
  detail::for_each_line(bytes, file, [&](std::size_t line_no, const json& obj) {
    Prediction p;
    p.id = FieldReader(obj, name, detail::record_name("line", line_no, "")).id("id");
    p.record = detail::record_name("line", line_no, p.id);
    FieldReader r(obj, name, p.record);
    auto [pos, inserted] = first.emplace(p.id, line_no);
    if (!inserted) r.fail("id", "duplicate id (first on line " + std::to_string(pos->second) + ")");
    p.output = r.text("output");
    out.push_back(std::move(p));
  });
  return out;
}

std::vector<std::string> read_label_list(const fs::path& file) {
  const std::string name = file.string();
  const std::string bytes = read_file(file);
  const json root = detail::parse_json(bytes, file, detail::Layout::kRecordArray);
  if (!root.is_array()) throw InputError(name, "", "", "expected a JSON array of labels, got " + type_name(root));
  if (root.empty()) throw InputError(name, "", "", "no labels: the list is empty");
  std::vector<std::string> out;
  std::unordered_map<std::string, std::size_t> first;
  for (std::size_t i = 0; i < root.size(); ++i) {
    const json& v = root[i];
    const std::string record = "record " + std::to_string(i);
    std::string label;
    if (v.is_string()) label = strip(v.get<std::string>());
    else if (v.is_number()) label = detail::number_text(v);
    else throw InputError(name, record, "", "expected a label (a string), got " + type_name(v));
    if (label.empty()) throw InputError(name, record, "", "empty label");
    auto [pos, inserted] = first.emplace(label, i);
    if (!inserted)
      throw InputError(name, record, "",
                       "duplicate label " + json_quote(label) + " (first at record " + std::to_string(pos->second) + ")");
    out.push_back(std::move(label));
  }
  return out;
}

GoldPlace gold_place(const Dataset& ds, std::size_t i) {
  const std::string id = i < ds.examples.size() ? ds.examples[i].id : std::string();
  GoldPlace fallback{ds.task + " " + ds.split, "example " + json_quote(id)};
  if (ds.sources.empty()) return fallback;
  const fs::path file = ds.sources.back();
  fallback.file = file.string();
  try {
    const std::string bytes = read_file(file);
    std::string record;
    if (is_jsonl(file)) {
      detail::for_each_line(bytes, file, [&](std::size_t line_no, const json& obj) {
        if (!record.empty()) return;
        const std::string line = detail::record_name("line", line_no, "");
        if (FieldReader(obj, file.string(), line).id("id") == id) record = detail::record_name("line", line_no, id);
      });
    } else {
      const json root = detail::parse_json(bytes, file, detail::Layout::kGoldsObject);
      detail::for_each_gold(root, file.string(), [&](std::size_t k, std::string gid, std::string, const FieldReader& r) {
        if (record.empty() && gid == id) record = r.record();
      });
    }
    if (!record.empty()) return {file.string(), record};
  } catch (const Error&) {  // the file changed since: name the example by its id
  }
  return fallback;
}

void check_gold_docs(const Dataset& ds, const std::vector<Document>& corpus, const fs::path& corpus_file) {
  std::unordered_set<std::string_view> ids;
  ids.reserve(corpus.size());
  for (const auto& d : corpus) ids.insert(d.id);
  for (std::size_t i = 0; i < ds.examples.size(); ++i) {
    const auto& golds = ds.examples[i].gold_docs;
    for (std::size_t k = 0; k < golds.size(); ++k) {
      if (ids.count(golds[k])) continue;
      const GoldPlace at = gold_place(ds, i);
      const std::string field = golds.size() == 1 ? "gold_doc" : "gold_doc[" + std::to_string(k) + "]";
      throw InputError(at.file, at.record, field,
                       "no passage with id " + json_quote(golds[k]) + " in the corpus " + corpus_file.string());
    }
  }
}

}  // namespace attune::data
