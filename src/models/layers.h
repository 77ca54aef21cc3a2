#pragma once
// Building blocks shared by the models layer's modules (private to src/models).
#include <torch/torch.h>

namespace attune::models::detail {

// RMSNorm (Llama's RMSNorm, T5's T5LayerNorm): no mean subtraction, no bias, the variance
// in float32. The normalised value is cast back to the input's dtype (Llama) or, with
// cast_to_weight, to the weight's dtype (T5, as transformers does for half weights).
struct RMSNormImpl : torch::nn::Module {
  RMSNormImpl(std::int64_t dim, double eps, bool cast_to_weight = false) : eps(eps), cast_to_weight(cast_to_weight) {
    weight = register_parameter("weight", torch::ones({dim}));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    auto xf = x.to(torch::kFloat32);
    xf = xf * torch::rsqrt(xf.pow(2).mean(-1, true) + eps);
    return weight * xf.to(cast_to_weight ? weight.scalar_type() : x.scalar_type());
  }
  torch::Tensor weight;
  double eps;
  bool cast_to_weight;
};
TORCH_MODULE(RMSNorm);

}  // namespace attune::models::detail
