#include "attune/models/weights.h"

#include <cstring>

#include "attune/core/error.h"
#include "attune/models/runtime.h"

namespace attune::models {

torch::Device to_torch(const Device& d) {
  ensure_torch_runtime();  // every model entry point comes through here first
  switch (d.kind) {
    case Device::Kind::Auto:
      return torch::cuda::is_available() ? torch::Device(torch::kCUDA, 0) : torch::Device(torch::kCPU);
    case Device::Kind::Cpu:
      return torch::Device(torch::kCPU);
    case Device::Kind::Cuda:
      break;
  }
  if (!torch::cuda::is_available())
    throw Error("device \"" + d.str() + "\": CUDA is not available in this build or on this machine");
  if (d.index >= static_cast<int>(torch::cuda::device_count()))
    throw Error("device \"" + d.str() + "\": no such CUDA device (" + std::to_string(torch::cuda::device_count()) + " present)");
  return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(d.index));
}

torch::Device parse_device(const std::string& spec) { return to_torch(Device::parse(spec)); }

torch::Dtype parse_dtype_name(const std::string& s) {
  if (s == "float32" || s == "fp32") return torch::kFloat32;
  if (s == "float16" || s == "fp16") return torch::kFloat16;
  if (s == "bfloat16" || s == "bf16") return torch::kBFloat16;
  throw UsageError("dtype \"" + s + "\": expected float32, float16 or bfloat16");
}

namespace {
torch::Dtype torch_dtype(DType d) {
  switch (d) {
    case DType::F64: return torch::kFloat64;
    case DType::F32: return torch::kFloat32;
    case DType::F16: return torch::kFloat16;
    case DType::BF16: return torch::kBFloat16;
    case DType::I64: return torch::kInt64;
    case DType::I32: return torch::kInt32;
    case DType::I16: return torch::kInt16;
    case DType::I8: return torch::kInt8;
    case DType::U8: return torch::kUInt8;
    case DType::BOOL: return torch::kBool;
  }
  return torch::kFloat32;
}

DType our_dtype(torch::Dtype d) {
  if (d == torch::kFloat64) return DType::F64;
  if (d == torch::kFloat32) return DType::F32;
  if (d == torch::kFloat16) return DType::F16;
  if (d == torch::kBFloat16) return DType::BF16;
  if (d == torch::kInt64) return DType::I64;
  if (d == torch::kInt32) return DType::I32;
  if (d == torch::kInt16) return DType::I16;
  if (d == torch::kInt8) return DType::I8;
  if (d == torch::kUInt8) return DType::U8;
  if (d == torch::kBool) return DType::BOOL;
  throw Error("cannot store tensors of dtype " + std::string(c10::toString(d)) + " in safetensors");
}

std::string shape_str(c10::IntArrayRef s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}
}  // namespace

torch::Tensor to_tensor(const TensorView& v, torch::Dtype dtype) {
  // from_blob over the mapped bytes (safetensors is little-endian, as is every machine we
  // build for), then a converting copy so the result owns its memory.
  auto src = torch::from_blob(const_cast<std::byte*>(v.data.data()), v.shape, torch::TensorOptions().dtype(torch_dtype(v.dtype)));
  return src.to(dtype, /*non_blocking=*/false, /*copy=*/true).contiguous();
}

NamedTensor from_tensor(const std::string& name, const torch::Tensor& t) {
  auto c = t.detach().to(torch::kCPU).contiguous();
  NamedTensor n;
  n.name = name;
  n.dtype = our_dtype(c.scalar_type());
  n.shape.assign(c.sizes().begin(), c.sizes().end());
  n.bytes.resize(c.numel() * c.element_size());
  if (!n.bytes.empty()) std::memcpy(n.bytes.data(), c.data_ptr(), n.bytes.size());
  return n;
}

std::string load_module(torch::nn::Module& module, const WeightSet& weights, const LoadOptions& opts) {
  auto params = module.named_parameters(/*recurse=*/true);
  auto buffers = module.named_buffers(/*recurse=*/true);
  std::string prefix = opts.prefixes.empty() ? "" : opts.prefixes.front();
  if (params.size() > 0) {
    for (const auto& p : opts.prefixes) {
      bool any = false;
      for (const auto& item : params)
        if (weights.contains(p + item.key())) {
          any = true;
          break;
        }
      if (any) {
        prefix = p;
        break;
      }
    }
  }
  torch::NoGradGuard guard;
  auto copy_in = [&](const std::string& name, torch::Tensor& dst, bool buffer) {
    const std::string full = prefix + name;
    if (!weights.contains(full)) {
      if (buffer || opts.optional.count(name)) return;
      throw Error(weights.source().string() + ": missing tensor \"" + full + "\"");
    }
    const auto& view = weights.get(full);
    if (c10::IntArrayRef(view.shape) != dst.sizes())
      throw Error(weights.source().string() + ": tensor \"" + full + "\" has shape " + shape_str(view.shape) +
                  " but the model (from config.json) expects " + shape_str(dst.sizes()));
    auto src = to_tensor(view, dst.scalar_type());
    if (src.is_floating_point() && !torch::isfinite(src).all().item<bool>())
      throw Error(weights.source().string() + ": tensor \"" + full + "\" holds NaN or infinite values (a broken or "
                  "diverged checkpoint); refusing to run it");
    dst.copy_(src);
  };
  for (auto& item : params) copy_in(item.key(), item.value(), false);
  for (auto& item : buffers) copy_in(item.key(), item.value(), true);
  return prefix;
}

void save_module(const torch::nn::Module& module, const std::filesystem::path& file,
                 const std::map<std::string, std::string>& metadata, const std::string& prefix) {
  std::vector<NamedTensor> out;
  for (const auto& item : module.named_parameters(true)) out.push_back(from_tensor(prefix + item.key(), item.value().to(torch::kFloat32)));
  for (const auto& item : module.named_buffers(true)) out.push_back(from_tensor(prefix + item.key(), item.value()));
  write_safetensors(file, out, metadata);
}

}  // namespace attune::models
