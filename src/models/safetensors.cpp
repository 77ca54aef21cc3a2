#include "attune/models/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>

#include "attune/core/error.h"

namespace attune::models {

namespace fs = std::filesystem;
using nlohmann::json;

DType parse_dtype(const std::string& n) {
  static const std::map<std::string, DType> names = {
      {"F64", DType::F64}, {"F32", DType::F32}, {"F16", DType::F16}, {"BF16", DType::BF16},
      {"I64", DType::I64}, {"I32", DType::I32}, {"I16", DType::I16}, {"I8", DType::I8},
      {"U8", DType::U8},   {"BOOL", DType::BOOL}};
  auto it = names.find(n);
  if (it == names.end()) throw Error("unsupported safetensors dtype \"" + n + "\"");
  return it->second;
}

const char* dtype_name(DType d) {
  switch (d) {
    case DType::F64: return "F64";
    case DType::F32: return "F32";
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
    case DType::I64: return "I64";
    case DType::I32: return "I32";
    case DType::I16: return "I16";
    case DType::I8: return "I8";
    case DType::U8: return "U8";
    case DType::BOOL: return "BOOL";
  }
  return "?";
}

std::size_t dtype_size(DType d) {
  switch (d) {
    case DType::F64: case DType::I64: return 8;
    case DType::F32: case DType::I32: return 4;
    case DType::F16: case DType::BF16: case DType::I16: return 2;
    case DType::I8: case DType::U8: case DType::BOOL: return 1;
  }
  return 0;
}

std::int64_t TensorView::numel() const {
  return std::accumulate(shape.begin(), shape.end(), std::int64_t{1}, std::multiplies<>());
}

std::shared_ptr<const SafetensorsFile> SafetensorsFile::open(const fs::path& path) {
  auto f = std::make_shared<SafetensorsFile>();
  f->path_ = path;
  const std::string where = path.string();
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(where + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    ::close(fd);
    throw Error(where + ": cannot stat");
  }
  f->size_ = static_cast<std::size_t>(st.st_size);
  if (f->size_ < 8) {
    ::close(fd);
    throw Error(where + ": not a safetensors file (" + std::to_string(f->size_) + " bytes)");
  }
  void* p = mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) throw Error(where + ": mmap failed: " + std::strerror(errno));
  const std::size_t size = f->size_;
  f->mapping_ = std::shared_ptr<const void>(p, [size](const void* q) { munmap(const_cast<void*>(q), size); });
  const auto* bytes = static_cast<const std::byte*>(p);

  std::uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | std::to_integer<std::uint64_t>(bytes[i]);
  if (header_len > size - 8) throw Error(where + ": header length " + std::to_string(header_len) + " exceeds the file size");
  json header;
  try {
    header = json::parse(reinterpret_cast<const char*>(bytes + 8), reinterpret_cast<const char*>(bytes + 8 + header_len));
  } catch (const json::exception& e) {
    throw Error(where + ": malformed header: " + e.what());
  }
  if (!header.is_object()) throw Error(where + ": header is not a JSON object");
  const std::byte* data = bytes + 8 + header_len;
  const std::uint64_t data_len = size - 8 - header_len;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
  for (auto& [name, v] : header.items()) {
    if (name == "__metadata__") {
      if (!v.is_object()) throw Error(where + ": __metadata__ is not an object");
      for (auto& [k, mv] : v.items())
        if (mv.is_string()) f->metadata_[k] = mv.get<std::string>();
      continue;
    }
    const std::string ctx = where + ": tensor \"" + name + "\"";
    try {
      TensorView t;
      t.dtype = parse_dtype(v.at("dtype").get<std::string>());
      for (auto& d : v.at("shape")) {
        auto x = d.get<std::int64_t>();
        if (x < 0) throw Error("negative dimension");
        t.shape.push_back(x);
      }
      auto off = v.at("data_offsets");
      if (!off.is_array() || off.size() != 2) throw Error("data_offsets must be [begin, end]");
      auto b = off[0].get<std::uint64_t>(), e = off[1].get<std::uint64_t>();
      if (b > e || e > data_len) throw Error("data_offsets [" + std::to_string(b) + ", " + std::to_string(e) + "] outside the data (" + std::to_string(data_len) + " bytes)");
      if (e - b != static_cast<std::uint64_t>(t.numel()) * dtype_size(t.dtype))
        throw Error("holds " + std::to_string(e - b) + " bytes but its shape and dtype need " +
                    std::to_string(t.numel() * dtype_size(t.dtype)));
      t.data = std::span<const std::byte>(data + b, e - b);
      ranges.emplace_back(b, e);
      f->tensors_.emplace(name, std::move(t));
    } catch (const json::exception& e) {
      throw Error(ctx + ": " + e.what());
    } catch (const Error& e) {
      throw Error(ctx + ": " + e.what());
    }
  }
  std::sort(ranges.begin(), ranges.end());
  for (std::size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first < ranges[i - 1].second) throw Error(where + ": tensor data ranges overlap");
  return f;
}

WeightSet WeightSet::open_file(const fs::path& file) {
  WeightSet w;
  w.source_ = file;
  w.files_.push_back(SafetensorsFile::open(file));
  for (auto& [n, t] : w.files_.back()->tensors()) w.index_[n] = &t;
  return w;
}

