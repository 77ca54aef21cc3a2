#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "attune/core/error.h"
#include "common.h"

namespace attune::cli {

namespace {

// The command-line spelling of the options struct field an error names (FieldError):
// "fit.batch_size" -> " (option --batch-size)"; "" for other errors.
std::string option_hint(const std::exception& e) {
  const auto* f = dynamic_cast<const NamesField*>(&e);
  if (!f || f->field().empty()) return "";
  std::string flag = f->field();
  if (const auto dot = flag.rfind('.'); dot != std::string::npos) flag = flag.substr(dot + 1);
  std::replace(flag.begin(), flag.end(), '_', '-');
  return " (option --" + flag + ")";
}

}  // namespace

int run_app(CLI::App& app, int& rc, int argc, char** argv) {
  check_number_options(app);  // before parsing: counts in decimal digits, finite reals
  // CLI11's own errors (unknown flag, bad value, ...) in one line, like attune's.
  app.failure_message([](const CLI::App*, const CLI::Error& e) { return "attune: " + std::string(e.what()) + " (see --help)\n"; });
  try {
    // --config FILE: the file's options, inserted where the command line has none. `serve`
    // takes --config itself: its deployment file (JSON, docs/serve.md), not options.
    std::vector<std::string> args(argv + 1, argv + argc);
    if (args.empty() || args.front() != "serve") args = expand_config(args);
    std::reverse(args.begin(), args.end());  // CLI11 takes a reversed vector
    app.parse(args);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  } catch (const UsageError& e) {
    std::fprintf(stderr, "attune: %s%s\n", e.what(), option_hint(e).c_str());
    return 2;
  } catch (const std::exception& e) {
    // One line (CLI.md): libtorch's errors carry a backtrace after the first line.
    std::string what = e.what() + option_hint(e);
    if (auto nl = what.find('\n'); nl != std::string::npos) what.resize(nl);
    std::fprintf(stderr, "attune: %s\n", what.c_str());
    return 1;
  }
  if (rc == 0 && (std::fflush(stdout) != 0 || std::ferror(stdout))) {
    std::fprintf(stderr, "attune: writing to standard output failed\n");
    return 1;
  }
  return rc;
}

}  // namespace attune::cli
