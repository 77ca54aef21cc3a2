// JSONL readers: a shared corpus ({"id","title","text"} per line) and KILT-like QA tasks
// ({"id","input","output","gold_doc"?} per line). docs/formats.md.
#include <algorithm>
#include <functional>
#include <unordered_map>

#include "attune/core/error.h"
#include "attune/core/file.h"
#include "attune/core/hash.h"
#include "attune/data/dataset.h"
#include "json_input.h"

namespace attune::data {

namespace fs = std::filesystem;
using detail::FieldReader;
using detail::json;
using detail::type_name;

namespace detail {

// Calls fn(line_number, object) for every non-blank line of `bytes`, each parsed as one
// JSON object; errors name the file and "line N".
void for_each_line(const std::string& bytes, const fs::path& file,
                   const std::function<void(std::size_t, const json&)>& fn) {
  std::string_view all(bytes);
  std::size_t pos = 0, line_no = 0;
  while (pos < all.size()) {
    std::size_t end = all.find('\n', pos);
    if (end == std::string_view::npos) end = all.size();
    ++line_no;
    std::string_view line = all.substr(pos, end - pos);
    std::size_t offset = pos;
    pos = end + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;  // blank line
    const std::string record = "line " + std::to_string(line_no);
    json obj = detail::parse_json(line, file, detail::Layout::kLine, offset, record, all);
    if (!obj.is_object()) throw InputError(file.string(), record, "", "expected a JSON object, got " + type_name(obj));
    fn(line_no, obj);
  }
}

}  // namespace detail

namespace {

using detail::for_each_line;

std::string line_record(std::size_t line_no, const std::string& id) {
  return detail::record_name("line", line_no, id);
}

// Duplicate-id check shared by both readers.
class IdSet {
 public:
  void add(const std::string& id, std::size_t line_no, const std::string& file) {
    auto [it, inserted] = first_.emplace(id, line_no);
    if (!inserted)
      throw InputError(file, line_record(line_no, id), "id",
                       "duplicate id (first on line " + std::to_string(it->second) + ")");
  }
  void reserve(std::size_t n) { first_.reserve(n); }

 private:
  std::unordered_map<std::string, std::size_t> first_;
};

}  // namespace

std::vector<Document> read_corpus_jsonl(const fs::path& file) {
  std::string bytes = read_file(file);
  const std::string name = file.string();
  std::vector<Document> docs;
  IdSet ids;
  std::size_t approx = static_cast<std::size_t>(std::count(bytes.begin(), bytes.end(), '\n')) + 1;
  docs.reserve(approx);
  ids.reserve(approx);
  for_each_line(bytes, file, [&](std::size_t line_no, const json& obj) {
    Document d;
    d.id = FieldReader(obj, name, line_record(line_no, "")).id("id");
    FieldReader r(obj, name, line_record(line_no, d.id));
    ids.add(d.id, line_no, name);
    d.fields.emplace("title", r.string("title"));
    d.fields.emplace("text", r.string("text"));
    docs.push_back(std::move(d));
  });
  return docs;
}

Dataset read_qa_jsonl(const fs::path& file, const std::string& task, const std::string& split) {
  std::string bytes = read_file(file);
  const std::string name = file.string();
  Dataset ds;
  ds.task = task;
  ds.split = split;
  ds.has_outputs = true;
  ds.sources.push_back(file);
  ds.content_hash = Hasher().add(std::uint64_t{1}).add(bytes).add(task).add(split).hex();
  IdSet ids;
  for_each_line(bytes, file, [&](std::size_t line_no, const json& obj) {
    Example ex;
    ex.id = FieldReader(obj, name, line_record(line_no, "")).id("id");
    FieldReader r(obj, name, line_record(line_no, ex.id));
    ids.add(ex.id, line_no, name);
    ex.user = ex.id;
    ex.input = r.string("input");
    ex.output = r.text("output");
    if (r.has("gold_doc")) {
      const json& g = r.get("gold_doc");
      if (g.is_string()) {
        ex.gold_docs.push_back(g.get<std::string>());
      } else if (g.is_array()) {
        for (std::size_t k = 0; k < g.size(); ++k) {
          if (!g[k].is_string())
            r.fail("gold_doc[" + std::to_string(k) + "]", "expected a string, got " + type_name(g[k]));
          ex.gold_docs.push_back(g[k].get<std::string>());
        }
      } else {
        r.fail("gold_doc", "expected a string (or an array of strings), got " + type_name(g));
      }
    }
    ds.examples.push_back(std::move(ex));
  });
  return ds;
}

}  // namespace attune::data
