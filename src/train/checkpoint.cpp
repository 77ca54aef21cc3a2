#include "checkpoint.h"

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include "attune/core/error.h"
#include "attune/core/file.h"
#include "attune/core/rng.h"
#include "attune/models/config.h"

namespace attune::train {

namespace fs = std::filesystem;

OutputLock::OutputLock(const fs::path& out) {
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec) throw FieldError<UsageError>("out", out.string() + ": cannot create the output folder: " + ec.message());
  const fs::path file = out / kFile;
  fd_ = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw FieldError<UsageError>("out", file.string() + ": cannot open: " + std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    char pid[32] = {0};
    const auto n = ::pread(fd_, pid, sizeof pid - 1, 0);
    ::close(fd_);
    fd_ = -1;
    std::string holder = n > 0 ? std::string(pid, static_cast<std::size_t>(n)) : std::string();
    while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
    throw FieldError<UsageError>("out", out.string() + " is being written by another attune run" +
                                            (holder.empty() ? std::string() : " (pid " + holder + ")") +
                                            ": wait for it to finish or choose another output folder");
  }
  const std::string me = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) == 0) (void)!::pwrite(fd_, me.data(), me.size(), 0);
}

OutputLock::~OutputLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the flock
}

namespace {
// What to say of a folder holding a run's files but no checkpoint: a finished run that kept
// none, or one killed before its first checkpoint, which nothing can resume.
std::string stopped_before_a_checkpoint(const fs::path& out) {
  bool complete = false;
  try {
    if (fs::exists(out / "attune_model.json"))
      complete = models::read_json_file(out / "attune_model.json").value("complete", false);
  } catch (const std::exception&) {
  }
  if (complete) return "finished and kept no checkpoint, so there is nothing to resume: choose another output folder";
  return "left no checkpoint (it stopped before its first one, or finished and kept none), so there is nothing "
         "to resume: remove the folder to train again from the start, or choose another output folder";
}
}  // namespace

void Checkpointer::prepare(bool resume) const {
  const fs::path ckpt = dir(), fresh = out_ / "checkpoint.new";
  if (!resume) {
    std::error_code ec;
    const auto st = fs::status(out_, ec);
    if (!fs::exists(st)) return;
    if (!fs::is_directory(st))
      throw FieldError<UsageError>("out", out_.string() + " exists and is not a folder: choose a new output folder");
    if (fs::exists(ckpt) || fs::exists(fresh))
      throw FieldError<UsageError>("out", out_.string() + " already holds a training run: resume it (--resume) or choose another output folder");
    if (fs::exists(out_ / "attune_train.json"))
      throw FieldError<UsageError>("out", out_.string() + " already holds a training run that " + stopped_before_a_checkpoint(out_));
    for (const auto& e : fs::directory_iterator(out_, ec))
      if (e.path().filename() != OutputLock::kFile)
        throw FieldError<UsageError>("out", out_.string() + " is not empty (it holds " + e.path().filename().string() +
                                                "): training writes a whole model folder and never over files it did "
                                                "not make; choose a new or empty output folder");
    return;
  }
  if (!fs::exists(ckpt / "state.json") && fs::exists(fresh / "state.json")) {
    // Killed between writing the new checkpoint and swapping it in: the new one is whole.
    remove_tree(ckpt);
    fs::rename(fresh, ckpt);
  }
  if (!fs::exists(ckpt / "state.json")) {
    std::string why;
    if (fs::exists(out_ / "attune_train.json")) why = ": the run " + stopped_before_a_checkpoint(out_);
    throw UsageError(out_.string() + ": no checkpoint to resume (checkpoint/state.json is missing)" + why);
  }
}

nlohmann::json Checkpointer::load_state(const nlohmann::json& signature) const {
  const auto state = models::read_json_file(dir() / "state.json");
  for (auto& [key, value] : signature.items())
    if (!state["options"].contains(key) || state["options"][key] != value)
      throw UsageError((dir() / "state.json").string() + ": option \"" + key + "\" was " +
                       (state["options"].contains(key) ? state["options"][key].dump() : std::string("absent")) +
                       " in the checkpointed run, now " + value.dump() + ": resume with the same options");
  return state;
}

void Checkpointer::write(const std::function<void(const fs::path&)>& fill, const nlohmann::json& state) const {
  const fs::path ckpt = dir(), fresh = out_ / "checkpoint.new";
  remove_tree(fresh);
  fs::create_directories(fresh);
  fill(fresh);
  models::write_json_file(fresh / "state.json", state);  // last: marks the checkpoint whole
  remove_tree(ckpt);
  fs::rename(fresh, ckpt);
}

