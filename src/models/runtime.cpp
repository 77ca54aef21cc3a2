#include "attune/models/runtime.h"

#include <ATen/Parallel.h>

#include <atomic>
#include <cstdlib>
#include <mutex>

#include "attune/core/parallel.h"

namespace attune::models {

namespace {
std::once_flag default_once;
std::atomic<bool> configured{false};

bool env_set(const char* name) {
  const char* v = std::getenv(name);
  return v && *v;
}
}  // namespace

void set_torch_threads(std::size_t n) {
  configured = true;
  if (n == 0) {
    if (env_set("OMP_NUM_THREADS") || env_set("MKL_NUM_THREADS")) return;  // torch honours them
    n = physical_cores();
  }
  at::set_num_threads(static_cast<int>(n));
}

void ensure_torch_threads() {
  std::call_once(default_once, [] {
    if (!configured) set_torch_threads(0);
  });
}

std::size_t torch_threads() { return static_cast<std::size_t>(at::get_num_threads()); }

}  // namespace attune::models
