// --config FILE: options from a file, for any verb. A TOML subset: `key = value` lines,
// # comments, [section] headers ignored; keys are long option names without "--" (dashes
// or underscores); values are "strings", numbers, true/false, or bare words. Options given
// on the command line win over the file.
#include <fstream>
#include <set>

#include "attune/core/error.h"
#include "common.h"

namespace attune::cli {

namespace {

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

}  // namespace

std::vector<std::string> expand_config(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  std::string file;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--config") {
      if (i + 1 >= args.size()) throw UsageError("--config needs a file");
      if (!file.empty()) throw UsageError("--config given twice");
      file = args[++i];
    } else if (args[i].rfind("--config=", 0) == 0) {
      if (!file.empty()) throw UsageError("--config given twice");
      file = args[i].substr(9);
    } else {
      out.push_back(args[i]);
    }
  }
  if (file.empty()) return args;
  std::ifstream in(file);
  if (!in) throw UsageError("--config " + file + ": cannot read the file");
  std::set<std::string> given;
  for (const auto& a : out)
    if (a.rfind("--", 0) == 0) given.insert(a.substr(0, a.find('=')));
  std::string line;
  std::size_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    std::string s = line;
    bool quoted = false;
    for (std::size_t i = 0; i < s.size(); ++i) {
      if (s[i] == '"') quoted = !quoted;
      if (s[i] == '#' && !quoted) {
        s.resize(i);
        break;
      }
    }
    s = trim(s);
    if (s.empty() || s.front() == '[') continue;
    const auto eq = s.find('=');
    if (eq == std::string::npos)
      throw UsageError(file + " line " + std::to_string(n) + ": expected key = value, got \"" + trim(line) + "\"");
    std::string key = trim(s.substr(0, eq)), value = trim(s.substr(eq + 1));
    if (key.empty()) throw UsageError(file + " line " + std::to_string(n) + ": no key before '='");
    for (auto& c : key)
      if (c == '_') c = '-';
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') value = value.substr(1, value.size() - 2);
    else if (!value.empty() && value.front() == '"')
      throw UsageError(file + " line " + std::to_string(n) + ": unterminated string");
    const std::string opt = "--" + key;
    if (given.count(opt)) continue;  // the command line wins
    if (value == "true") out.push_back(opt);
    else if (value == "false") continue;
    else out.push_back(opt + "=" + value);
  }
  return out;
}

}  // namespace attune::cli
