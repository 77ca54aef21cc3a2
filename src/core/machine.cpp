#include "attune/core/machine.h"

#include <dlfcn.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "attune/core/strings.h"

namespace attune {
namespace {

int cpuinfo_int(std::string_view s) {
  int v = 0;
  if (s.empty()) return -1;
  for (char c : s) {
    if (c < '0' || c > '9') return -1;
    v = v * 10 + (c - '0');
    if (v > 1'000'000) return -1;
  }
  return v;
}

bool cpuinfo_has_flag(const std::string& flags, std::string_view f) {
  for (auto w : split_whitespace_views(flags))
    if (w == f) return true;
  return false;
}

}  // namespace

Machine parse_cpuinfo(std::string_view text) {
  Machine m;
  std::string flags;
  std::size_t pos = 0;
  bool seen_processor = false;
  while (pos < text.size()) {
    auto nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    const auto line = text.substr(pos, nl - pos);
    pos = nl + 1;
    const auto colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string key = strip(line.substr(0, colon));
    const std::string value = strip(line.substr(colon + 1));
    if (key == "processor") {
      if (seen_processor) break;  // the first processor's block only
      seen_processor = true;
    } else if (key == "model name" && m.cpu.empty()) {
      m.cpu = value;
    } else if (key == "cpu family" && m.family < 0) {
      m.family = cpuinfo_int(value);
    } else if (key == "model" && m.model < 0) {
      m.model = cpuinfo_int(value);
    } else if (key == "flags" && flags.empty()) {
      flags = value;
    }
  }
  if (cpuinfo_has_flag(flags, "avx512f")) m.isa = "avx512";
  else if (cpuinfo_has_flag(flags, "avx2")) m.isa = "avx2";
  else if (cpuinfo_has_flag(flags, "avx")) m.isa = "avx";
  else if (cpuinfo_has_flag(flags, "sse2")) m.isa = "sse";
  m.bf16 = cpuinfo_has_flag(flags, "avx512_bf16") || cpuinfo_has_flag(flags, "amx_bf16");
  return m;
}

std::string Machine::line() const {
  std::ostringstream o;
  o << (cpu.empty() ? "an unknown CPU" : cpu);
  std::string detail;
  if (family >= 0) detail += "family " + std::to_string(family);
  if (model >= 0) detail += (detail.empty() ? "" : ", ") + std::string("model ") + std::to_string(model);
  std::string sets = isa;
  if (bf16) sets += sets.empty() ? "bf16" : ", bf16";
  if (!sets.empty()) detail += (detail.empty() ? "" : "; ") + sets;
  if (!detail.empty()) o << " (" << detail << ")";
  if (logical_cpus) o << ", " << logical_cpus << " logical CPU" << (logical_cpus == 1 ? "" : "s");
  if (!blas.empty()) o << ", OpenBLAS core " << blas;
  return o.str();
}

nlohmann::json Machine::to_json() const {
  nlohmann::json j = {{"cpu", cpu}, {"isa", isa}, {"bf16", bf16}, {"logical_cpus", logical_cpus}};
  if (family >= 0) j["family"] = family;
  if (model >= 0) j["model"] = model;
  if (!blas.empty()) j["blas"] = "OpenBLAS " + blas;
  return j;
}

const Machine& this_machine() {
  static const Machine m = [] {
    Machine r;
    if (std::ifstream in("/proc/cpuinfo"); in) {
      std::stringstream ss;
      ss << in.rdbuf();
      r = parse_cpuinfo(ss.str());
    }
    r.logical_cpus = std::thread::hardware_concurrency();
    using CoreName = char* (*)();
    if (auto* f = reinterpret_cast<CoreName>(dlsym(RTLD_DEFAULT, "openblas_get_corename")))
      if (const char* name = f()) r.blas = name;
    return r;
  }();
  return m;
}

}  // namespace attune
