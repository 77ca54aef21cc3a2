#pragma once
// What an evaluation produced per example and per (retriever, example) cell; internal to
// eval, shared by its phases (evaluate.cpp) and the selection report (selection.cpp).
#include <cstddef>
#include <string>
#include <vector>

#include "attune/core/types.h"
#include "attune/eval/qpp.h"

namespace attune::eval {

// Cell (r, e): retriever r of EvalOptions::retrievers on example e of the first n, stored
// at at(r, e) = r * n + e in every per-cell vector.
struct Grid {
  std::size_t n = 0;                          // examples evaluated
  std::vector<std::string> golds;             // per example: its gold output
  std::vector<std::string> queries;           // per example: its input x (task.query), what a selector reads first
  std::vector<std::string> prompts;           // per cell: the prompt with the top-k documents
  std::vector<std::vector<DocId>> retrieved;  // per cell: those documents, best first
  std::vector<double> r5;                     // per cell: recall@5 on corpus tasks, else 0
  std::vector<Qpp> qpps;                      // per cell: QPP values for selector pool members, else zeros
  std::vector<std::string> outputs;           // per cell: the model's output for the prompt
  // Oracle bounds (EvalOptions::oracle_depth): per cell, the prompts with each of its top
  // documents alone, as indices into oracle_prompts (distinct), and their outputs.
  std::vector<std::vector<std::size_t>> oracle_cells;
  // The best-ordering oracle (EvalOptions::oracle_orders): per cell, the prompts with every
  // order of its top-k documents, indices into oracle_prompts too.
  std::vector<std::vector<std::size_t>> order_cells;
  std::vector<std::string> oracle_prompts, oracle_outputs;
  // Context-aware decoding (EvalOptions::generate.cad > 0), else empty: per cell, and per
  // oracle prompt, the same example's prompt without documents.
  std::vector<std::string> without_documents, oracle_without_documents;

  std::size_t at(std::size_t r, std::size_t e) const { return r * n + e; }
};

}  // namespace attune::eval
