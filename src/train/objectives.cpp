#include "attune/train/objectives.h"

#include <cmath>


namespace attune::train {

namespace {

void check(const torch::Tensor& scores, const torch::Tensor& mask, const char* what) {
  TORCH_CHECK(scores.dim() == 2, what, ": scores must be [B, l]");
  TORCH_CHECK(mask.sizes() == scores.sizes(), what, ": mask must have the scores' shape");
  TORCH_CHECK(mask.scalar_type() == torch::kBool, what, ": mask must be bool");
}

// KL(p || softmax(s)) per row over the mask, p zero on padding.
torch::Tensor kl_rows(const torch::Tensor& p, const torch::Tensor& scores, const torch::Tensor& mask) {
  auto logq = masked_log_softmax(scores, mask);
  auto logp = torch::where(p > 0, torch::log(p.clamp_min(1e-45)), torch::zeros_like(p));
  return (p * (logp - logq)).masked_fill(~mask, 0.0).sum(1);
}

}  // namespace

torch::Tensor masked_log_softmax(const torch::Tensor& scores, const torch::Tensor& mask) {
  check(scores, mask, "masked_log_softmax");
  auto lsm = torch::log_softmax(scores.masked_fill(~mask, -std::numeric_limits<double>::infinity()), 1);
  return lsm.masked_fill(~mask, 0.0);
}

torch::Tensor masked_softmax(const torch::Tensor& scores, const torch::Tensor& mask) {
  check(scores, mask, "masked_softmax");
  return torch::softmax(scores.masked_fill(~mask, -std::numeric_limits<double>::infinity()), 1).masked_fill(~mask, 0.0);
}

torch::Tensor zscore_rows(const torch::Tensor& values, const torch::Tensor& mask) {
  check(values, mask, "zscore_rows");
  auto v = values.detach().to(torch::kFloat64);
  auto m = mask.to(torch::kFloat64);
  auto n = m.sum(1, true).clamp_min(1.0);
  auto mean = (v * m).sum(1, true) / n;
  auto centred = (v - mean) * m;
  auto sd = (centred * centred).sum(1, true).div(n).sqrt();
  // A flat row (sd 0, or below rounding) has no preference: all 0.
  auto z = torch::where(sd > 1e-12, centred / sd.clamp_min(1e-12), torch::zeros_like(centred));
  return z.masked_fill(~mask, 0.0).to(values.scalar_type());
}

torch::Tensor normalize_targets(const torch::Tensor& utilities, const torch::Tensor& mask, TargetNormalization n) {
  return n == TargetNormalization::ZScore ? zscore_rows(utilities, mask) : utilities;
}

torch::Tensor ropg_kd_loss(const torch::Tensor& scores, const torch::Tensor& utilities, const torch::Tensor& mask,
                           bool double_softmax, double target_temperature, bool fit_scale, double* fitted_scale) {
  check(scores, mask, "ropg_kd_loss");
  TORCH_CHECK(utilities.sizes() == scores.sizes(), "ropg_kd_loss: utilities must have the scores' shape");
  TORCH_CHECK(target_temperature > 0, "ropg_kd_loss: the target temperature must be positive");
  TORCH_CHECK(!(fit_scale && double_softmax), "ropg_kd_loss: a fitted scale does not apply to the double softmax");
  auto target = masked_softmax(utilities.detach().to(scores.dtype()) / target_temperature, mask);
  auto s = double_softmax ? masked_softmax(scores, mask) : scores;
  if (fit_scale) {
    const double c = fit_policy_scale(target, scores, mask);
    if (fitted_scale) *fitted_scale = c;
    s = s * c;
  }
  return kl_rows(target, s, mask).mean();
}

double fit_policy_scale(const torch::Tensor& target, const torch::Tensor& scores, const torch::Tensor& mask) {
  check(scores, mask, "fit_policy_scale");
  TORCH_CHECK(target.sizes() == scores.sizes(), "fit_policy_scale: target must have the scores' shape");
  torch::NoGradGuard ng;
  const auto s = scores.detach().to(torch::kFloat64).masked_fill(~mask, 0.0);
  const auto t = target.detach().to(torch::kFloat64).masked_fill(~mask, 0.0);
  const double want = (t * s).sum().item<double>();  // sum over rows of E_target[s]
  // d KL / d c = sum_rows E_pi_c[s] - E_target[s]; E_pi_c[s] rises with c (its derivative is Var_pi_c[s]).
  auto slope = [&](double c) { return (masked_softmax(s * c, mask) * s).sum().item<double>() - want; };
  double lo = std::log(1e-4), hi = std::log(1e4);
  if (slope(std::exp(lo)) >= 0) return std::exp(lo);
  if (slope(std::exp(hi)) <= 0) return std::exp(hi);
  for (int i = 0; i < 50; ++i) {
    const double mid = 0.5 * (lo + hi);
    (slope(std::exp(mid)) < 0 ? lo : hi) = mid;
  }
  return std::exp(0.5 * (lo + hi));
}

torch::Tensor reinforce_loss(const torch::Tensor& scores, const torch::Tensor& mask, const torch::Tensor& actions,
                             const torch::Tensor& rewards) {
  check(scores, mask, "reinforce_loss");
  TORCH_CHECK(actions.dim() == 1 && actions.size(0) == scores.size(0), "reinforce_loss: actions must be [B]");
  TORCH_CHECK(rewards.dim() == 1 && rewards.size(0) == scores.size(0), "reinforce_loss: rewards must be [B]");
  auto a = actions.to(torch::kInt64).unsqueeze(1);
  TORCH_CHECK(mask.gather(1, a).all().item<bool>(), "reinforce_loss: an action points at padding");
  auto logp = masked_log_softmax(scores, mask).gather(1, a).squeeze(1);
  return -(rewards.detach().to(scores.dtype()) * logp).mean();
}

torch::Tensor calibrated_kl_loss(const torch::Tensor& scores, const torch::Tensor& labels, const torch::Tensor& mask,
                                 double y0, double tau, bool anchor) {
  check(scores, mask, "calibrated_kl_loss");
  TORCH_CHECK(labels.sizes() == scores.sizes(), "calibrated_kl_loss: labels must have the scores' shape");
  TORCH_CHECK(tau > 0, "calibrated_kl_loss: tau must be positive");
  auto y = labels.detach().to(scores.dtype());
  auto s = scores;
  auto m = mask;
  if (anchor) {
    const auto B = scores.size(0);
    y = torch::cat({torch::full({B, 1}, y0, y.options()), y}, 1);
    s = torch::cat({torch::zeros({B, 1}, s.options()), s}, 1);
    m = torch::cat({torch::ones({B, 1}, m.options()), m}, 1);
  }
  auto target = masked_softmax(y / tau, m);
  return -(target * masked_log_softmax(s, m)).sum(1).mean();
}

torch::Tensor listwise_kl_loss(const torch::Tensor& scores, const torch::Tensor& utilities, const torch::Tensor& mask,
                               double temperature) {
  check(scores, mask, "listwise_kl_loss");
  TORCH_CHECK(temperature > 0, "listwise_kl_loss: temperature must be positive");
  auto target = masked_softmax(utilities.detach().to(scores.dtype()) / temperature, mask);
  return kl_rows(target, scores, mask).mean();
}

namespace {
// The mean of per-row losses over the rows `applies` marks; 0 (with a gradient path) when none.
torch::Tensor mean_over(const torch::Tensor& per_row, const torch::Tensor& applies) {
  const auto n = applies.sum();
  return (per_row.masked_fill(~applies, 0.0)).sum() / n.clamp_min(1).to(per_row.dtype());
}
}  // namespace

torch::Tensor luf_strict_loss(const torch::Tensor& scores, const torch::Tensor& positive, const torch::Tensor& mask) {
  check(scores, mask, "luf_strict_loss");
  TORCH_CHECK(positive.sizes() == scores.sizes() && positive.scalar_type() == torch::kBool,
              "luf_strict_loss: positive must be bool of the scores' shape");
  const auto pos = positive & mask;
  const auto applies = pos.any(1);
  const auto ninf = -std::numeric_limits<double>::infinity();
  // Rows without a positive get a dummy numerator (their loss is masked out below and their
  // scores get no gradient through it).
  const auto num = torch::logsumexp(scores.masked_fill(~pos, ninf).masked_fill(~applies.unsqueeze(1), 0.0), 1);
  const auto den = torch::logsumexp(scores.masked_fill(~mask, ninf).masked_fill(~applies.unsqueeze(1), 0.0), 1);
  return mean_over(den - num, applies);
}

torch::Tensor luf_flaccid_loss(const torch::Tensor& scores, const torch::Tensor& grades, const torch::Tensor& relevant) {
  check(scores, relevant, "luf_flaccid_loss");
  TORCH_CHECK(grades.sizes() == scores.sizes(), "luf_flaccid_loss: grades must have the scores' shape");
  const auto g = grades.detach().to(scores.dtype()).clamp_min(0.0).masked_fill(~relevant, 0.0);
  const auto sum = g.sum(1, true);
  const auto applies = (relevant.sum(1) >= 2) & (sum.squeeze(1) > 0);
  const auto p = g / sum.clamp_min(1e-300);
  // Rows that do not apply: a full mask keeps the softmax finite; their loss is dropped.
  const auto m = relevant | ~applies.unsqueeze(1);
  return mean_over(kl_rows(p.masked_fill(~applies.unsqueeze(1), 0.0), scores, m), applies);
}

torch::Tensor luf_hard_negative_loss(const torch::Tensor& scores, const torch::Tensor& positive,
                                     const torch::Tensor& negative, const torch::Tensor& weights, double gamma) {
  check(scores, positive, "luf_hard_negative_loss");
  TORCH_CHECK(negative.sizes() == scores.sizes() && negative.scalar_type() == torch::kBool,
              "luf_hard_negative_loss: negative must be bool of the scores' shape");
  TORCH_CHECK(weights.sizes() == scores.sizes(), "luf_hard_negative_loss: weights must have the scores' shape");
  const auto applies = positive.any(1) & negative.any(1);
  // margins[b, i, j] = max(0, gamma - s[b, i] + s[b, j]) for a positive i and a negative j.
  const auto margins = (gamma - scores.unsqueeze(2) + scores.unsqueeze(1)).clamp_min(0.0);
  const auto pair = positive.unsqueeze(2) & negative.unsqueeze(1);
  const auto n_pos = positive.sum(1).clamp_min(1).to(scores.dtype());
  const auto per_neg = margins.masked_fill(~pair, 0.0).sum(1) / n_pos.unsqueeze(1);  // mean over d+, per d-
  const auto w = weights.detach().to(scores.dtype()).masked_fill(~negative, 0.0);
  return mean_over((w * per_neg).sum(1), applies);
}

}  // namespace attune::train
