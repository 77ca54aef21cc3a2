#include "attune/core/device.h"

#include <charconv>

#include "attune/core/error.h"

namespace attune {

Device Device::parse(std::string_view s) {
  if (s == "auto" || s.empty()) return {Kind::Auto};
  if (s == "cpu") return {Kind::Cpu};
  if (s == "cuda") return {Kind::Cuda, 0};
  if (s.starts_with("cuda:") && s.size() > 5) {
    int index = -1;
    const auto digits = s.substr(5);
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
    if (ec == std::errc() && end == digits.data() + digits.size() && index >= 0) return {Kind::Cuda, index};
  }
  throw FieldError<UsageError>("device", "device \"" + std::string(s) + "\": expected cpu, cuda, cuda:N or auto");
}

std::string Device::str() const {
  switch (kind) {
    case Kind::Auto: return "auto";
    case Kind::Cpu: return "cpu";
    case Kind::Cuda: return "cuda:" + std::to_string(index);
  }
  return "auto";
}

}  // namespace attune
