// core/machine.h: what machine a run ran on, parsed from /proc/cpuinfo.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "attune/core/machine.h"

namespace attune {
namespace {

// Two processors of a Zen 4 guest, shortened; only the first block counts.
constexpr const char* kZen4 =
    "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\n"
    "model name\t: AMD EPYC\nflags\t\t: fpu sse sse2 avx avx2 fma avx512f avx512dq avx512_bf16 avx512_vnni\n\n"
    "processor\t: 1\ncpu family\t: 6\nmodel\t\t: 85\nmodel name\t: Other\nflags\t\t: sse2\n";

TEST(Machine, ParsesTheFirstProcessor) {
  const auto m = parse_cpuinfo(kZen4);
  EXPECT_EQ(m.cpu, "AMD EPYC");
  EXPECT_EQ(m.family, 25);
  EXPECT_EQ(m.model, 17);
  EXPECT_EQ(m.isa, "avx512");
  EXPECT_TRUE(m.bf16);
  EXPECT_EQ(m.logical_cpus, 0u);  // parsing leaves the rest to this_machine()
  EXPECT_EQ(m.line(), "AMD EPYC (family 25, model 17; avx512, bf16)");
}

TEST(Machine, WidestVectorSetAndNoPrefixMatch) {
  // "avx2" names the set; "avx512_vnni" alone is not avx512f, "avx512_bf16x" is not bf16.
  const auto m = parse_cpuinfo("model name: X\nflags: sse2 avx avx2 avx512_vnni avx512_bf16x\n");
  EXPECT_EQ(m.isa, "avx2");
  EXPECT_FALSE(m.bf16);
  EXPECT_EQ(m.family, -1);
  EXPECT_EQ(parse_cpuinfo("flags: sse sse2\n").isa, "sse");
  EXPECT_EQ(parse_cpuinfo("flags: avx\n").isa, "avx");
}

TEST(Machine, UnknownFieldsStayUnknown) {
  // Not a cpuinfo (another architecture's, or none): nothing invented.
  const auto m = parse_cpuinfo("cpu family: 2x\nmodel: \nCPU part: 0xd0c\n");
  EXPECT_EQ(m.cpu, "");
  EXPECT_EQ(m.family, -1);
  EXPECT_EQ(m.model, -1);
  EXPECT_EQ(m.isa, "");
  EXPECT_EQ(m.line(), "an unknown CPU");
  const auto j = m.to_json();
  EXPECT_FALSE(j.contains("family"));
  EXPECT_FALSE(j.contains("blas"));
}

TEST(Machine, ThisMachineIsReadOnce) {
  const auto& a = this_machine();
  const auto& b = this_machine();
  EXPECT_EQ(&a, &b);
  EXPECT_GT(a.logical_cpus, 0u);
  // This test binary does not load OpenBLAS, so no core is claimed for it.
  EXPECT_EQ(a.blas, "");
  const auto j = a.to_json();
  EXPECT_EQ(j.at("logical_cpus").get<unsigned>(), a.logical_cpus);
  EXPECT_NE(a.line().find("logical CPU"), std::string::npos);
}

}  // namespace
}  // namespace attune
