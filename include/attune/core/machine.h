#pragma once
// What machine a run ran on, recorded beside its timings (attune_train.json's "machine",
// train-lm's first line, the benchmarks' context). This workspace's "2 cores" have been
// an AVX2 EPYC in some hours and an AVX-512 one in others, 1.5x apart on the same
// recipe: a time means little without the CPU it was taken on.
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace attune {

struct Machine {
  std::string cpu;          // /proc/cpuinfo's "model name" ("" when unknown)
  int family = -1;          // "cpu family", -1 when unknown
  int model = -1;           // "model", -1 when unknown
  std::string isa;          // the widest float vector set of "flags": "avx512", "avx2", "avx", "sse" or ""
  bool bf16 = false;        // "flags" has avx512_bf16 or amx_bf16
  unsigned logical_cpus = 0;  // std::thread::hardware_concurrency()
  std::string blas;         // OpenBLAS's core name when OpenBLAS is loaded in this process, else ""

  // "AMD EPYC (family 25, model 17; avx512, bf16), 2 logical CPUs, OpenBLAS core Cooperlake"
  std::string line() const;
  nlohmann::json to_json() const;
};

// The fields /proc/cpuinfo's first processor gives (cpu, family, model, isa, bf16); the
// rest left empty. Parsing only: tests feed it text.
Machine parse_cpuinfo(std::string_view text);

// This process's machine: /proc/cpuinfo where it exists, the thread count, and the BLAS
// core of an OpenBLAS already loaded (looked up with dlsym, so nothing links it for this).
// Read once and cached.
const Machine& this_machine();

}  // namespace attune
