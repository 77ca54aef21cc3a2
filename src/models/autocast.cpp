// torch's autocast as a scope (models/autocast.h). libtorch 2.4 replaced the CUDA-only
// calls (set_enabled, set_autocast_gpu_dtype) with per-device ones; Debian 12 has 1.13,
// the GPU machines a 2.x, so both spellings are kept.
#include "attune/models/autocast.h"

#include <ATen/autocast_mode.h>
#include <torch/version.h>

#include "attune/core/error.h"
#include "attune/core/machine.h"

#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
#define ATTUNE_AUTOCAST_PER_DEVICE 1
#else
#define ATTUNE_AUTOCAST_PER_DEVICE 0
#endif

namespace attune::models {

Precision resolve_precision(const std::string& wanted, const torch::Device& device, const std::string& field) {
  if (wanted == "auto") return device.is_cuda() ? Precision::BF16 : Precision::FP32;
  if (wanted == "fp32" || wanted == "float32") return Precision::FP32;
  if (wanted == "bf16" || wanted == "bfloat16") {
    if (!device.is_cuda() && !device.is_cpu())
      throw FieldError<UsageError>(field, field + " bf16: mixed precision runs on CUDA or the CPU, not " + device.str());
    // On a CPU without bf16 instructions the products are emulated, about 3x slower than
    // float32: refuse rather than run a slow recipe the user asked to speed up.
    if (device.is_cpu() && !this_machine().bf16)
      throw FieldError<UsageError>(field, field + " bf16: this CPU (" + this_machine().line() +
                                              ") has no avx512_bf16 or amx_bf16, so bf16 products are slower than "
                                              "float32 here; use fp32 or auto");
    return Precision::BF16;
  }
  throw FieldError<UsageError>(field, field + " \"" + wanted + "\": expected auto, fp32 or bf16");
}

const char* precision_name(Precision p) { return p == Precision::BF16 ? "bf16" : "fp32"; }

AutocastScope::AutocastScope(const torch::Device& device, Precision p)
    : on_(p == Precision::BF16 && (device.is_cuda() || device.is_cpu())), cpu_(device.is_cpu()) {
  if (!on_) return;
#if ATTUNE_AUTOCAST_PER_DEVICE
  const auto type = cpu_ ? at::kCPU : at::kCUDA;
  was_enabled_ = at::autocast::is_autocast_enabled(type);
  was_dtype_ = at::autocast::get_autocast_dtype(type);
  at::autocast::set_autocast_dtype(type, at::kBFloat16);
  at::autocast::set_autocast_enabled(type, true);
#else
  if (cpu_) {
    was_enabled_ = at::autocast::is_cpu_enabled();
    was_dtype_ = at::autocast::get_autocast_cpu_dtype();
    at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
    at::autocast::set_cpu_enabled(true);
  } else {
    was_enabled_ = at::autocast::is_enabled();
    was_dtype_ = at::autocast::get_autocast_gpu_dtype();
    at::autocast::set_autocast_gpu_dtype(at::kBFloat16);
    at::autocast::set_enabled(true);
  }
#endif
  at::autocast::increment_nesting();
}

AutocastScope::~AutocastScope() {
  if (!on_) return;
  // The outermost scope drops the casts it cached (the bf16 copies of the weights).
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
#if ATTUNE_AUTOCAST_PER_DEVICE
  const auto type = cpu_ ? at::kCPU : at::kCUDA;
  at::autocast::set_autocast_enabled(type, was_enabled_);
  at::autocast::set_autocast_dtype(type, was_dtype_);
#else
  if (cpu_) {
    at::autocast::set_cpu_enabled(was_enabled_);
    at::autocast::set_autocast_cpu_dtype(was_dtype_);
  } else {
    at::autocast::set_enabled(was_enabled_);
    at::autocast::set_autocast_gpu_dtype(was_dtype_);
  }
#endif
}

bool cpu_autocast_enabled() {
#if ATTUNE_AUTOCAST_PER_DEVICE
  return at::autocast::is_autocast_enabled(at::kCPU);
#else
  return at::autocast::is_cpu_enabled();
#endif
}

}  // namespace attune::models
