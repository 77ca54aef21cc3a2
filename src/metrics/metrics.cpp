#include "attune/metrics/metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "attune/core/error.h"
#include "attune/text/lexical.h"

namespace attune::metrics {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

void require_same_size(std::size_t a, std::size_t b, const char* what) {
  if (a != b)
    throw Error(std::string(what) + ": predictions and golds differ in length (" + std::to_string(a) + " vs " +
                std::to_string(b) + ")");
}

// rouge_score's _score_lcs / _score_ngrams end: F = 2PR / (P + R), 0 when P + R = 0.
Prf make_prf(double overlap, std::size_t pred_count, std::size_t target_count) {
  Prf r;
  r.precision = overlap / static_cast<double>(std::max<std::size_t>(pred_count, 1));
  r.recall = overlap / static_cast<double>(std::max<std::size_t>(target_count, 1));
  const double sum = r.precision + r.recall;
  r.fmeasure = sum > 0 ? 2 * r.precision * r.recall / sum : 0.0;
  return r;
}

}  // namespace

double accuracy(const std::vector<int>& pred, const std::vector<int>& gold) {
  require_same_size(pred.size(), gold.size(), "accuracy");
  if (pred.empty()) return 0;
  std::size_t right = 0;
  for (std::size_t i = 0; i < pred.size(); ++i) right += pred[i] == gold[i];
  return static_cast<double>(right) / static_cast<double>(pred.size());
}

double macro_f1(const std::vector<int>& pred, const std::vector<int>& gold, int num_labels) {
  require_same_size(pred.size(), gold.size(), "macro_f1");
  if (num_labels <= 0) throw Error("macro_f1: num_labels must be positive, got " + std::to_string(num_labels));
  std::vector<double> tp(num_labels, 0), fp(num_labels, 0), fn(num_labels, 0);
  auto in_range = [&](int l) { return l >= 0 && l < num_labels; };
  for (std::size_t i = 0; i < pred.size(); ++i) {
    const int p = pred[i], g = gold[i];
    if (p == g) {
      if (in_range(p)) tp[p] += 1;
      continue;
    }
    // Labels outside the list (the -1 "unparseable" prediction) are nobody's positive.
    if (in_range(p)) fp[p] += 1;
    if (in_range(g)) fn[g] += 1;
  }
  // sklearn: F1 = 2TP / (2TP + FP + FN), zero_division=0, averaged over every listed label.
  double sum = 0;
  for (int l = 0; l < num_labels; ++l) {
    const double denom = 2 * tp[l] + fp[l] + fn[l];
    sum += denom > 0 ? 2 * tp[l] / denom : 0.0;
  }
  return sum / num_labels;
}

double mae(const std::vector<double>& pred, const std::vector<double>& gold) {
  require_same_size(pred.size(), gold.size(), "mae");
  if (pred.empty()) return 0;
  double s = 0;
  for (std::size_t i = 0; i < pred.size(); ++i) s += std::abs(pred[i] - gold[i]);
  return s / static_cast<double>(pred.size());
}

double rmse(const std::vector<double>& pred, const std::vector<double>& gold) {
  require_same_size(pred.size(), gold.size(), "rmse");
  if (pred.empty()) return 0;
  double s = 0;
  for (std::size_t i = 0; i < pred.size(); ++i) s += (pred[i] - gold[i]) * (pred[i] - gold[i]);
  return std::sqrt(s / static_cast<double>(pred.size()));
}

Prf rouge1(std::string_view prediction, std::string_view target) {
  const auto p = text::rouge_tokens(prediction);
  const auto t = text::rouge_tokens(target);
  if (p.empty() || t.empty()) return {};
  // Clipped unigram overlap: sum over words of min(count in target, count in prediction).
  std::unordered_map<std::string, long> counts;
  for (const auto& w : t) ++counts[w];
  double overlap = 0;
  for (const auto& w : p) {
    auto it = counts.find(w);
    if (it != counts.end() && it->second > 0) {
      --it->second;
      overlap += 1;
    }
  }
  return make_prf(overlap, p.size(), t.size());
}

