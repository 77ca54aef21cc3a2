// attune: learns which documents help a language model, and serves them.
// Exit codes (CLI.md): 0 success, 2 usage error, 1 runtime error (one line on stderr).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "attune/core/error.h"
#include "attune/neural/dense.h"
#include "cmd_neural.h"
#include "common.h"

namespace {

// OpenMP threads (torch's intra-op pool, OpenBLAS under it) spin for a while after each
// parallel region by default. When two attune processes share the cores — experiments run
// side by side, a server beside a trainer — the spinners take the CPU the other one needs:
// two processes of 2 threads each on 2 cores ran 2-10x slower (bench/RESULTS.md). Passive
// waiting costs nothing measurable on one process's own work. libgomp reads the setting
// when it is loaded, before main, so it is set from the executable's .preinit_array, which
// the dynamic loader runs before any library's initialisers. A value the user set stays.
void default_omp_wait_policy(int, char**, char**) { ::setenv("OMP_WAIT_POLICY", "PASSIVE", 0); }
__attribute__((section(".preinit_array"), used)) void (*const preinit_omp)(int, char**, char**) = &default_omp_wait_policy;

}  // namespace

namespace {

// The command-line spelling of the options struct field an error names (FieldError):
// "fit.batch_size" -> " (option --batch-size)"; "" for other errors.
std::string option_hint(const std::exception& e) {
  const auto* f = dynamic_cast<const attune::NamesField*>(&e);
  if (!f || f->field().empty()) return "";
  std::string flag = f->field();
  if (const auto dot = flag.rfind('.'); dot != std::string::npos) flag = flag.substr(dot + 1);
  std::replace(flag.begin(), flag.end(), '_', '-');
  return " (option --" + flag + ")";
}

}  // namespace

int main(int argc, char** argv) {
  attune::neural::register_retrievers();  // dense:MODEL_DIR, cross:MODEL_DIR
  CLI::App app{"attune: learn which documents actually help a language model, and serve them"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "attune 0.1.0");
  int rc = 0;
  attune::cli::add_rank(app, rc);
  attune::cli::add_eval(app, rc);
  attune::cli::add_metrics(app, rc);
  attune::cli::add_feedback(app, rc);
  attune::cli::add_import(app, rc);
  attune::cli::add_demo(app, rc);
  attune::cli::add_sample(app, rc);
  attune::cli::add_generate(app, rc);
  attune::cli::add_score(app, rc);
  attune::cli::add_pretrain_encoder(app, rc);
  attune::cli::add_train(app, rc);
  try {
    // --config FILE: the file's options, inserted where the command line has none.
    std::vector<std::string> args(argv + 1, argv + argc);
    args = attune::cli::expand_config(args);
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
  } catch (const attune::UsageError& e) {
    std::fprintf(stderr, "attune: %s%s\n", e.what(), option_hint(e).c_str());
    return 2;
  } catch (const std::exception& e) {
    // One line (CLI.md): libtorch's errors carry a backtrace after the first line.
    std::string what = e.what() + option_hint(e);
    if (auto nl = what.find('\n'); nl != std::string::npos) what.resize(nl);
    std::fprintf(stderr, "attune: %s\n", what.c_str());
    return 1;
  }
  return rc;
}
