// attune report: one self-contained HTML file (inline CSS and SVG, no script, nothing
// fetched) from `attune eval --out` files and `attune train` output folders.
#include <cstdio>
#include <filesystem>

#include "attune/core/error.h"
#include "attune/core/file.h"
#include "attune/report/report.h"
#include "common.h"

namespace attune::cli {

void add_report(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand("report", "write one self-contained HTML report from eval and train outputs");
  cmd->footer(
      "The page: per eval file the results table (significance letters, oracle bounds) and bar charts with error bars, "
      "per-example distributions, RSPG selection (chosen vs best member) and list overlap (eval --list-overlap); per "
      "training run its learning curves (loss and dev values per epoch) and feedback statistics. A section whose data "
      "the inputs do not hold says so. Same inputs, same bytes.");
  auto evals = std::make_shared<std::vector<std::string>>();
  auto trains = std::make_shared<std::vector<std::string>>();
  auto out = std::make_shared<std::string>();
  auto opts = std::make_shared<report::ReportOptions>();
  auto quiet = std::make_shared<bool>(false);
  cmd->add_option("--eval", *evals, "an `attune eval --out` JSON file (repeatable; shown in the order given)");
  cmd->add_option("--train", *trains,
                  "an `attune train --out` folder (repeatable); a folder of runs (IUM's iter-N) shows each of them");
  cmd->add_option("--out", *out, "the HTML file to write (atomically: a temporary file, then a rename; - = stdout)")
      ->required();
  cmd->add_option("--title", opts->title, "the page's title")->capture_default_str();
  cmd->add_flag("--quiet", *quiet, "no summary line on stderr");
  cmd->callback([=, &rc] {
    if (evals->empty() && trains->empty())
      throw UsageError("attune report: nothing to report: give --eval F.json (from attune eval --out) and/or --train DIR");
    if (out->empty()) throw UsageError("attune report: --out is empty");
    namespace fs = std::filesystem;
    std::error_code ec;
    for (const auto& e : *evals)
      if (*out != "-" && fs::exists(*out, ec) && fs::equivalent(*out, e, ec))
        throw UsageError("attune report: --out " + *out + " is the --eval file " + e + ": it would be written over");
    std::vector<report::EvalRun> eval_runs;
    for (const auto& e : *evals) eval_runs.push_back(report::read_eval(e));
    std::vector<report::TrainRun> train_runs;
    for (const auto& t : *trains)
      for (auto& r : report::read_train(t)) train_runs.push_back(std::move(r));
    write_output(*out, report::render_html(eval_runs, train_runs, *opts));
    if (!*quiet && *out != "-")
      std::fprintf(stderr, "report: wrote %s (%zu eval files, %zu training runs)\n", out->c_str(), eval_runs.size(),
                   train_runs.size());
    rc = 0;
  });
}

}  // namespace attune::cli
