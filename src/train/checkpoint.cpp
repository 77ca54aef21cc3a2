#include "checkpoint.h"

#include <cstdio>

#include "attune/core/error.h"
#include "attune/models/config.h"

namespace attune::train {

namespace fs = std::filesystem;

void Checkpointer::prepare(bool resume) const {
  const fs::path ckpt = dir(), fresh = out_ / "checkpoint.new";
  if (!resume) {
    if (fs::exists(ckpt) || fs::exists(fresh) || fs::exists(out_ / "attune_train.json"))
      throw UsageError(out_.string() + " already holds a training run: --resume it or choose another --out");
    return;
  }
  if (!fs::exists(ckpt / "state.json") && fs::exists(fresh / "state.json")) {
    // Killed between writing the new checkpoint and swapping it in: the new one is whole.
    fs::remove_all(ckpt);
    fs::rename(fresh, ckpt);
  }
  if (!fs::exists(ckpt / "state.json"))
    throw UsageError(out_.string() + ": no checkpoint to resume (checkpoint/state.json is missing)");
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
  fs::remove_all(fresh);
  fs::create_directories(fresh);
  fill(fresh);
  models::write_json_file(fresh / "state.json", state);  // last: marks the checkpoint whole
  fs::remove_all(ckpt);
  fs::rename(fresh, ckpt);
}

void write_model_marker(const fs::path& out, const std::string& kind, const std::string& method) {
  models::write_json_file(out / "attune_model.json", {{"kind", kind}, {"method", method}});
}

std::string format_duration(double s) {
  char buf[32];
  if (s >= 3600) std::snprintf(buf, sizeof buf, "%dh%02dm", static_cast<int>(s / 3600), static_cast<int>(s / 60) % 60);
  else if (s >= 60) std::snprintf(buf, sizeof buf, "%dm%02ds", static_cast<int>(s / 60), static_cast<int>(s) % 60);
  else std::snprintf(buf, sizeof buf, "%.1fs", s);
  return buf;
}

}  // namespace attune::train
