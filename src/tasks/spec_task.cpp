#include "spec_task.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <tuple>
#include <utility>

#include "attune/core/error.h"
#include "attune/core/strings.h"
#include "attune/metrics/metrics.h"

namespace attune::tasks::detail {

MetricInfo accuracy_info() { return {"accuracy", true, "mcnemar"}; }
MetricInfo f1_info() { return {"f1", true, "mcnemar"}; }
MetricInfo mae_info() { return {"mae", false, "paired-t"}; }
MetricInfo rmse_info() { return {"rmse", false, "paired-t"}; }
MetricInfo rouge1_info() { return {"rouge-1", true, "paired-t"}; }
MetricInfo rougeL_info() { return {"rouge-L", true, "paired-t"}; }
MetricInfo exact_match_info() { return {"exact_match", true, "mcnemar"}; }

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

std::string ascii_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

// Appends one Python `digitpart` (digit ("_"? digit)*) starting at s[j] to `out`,
// underscores dropped; false when s[j] is not a digit.
bool take_digits(std::string_view s, std::size_t& j, std::string& out) {
  if (j >= s.size() || !is_digit(s[j])) return false;
  out += s[j++];
  while (j < s.size()) {
    if (is_digit(s[j])) {
      out += s[j++];
    } else if (s[j] == '_' && j + 1 < s.size() && is_digit(s[j + 1])) {
      out += s[j + 1];
      j += 2;
    } else {
      break;
    }
  }
  return true;
}

double mean(const std::vector<double>& v) {
  if (v.empty()) return 0.0;
  double sum = 0.0;
  for (double x : v) sum += x;
  return sum / static_cast<double>(v.size());
}

}  // namespace

std::optional<double> parse_python_float(std::string_view raw) {
  const std::string stripped = strip(raw);
  std::string_view s = stripped;
  bool negative = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  const double sign = negative ? -1.0 : 1.0;
  const std::string lower = ascii_lower(s);
  if (lower == "inf" || lower == "infinity") return sign * std::numeric_limits<double>::infinity();
  if (lower == "nan") return std::numeric_limits<double>::quiet_NaN();

  std::string clean;
  std::size_t j = 0;
  const bool int_part = take_digits(s, j, clean);
  bool frac_part = false;
  if (j < s.size() && s[j] == '.') {
    clean += '.';
    ++j;
    frac_part = take_digits(s, j, clean);
  }
  if (!int_part && !frac_part) return std::nullopt;
  bool negative_exponent = false;
  if (j < s.size() && (s[j] == 'e' || s[j] == 'E')) {
    clean += 'e';
    ++j;
    if (j < s.size() && (s[j] == '+' || s[j] == '-')) {
      negative_exponent = s[j] == '-';
      clean += s[j++];
    }
    if (!take_digits(s, j, clean)) return std::nullopt;
  }
  if (j != s.size()) return std::nullopt;

  double value = 0.0;
  const auto res = std::from_chars(clean.data(), clean.data() + clean.size(), value);
  if (res.ec == std::errc::result_out_of_range) {
    // Python gives inf on overflow and 0.0 on underflow.
    value = negative_exponent ? 0.0 : std::numeric_limits<double>::infinity();
  } else if (res.ec != std::errc() || res.ptr != clean.data() + clean.size()) {
    return std::nullopt;  // not reached for strings the grammar above accepted
  }
  return sign * value;
}

SpecTask::SpecTask(TaskSpec spec) : spec_(std::move(spec)) {}

std::string SpecTask::query(const Example& ex) const { return spec_.query(ex.input); }

std::string SpecTask::document_text(const Document& doc) const {
  return spec_.document_text(doc);
}

std::string SpecTask::prompt(const Example& ex, const std::vector<const Document*>& docs,
                             const text::Tokenizer& tok, const PromptOptions& opts) const {
  const PromptFormat& format = (opts.reference_quirks && spec_.reference_format)
                                   ? *spec_.reference_format
                                   : spec_.format;
  return build_prompt(spec_.name, ex.input, docs, tok, opts.max_length, format);
}

int SpecTask::label_index(const std::string& stripped) const {
  const auto it = std::find(spec_.labels.begin(), spec_.labels.end(), stripped);
  return it == spec_.labels.end() ? -1 : static_cast<int>(it - spec_.labels.begin());
}

namespace {

// The index of a gold in spec.labels; Error when it is not a label.
int gold_index(const TaskSpec& spec, const std::string& stripped) {
  const auto it = std::find(spec.labels.begin(), spec.labels.end(), stripped);
  if (it == spec.labels.end()) {
    std::string list;
    for (std::size_t k = 0; k < spec.labels.size() && k < 8; ++k) list += (k ? ", " : "") + spec.labels[k];
    if (spec.labels.size() > 8) list += ", ...";
    throw Error("task " + spec.name + ": gold output \"" + stripped + "\" is not one of its " +
                std::to_string(spec.labels.size()) + " labels (" + list + ")");
  }
  return static_cast<int>(it - spec.labels.begin());
}

}  // namespace

bool SpecTask::correct(std::string_view output, std::string_view gold) const {
  const std::string o = strip(output), g = strip(gold);
  if (spec_.labels.empty()) return o == g;
  // The reference maps both sides to label indices; a non-label output is -1 and never
  // right. A gold that is not a label is refused: it would make a right answer wrong.
  const int gi = gold_index(spec_, g);
  return label_index(o) == gi;
}

