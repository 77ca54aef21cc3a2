// attune: learns which documents help a language model, and serves them.
// The verbs that never touch a neural model (metrics, import, sample, train-tokenizer) run here, in a
// program without libtorch that starts at once; every other verb, and the top-level help,
// is handed to attune-torch beside this program (main.cpp), with the same arguments.
// Exit codes (CLI.md): 0 success, 2 usage error, 1 runtime error (one line on stderr).
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <set>
#include <string>

#include "common.h"

namespace {

// The verbs this program runs itself.
const std::set<std::string> kLight = {"metrics", "import", "sample", "train-tokenizer", "tenant", "import-git", "report"};

// Replaces this process by attune-torch from this program's folder.
//
// Its OpenMP threads (torch's operators) spin briefly, then sleep, unless the user says
// otherwise (main.cpp's default_omp_wait_policy says why GOMP_SPINCOUNT=1000). OpenMP reads
// the variables when the library loads, so they are set here, before attune-torch starts.
int hand_over(char** argv) {
  if (!std::getenv("OMP_WAIT_POLICY") && !std::getenv("GOMP_SPINCOUNT")) ::setenv("GOMP_SPINCOUNT", "1000", 0);
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  const auto torch = (ec ? std::filesystem::path(argv[0]).parent_path() : self.parent_path()) / "attune-torch";
  ::execv(torch.c_str(), argv);
  std::fprintf(stderr, "attune: cannot run %s: %s\n", torch.c_str(), std::strerror(errno));
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !kLight.count(argv[1])) return hand_over(argv);
  CLI::App app{attune::cli::kDescription};
  app.require_subcommand(1);
  app.set_version_flag("--version", attune::cli::kVersion);
  int rc = 0;
  attune::cli::add_metrics(app, rc);
  attune::cli::add_import(app, rc);
  attune::cli::add_tenant(app, rc);
  attune::cli::add_import_git(app, rc);
  attune::cli::add_report(app, rc);
  attune::cli::add_sample(app, rc);
  attune::cli::add_train_tokenizer(app, rc);
  return attune::cli::run_app(app, rc, argc, argv);
}
