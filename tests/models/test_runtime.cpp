// torch's thread count: attune's default (one per physical core) replaces libtorch 1.13's
// hardware_concurrency()/2, which runs a machine without SMT on half its cores.
#include <gtest/gtest.h>

#include <cstdlib>

#include "attune/core/parallel.h"
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

}  // namespace
}  // namespace attune
