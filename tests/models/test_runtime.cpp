// torch's thread count: attune's default (one per physical core) replaces libtorch 1.13's
// hardware_concurrency()/2, which runs a machine without SMT on half its cores.
#include <gtest/gtest.h>

#include <cstdlib>

#include "attune/core/error.h"
#include "attune/core/machine.h"
#include "attune/core/parallel.h"
#include "attune/models/autocast.h"
#include "attune/models/runtime.h"
#include "attune/models/weights.h"

namespace attune {
namespace {

TEST(TorchRuntime, ThreadsDefaultToPhysicalCoresAndFollowSetTorchThreads) {
  auto set = [](const char* name) {
    const char* v = std::getenv(name);
    return v && *v;
  };
  const bool env = set("OMP_NUM_THREADS") || set("MKL_NUM_THREADS");
  models::parse_device("cpu");  // every model entry point applies the default here
  if (!env) {
    EXPECT_EQ(models::torch_threads(), physical_cores());
  }
  models::set_torch_threads(1);
  EXPECT_EQ(models::torch_threads(), 1u);
  models::parse_device("cpu");  // an explicit choice is not overridden by the default
  EXPECT_EQ(models::torch_threads(), 1u);
  models::set_torch_threads(3);
  EXPECT_EQ(models::torch_threads(), 3u);
  models::set_torch_threads(0);
  if (env) {
    EXPECT_EQ(models::torch_threads(), static_cast<std::size_t>(std::atoi(std::getenv(set("OMP_NUM_THREADS") ? "OMP_NUM_THREADS" : "MKL_NUM_THREADS"))));
  } else {
    EXPECT_EQ(models::torch_threads(), physical_cores());
  }
}

// bf16 on a CPU: allowed where the CPU has bf16 instructions (there a product runs at
// twice float32's rate), refused with the reason where it has not. Both branches assert.
TEST(TorchRuntime, Bf16OnTheCpuFollowsTheCpusInstructions) {
  const torch::Device cpu(torch::kCPU);
  EXPECT_EQ(models::resolve_precision("auto", cpu), models::Precision::FP32);  // never silently on
  EXPECT_EQ(models::resolve_precision("fp32", cpu), models::Precision::FP32);
  if (this_machine().bf16) {
    EXPECT_EQ(models::resolve_precision("bf16", cpu), models::Precision::BF16);
  } else {
    try {
      (void)models::resolve_precision("bf16", cpu, "--precision");
      ADD_FAILURE() << "bf16 accepted on a CPU without bf16 instructions";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("avx512_bf16"), std::string::npos) << e.what();
    }
  }
}

// The scope turns CPU autocast on for its lifetime only, restoring what was there.
TEST(TorchRuntime, AutocastScopeOnTheCpuCastsProductsAndRestores) {
  torch::NoGradGuard g;
  const torch::Device cpu(torch::kCPU);
  auto a = torch::randn({8, 16}), b = torch::randn({16, 4});
  const auto exact = torch::matmul(a, b);
  {
    models::AutocastScope off(cpu, models::Precision::FP32);
    EXPECT_EQ(torch::matmul(a, b).scalar_type(), torch::kFloat32);
  }
  {
    models::AutocastScope on(cpu, models::Precision::BF16);
    const auto c = torch::matmul(a, b);
    EXPECT_EQ(c.scalar_type(), torch::kBFloat16);
    // bf16's 8-bit mantissa: close to the float32 product, not equal to it.
    EXPECT_TRUE(torch::allclose(c.to(torch::kFloat32), exact, 0.05, 0.1));
    EXPECT_FALSE(torch::equal(c.to(torch::kFloat32), exact));
  }
  EXPECT_EQ(torch::matmul(a, b).scalar_type(), torch::kFloat32);
}

}  // namespace
}  // namespace attune
