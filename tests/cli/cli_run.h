#pragma once
// What the CLI tests share: running the attune binary in a folder and reading its output.
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace attune::testing {

struct CliResult {
  int rc = -1;
  std::string out, err;
};

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// `attune ARGS` run in `dir` (env: a prefix for the command, e.g. "env -u VAR NAME=VALUE"),
// its stdout and stderr captured in dir/out.txt and dir/err.txt.
inline CliResult run_attune(const std::filesystem::path& dir, const std::string& args, const std::string& env = "") {
  const std::string bin = std::string(ATTUNE_BINARY_DIR) + "/tools/attune/attune";
  const std::string cmd = "cd '" + dir.string() + "' && " + env + " '" + bin + "' " + args + " >out.txt 2>err.txt";
  const int status = std::system(cmd.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(dir / "out.txt"), slurp(dir / "err.txt")};
}

}  // namespace attune::testing
