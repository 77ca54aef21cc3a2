#pragma once
// The learning-from-feedback objectives of METHODS.md as pure tensor functions, so each
// can be checked against its closed form. Includes torch; the trainers' torch-free entry
// points are train/ropg.h (and later rspg.h, pearl.h).
//
// Shapes: scores, utilities, labels [B, l]; mask [B, l] bool (true = a real candidate,
// false = padding of a list shorter than l). Padding never receives probability mass or
// gradient, and every row must have at least one real candidate.
#include <torch/torch.h>

#include "attune/train/fit_options.h"

namespace attune::train {

// log softmax over each row's real candidates; padded positions hold 0 (not -inf), so
// products with a zero target stay finite.
torch::Tensor masked_log_softmax(const torch::Tensor& scores, const torch::Tensor& mask);
// softmax over each row's real candidates; padded positions hold 0.
torch::Tensor masked_softmax(const torch::Tensor& scores, const torch::Tensor& mask);

// Per-row z-scores of `values` over the real candidates: (v - mean) / std (population std).
// A row whose values are all equal (std 0) becomes all 0, i.e. a uniform target after a
// softmax. Padding holds 0. No gradient (targets are constants).
torch::Tensor zscore_rows(const torch::Tensor& values, const torch::Tensor& mask);

// The utilities a KD / listwise target softmaxes (train/fit_options.h TargetNormalization).
torch::Tensor normalize_targets(const torch::Tensor& utilities, const torch::Tensor& mask, TargetNormalization n);

// ROPG-KD (000 §4.2): mean over rows of KL(p_t || pi) with p_t = softmax(utilities / T) and
// pi = softmax(scores), both over the real candidates. d loss / d scores = (pi - p_t) / B.
// T = `target_temperature` (the paper: 1; below 1 sharpens a target whose utilities differ
// by little). `double_softmax`: the LaMP reference code's variant, which softmaxes the
// scores before its cross-entropy (pi = softmax(softmax(scores))); named for what it is.
// `fit_scale`: pi = softmax(c * scores) with the one scalar c > 0 that minimises the batch's
// KL (found without gradient; by the envelope theorem d loss / d c = 0 there). The encoder is
// then moved only by how the target orders and spaces the candidates, not by how sharp it is
// overall: a broad target cannot pull a sharp starting policy flat, nor a sharp one push all
// scores apart. Not with `double_softmax`.
torch::Tensor ropg_kd_loss(const torch::Tensor& scores, const torch::Tensor& utilities, const torch::Tensor& mask,
                           bool double_softmax = false, double target_temperature = 1.0, bool fit_scale = false,
                           double* fitted_scale = nullptr);  // receives c when fit_scale

// argmin over c in [1e-4, 1e4] of sum over rows KL(target || softmax(c * scores)) (rows over
// `mask`; target zero on padding). The KL is convex in c: bisection on log c of its derivative
// sum_rows E_pi_c[s] - E_target[s]. No gradient. Returns the upper (lower) end where the
// target is sharper (flatter) than any c reaches, and the lower end when `scores` has no spread.
double fit_policy_scale(const torch::Tensor& target, const torch::Tensor& scores, const torch::Tensor& mask);

// ROPG-RL (000 §4.1): REINFORCE with one sampled action per row,
// loss = -mean_b reward_b * log pi(action_b | row b). actions [B] int64 (a real candidate),
// rewards [B] (u(action) - u(d_b), no gradient). Averaged over actions drawn from pi, its
// gradient is the exact policy gradient -d/ds E_pi[reward].
torch::Tensor reinforce_loss(const torch::Tensor& scores, const torch::Tensor& mask, const torch::Tensor& actions,
                             const torch::Tensor& rewards);

// Pearl's scale-calibrated KL (001 Eq. 2-3). With the anchor: prepend a candidate with
// label y0 and logit 0, then L = -sum_i softmax([y0, y] / tau)_i * log softmax([0, s])_i,
// mean over rows (padding excluded). Without: L = -sum_i softmax(y / tau)_i log softmax(s)_i
// (plain listwise KL up to the target's entropy; the paper's ablation).
torch::Tensor calibrated_kl_loss(const torch::Tensor& scores, const torch::Tensor& labels, const torch::Tensor& mask,
                                 double y0, double tau, bool anchor = true);

// RSPG (000 §5): mean over rows of KL(softmax(utilities / temperature) || softmax(scores)),
// the selector's objective over the retriever pool (every row full: mask all true).
torch::Tensor listwise_kl_loss(const torch::Tensor& scores, const torch::Tensor& utilities, const torch::Tensor& mask,
                               double temperature = 1.0);

// LUF (004 §2, METHODS.md §7): the three losses on a dense retriever's scores sim(q, d),
// from the LLM-judged labels of feedback/judge.h. A row holds a query's judged candidates,
// and any others the caller adds as negatives (other queries' documents: in-batch
// negatives); `mask` marks the real ones. positive [B, l] bool: D+ (contains the answer);
// relevant [B, l] bool: D^r with `grades` [B, l] its graded scores in [0, 1]; negative
// [B, l] bool: D-. Each loss is the mean over the rows it applies to and 0 when none does;
// nothing reaches padding.
//  strict:   -log( sum_{d+} exp s(d+) / sum_{d real} exp s(d) ), rows with a positive.
torch::Tensor luf_strict_loss(const torch::Tensor& scores, const torch::Tensor& positive, const torch::Tensor& mask);
//  flaccid:  KL(P_LLM || P_ret) over the row's D^r, P_LLM = grades / their sum and
//            P_ret = softmax(scores over D^r); rows with two or more D^r and a positive sum.
torch::Tensor luf_flaccid_loss(const torch::Tensor& scores, const torch::Tensor& grades, const torch::Tensor& relevant);
//  hard negative: sum_{d-} w(d-) mean_{d+} max(0, gamma - s(d+) + s(d-)), rows with a
//            positive and a negative; w [B, l] the rank weights (the caller's: e.g.
//            1 / (1 + rank) in the retriever's list, so higher-ranked negatives weigh more).
torch::Tensor luf_hard_negative_loss(const torch::Tensor& scores, const torch::Tensor& positive,
                                     const torch::Tensor& negative, const torch::Tensor& weights, double gamma);

}  // namespace attune::train
