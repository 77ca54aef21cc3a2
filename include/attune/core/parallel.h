#pragma once
// A minimal fork-join helper: runs fn(i) for i in [0, n) on `threads` threads
// (0 = hardware concurrency). Items are handed out dynamically. The first exception
// thrown by fn is rethrown in the caller after all threads stop.
#include <cstddef>
#include <functional>

namespace attune {

// CPUs this process may run on (its affinity mask; a container's cpuset limits it), at
// least 1. The default size of attune's own worker pools.
std::size_t default_threads();
// Physical cores among those CPUs: distinct (package, core) pairs from sysfs topology, so
// SMT siblings count once; default_threads() where the topology cannot be read.
std::size_t physical_cores();
void parallel_for(std::size_t n, std::size_t threads, const std::function<void(std::size_t)>& fn);

}  // namespace attune
