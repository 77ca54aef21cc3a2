#pragma once
// Which tasks score against a label list (classification: lamp1, lamp2, commit_area,
// commit_pick, factcheck, slot). Their golds must be labels: a Task's score, aggregate and
// reward throw attune::Error for a gold that is not one (it would make a right answer
// wrong); an output that is not a label is scored wrong and is nobody's positive in
// macro-F1. Slot without a list compares stripped strings.
#include <string_view>

namespace attune::tasks {

// True when make_task(name, labels) takes a label list. UsageError for an unknown name.
bool takes_labels(std::string_view name);

}  // namespace attune::tasks
