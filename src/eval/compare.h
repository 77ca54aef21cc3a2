#pragma once
// Paired significance tests between the rows of an eval report; internal to eval.
#include <vector>

#include "attune/eval/evaluate.h"

namespace attune::eval {

// Every ordered pair (a, b), a != b, of r.results, on every metric of r.metrics, in that
// order (none when r.examples < 2). Per example, a metric a row's example lacks counts as
// the primary metric r.metrics.front() (0 when that is missing too); metrics whose
// significance_test is "mcnemar" compare values >= 0.5 by McNemar, the others by the paired
// t-test. a_better compares the rows' aggregate values.
std::vector<Comparison> compare_pairs(const EvalReport& r);

}  // namespace attune::eval