std::pair<double, double> SpecTask::ordinal_pair(std::string_view output,
                                                 std::string_view gold) const {
  const auto y = parse_python_float(gold);
  if (!y) throw Error("task " + spec_.name + ": gold output \"" + std::string(gold) +
                      "\" is not a number");
  if (auto y_hat = parse_python_float(output)) return {*y, *y_hat};
  // The reference's fallback: the end of the 1..5 scale farther from the gold (5 on a tie).
  return {*y, std::abs(1.0 - *y) > std::abs(5.0 - *y) ? 1.0 : 5.0};
}

bool SpecTask::has_metric(std::string_view name) const {
  return std::any_of(spec_.metrics.begin(), spec_.metrics.end(),
                     [&](const MetricInfo& m) { return m.name == name; });
}

MetricValues SpecTask::score(std::string_view output, std::string_view gold) const {
  MetricValues v;
  switch (spec_.scoring) {
    case Scoring::kClassification: {
      // Per example, F1 is represented by correctness (what McNemar's test pairs).
      const double c = correct(output, gold) ? 1.0 : 0.0;
      for (const MetricInfo& m : spec_.metrics) v[m.name] = c;
      break;
    }
    case Scoring::kOrdinal: {
      // Per example, RMSE is the absolute error (the RMSE of one example).
      const auto [y, y_hat] = ordinal_pair(output, gold);
      v["mae"] = std::abs(y - y_hat);
      v["rmse"] = std::abs(y - y_hat);
      break;
    }
    case Scoring::kGeneration: {
      const std::string o = strip(output), g = strip(gold);
      v["rouge-1"] = metrics::rouge1(o, g).fmeasure;
      v["rouge-L"] = metrics::rougeL(o, g).fmeasure;
      break;
    }
    case Scoring::kExactMatch:
      v["exact_match"] = metrics::exact_match(strip(output), strip(gold));
      break;
  }
  return v;
}

MetricValues SpecTask::aggregate(const std::vector<std::string>& outputs,
                                 const std::vector<std::string>& golds) const {
  if (outputs.size() != golds.size())
    throw UsageError("task " + spec_.name + ": " + std::to_string(outputs.size()) +
                     " outputs for " + std::to_string(golds.size()) + " golds");
  MetricValues v;
  const std::size_t n = outputs.size();
  switch (spec_.scoring) {
    case Scoring::kClassification: {
      std::vector<double> hits(n);
      std::vector<int> pred(n), gold(n);
      for (std::size_t i = 0; i < n; ++i) {
        hits[i] = correct(outputs[i], golds[i]) ? 1.0 : 0.0;
        pred[i] = label_index(strip(outputs[i]));
        gold[i] = spec_.labels.empty() ? -1 : gold_index(spec_, strip(golds[i]));
      }
      v["accuracy"] = mean(hits);
      if (has_metric("f1"))
        v["f1"] = n == 0 ? 0.0
                         : metrics::macro_f1(pred, gold, static_cast<int>(spec_.labels.size()));
      break;
    }
    case Scoring::kOrdinal: {
      std::vector<double> pred(n), gold(n);
      for (std::size_t i = 0; i < n; ++i) std::tie(gold[i], pred[i]) = ordinal_pair(outputs[i], golds[i]);
      v["mae"] = n == 0 ? 0.0 : metrics::mae(pred, gold);
      v["rmse"] = n == 0 ? 0.0 : metrics::rmse(pred, gold);
      break;
    }
    case Scoring::kGeneration:
    case Scoring::kExactMatch: {
      // Plain means of the per-example values (LAMP.md: not the bootstrap median).
      std::map<std::string, std::vector<double>> per;
      for (std::size_t i = 0; i < n; ++i)
        for (const auto& [name, x] : score(outputs[i], golds[i])) per[name].push_back(x);
      for (const MetricInfo& m : spec_.metrics) v[m.name] = mean(per[m.name]);
      break;
    }
  }
  return v;
}

double SpecTask::reward(std::string_view output, std::string_view gold) const {
  switch (spec_.scoring) {
    case Scoring::kClassification:
      return correct(output, gold) ? 1.0 : 0.0;
    case Scoring::kOrdinal: {
      // 000 Eq. 8: (max(|1-y|,|5-y|) - |y - y_hat|) / max(|1-y|,|5-y|); 1 when exact, 0 for
      // the worst answer on the scale. Answers off the scale (or NaN) are clamped to 0.
      const auto [y, y_hat] = ordinal_pair(output, gold);
      const double worst = std::max(std::abs(1.0 - y), std::abs(5.0 - y));
      const double r = (worst - std::abs(y - y_hat)) / worst;
      if (std::isnan(r)) return 0.0;
      return std::clamp(r, 0.0, 1.0);
    }
    case Scoring::kGeneration:
      // The primary metric, ROUGE-1 F.
      return metrics::rouge1(strip(output), strip(gold)).fmeasure;
    case Scoring::kExactMatch:
      return metrics::exact_match(strip(output), strip(gold));
  }
  return 0.0;
}

}  // namespace attune::tasks::detail
