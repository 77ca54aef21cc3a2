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
// The intra-op thread count torch uses now.
std::size_t torch_threads();

// Whether CPU inference of BERT-family encoders takes the path without torch operators
// (models/bert_native.h): true unless ATTUNE_ENCODER_KERNEL=torch (for A/B measurements);
// UsageError for a value other than native or torch.
bool native_encoder_kernel();

// Applied once per process, before the first model runs; every model entry point calls it
// (through parse_device), so library users get it without asking:
// - torch's default thread count (above), unless set_torch_threads ran first;
// - glibc malloc keeps freed activation buffers for reuse instead of handing them back to
//   the kernel: a fixed 32 MiB mmap threshold (glibc's largest) and a 512 MiB trim
//   threshold. By default every forward pass gets fresh pages for its [tokens x features]
//   tensors and pays a page fault per 4 KiB of them — 10-15 % of a MiniLM forward on CPU
//   (bench/RESULTS.md). A user's own MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_ or
//   glibc.malloc tunables are left alone.
void ensure_torch_runtime();

}  // namespace attune::models
