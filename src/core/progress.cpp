#include "attune/core/progress.h"

#include <cstdio>
#include <unistd.h>

namespace attune {

Progress::Progress(std::string label, std::size_t total, bool enabled)
    : label_(std::move(label)), total_(total), enabled_(enabled),
      start_(std::chrono::steady_clock::now()), last_(start_) {}

Progress::~Progress() { finish(); }

void Progress::add(std::size_t n) {
  done_ += n;
  if (!enabled_) return;
  auto now = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(mu_);
  if (now - last_ < std::chrono::milliseconds(500)) return;
  last_ = now;
  draw(false);
}

void Progress::finish() {
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_) return;
  finished_ = true;
  if (enabled_) draw(true);
}

void Progress::draw(bool final) {
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const std::size_t done = done_.load();
  const double rate = secs > 0 ? done / secs : 0;
  char eta[32] = "";
  if (!final && rate > 0 && total_ > done) std::snprintf(eta, sizeof eta, ", ETA %.0fs", (total_ - done) / rate);
  // On a terminal redraw one line in place; in logs write whole lines.
  const bool tty = isatty(2);
  char took[32] = "";
  if (final) std::snprintf(took, sizeof took, ", %.1fs", secs);
  std::fprintf(stderr, "%s%s: %zu/%zu (%.1f/s%s%s)%s", tty ? "\r" : "", label_.c_str(), done, total_, rate, eta,
               took, (final || !tty) ? "\n" : "");
  std::fflush(stderr);
}

}  // namespace attune
