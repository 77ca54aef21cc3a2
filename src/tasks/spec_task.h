#pragma once
// Private to the tasks layer: every task is one table row (TaskSpec) run by one class.
// The rows live in lamp_tasks.cpp, commit_tasks.cpp and corpus_tasks.cpp.
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "attune/tasks/task.h"
#include "prompt_builder.h"

namespace attune::tasks::detail {

// How outputs are scored; fixes score(), aggregate() and reward().
enum class Scoring {
  // Output and gold mapped to their index in the label list (-1 when absent: always
  // wrong). accuracy; macro-F1 ("f1") over the fixed list when listed in metrics. With
  // no labels (slot), stripped strings are compared.
  kClassification,
  // LaMP-3: Python float(); unparsable -> whichever of 1 or 5 is farther from the gold.
  // mae, rmse; reward = 000 Eq. 8.
  kOrdinal,
  // rouge-1 and rouge-L F-measure; reward = rouge-1 F.
  kGeneration,
  // SQuAD exact match; reward = EM.
  kExactMatch,
};

struct TaskSpec {
  std::string name;
  bool uses_corpus = false;
  // phi_q from the input.
  std::function<std::string(std::string_view input)> query;
  std::function<std::string(const Document& doc)> document_text;
  // What attune emits, with `need` measured on what is emitted (reference_quirks off).
  PromptFormat format;
  // The LaMP reference code's arithmetic (reference_quirks on); unset: same as `format`.
  std::optional<PromptFormat> reference_format;
  Scoring scoring = Scoring::kClassification;
  std::vector<std::string> labels;
  std::vector<MetricInfo> metrics;  // primary first
};

// The rows. Names are canonical ("lamp4", "commit_area", "qa").
TaskSpec lamp_spec(int number);  // 1..7
TaskSpec commit_spec(std::string_view name);
TaskSpec corpus_spec(std::string_view name);

// The metric descriptions shared by the rows.
MetricInfo accuracy_info();
MetricInfo f1_info();
MetricInfo mae_info();
MetricInfo rmse_info();
MetricInfo rouge1_info();
MetricInfo rougeL_info();
MetricInfo exact_match_info();

// Python float() on an already stripped string: optional sign, digits with single '_'
// between digits, optional fraction and exponent, or inf / infinity / nan in any case.
// std::nullopt when Python would raise ValueError. (Non-ASCII Unicode digits, which
// Python also accepts, are not.)
std::optional<double> parse_python_float(std::string_view s);

class SpecTask final : public Task {
 public:
  explicit SpecTask(TaskSpec spec);
  std::string name() const override { return spec_.name; }
  bool uses_corpus() const override { return spec_.uses_corpus; }
  std::string query(const Example& ex) const override;
  std::string document_text(const Document& doc) const override;
  std::string prompt(const Example& ex, const std::vector<const Document*>& docs,
                     const text::Tokenizer& tok, const PromptOptions& opts) const override;
  const std::vector<std::string>& labels() const override { return spec_.labels; }
  const std::vector<MetricInfo>& metrics() const override { return spec_.metrics; }
  MetricValues score(std::string_view output, std::string_view gold) const override;
  MetricValues aggregate(const std::vector<std::string>& outputs,
                         const std::vector<std::string>& golds) const override;
  double reward(std::string_view output, std::string_view gold) const override;

 private:
  int label_index(const std::string& stripped) const;  // -1 when not a label
  bool correct(std::string_view output, std::string_view gold) const;
  // LaMP-3: (gold, prediction) after the parse fallback.
  std::pair<double, double> ordinal_pair(std::string_view output, std::string_view gold) const;
  bool has_metric(std::string_view name) const;

  TaskSpec spec_;
};

}  // namespace attune::tasks::detail
