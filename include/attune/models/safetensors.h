#pragma once
// The safetensors format (https://huggingface.co/docs/safetensors): an 8-byte little-endian
// header length, a JSON header {name: {dtype, shape, data_offsets: [begin, end]},
// "__metadata__": {str: str}}, then the raw little-endian tensor bytes. Torch-free: the
// models layer turns views into tensors (models/weights.h).
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace attune::models {

enum class DType { F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL };

// "F32", "BF16", ... as written in safetensors headers; Error for an unknown name.
DType parse_dtype(const std::string& name);
const char* dtype_name(DType d);
std::size_t dtype_size(DType d);

// A tensor inside a loaded file; `data` stays valid while the owning file lives.
struct TensorView {
  DType dtype = DType::F32;
  std::vector<std::int64_t> shape;
  std::span<const std::byte> data;
  std::int64_t numel() const;
};

// One .safetensors file, memory-mapped read-only and validated: offsets inside the buffer, in
// order, without overlap, each size = numel * dtype size. Errors name the file and tensor.
class SafetensorsFile {
 public:
  static std::shared_ptr<const SafetensorsFile> open(const std::filesystem::path& path);
  const std::filesystem::path& path() const { return path_; }
  const std::map<std::string, TensorView>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  std::filesystem::path path_;
  std::shared_ptr<const void> mapping_;  // mmap of the whole file
  std::size_t size_ = 0;
  std::map<std::string, TensorView> tensors_;
  std::map<std::string, std::string> metadata_;
};

// All weights of a model folder: model.safetensors, or the shards named by
// model.safetensors.index.json ({"weight_map": {tensor: file}}).
class WeightSet {
 public:
  // dir: a model folder; Error naming the folder when it has no safetensors weights.
  static WeightSet open(const std::filesystem::path& dir);
  // A single file.
  static WeightSet open_file(const std::filesystem::path& file);
  bool contains(const std::string& name) const { return index_.count(name) > 0; }
  // Error "<folder>: missing tensor \"name\"" when absent.
  const TensorView& get(const std::string& name) const;
  std::vector<std::string> names() const;
  const std::filesystem::path& source() const { return source_; }

 private:
  std::filesystem::path source_;
  std::vector<std::shared_ptr<const SafetensorsFile>> files_;
  std::map<std::string, const TensorView*> index_;
};

// A tensor to write: raw little-endian bytes of `dtype` in row-major order.
struct NamedTensor {
  std::string name;
  DType dtype = DType::F32;
  std::vector<std::int64_t> shape;
  std::vector<std::byte> bytes;
};

// Writes one safetensors file atomically (temporary file + rename). Tensors are stored in
// name order, which is what the format's canonical writers do; Error on a size mismatch.
void write_safetensors(const std::filesystem::path& path, const std::vector<NamedTensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// IEEE half / bfloat16 <-> float conversions (round to nearest even).
float half_to_float(std::uint16_t h);
float bf16_to_float(std::uint16_t b);
std::uint16_t float_to_half(float f);
std::uint16_t float_to_bf16(float f);

}  // namespace attune::models
