#pragma once
// Where neural models run, parsed once at the edge (CLI flag, HTTP field, config) from
// "auto", "cpu", "cuda" or "cuda:N"; nothing below looks at the string again.
#include <string>
#include <string_view>

namespace attune {

struct Device {
  enum class Kind { Auto, Cpu, Cuda };
  Kind kind = Kind::Auto;  // Auto: CUDA device 0 when CUDA is available, else the CPU
  int index = 0;           // Cuda: which GPU

  Device() = default;
  constexpr Device(Kind k, int i = 0) : kind(k), index(i) {}
  // A literal in code ("cpu"); user input goes through parse().
  Device(const char* literal) : Device(parse(literal)) {}

  // UsageError naming the value unless it is auto, cpu, cuda or cuda:N (N >= 0).
  static Device parse(std::string_view s);
  // The canonical spelling: "auto", "cpu", "cuda:N".
  std::string str() const;
  bool operator==(const Device&) const = default;
};

}  // namespace attune
