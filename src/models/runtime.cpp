#include "attune/models/runtime.h"

#include <ATen/Parallel.h>
#include <malloc.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "attune/core/error.h"
#include "attune/core/parallel.h"

namespace attune::models {

namespace {
std::once_flag runtime_once;
std::atomic<bool> threads_configured{false};

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

void keep_freed_buffers() {
#ifdef __GLIBC__
  if (env("MALLOC_MMAP_THRESHOLD_") || env("MALLOC_TRIM_THRESHOLD_")) return;
  if (const char* t = env("GLIBC_TUNABLES"); t && std::strstr(t, "glibc.malloc.")) return;
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
#endif
}
}  // namespace

void set_torch_threads(std::size_t n) {
  threads_configured = true;
  if (n == 0) {
    // torch's own default honours OMP_NUM_THREADS / MKL_NUM_THREADS
    const bool user_set = env("OMP_NUM_THREADS") || env("MKL_NUM_THREADS");
    n = user_set ? static_cast<std::size_t>(at::intraop_default_num_threads()) : physical_cores();
  }
  at::set_num_threads(static_cast<int>(n));
}

std::size_t torch_threads() { return static_cast<std::size_t>(at::get_num_threads()); }

void ensure_torch_runtime() {
  std::call_once(runtime_once, [] {
    if (!threads_configured) set_torch_threads(0);
    keep_freed_buffers();
  });
}

bool native_encoder_kernel() {
  const char* kernel = std::getenv("ATTUNE_ENCODER_KERNEL");
  const std::string k = kernel ? kernel : "";
  if (!k.empty() && k != "native" && k != "torch") throw UsageError("ATTUNE_ENCODER_KERNEL=" + k + ": expected native or torch");
  return k != "torch";
}

}  // namespace attune::models
