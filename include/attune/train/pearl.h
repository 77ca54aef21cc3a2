#pragma once
// Pearl (001 §3; METHODS.md §4): a generation-calibrated cross-encoder retriever. Torch-free.
//
// On attune's LaMP-schema data: request q_u = an example's query phi_q(x), target t_u = its
// gold output y, candidates D^c_u = the top-l profile documents of the initial retriever
// (the profile holds only documents older than the example).
//  - Labels (Eq. 1): y_q^d = log p_aux(y | phi_p(x, [d])) - log p_aux(y | phi_p(x, F)), F a
//    fixed set of random few-shot documents of the example's profile (appendix A).
//  - Request selection: keep the top 2/3 of requests by their best y_q^d.
//  - Lists: the top p = 2 candidates of a kept request are positives, each with n = 3
//    random negatives from the request's other candidates.
//  - Model: w^T tanh(W^T Enc([q; d])_CLS), a BERT with pooler + 1-output classifier.
//  - Loss: the scale-calibrated KL with anchor y0 (Eq. 2-3), tau = 5.
//  - Selective revision on dev: s1 = max_d f(q, d); outputs with s1 < theta are revised.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "attune/core/run_control.h"
#include "attune/data/dataset.h"
#include "attune/llm/language_model.h"
#include "attune/retrieval/candidates.h"
#include "attune/store/store.h"
#include "attune/tasks/task.h"
#include "attune/text/tokenizer.h"
#include "attune/train/fit_options.h"

namespace attune::train {

// One request with its top-l candidates (initial retriever order) and their labels y_q^d.
struct PearlRequest {
  std::string id;
  std::string query;
  std::vector<std::string> docs;
  std::vector<double> label;
};

// ---------------------------------------------------------------- pure pieces

// The indices of the kept requests: the ceil(keep_fraction * n) with the highest best label
// (ties: the earlier request), in input order. Requests without candidates are never kept.
std::vector<std::size_t> select_requests(const std::vector<PearlRequest>& reqs, double keep_fraction);

// One training list: docs[0] is a positive, the rest its negatives (indices into the
// request's docs).
struct PearlList {
  std::size_t request = 0;
  std::vector<std::size_t> docs;
};

struct PearlSampling {
  double keep_fraction = 2.0 / 3.0;
  std::size_t positives = 2;  // p
  std::size_t negatives = 3;  // n, per positive
  std::uint64_t seed = 0;
};

// Request selection, then per kept request (with >= 2 candidates) the top-p candidates by
// label (ties: the earlier) as positives, each with n negatives drawn without replacement
// from the request's non-positive candidates (seeded by seed + request id + positive; fewer
// when there are fewer).
std::vector<PearlList> pearl_lists(const std::vector<PearlRequest>& reqs, const PearlSampling& s);

// The few-shot set F of an example: n distinct indices of its profile (size profile_size),
// drawn from the profile outside `top` (its top-l candidates) when that has n, else from
// the whole profile; seeded by (seed, key), sorted ascending.
std::vector<std::size_t> few_shot_indices(std::size_t profile_size, const std::vector<std::size_t>& top, std::size_t n,
                                          std::uint64_t seed, std::string_view key);
// The few-shot set fixed across a user's requests (PearlLabelOptions::few_shot_per_user):
// 001 uses one set for every request; a set shared across users would put one user's
// documents in another's prompt, so attune fixes it per user. Every document of the user
// gets a key drawn once from (seed, user, document id); F is the n documents of this
// profile with the smallest keys, outside `top` when that has n, else from the whole
// profile. So two requests of the user share F unless one of its documents is a candidate
// of one of them or absent from its (older) profile. Sorted ascending.
std::vector<std::size_t> user_few_shot_indices(std::span<const Document> profile, const std::vector<std::size_t>& top,
                                               std::size_t n, std::uint64_t seed, std::string_view user);

// Median (mean of the middle two for an even count); NaN when empty.
double median(std::vector<double> v);
// The q-th percentile (0..100), linear between order statistics (numpy's default); NaN
// when empty. percentile(v, 50) == median(v).
double percentile(std::vector<double> v, double q);

// Selective revision: theta among -inf (never revise), the observed s1 values and +inf
// (revise all), the one
// maximising the mean of (s1 < theta ? revised : first) (minimising when !higher_is_better);
// ties keep the smaller theta (fewer revisions).
struct RevisionChoice {
  double theta = -std::numeric_limits<double>::infinity();
  double without = 0, with = 0;  // mean metric without revision / with it at theta
  std::size_t revised = 0;       // outputs below theta
};
RevisionChoice choose_revision_threshold(const std::vector<double>& s1, const std::vector<double>& first,
                                         const std::vector<double>& revised, bool higher_is_better = true);
// The same choice made honestly: two folds (even and odd positions); each fold is revised
// at the threshold fitted on the other one. Returns the mean metric over all examples, an
// estimate of what the fitted threshold gives on unseen inputs. NaN below 2 examples.
double cross_fitted_revision(const std::vector<double>& s1, const std::vector<double>& first,
                             const std::vector<double>& revised, bool higher_is_better = true);

// ---------------------------------------------------------------- labels (Eq. 1)

struct PearlLabelOptions {
  std::string initial_retriever = "bm25";
  std::size_t top_l = 16;
  std::size_t few_shot = 1;      // |F|
  // F fixed across each user's requests (user_few_shot_indices; default, the paper's one
  // set across requests within what privacy allows), or drawn per request
  // (few_shot_indices, keyed by the example id) when false.
  bool few_shot_per_user = true;
  std::size_t max_length = 0;    // prompt budget; 0 = 512 (the per-item feedback budget)
  bool reference_quirks = true;
  RunControl run;                // seed, threads, batch, progress, limit (first N examples)
  std::function<const retrieval::CandidateSource*(const std::string& spec)> source_for;
};

struct PearlLabelSummary {
  std::size_t requests = 0, labels = 0, model_calls = 0, cache_hits = 0;
};

// y_q^d for the top-l candidates of each example of `ds` with the auxiliary model `aux`
// (bare; cached in `store`): the per-document terms through feedback::collect (kind
// likelihood, records kept in the store), the few-shot term through llm::CachedModel.
// Examples with fewer than 2 candidates are dropped.
std::vector<PearlRequest> pearl_requests(const data::Dataset& ds, const tasks::Task& task,
                                         const retrieval::CandidateSource& source, llm::LanguageModel& aux,
                                         store::Store& store, const text::Tokenizer& tok, const PearlLabelOptions& opts,
                                         PearlLabelSummary* summary = nullptr);

// ---------------------------------------------------------------- training

struct PearlOptions {
  std::filesystem::path init;   // an encoder folder (pooler/classifier initialised when absent)
  PearlSampling sampling;
  std::size_t max_length = 256; // pair tokens, specials included (capped by the model)
  double tau = 5;
  bool anchor = true;
  double y0 = std::numeric_limits<double>::quiet_NaN();  // NaN = a percentile of the positives' labels:
  double y0_percentile = 50;                              // 001: the median; tune 25..75 on dev
  // The candidates the requests were built from, written to attune_model.json so that the
  // plain folder as a retriever spec reranks them: rerank(initial,top_l,cross:OUT).
  // Empty: the folder is cross:OUT, a reranker of whatever candidates it is given.
  std::string initial_retriever;
  std::size_t top_l = 0;
  // The loop (batches are lists): CPU-sized, 3 epochs of 16 lists in micro-batches of 8,
  // AdamW lr 2e-5 (weight decay 0.01), warmup 10%, clip 1.
  FitOptions fit = [] {
    FitOptions f;
    f.epochs = 3, f.batch_size = 16, f.micro_batch = 8, f.lr = 2e-5, f.warmup = 0.1;
    return f;
  }();

