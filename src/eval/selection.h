#pragma once
// Selectors in eval (paper 000 §5, Tables 4-5): each picks one retriever of its pool per
// example; internal to eval.
#include <cstddef>
#include <vector>

#include "attune/eval/evaluate.h"
#include "grid.h"

namespace attune::eval {

// For each selector of opts.selectors, in order (pools[i]: its pool as indices into
// opts.retrievers, rows of rep.results): its choice per example (the argmax of its scores),
// the same choice by each QPP predictor and by the two oracles, each method's success rate
// and end-to-end metrics, and McNemar of each method against the selector. Appends the
// selector's row (each example answered by its chosen member) to rep.results and its report
// to rep.selections. Reads the grid's prompts, outputs, golds, r@5 and QPP values. Error
// when a selector gives other than one score per pool member.
void add_selections(const tasks::Task& task, const EvalOptions& opts, const std::vector<std::vector<std::size_t>>& pools,
                    const Grid& grid, EvalReport& rep);

}  // namespace attune::eval