WeightSet WeightSet::open(const fs::path& dir) {
  if (fs::is_regular_file(dir)) return open_file(dir);
  const fs::path single = dir / "model.safetensors";
  const fs::path index = dir / "model.safetensors.index.json";
  if (fs::exists(single)) {
    WeightSet w = open_file(single);
    w.source_ = dir;
    return w;
  }
  if (!fs::exists(index))
    throw Error(dir.string() + ": no model.safetensors or model.safetensors.index.json (only safetensors weights are supported)");
  json j;
  try {
    std::ifstream in(index);
    j = json::parse(in);
  } catch (const json::exception& e) {
    throw Error(index.string() + ": " + e.what());
  }
  if (!j.contains("weight_map") || !j["weight_map"].is_object())
    throw Error(index.string() + ": field \"weight_map\" missing or not an object");
  WeightSet w;
  w.source_ = dir;
  std::map<std::string, std::shared_ptr<const SafetensorsFile>> shards;
  for (auto& [name, file] : j["weight_map"].items()) {
    if (!file.is_string()) throw Error(index.string() + ": weight_map[\"" + name + "\"] is not a file name");
    auto fname = file.get<std::string>();
    auto& shard = shards[fname];
    if (!shard) {
      shard = SafetensorsFile::open(dir / fname);
      w.files_.push_back(shard);
    }
    auto it = shard->tensors().find(name);
    if (it == shard->tensors().end())
      throw Error((dir / fname).string() + ": missing tensor \"" + name + "\" named by " + index.filename().string());
    w.index_[name] = &it->second;
  }
  return w;
}

const TensorView& WeightSet::get(const std::string& name) const {
  auto it = index_.find(name);
  if (it == index_.end()) throw Error(source_.string() + ": missing tensor \"" + name + "\"");
  return *it->second;
}

std::vector<std::string> WeightSet::names() const {
  std::vector<std::string> out;
  for (auto& [n, _] : index_) out.push_back(n);
  return out;
}

void write_safetensors(const fs::path& path, const std::vector<NamedTensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::vector<const NamedTensor*> order;
  for (auto& t : tensors) order.push_back(&t);
  std::sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->name < b->name; });
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::uint64_t offset = 0;
  for (auto* t : order) {
    std::int64_t numel = std::accumulate(t->shape.begin(), t->shape.end(), std::int64_t{1}, std::multiplies<>());
    if (t->bytes.size() != static_cast<std::size_t>(numel) * dtype_size(t->dtype))
      throw Error(path.string() + ": tensor \"" + t->name + "\" has " + std::to_string(t->bytes.size()) +
                  " bytes but its shape and dtype need " + std::to_string(numel * dtype_size(t->dtype)));
    header[t->name] = {{"dtype", dtype_name(t->dtype)}, {"shape", t->shape}, {"data_offsets", {offset, offset + t->bytes.size()}}};
    offset += t->bytes.size();
  }
  std::string h = header.dump();
  while ((8 + h.size()) % 8) h.push_back(' ');  // align the data to 8 bytes, as the format recommends
  fs::path tmp = path;
  tmp += ".tmp" + std::to_string(::getpid());
  // A failed write leaves nothing behind: no temporary file, the old file untouched.
  auto fail = [&](const std::string& what) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    throw Error(path.string() + ": " + what);
  };
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) fail("cannot write");
    unsigned char len[8];
    std::uint64_t n = h.size();
    for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>((n >> (8 * i)) & 0xff);
    out.write(reinterpret_cast<const char*>(len), 8);
    out.write(h.data(), static_cast<std::streamsize>(h.size()));
    for (auto* t : order) out.write(reinterpret_cast<const char*>(t->bytes.data()), static_cast<std::streamsize>(t->bytes.size()));
    out.flush();
    if (!out) {
      out.close();
      fail("write failed (disk full?)");
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) fail(ec.message());
}

float half_to_float(std::uint16_t h) {
  std::uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ffu, bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      exp = 127 - 15 + 1;
      while (!(mant & 0x400u)) {
        mant <<= 1;
        --exp;
      }
      mant &= 0x3ffu;
      bits = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  return std::bit_cast<float>(bits);
}

float bf16_to_float(std::uint16_t b) { return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16); }

std::uint16_t float_to_bf16(float f) {
  std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40);  // quiet NaN
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<std::uint16_t>(x >> 16);
}

std::uint16_t float_to_half(float f) {
  std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  std::uint16_t sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  std::uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return sign | 0x7e00u;             // NaN
  if (ax >= 0x477ff000u) return sign | 0x7c00u;            // overflow -> inf (incl. rounding up)
  if (ax < 0x38800000u) {                                  // subnormal or zero in half
    if (ax < 0x33000000u) return sign;                     // underflows to 0
    std::uint32_t mant = (ax & 0x7fffffu) | 0x800000u;
    int shift = 126 - static_cast<int>(ax >> 23);          // 14 + (113 - exp)
    std::uint32_t v = mant >> (shift - 0);
    std::uint32_t rem = mant & ((1u << shift) - 1);
    std::uint32_t half = 1u << (shift - 1);
    v >>= 0;
    std::uint16_t r = static_cast<std::uint16_t>(v);
    if (rem > half || (rem == half && (r & 1))) ++r;
    return sign | r;
  }
  std::uint32_t r = ax + 0xfffu + ((ax >> 13) & 1u);       // round to nearest even at bit 13
  return sign | static_cast<std::uint16_t>((r - (112u << 23)) >> 13);
}

}  // namespace attune::models
