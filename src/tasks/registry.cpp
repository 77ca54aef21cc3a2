// make_task / task_names: the task table by name.
#include <set>
#include <string>

#include "attune/core/error.h"
#include "attune/core/strings.h"
#include "attune/tasks/labels.h"
#include "spec_task.h"

namespace attune::tasks {
namespace {

// "lamp4", "LaMP-4", "LaMP_4", "lamp_4" -> 4; 0 when `name` is not a LaMP task name.
int lamp_number(std::string_view name) {
  std::string s;
  for (char c : name) {
    if (c == '-' || c == '_') continue;
    s += (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
  }
  if (s.size() == 5 && s.rfind("lamp", 0) == 0 && s[4] >= '1' && s[4] <= '7') return s[4] - '0';
  return 0;
}

}  // namespace

std::vector<std::string> task_names() {
  return {"lamp1", "lamp2", "lamp3", "lamp4", "lamp5", "lamp6", "lamp7",
          "commit_subject", "commit_area", "commit_pick", "qa", "factcheck", "slot"};
}

bool takes_labels(std::string_view name) {
  std::string n(name);
  if (lamp_number(name)) return detail::lamp_spec(lamp_number(name)).scoring == detail::Scoring::kClassification;
  if (name == "commit_subject" || name == "commit_area" || name == "commit_pick")
    return detail::commit_spec(name).scoring == detail::Scoring::kClassification;
  if (name == "qa" || name == "factcheck" || name == "slot")
    return detail::corpus_spec(name).scoring == detail::Scoring::kClassification;
  throw UsageError("unknown task \"" + n + "\" (known: " + join(task_names(), ", ") + ")");
}

std::unique_ptr<Task> make_task(std::string_view name, std::vector<std::string> labels) {
  detail::TaskSpec spec;
  if (int n = lamp_number(name)) {
    spec = detail::lamp_spec(n);
  } else if (name == "commit_subject" || name == "commit_area" || name == "commit_pick") {
    spec = detail::commit_spec(name);
  } else if (name == "qa" || name == "factcheck" || name == "slot") {
    spec = detail::corpus_spec(name);
  } else {
    throw UsageError("unknown task \"" + std::string(name) + "\" (known: " +
                     join(task_names(), ", ") + ")");
  }
  if (!labels.empty()) {
    if (spec.scoring != detail::Scoring::kClassification)
      throw UsageError("task " + spec.name + " takes no label list");
    std::set<std::string> seen;
    for (const auto& l : labels)
      if (!seen.insert(l).second)
        throw UsageError("task " + spec.name + ": label \"" + l + "\" given twice");
    spec.labels = std::move(labels);
  }
  return std::make_unique<detail::SpecTask>(std::move(spec));
}

}  // namespace attune::tasks