  // FieldError<UsageError> naming the field and its value.
  void validate() const;
};

struct PearlResult {
  std::size_t requests = 0, kept_requests = 0, lists = 0;
  double y0 = 0;
  std::size_t steps_done = 0, total_steps = 0;
  std::vector<double> epoch_loss;  // of the whole run
  std::vector<double> losses;      // per step of this process
  // Mean label of the top-scored candidate over `eval` requests, before / after training.
  double eval_top1_before = 0, eval_top1_after = 0;
  double seconds = 0;
};

// Trains and writes out/ as a cross-encoder folder (models::CrossEncoder::load, cross:DIR,
// or the plain path through attune_model.json) with attune_train.json {method, seed,
// options, y0, labels {count, mean, std, positive_fraction}, epochs}. `eval`: labelled
// requests scored before and after (not used for training). Checkpoints in out/checkpoint;
// `resume` ends with the weights of an uninterrupted run. UsageError for bad options or an
// out folder holding a run; Error when no list can be built.
PearlResult train_pearl(const std::vector<PearlRequest>& train, const std::vector<PearlRequest>& eval,
                        const PearlOptions& opts);

// ---------------------------------------------------------------- dev: calibration, revision

// Scores (query, doc) pairs, higher = more useful (e.g. models::CrossEncoder::score).
using PairScorer = std::function<std::vector<float>(const std::string& query, std::span<const std::string> docs)>;

struct PearlDevOptions {
  std::string initial_retriever = "bm25";
  std::size_t top_l = 16;
  std::size_t k = 4;             // documents in the writing prompt
  std::size_t max_length = 256;  // prompt budget (evaluation)
  bool reference_quirks = true;
  llm::GenerateOptions generate;
  RunControl run;                // seed, threads, batch, limit (first N examples); no progress lines
  std::function<const retrieval::CandidateSource*(const std::string& spec)> source_for;
};

struct PearlDevResult {
  std::size_t examples = 0;
  std::string metric;             // the task's primary metric
  double r = 0;                   // Pearson(s1, per-example metric); NaN when a side is constant
  RevisionChoice revision;        // revision = phi_p(x, the initial retriever's top-k); fitted and
                                  // reported on the same examples (optimistic)
  double revision_cross_fitted = 0;  // the metric with revision, 2-fold cross-fitted
  double initial_metric = 0;      // mean metric of the initial retriever's top-k (= revising all)
};

// For each dev example: s1 = max over the top-l candidates of `scorer`, the generation with
// the scorer's top-k (through llm::CachedModel), its primary metric, the calibration r and
// the revision threshold (the revision: the prompt with the initial retriever's top-k).
PearlDevResult pearl_dev(const data::Dataset& ds, const tasks::Task& task, const retrieval::CandidateSource& source,
                         const PairScorer& scorer, llm::LanguageModel& model, store::Store& store,
                         const text::Tokenizer& tok, const PearlDevOptions& opts);

}  // namespace attune::train
