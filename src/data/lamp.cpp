// LaMP reader and writer: {split}_questions.json + {split}_outputs.json (docs/formats.md).
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
using detail::json_quote;
using detail::json;
using detail::type_name;

namespace detail {

void for_each_gold(const json& root, const std::string& file,
                   const std::function<void(std::size_t, std::string, std::string, const FieldReader&)>& fn) {
  if (!root.is_object())
    throw InputError(file, "", "", "expected a JSON object {\"task\", \"golds\"} at the top level, got " + type_name(root));
  FieldReader top(root, file, "");
  (void)top.string("task");
  const json& golds = top.get("golds");
  if (!golds.is_array()) top.fail("golds", "expected an array of {\"id\", \"output\"}, got " + type_name(golds));
  std::unordered_map<std::string, std::size_t> first;
  first.reserve(golds.size());
  for (std::size_t k = 0; k < golds.size(); ++k) {
    const json& g = golds[k];
    std::string bare = "golds[" + std::to_string(k) + "]";
    if (!g.is_object()) throw InputError(file, bare, "", "expected an object {\"id\", \"output\"}, got " + type_name(g));
    std::string id = FieldReader(g, file, bare).id("id");
    FieldReader r(g, file, bare + " (id " + json_quote(id) + ")");
    std::string output = r.text("output");
    auto [pos, inserted] = first.emplace(id, k);
    if (!inserted) r.fail("id", "duplicate gold id (first at golds[" + std::to_string(pos->second) + "])");
    fn(k, std::move(id), std::move(output), r);
  }
}

}  // namespace detail

namespace {

// One profile item: "id", optional "date", every other key a string (or number) field.
Document read_item(const json& item, const std::string& file, const std::string& record,
                   const std::string& prefix, const std::string& owner) {
  FieldReader r(item, file, record, prefix);
  Document doc;
  doc.id = r.id("id");
  doc.owner = owner;
  for (auto it = item.begin(); it != item.end(); ++it) {
    const std::string& key = it.key();
    if (key == "id") continue;
    const json& v = it.value();
    if (key == "date") {
      if (!v.is_string()) r.fail(key, "expected a date string \"YYYY-MM-DD\", got " + type_name(v));
      const auto& s = v.get_ref<const std::string&>();
      if (!detail::valid_date_shape(s)) r.fail(key, "expected a date \"YYYY-MM-DD\", got " + json_quote(s));
      doc.date = s;
      continue;
    }
    if (v.is_string()) {
      doc.fields.emplace(key, v.get<std::string>());
    } else if (v.is_number()) {
      doc.fields.emplace(key, detail::number_text(v));
    } else {
      r.fail(key, "expected a string or a number, got " + type_name(v));
    }
  }
  return doc;
}

std::vector<Example> read_questions(const json& root, const std::string& file) {
  if (!root.is_array())
    throw InputError(file, "", "", "expected a JSON array of questions at the top level, got " + type_name(root));
  std::vector<Example> out;
  out.reserve(root.size());
  std::unordered_map<std::string, std::size_t> seen;
  seen.reserve(root.size());
  std::unordered_map<std::string, std::size_t> item_seen;
  for (std::size_t i = 0; i < root.size(); ++i) {
    const json& q = root[i];
    if (!q.is_object())
      throw InputError(file, detail::record_name("record", i, ""), "", "expected a question object, got " + type_name(q));
    Example ex;
    ex.id = FieldReader(q, file, detail::record_name("record", i, "")).id("id");
    const std::string record = detail::record_name("record", i, ex.id);
    FieldReader r(q, file, record);
    auto [pos, inserted] = seen.emplace(ex.id, i);
    if (!inserted) r.fail("id", "duplicate question id (first at record " + std::to_string(pos->second) + ")");
    ex.user = ex.id;
    ex.input = r.string("input");
    const json& profile = r.get("profile");
    if (!profile.is_array()) r.fail("profile", "expected an array of profile items, got " + type_name(profile));
    ex.profile.reserve(profile.size());
    item_seen.clear();
    for (std::size_t j = 0; j < profile.size(); ++j) {
      const std::string prefix = "profile[" + std::to_string(j) + "]";
      const json& item = profile[j];
      if (!item.is_object()) r.fail(prefix, "expected a profile item object, got " + type_name(item));
      Document doc = read_item(item, file, record, prefix + ".", ex.user);
      auto [ipos, ok] = item_seen.emplace(doc.id, j);
      if (!ok)
        throw InputError(file, record, prefix + ".id",
                         "duplicate profile item id " + json_quote(doc.id) + " (first at profile[" +
                             std::to_string(ipos->second) + "])");
      ex.profile.push_back(std::move(doc));
    }
    out.push_back(std::move(ex));
  }
  return out;
}

void read_outputs(const json& root, const std::string& file, const std::string& questions_file,
                  std::vector<Example>& examples) {
  std::unordered_map<std::string, std::size_t> index;  // question id -> position
  index.reserve(examples.size());
  for (std::size_t i = 0; i < examples.size(); ++i) index.emplace(examples[i].id, i);
  std::vector<std::ptrdiff_t> gold_of(examples.size(), -1);
  detail::for_each_gold(root, file, [&](std::size_t k, std::string id, std::string output, const FieldReader& r) {
    auto it = index.find(id);
    if (it == index.end()) r.fail("id", "no question with this id in " + questions_file);
    gold_of[it->second] = static_cast<std::ptrdiff_t>(k);
    examples[it->second].output = std::move(output);
  });
  for (std::size_t i = 0; i < examples.size(); ++i)
    if (gold_of[i] < 0)
      throw InputError(questions_file, detail::record_name("record", i, examples[i].id), "id",
                       "question has no gold output in " + file);
}

}  // namespace

