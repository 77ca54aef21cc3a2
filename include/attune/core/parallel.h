#pragma once
// A minimal fork-join helper: runs fn(i) for i in [0, n) on `threads` threads
// (0 = hardware concurrency). Items are handed out dynamically. The first exception
// thrown by fn is rethrown in the caller after all threads stop.
#include <cstddef>
#include <functional>

namespace attune {

std::size_t default_threads();
void parallel_for(std::size_t n, std::size_t threads, const std::function<void(std::size_t)>& fn);

}  // namespace attune
