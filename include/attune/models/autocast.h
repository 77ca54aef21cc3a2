#pragma once
// Mixed precision for training on CUDA, or on a CPU with bf16 instructions (avx512_bf16,
// amx_bf16): torch's autocast as a scope. Inside it, the
// forward passes run their matrix products in the lower precision and keep reductions,
// softmax and losses in float32 (torch's own per-operator lists); the weights, their
// gradients and the optimiser state stay float32. Backward runs outside the scope.
#include <torch/torch.h>

#include <string>

namespace attune::models {

// "auto" (bf16 on CUDA, fp32 elsewhere), "fp32" or "bf16"; UsageError naming `field`
// otherwise, and for bf16 on a CPU without bf16 instructions (there bf16 matrix products
// are emulated, slower than float32: models/local_lm.h). On a CPU with them a bf16 product
// runs at twice float32's rate (bench_models' MatmulBf16), so bf16 is allowed but not the
// default: it changes the numbers a recipe was measured with.
enum class Precision { FP32, BF16 };
Precision resolve_precision(const std::string& wanted, const torch::Device& device, const std::string& field = "precision");
const char* precision_name(Precision p);
// Whether CPU autocast is on in this thread (an AutocastScope for the CPU, or the caller's own).
bool cpu_autocast_enabled();

class AutocastScope {
 public:
  // Nothing happens for FP32 (or a device that is neither CUDA nor the CPU).
  AutocastScope(const torch::Device& device, Precision p);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool on_ = false, cpu_ = false, was_enabled_ = false;
  torch::ScalarType was_dtype_ = torch::kFloat16;
};

}  // namespace attune::models
