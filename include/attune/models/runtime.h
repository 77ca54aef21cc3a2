#pragma once
// torch's process-wide settings that attune owns. No torch in this header: the CLI's
// option parsing includes it.
#include <cstddef>

namespace attune::models {

// Threads torch runs one operator on (its intra-op pool, and OpenBLAS under it). n > 0 sets
// n; n == 0 picks the default: torch's own choice where OMP_NUM_THREADS or MKL_NUM_THREADS
// is set, else one per physical core (attune::physical_cores()). libtorch 1.13's own default is
// hardware_concurrency() / 2 on x86-64 — it assumes two hyper-threads per core — so on a
// machine without SMT it leaves half the cores idle (a 2-vCPU machine ran every model on
// one thread; bench/RESULTS.md).
void set_torch_threads(std::size_t n);
// Applies the default once, unless set_torch_threads ran first. Every model entry point
// calls it (through parse_device), so library users get the default without asking.
void ensure_torch_threads();
// The intra-op thread count torch uses now.
std::size_t torch_threads();

}  // namespace attune::models
