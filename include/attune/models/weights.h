#pragma once
// Tensors <-> safetensors, and Hugging Face-named module state. Includes torch: only the
// models layer and its users include this header.
#include <torch/torch.h>

#include <filesystem>
#include <map>
#include <set>
#include <string>

#include "attune/core/device.h"
#include "attune/models/safetensors.h"

namespace attune::models {

// The torch device of `d` (Auto: CUDA device 0 when available, else the CPU). Error when
// CUDA is asked for and absent. Also applies attune's torch runtime settings (runtime.h)
// the first time.
torch::Device to_torch(const Device& d);
// to_torch(Device::parse(spec)).
torch::Device parse_device(const std::string& spec);
// "float32" | "float16" | "bfloat16" (also "fp32", "fp16", "bf16"); UsageError otherwise.
torch::Dtype parse_dtype_name(const std::string& spec);

// Copies a view into a new contiguous CPU tensor of `dtype` (floats convert from
// F16/BF16/F32/F64).
torch::Tensor to_tensor(const TensorView& view, torch::Dtype dtype = torch::kFloat32);
NamedTensor from_tensor(const std::string& name, const torch::Tensor& t);

struct LoadOptions {
  // Parameters that may be absent from the weights (left as initialised), e.g. a tied
  // lm_head.
  std::set<std::string> optional;
  // Weight-name prefix tried in turn ("" and e.g. "bert."): the first that has the
  // module's first parameter wins.
  std::vector<std::string> prefixes = {""};
};

// Copies every parameter and buffer of `module` from `weights` by its dotted name (which
// is the Hugging Face name by construction). Error naming the folder and tensor on a
// missing tensor or a shape mismatch. Returns the prefix used.
std::string load_module(torch::nn::Module& module, const WeightSet& weights, const LoadOptions& opts = {});

// Writes every parameter (and persistent buffer) as F32 safetensors, named as in the module.
void save_module(const torch::nn::Module& module, const std::filesystem::path& file,
                 const std::map<std::string, std::string>& metadata = {}, const std::string& prefix = "");

}  // namespace attune::models
