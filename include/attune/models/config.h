#pragma once
// config.json of a Hugging Face model folder, read once into typed fields; errors name the
// file and the key.
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace attune::models {

// A JSON file read whole; Error "<file>: cannot open" / "<file>: invalid JSON: ...".
nlohmann::json read_json_file(const std::filesystem::path& p);
// Writes pretty JSON atomically (temporary file + rename); Error naming the file.
void write_json_file(const std::filesystem::path& p, const nlohmann::json& j);

class ConfigFile {
 public:
  static ConfigFile load(const std::filesystem::path& dir_or_file);
  static ConfigFile parse(const std::string& text, std::string source);
  const nlohmann::json& json() const { return j_; }
  const std::string& source() const { return source_; }
  // The first of architectures[], or "" when absent.
  std::string architecture() const;
  std::string model_type() const;
  bool has(const std::string& key) const { return j_.contains(key) && !j_[key].is_null(); }
  // Required keys: Error "<file>: field \"key\": missing" / "... expected an integer".
  std::int64_t integer(const std::string& key) const;
  double number(const std::string& key) const;
  std::string string(const std::string& key) const;
  bool boolean(const std::string& key) const;
  // Optional keys with a default.
  std::int64_t integer(const std::string& key, std::int64_t def) const;
  double number(const std::string& key, double def) const;
  std::string string(const std::string& key, const std::string& def) const;
  bool boolean(const std::string& key, bool def) const;
  // An int or a list of ints (eos_token_id); empty when absent.
  std::vector<std::int64_t> integers(const std::string& key) const;
  [[noreturn]] void fail(const std::string& key, const std::string& what) const;

 private:
  nlohmann::json j_;
  std::string source_;
};

}  // namespace attune::models

namespace attune::models {

class WeightSet;

// Compares config.json with the tensors the weights hold, before any module is built: a
// size the weights do not have (num_hidden_layers: 1000000, head_dim: 1000000) would
// otherwise allocate until the process is killed. Errors name config.json, the field, the
// tensor and the weights file.
class ConfigCheck {
 public:
  // A tensor dimension and the config field(s) it comes from ("num_attention_heads x head_dim").
  struct Dim {
    std::int64_t value;
    std::string field;
  };
  ConfigCheck(const ConfigFile& config, const WeightSet& weights, std::string prefix = "")
      : c_(config), w_(weights), prefix_(std::move(prefix)) {}
  // `value` of `field` must be at least `min` (sizes of 0 or less build an empty or broken model).
  void at_least(std::int64_t value, const std::string& field, std::int64_t min = 1) const;
  // prefix + name holds exactly these dims.
  void tensor(const std::string& name, const std::vector<Dim>& dims) const;
  // prefix + pattern with "{}" replaced by i exists for every i < n and not for i = n.
  void layers(const std::string& pattern, std::int64_t n, const std::string& field) const;

 private:
  const ConfigFile& c_;
  const WeightSet& w_;
  std::string prefix_;
};

}  // namespace attune::models
