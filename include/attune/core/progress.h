#pragma once
// Progress of a long job on stderr: "label: done/total (rate/s, ETA 12s)", redrawn at
// most every half second, and a final line from finish(). Thread-safe. Silent when
// disabled (--quiet) so scripts can keep stderr clean.
#include <atomic>
#include <chrono>
#include <cstddef>
#include <mutex>
#include <string>

namespace attune {

class Progress {
 public:
  Progress(std::string label, std::size_t total, bool enabled = true);
  ~Progress();
  void add(std::size_t n = 1);
  void finish();

 private:
  void draw(bool final);
  std::string label_;
  std::size_t total_;
  bool enabled_;
  std::atomic<std::size_t> done_{0};
  std::mutex mu_;
  std::chrono::steady_clock::time_point start_, last_;
  bool finished_ = false;
};

}  // namespace attune
