// attune-torch: every verb of attune, the neural ones included (it links libtorch). Users run
// `attune`, which runs the lexical verbs itself and hands the others to this program
// (main_light.cpp). Exit codes (CLI.md): 0 success, 2 usage error, 1 runtime error.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "attune/core/error.h"
#include "attune/models/runtime.h"
#include "attune/neural/dense.h"
#include "attune/neural/dense_corpus.h"
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

int main(int argc, char** argv) {
  attune::neural::register_retrievers();  // dense:MODEL_DIR, cross:MODEL_DIR
  attune::neural::register_first_stages();  // `attune serve`'s corpus search under dense:MODEL_DIR
  attune::cli::on_threads_option([](std::size_t n) { attune::models::set_torch_threads(n); });
  CLI::App app{attune::cli::kDescription};
  app.require_subcommand(1);
  app.set_version_flag("--version", attune::cli::kVersion);
  int rc = 0;
  attune::cli::add_rank(app, rc);
  attune::cli::add_eval(app, rc);
  attune::cli::add_metrics(app, rc);
  attune::cli::add_feedback(app, rc);
  attune::cli::add_judge(app, rc);
  attune::cli::add_import(app, rc);
  attune::cli::add_demo(app, rc);
  attune::cli::add_sample(app, rc);
  attune::cli::add_train_tokenizer(app, rc);
  attune::cli::add_generate(app, rc);
  attune::cli::add_score(app, rc);
  attune::cli::add_serve_llm(app, rc);
  attune::cli::add_serve(app, rc);
  attune::cli::add_user_feedback(app, rc);
  attune::cli::add_tenant(app, rc);
  attune::cli::add_import_git(app, rc);
  attune::cli::add_report(app, rc);
  attune::cli::add_pretrain_encoder(app, rc);
  attune::cli::add_train_lm(app, rc);
  attune::cli::add_train(app, rc);
  return attune::cli::run_app(app, rc, argc, argv);
}