void write_model_marker(const fs::path& out, const std::string& kind, const std::string& method,
                        const nlohmann::json& extra) {
  nlohmann::json j = {{"kind", kind}, {"method", method}};
  j.update(extra);
  j["complete"] = false;  // until train::fit finishes the run (mark_model_complete)
  models::write_json_file(out / "attune_model.json", j);
}

void mark_model_complete(const fs::path& out) {
  const fs::path marker = out / "attune_model.json";
  if (!fs::exists(marker)) return;
  auto j = models::read_json_file(marker);
  j["complete"] = true;
  models::write_json_file(marker, j);
}

std::string format_duration(double s) {
  char buf[32];
  if (s >= 3600) std::snprintf(buf, sizeof buf, "%dh%02dm", static_cast<int>(s / 3600), static_cast<int>(s / 60) % 60);
  else if (s >= 60) std::snprintf(buf, sizeof buf, "%dm%02ds", static_cast<int>(s / 60), static_cast<int>(s) % 60);
  else std::snprintf(buf, sizeof buf, "%.1fs", s);
  return buf;
}

double warmup_linear_lr(double lr, std::size_t s, std::size_t total, std::size_t warmup) {
  if (s < warmup) return lr * static_cast<double>(s + 1) / static_cast<double>(warmup);
  return lr * std::max(0.0, static_cast<double>(total - s) / static_cast<double>(std::max<std::size_t>(1, total - warmup)));
}

std::vector<std::size_t> epoch_order(std::uint64_t seed, const std::string& key, std::size_t epoch, std::size_t n) {
  std::vector<std::size_t> perm(n);
  std::iota(perm.begin(), perm.end(), 0);
  Rng rng(derive_seed(seed, key + std::to_string(epoch)));
  for (std::size_t i = n; i > 1; --i) std::swap(perm[i - 1], perm[rng.below(i)]);
  return perm;
}

void EpochTracker::restore(const nlohmann::json& state) {
  losses_ = state.value("losses", std::vector<double>{});
  acc_ = 0;
  n_ = 0;
  for (std::size_t s = losses_.size() - losses_.size() % per_epoch_; s < losses_.size(); ++s) {
    acc_ += losses_[s];
    ++n_;
  }
  auto it = state.find("best_dev");
  has_best_ = it != state.end() && it->is_number();
  best_ = has_best_ ? it->get<double>() : 0;
}

bool EpochTracker::add(double loss) {
  losses_.push_back(loss);
  acc_ += loss;
  ++n_;
  return losses_.size() % per_epoch_ == 0;
}

double EpochTracker::end_epoch() {
  const double mean = acc_ / static_cast<double>(std::max<std::size_t>(1, n_));
  acc_ = 0;
  n_ = 0;
  return mean;
}

bool EpochTracker::keep(bool has_dev, double dev_value) {
  if (!has_dev) return true;
  if (has_best_ && !(dev_value > best_)) return false;
  has_best_ = true;
  best_ = dev_value;
  return true;
}

nlohmann::json EpochTracker::state() const {
  nlohmann::json j = {{"losses", losses_}};
  j["best_dev"] = has_best_ ? nlohmann::json(best_) : nlohmann::json(nullptr);
  return j;
}

StepLog::StepLog(std::string name, std::size_t epochs, std::size_t total, std::size_t every, bool quiet)
    : name_(std::move(name)), epochs_(epochs), total_(total), every_(std::max<std::size_t>(1, every)), quiet_(quiet) {}

void StepLog::add(std::size_t epoch, std::size_t done, double loss, double lr) {
  acc_ += loss;
  ++since_;
  if (quiet_ || (since_ < every_ && done != total_)) return;
  const auto now = std::chrono::steady_clock::now();
  const double per = std::chrono::duration<double>(now - last_).count() / static_cast<double>(since_);
  std::fprintf(stderr, "train: %s epoch %zu/%zu step %zu/%zu loss %.5f lr %.2e %.2f s/step ETA %s\n", name_.c_str(), epoch + 1,
               epochs_, done, total_, acc_ / static_cast<double>(since_), lr, per,
               format_duration(per * static_cast<double>(total_ - done)).c_str());
  last_ = now;
  since_ = 0;
  acc_ = 0;
}

}  // namespace attune::train