Dataset read_lamp(const fs::path& questions, const std::optional<fs::path>& outputs,
                  const std::string& task, const std::string& split) {
  Dataset ds;
  ds.task = task;
  ds.split = split;
  Hasher h;
  h.add(std::uint64_t{outputs ? 2u : 1u});
  {
    std::string bytes = read_file(questions);
    h.add(bytes);
    json root = detail::parse_json(bytes, questions, detail::Layout::kRecordArray);
    std::string().swap(bytes);
    ds.examples = read_questions(root, questions.string());
  }
  ds.sources.push_back(questions);
  if (outputs) {
    std::string bytes = read_file(*outputs);
    h.add(bytes);
    json root = detail::parse_json(bytes, *outputs, detail::Layout::kGoldsObject);
    read_outputs(root, outputs->string(), questions.string(), ds.examples);
    ds.has_outputs = true;
    ds.sources.push_back(*outputs);
  }
  h.add(task).add(split);
  ds.content_hash = h.hex();
  return ds;
}

namespace {

std::string dump_checked(const nlohmann::ordered_json& j, const std::string& what) {
  try {
    return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::strict);
  } catch (const nlohmann::ordered_json::exception&) {
    throw Error("cannot write " + what + ": invalid UTF-8 in a string");
  }
}

}  // namespace

void write_lamp(const Dataset& ds, const fs::path& questions, const fs::path& outputs) {
  using ojson = nlohmann::ordered_json;
  std::string q = "[\n";
  for (std::size_t i = 0; i < ds.examples.size(); ++i) {
    const Example& ex = ds.examples[i];
    ojson rec = ojson::object();
    rec["id"] = ex.id;
    rec["input"] = ex.input;
    ojson profile = ojson::array();
    for (const Document& d : ex.profile) {
      ojson item = ojson::object();
      item["id"] = d.id;
      for (const auto& [k, v] : d.fields) {
        if (k == "id" || k == "date")
          throw Error("cannot write " + questions.string() + ": example " + json_quote(ex.id) + " document " +
                      json_quote(d.id) + " has a field named \"" + k + "\", which LaMP reserves");
        item[k] = v;
      }
      if (d.date) item["date"] = *d.date;
      profile.push_back(std::move(item));
    }
    rec["profile"] = std::move(profile);
    if (i) q += ",\n";
    q += dump_checked(rec, questions.string() + " (example " + json_quote(ex.id) + ")");
  }
  q += "\n]\n";
  write_file_atomic(questions, q);
  if (!ds.has_outputs) return;

  std::string o = "{\"task\": " + dump_checked(ojson(ds.task), outputs.string()) + ", \"golds\": [\n";
  for (std::size_t i = 0; i < ds.examples.size(); ++i) {
    ojson g = ojson::object();
    g["id"] = ds.examples[i].id;
    g["output"] = ds.examples[i].output;
    if (i) o += ",\n";
    o += dump_checked(g, outputs.string() + " (example " + json_quote(ds.examples[i].id) + ")");
  }
  o += "\n]}\n";
  write_file_atomic(outputs, o);
}

}  // namespace attune::data
