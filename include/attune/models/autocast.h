#pragma once
// Mixed precision for training on CUDA: torch's autocast as a scope. Inside it, the
// forward passes run their matrix products in the lower precision and keep reductions,
// softmax and losses in float32 (torch's own per-operator lists); the weights, their
// gradients and the optimiser state stay float32. Backward runs outside the scope.
#include <torch/torch.h>

#include <string>

namespace attune::models {

// "auto" (bf16 on CUDA, fp32 elsewhere), "fp32" or "bf16"; UsageError naming `field`
// otherwise, and for bf16 on a device that is not CUDA (on CPU bf16 matrix products are
// slower than float32: models/local_lm.h).
enum class Precision { FP32, BF16 };
Precision resolve_precision(const std::string& wanted, const torch::Device& device, const std::string& field = "precision");
const char* precision_name(Precision p);

class AutocastScope {
 public:
  // Nothing happens for FP32 (or a device that is not CUDA).
  AutocastScope(const torch::Device& device, Precision p);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool on_ = false, was_enabled_ = false;
  torch::ScalarType was_dtype_ = torch::kFloat16;
};

}  // namespace attune::models
