#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "attune/core/error.h"
#include "attune/models/config.h"
#include "attune/models/safetensors.h"
#include "attune/models/weights.h"

using namespace attune;
using namespace attune::models;
namespace fs = std::filesystem;

namespace {
fs::path temp_dir(const std::string& name) {
  auto d = fs::temp_directory_path() / ("attune_st_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}
template <class T>
NamedTensor tensor(const std::string& name, DType dt, std::vector<std::int64_t> shape, const std::vector<T>& v) {
  NamedTensor t{name, dt, std::move(shape), {}};
  t.bytes.resize(v.size() * sizeof(T));
  std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
  return t;
}
std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}
void spit(const fs::path& p, const std::string& s) {
  std::ofstream out(p, std::ios::binary);
  out << s;
}
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(Safetensors, WriteReadIsBitIdentical) {
  auto d = temp_dir("rt");
  std::vector<float> f32 = {1.5f, -0.0f, 3.25e-38f, 1e30f, -7.0f, 0.1f};
  std::vector<std::uint16_t> f16 = {float_to_half(1.0f), float_to_half(-2.5f), 0x7c00, 0x0001};
  std::vector<std::uint16_t> bf16 = {float_to_bf16(3.0f), float_to_bf16(-0.15625f)};
  std::vector<std::int64_t> i64 = {1, -2, 1LL << 40};
  std::vector<NamedTensor> ts = {tensor("b.weight", DType::F32, {2, 3}, f32), tensor("a.half", DType::F16, {4}, f16),
                                 tensor("c.bf", DType::BF16, {1, 2}, bf16), tensor("d.ids", DType::I64, {3}, i64),
                                 tensor("e.empty", DType::F32, {0, 4}, std::vector<float>{})};
  write_safetensors(d / "m.safetensors", ts, {{"format", "pt"}});
  auto f = SafetensorsFile::open(d / "m.safetensors");
  ASSERT_EQ(f->tensors().size(), ts.size());
  EXPECT_EQ(f->metadata().at("format"), "pt");
  for (auto& t : ts) {
    const auto& v = f->tensors().at(t.name);
    EXPECT_EQ(v.dtype, t.dtype) << t.name;
    EXPECT_EQ(v.shape, t.shape) << t.name;
    ASSERT_EQ(v.data.size(), t.bytes.size()) << t.name;
    EXPECT_EQ(0, std::memcmp(v.data.data(), t.bytes.data(), t.bytes.size())) << t.name;
  }
  // Writing what was read gives the same file, byte for byte.
  std::vector<NamedTensor> again;
  for (auto& [n, v] : f->tensors()) {
    NamedTensor t{n, v.dtype, v.shape, std::vector<std::byte>(v.data.begin(), v.data.end())};
    again.push_back(t);
  }
  write_safetensors(d / "m2.safetensors", again, f->metadata());
  EXPECT_EQ(slurp(d / "m.safetensors"), slurp(d / "m2.safetensors"));
  // The data section starts 8-byte aligned.
  std::string bytes = slurp(d / "m.safetensors");
  std::uint64_t hl = 0;
  std::memcpy(&hl, bytes.data(), 8);
  EXPECT_EQ((8 + hl) % 8, 0u);
}

TEST(Safetensors, TensorsConvertThroughTorch) {
  auto d = temp_dir("torch");
  auto t = torch::arange(12, torch::kFloat32).view({3, 4}) / 7.0;
  write_safetensors(d / "t.safetensors", {from_tensor("x", t), from_tensor("h", t.to(torch::kFloat16)), from_tensor("b", t.to(torch::kBFloat16))});
  auto w = WeightSet::open_file(d / "t.safetensors");
  EXPECT_TRUE(torch::equal(to_tensor(w.get("x")), t));
  EXPECT_TRUE(torch::equal(to_tensor(w.get("h")), t.to(torch::kFloat16).to(torch::kFloat32)));
  EXPECT_TRUE(torch::equal(to_tensor(w.get("b")), t.to(torch::kBFloat16).to(torch::kFloat32)));
  EXPECT_EQ(w.get("h").dtype, DType::F16);
}

TEST(Safetensors, HalfAndBfloatConversionsMatchTorch) {
  std::vector<float> xs = {0.0f, -0.0f, 1.0f, -1.0f, 0.1f, 65504.0f, 65519.0f, 65520.0f, 6.0e-8f, 5.96e-8f, 2.98e-8f,
                           3.0e-8f, 1e-5f, 3.14159f, -1234.5678f, 1e38f, 6.103515625e-05f};
  for (float x : xs) {
    auto th = torch::tensor({x}).to(torch::kFloat16);
    std::uint16_t bits;
    std::memcpy(&bits, th.data_ptr(), 2);
    EXPECT_EQ(float_to_half(x), bits) << x;
    EXPECT_EQ(half_to_float(bits), th.to(torch::kFloat32).item<float>()) << x;
    auto tb = torch::tensor({x}).to(torch::kBFloat16);
    std::memcpy(&bits, tb.data_ptr(), 2);
    EXPECT_EQ(float_to_bf16(x), bits) << x;
    EXPECT_EQ(bf16_to_float(bits), tb.to(torch::kFloat32).item<float>()) << x;
  }
}

TEST(Safetensors, ShardedIndex) {
  auto d = temp_dir("shard");
  write_safetensors(d / "model-00001-of-00002.safetensors", {tensor("a", DType::F32, {2}, std::vector<float>{1, 2})});
  write_safetensors(d / "model-00002-of-00002.safetensors", {tensor("b", DType::F32, {1}, std::vector<float>{3})});
  spit(d / "model.safetensors.index.json",
       R"({"metadata": {}, "weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}})");
  auto w = WeightSet::open(d);
  EXPECT_EQ(w.names(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(to_tensor(w.get("b")).item<float>(), 3.0f);
  EXPECT_NE(error_of([&] { w.get("c"); }).find("missing tensor \"c\""), std::string::npos);
  spit(d / "model.safetensors.index.json", R"({"weight_map": {"a": "model-00002-of-00002.safetensors"}})");
  EXPECT_NE(error_of([&] { WeightSet::open(d); }).find("model-00002-of-00002.safetensors: missing tensor \"a\""), std::string::npos);
}

TEST(Safetensors, CorruptFilesAreRejectedWithTheirName) {
  auto d = temp_dir("bad");
  write_safetensors(d / "ok.safetensors", {tensor("w", DType::F32, {2, 2}, std::vector<float>{1, 2, 3, 4})});
  std::string good = slurp(d / "ok.safetensors");
  // Every truncation of the file is an error, never a crash or a silent partial read.
  for (std::size_t n = 0; n < good.size(); ++n) {
    spit(d / "t.safetensors", good.substr(0, n));
    auto msg = error_of([&] { SafetensorsFile::open(d / "t.safetensors"); });
    EXPECT_NE(msg.find("t.safetensors"), std::string::npos) << "truncated to " << n;
  }
  auto with_header = [&](const std::string& h, std::size_t data) {
    std::string s(8, '\0');
    std::uint64_t n = h.size();
    std::memcpy(s.data(), &n, 8);
    s += h + std::string(data, '\0');
    spit(d / "h.safetensors", s);
    return error_of([&] { SafetensorsFile::open(d / "h.safetensors"); });
  };
  EXPECT_NE(with_header(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 12]}})", 12).find("holds 12 bytes"), std::string::npos);
  EXPECT_NE(with_header(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", 4).find("outside the data"), std::string::npos);
  EXPECT_NE(with_header(R"({"w": {"dtype": "Q4", "shape": [2], "data_offsets": [0, 8]}})", 8).find("unsupported safetensors dtype \"Q4\""), std::string::npos);
  EXPECT_NE(with_header(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})", 12).find("overlap"), std::string::npos);
  EXPECT_NE(with_header("{not json", 0).find("malformed header"), std::string::npos);
  EXPECT_NE(error_of([&] { WeightSet::open(d / "nowhere"); }).find("no model.safetensors"), std::string::npos);
  EXPECT_NE(error_of([&] { write_safetensors(d / "w.safetensors", {tensor("x", DType::F32, {3}, std::vector<float>{1})}); }).find("\"x\" has 4 bytes"), std::string::npos);
}

TEST(Config, ErrorsNameTheFileAndKey) {
  auto c = ConfigFile::parse(R"({"hidden_size": 64, "eos_token_id": [1, 2], "name": 3})", "cfg.json");
  EXPECT_EQ(c.integer("hidden_size"), 64);
  EXPECT_EQ(c.integers("eos_token_id"), (std::vector<std::int64_t>{1, 2}));
  EXPECT_EQ(c.integer("absent", 7), 7);
  EXPECT_EQ(error_of([&] { c.integer("vocab_size"); }), "cfg.json: field \"vocab_size\": missing");
  EXPECT_EQ(error_of([&] { c.string("name"); }), "cfg.json: field \"name\": expected a string");
  EXPECT_NE(error_of([] { ConfigFile::parse("{", "x.json"); }).find("x.json: malformed JSON"), std::string::npos);
}
