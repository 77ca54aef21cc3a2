#include "attune/core/parallel.h"

#include <sched.h>

#include <atomic>
#include <exception>
#include <fstream>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace attune {

namespace {

// The CPUs in this process's affinity mask; empty when it cannot be read.
std::vector<int> affinity_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

bool read_int(const std::string& path, long& out) {
  std::ifstream in(path);
  return static_cast<bool>(in >> out);
}

}  // namespace

std::size_t default_threads() {
  if (auto cpus = affinity_cpus(); !cpus.empty()) return cpus.size();
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : n;
}

std::size_t physical_cores() {
  const auto cpus = affinity_cpus();
  if (cpus.empty()) return default_threads();
  std::set<std::pair<long, long>> cores;
  for (int c : cpus) {
    const std::string dir = "/sys/devices/system/cpu/cpu" + std::to_string(c) + "/topology/";
    long package = 0, core = 0;
    if (!read_int(dir + "physical_package_id", package) || !read_int(dir + "core_id", core)) return cpus.size();
    cores.emplace(package, core);
  }
  return cores.empty() ? cpus.size() : cores.size();
}

void parallel_for(std::size_t n, std::size_t threads, const std::function<void(std::size_t)>& fn) {
  if (threads == 0) threads = default_threads();
  if (threads > n) threads = n;
  if (threads <= 1) {
    for (std::size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex mu;
  auto worker = [&] {
    for (;;) {
      if (failed.load()) return;
      std::size_t i = next.fetch_add(1);
      if (i >= n) return;
      try {
        fn(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!error) error = std::current_exception();
        failed = true;
        return;
      }
    }
  };
  std::vector<std::thread> pool;
  for (std::size_t t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace attune
