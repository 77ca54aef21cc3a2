#pragma once
// The runs role of the store: every CLI run that computes something records its verb,
// arguments, seed and outcome. Implementations may be called from several threads; every
// write is one transaction.
#include <cstdint>
#include <string>
#include <vector>

namespace attune::store {

struct RunRecord {
  std::int64_t id = 0;
  std::string verb, args_json, status, summary_json;
  std::uint64_t seed = 0;
  std::string started, finished;
};

class RunLog {
 public:
  virtual ~RunLog() = default;

  // Records a new run with status "running" and returns its id.
  virtual std::int64_t run_begin(const std::string& verb, const std::string& args_json, std::uint64_t seed) = 0;
  // Sets a run's status, summary and finish time; Error when no run has this id.
  virtual void run_end(std::int64_t id, const std::string& status, const std::string& summary_json) = 0;
  // Every run, oldest first; one not yet ended has status "running" and finished "".
  virtual std::vector<RunRecord> runs() = 0;
};

// One run's record, begun when made. end() closes it with a status and summary; destroyed
// without end() (an error unwinding the verb) it closes it as "failed", so a run that
// failed never stays "running". (Only a killed process leaves "running" behind.)
class RunScope {
 public:
  RunScope(RunLog& log, const std::string& verb, const std::string& args_json, std::uint64_t seed)
      : log_(log), id_(log.run_begin(verb, args_json, seed)) {}
  ~RunScope() {
    if (ended_) return;
    try {
      log_.run_end(id_, "failed", R"j({"error": "the run stopped with an error (the message went to stderr)"})j");
    } catch (...) {  // never throw from a destructor; the original error is the one to report
    }
  }
  RunScope(const RunScope&) = delete;
  RunScope& operator=(const RunScope&) = delete;
  void end(const std::string& status, const std::string& summary_json) {
    log_.run_end(id_, status, summary_json);
    ended_ = true;
  }
  std::int64_t id() const { return id_; }

 private:
  RunLog& log_;
  std::int64_t id_;
  bool ended_ = false;
};

}  // namespace attune::store
