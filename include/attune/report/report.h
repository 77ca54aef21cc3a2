#pragma once
// `attune report`: one self-contained HTML page (inline CSS and SVG written by attune, no
// script, nothing fetched) from eval JSON files and training folders.
#include <string>
#include <vector>

#include "attune/report/inputs.h"

namespace attune::report {

struct ReportOptions {
  std::string title = "attune report";  // the page's <title> and heading (escaped)
};

// The page, in the order given: per eval file its results table and bar charts (error
// bars: +-1.96 standard errors of the per-example mean, where the metric is that mean;
// letters: the rows it beats at p < alpha; ticks: oracle bounds), per-example distributions,
// RSPG selection (table and confusion of chosen vs best member), list overlap (Jaccard and
// Kendall tau matrix); per training run its learning curves (loss and each dev value per
// epoch, the start as epoch 0) and feedback statistics. A section whose data the inputs do
// not hold says so in one line. Depends only on the arguments (byte-identical output).
std::string render_html(const std::vector<EvalRun>& evals, const std::vector<TrainRun>& trains,
                        const ReportOptions& options);

}  // namespace attune::report