Prf rougeL(std::string_view prediction, std::string_view target) {
  const auto p = text::rouge_tokens(prediction);
  const auto t = text::rouge_tokens(target);
  if (p.empty() || t.empty()) return {};
  // Longest common subsequence by dynamic programming, one row at a time.
  std::vector<std::size_t> prev(p.size() + 1, 0), cur(p.size() + 1, 0);
  for (std::size_t i = 1; i <= t.size(); ++i) {
    for (std::size_t j = 1; j <= p.size(); ++j)
      cur[j] = t[i - 1] == p[j - 1] ? prev[j - 1] + 1 : std::max(prev[j], cur[j - 1]);
    std::swap(prev, cur);
  }
  return make_prf(static_cast<double>(prev[p.size()]), p.size(), t.size());
}

double exact_match(std::string_view prediction, std::string_view gold) {
  return text::squad_normalize(prediction) == text::squad_normalize(gold) ? 1.0 : 0.0;
}

double recall_at_k(const std::vector<std::string>& ranked, const std::unordered_set<std::string>& relevant,
                   std::size_t k) {
  const std::size_t n = std::min(k, ranked.size());
  for (std::size_t i = 0; i < n; ++i)
    if (relevant.count(ranked[i])) return 1.0;
  return 0.0;
}

double ndcg_at_k(const std::vector<std::string>& ranked, const std::unordered_set<std::string>& relevant,
                 std::size_t k) {
  if (relevant.empty() || k == 0) return 0.0;
  // A relevant id repeated in the ranking gains only at its first position, so the
  // score stays within [0, 1].
  std::unordered_set<std::string> seen;
  double dcg = 0;
  const std::size_t n = std::min(k, ranked.size());
  for (std::size_t i = 0; i < n; ++i)
    if (relevant.count(ranked[i]) && seen.insert(ranked[i]).second) dcg += 1.0 / std::log2(i + 2.0);
  double ideal = 0;
  const std::size_t m = std::min(k, relevant.size());
  for (std::size_t i = 0; i < m; ++i) ideal += 1.0 / std::log2(i + 2.0);
  return dcg / ideal;
}

double pearson(const std::vector<double>& x, const std::vector<double>& y) {
  require_same_size(x.size(), y.size(), "pearson");
  const std::size_t n = x.size();
  if (n < 2) return kNaN;
  double mx = 0, my = 0;
  for (std::size_t i = 0; i < n; ++i) {
    mx += x[i];
    my += y[i];
  }
  mx /= n;
  my /= n;
  double sxy = 0, sxx = 0, syy = 0;
  for (std::size_t i = 0; i < n; ++i) {
    sxy += (x[i] - mx) * (y[i] - my);
    sxx += (x[i] - mx) * (x[i] - mx);
    syy += (y[i] - my) * (y[i] - my);
  }
  if (sxx == 0 || syy == 0) return kNaN;
  // Rounding can push |r| a hair past 1; clip as scipy does.
  return std::clamp(sxy / std::sqrt(sxx * syy), -1.0, 1.0);
}

double kendall_tau(const std::vector<double>& x, const std::vector<double>& y) {
  require_same_size(x.size(), y.size(), "kendall_tau");
  // tau-b = (C - D) / sqrt((C + D + Tx)(C + D + Ty)), Tx / Ty the pairs tied only in x / y
  // (pairs tied in both count nowhere). O(n^2): the lists compared here are short.
  double concordant = 0, discordant = 0, tie_x = 0, tie_y = 0;
  const std::size_t n = x.size();
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = i + 1; j < n; ++j) {
      const double dx = x[i] - x[j], dy = y[i] - y[j];
      if (dx == 0 && dy == 0) continue;
      if (dx == 0) {
        tie_x += 1;
      } else if (dy == 0) {
        tie_y += 1;
      } else if ((dx > 0) == (dy > 0)) {
        concordant += 1;
      } else {
        discordant += 1;
      }
    }
  }
  const double denom = (concordant + discordant + tie_x) * (concordant + discordant + tie_y);
  if (denom == 0) return kNaN;
  return std::clamp((concordant - discordant) / std::sqrt(denom), -1.0, 1.0);
}

double jaccard(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  const std::unordered_set<std::string> sa(a.begin(), a.end()), sb(b.begin(), b.end());
  if (sa.empty() && sb.empty()) return 1.0;
  std::size_t inter = 0;
  for (const auto& s : sa) inter += sb.count(s);
  return static_cast<double>(inter) / static_cast<double>(sa.size() + sb.size() - inter);
}

}  // namespace attune::metrics
