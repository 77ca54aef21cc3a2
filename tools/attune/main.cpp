// attune-torch: every verb of attune, the neural ones included (it links libtorch). Users run
// `attune`, which runs the lexical verbs itself and hands the others to this program
// (main_light.cpp). Exit codes (CLI.md): 0 success, 2 usage error, 1 runtime error.
#include <malloc.h>

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
// parallel region by default (libgomp: 300,000 iterations). When two attune processes share
// the cores — experiments run side by side, a server beside a trainer — the spinners take the
// CPU the other one needs: two processes of 2 threads each on 2 cores ran 2-10x slower
// (bench/RESULTS.md). Purely passive waiting (OMP_WAIT_POLICY=PASSIVE, this default until
// 2026-12-03) cost a process alone about 15-20%: a training step runs ~1,500 operators, and
// each wakes a sleeping thread. A short spin (GOMP_SPINCOUNT=1000) ran the default train-lm
// step 13% faster than passive alone and no slower than passive with two processes sharing
// the cores. libgomp reads the settings when it is loaded, before main, so they are set from
// the executable's .preinit_array, which the dynamic loader runs before any library's
// initialisers. A policy or spin count the user set stays.
void default_omp_wait_policy(int, char**, char**) {
  if (!std::getenv("OMP_WAIT_POLICY") && !std::getenv("GOMP_SPINCOUNT")) ::setenv("GOMP_SPINCOUNT", "1000", 0);
}
__attribute__((section(".preinit_array"), used)) void (*const preinit_omp)(int, char**, char**) = &default_omp_wait_policy;

// libtorch frees and allocates tensors of megabytes at every step. glibc serves blocks above
// its mmap threshold (128 KiB, raised only as far as the largest block freed so far) by mmap and
// gives them back at free, so every step faults in fresh zeroed pages, and it trims the heap's
// top as soon as 128 KiB are free. With blocks of up to 32 MiB kept in the heap and a 256 MiB
// trim threshold, the default reader's pretraining step ran 15-20% faster on 2 cores with the
// same peak memory (bench/RESULTS.md); the numbers are bit for bit the same (only where memory
// comes from changes). A user's own malloc settings (GLIBC_TUNABLES, MALLOC_*_) stay.
void default_malloc_thresholds() {
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if ((tunables && std::string(tunables).find("malloc") != std::string::npos) || std::getenv("MALLOC_MMAP_THRESHOLD_") ||
      std::getenv("MALLOC_TRIM_THRESHOLD_") || std::getenv("MALLOC_TOP_PAD_") || std::getenv("MALLOC_MMAP_MAX_"))
    return;
  ::mallopt(M_MMAP_THRESHOLD, 32 << 20);
  ::mallopt(M_TRIM_THRESHOLD, 256 << 20);
}

}  // namespace

int main(int argc, char** argv) {
  default_malloc_thresholds();
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
