#include "attune/models/config.h"

#include <fstream>
#include <sstream>

#include "attune/core/error.h"
#include "attune/core/file.h"
#include "attune/models/safetensors.h"

namespace attune::models {

namespace fs = std::filesystem;

nlohmann::json read_json_file(const fs::path& p) {
  const std::string text = read_file(p);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(p.string() + ": invalid JSON: " + e.what());
  }
}

void write_json_file(const fs::path& p, const nlohmann::json& j) { write_file_atomic(p, j.dump(2) + "\n"); }

ConfigFile ConfigFile::load(const fs::path& p) {
  fs::path file = fs::is_directory(p) ? p / "config.json" : p;
  if (!fs::is_regular_file(file)) throw Error(file.string() + ": cannot open (a Hugging Face model folder needs config.json)");
  return parse(read_file(file), file.string());
}

ConfigFile ConfigFile::parse(const std::string& text, std::string source) {
  ConfigFile c;
  c.source_ = std::move(source);
  try {
    c.j_ = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(c.source_ + ": malformed JSON: " + e.what());
  }
  if (!c.j_.is_object()) throw Error(c.source_ + ": not a JSON object");
  return c;
}

void ConfigFile::fail(const std::string& key, const std::string& what) const {
  throw Error(source_ + ": field \"" + key + "\": " + what);
}

std::string ConfigFile::architecture() const {
  if (j_.contains("architectures") && j_["architectures"].is_array() && !j_["architectures"].empty() &&
      j_["architectures"][0].is_string())
    return j_["architectures"][0].get<std::string>();
  return "";
}

std::string ConfigFile::model_type() const { return string("model_type", ""); }

std::int64_t ConfigFile::integer(const std::string& key) const {
  if (!has(key)) fail(key, "missing");
  const auto& v = j_[key];
  if (!v.is_number_integer()) fail(key, "expected an integer");
  return v.get<std::int64_t>();
}
double ConfigFile::number(const std::string& key) const {
  if (!has(key)) fail(key, "missing");
  const auto& v = j_[key];
  if (!v.is_number()) fail(key, "expected a number");
  return v.get<double>();
}
std::string ConfigFile::string(const std::string& key) const {
  if (!has(key)) fail(key, "missing");
  const auto& v = j_[key];
  if (!v.is_string()) fail(key, "expected a string");
  return v.get<std::string>();
}
bool ConfigFile::boolean(const std::string& key) const {
  if (!has(key)) fail(key, "missing");
  const auto& v = j_[key];
  if (!v.is_boolean()) fail(key, "expected true or false");
  return v.get<bool>();
}
std::int64_t ConfigFile::integer(const std::string& key, std::int64_t def) const { return has(key) ? integer(key) : def; }
double ConfigFile::number(const std::string& key, double def) const { return has(key) ? number(key) : def; }
std::string ConfigFile::string(const std::string& key, const std::string& def) const { return has(key) ? string(key) : def; }
bool ConfigFile::boolean(const std::string& key, bool def) const { return has(key) ? boolean(key) : def; }

std::vector<std::int64_t> ConfigFile::integers(const std::string& key) const {
  std::vector<std::int64_t> out;
  if (!has(key)) return out;
  const auto& v = j_[key];
  if (v.is_number_integer()) {
    out.push_back(v.get<std::int64_t>());
  } else if (v.is_array()) {
    for (auto& x : v) {
      if (!x.is_number_integer()) fail(key, "expected an integer or a list of integers");
      out.push_back(x.get<std::int64_t>());
    }
  } else {
    fail(key, "expected an integer or a list of integers");
  }
  return out;
}

}  // namespace attune::models

namespace attune::models {

namespace {
std::string layer_name(const std::string& pattern, std::int64_t i) {
  std::string s = pattern;
  const auto at = s.find("{}");
  if (at != std::string::npos) s.replace(at, 2, std::to_string(i));
  return s;
}
std::string dims_str(const std::vector<std::int64_t>& d) {
  std::string s = "[";
  for (std::size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}
}  // namespace

void ConfigCheck::at_least(std::int64_t value, const std::string& field, std::int64_t min) const {
  if (value < min) c_.fail(field, std::to_string(value) + " must be at least " + std::to_string(min));
}

void ConfigCheck::tensor(const std::string& name, const std::vector<Dim>& dims) const {
  const std::string full = prefix_ + name;
  if (!w_.contains(full))
    throw Error(w_.source().string() + ": missing tensor \"" + full + "\" (which " + c_.source() + " describes)");
  const auto& shape = w_.get(full).shape;
  std::vector<std::int64_t> want;
  for (const auto& d : dims) want.push_back(d.value);
  if (shape.size() != dims.size())
    throw Error(c_.source() + ": tensor \"" + full + "\" in " + w_.source().string() + " has shape " + dims_str(shape) +
                ", expected " + std::to_string(dims.size()) + " dimensions " + dims_str(want));
  for (std::size_t i = 0; i < dims.size(); ++i)
    if (shape[i] != dims[i].value)
      c_.fail(dims[i].field, "gives " + std::to_string(dims[i].value) + " but tensor \"" + full + "\" in " +
                                 w_.source().string() + " has shape " + dims_str(shape) + " (expected " + dims_str(want) +
                                 ")");
}

void ConfigCheck::layers(const std::string& pattern, std::int64_t n, const std::string& field) const {
  at_least(n, field);
  std::int64_t have = 0;
  while (have < n && w_.contains(prefix_ + layer_name(pattern, have))) ++have;
  if (have < n)
    c_.fail(field, std::to_string(n) + " layers, but " + w_.source().string() + " holds " + std::to_string(have) +
                       " (missing tensor \"" + prefix_ + layer_name(pattern, have) + "\")");
  if (w_.contains(prefix_ + layer_name(pattern, n)))
    c_.fail(field, std::to_string(n) + " layers, but " + w_.source().string() + " holds more (tensor \"" + prefix_ +
                       layer_name(pattern, n) + "\")");
}

}  // namespace attune::models
