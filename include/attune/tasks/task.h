#pragma once
// One Task per benchmark task (LAMP.md; shared/data/README.md): the query function
// phi_q, the document text for retrieval, the prompt function phi_p with its token
// budget, the label set, the metrics and the metric-to-reward mapping.
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "attune/core/types.h"
#include "attune/text/tokenizer.h"

namespace attune::tasks {

// Per-example metric values by name ("rouge-1", "accuracy", "mae", ...).
using MetricValues = std::map<std::string, double>;

struct PromptOptions {
  // Token budget of the whole prompt in the target LLM's tokenizer (LAMP.md: 256 for
  // evaluation, 512 for per-item feedback).
  std::size_t max_length = 256;
  // Reproduce the LaMP reference code's budget quirks (LaMP-5 measures "is a title",
  // LaMP-7 subtracts "are written by user. ..."). Default on, for fidelity.
  bool reference_quirks = true;
};

struct MetricInfo {
  std::string name;
  bool higher_is_better = true;
  // "mcnemar" for 0/1 per-example outcomes (accuracy, EM), "paired-t" otherwise.
  std::string significance_test;
};

class Task {
 public:
  virtual ~Task() = default;
  virtual std::string name() const = 0;
  // True when retrieval searches a shared corpus (qa, factcheck, slot), not a profile.
  virtual bool uses_corpus() const = 0;

  // phi_q: the retrieval query of an example.
  virtual std::string query(const Example& ex) const = 0;
  // The text retrieval sees for a document (e.g. title + " " + text).
  virtual std::string document_text(const Document& doc) const = 0;
  // phi_p: the prompt for `ex` with the retrieved documents, best first, within
  // opts.max_length tokens of `tok` (LAMP.md's budget algorithm). No documents: the
  // input alone.
  virtual std::string prompt(const Example& ex, const std::vector<const Document*>& docs,
                             const text::Tokenizer& tok, const PromptOptions& opts) const = 0;

  // The fixed label list for classification tasks; empty for open generation.
  virtual const std::vector<std::string>& labels() const = 0;
  // Metrics reported, primary first.
  virtual const std::vector<MetricInfo>& metrics() const = 0;
  // Per-example metric values (outputs and golds stripped first).
  virtual MetricValues score(std::string_view output, std::string_view gold) const = 0;
  // Corpus-level metric values over all examples (macro-F1 and RMSE are not means of
  // per-example values).
  virtual MetricValues aggregate(const std::vector<std::string>& outputs,
                                 const std::vector<std::string>& golds) const = 0;
  // Metric-to-reward mapping in [0, 1], higher is better (000 Eq. 8 for LaMP-3).
  virtual double reward(std::string_view output, std::string_view gold) const = 0;
};

// Tasks by name: lamp1..lamp7, commit_subject, commit_area, commit_pick, qa, factcheck,
// slot. `labels` overrides the built-in label list (commit_area reads labels.json;
// slot's labels are the sections of the training outputs). UsageError for an unknown name.
std::unique_ptr<Task> make_task(std::string_view name, std::vector<std::string> labels = {});
std::vector<std::string> task_names();

}  // namespace attune::tasks
