#pragma once
// PURPLE (003 §3; METHODS.md §6): list-aware profile selection as a contextual bandit.
// Torch-free.
//
// For each example: the top-l records of a first-stage retriever (l = 20); a record encoder
// (models/purple_net.h) gives each a propensity f in (0, 1); the policy is Plackett-Luce
// over the propensities (Eq. 3), pi(P | C) = prod_k f(p_k) / (S - sum_{j<k} f(p_j)),
// S = sum_i f(i), an ordered profile P of K records drawn without replacement. M profiles
// are sampled per example; each one's reward is log p_M(y | phi_p(x, P)), the frozen
// language model's log-probability of the gold output with that profile in its prompt,
// asked inside the training loop; the M rewards are z-scored and the policy follows
// REINFORCE: grad J ~ 1/B sum_b 1/M sum_m r~_bm grad log pi(P_bm | C_b). Inference: the
// top K by propensity, in that order.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "attune/core/rng.h"
#include "attune/train/fit_options.h"

namespace attune::train {

// One example: the query the encoder reads and its candidate records (texts), in the first
// stage's order.
struct PurpleExample {
  std::string id;
  std::string query;
  std::vector<std::string> records;
  // The first stage's score of each record (records' order); needed with initial_prior,
  // whose prior is retrieval::initial_prior_z of these.
  std::vector<double> initial_scores;
};

// One ordered profile of one example: indices into its records, best first.
struct ProfileRequest {
  std::size_t example = 0;
  std::vector<std::size_t> records;
};
// The reward of each profile, log p(y | phi_p(x, P)), in request order: the workflow builds
// the prompts and asks the language model (batched, cached). A non-finite value is refused.
using ProfileReward = std::function<std::vector<double>(std::span<const ProfileRequest>)>;

// ---------------------------------------------------------------- pure pieces

// log pi(order | weights) under Plackett-Luce (Eq. 3): sum_k log w[o_k] - log(S - sum_{j<k}
// w[o_j]). `order` holds distinct indices; weights are positive.
double plackett_luce_log_prob(std::span<const double> weights, std::span<const std::size_t> order);
// K = min(k, n) distinct indices drawn from Plackett-Luce over `weights` (the Gumbel-top-K
// trick on log w: exact for Plackett-Luce), in draw order.
std::vector<std::size_t> plackett_luce_sample(std::span<const double> weights, std::size_t k, Rng& rng);
// The same over log-weights (w = exp(log_weights); -inf never drawn before a finite one).
std::vector<std::size_t> plackett_luce_sample_log(std::span<const double> log_weights, std::size_t k, Rng& rng);
// The indices of the k largest weights, largest first; ties: the earlier index.
std::vector<std::size_t> top_k_order(std::span<const double> weights, std::size_t k);
// (r - mean) / std (population) over the values; all 0 when std is 0 or there is one value.
std::vector<double> zscore(std::span<const double> r);

// ---------------------------------------------------------------- training

struct PurpleOptions {
  std::filesystem::path init;    // the frozen encoder folder (pretrain-encoder, dense:DIR)
  std::size_t k = 5;             // K, the profile size (003: 5)
  std::size_t samples = 32;      // M, profiles sampled per example (003: 32)
  std::size_t heads = 4;         // attention heads of the head (must divide the encoder's hidden size)
  std::size_t layers = 2;        // record Transformer layers (003: 12; sized to a 2-core CPU)
  bool cross_attention = true;   // ablation: false = the query as one extra record token
  bool record_transformer = true;// ablation: false = pointwise
  std::size_t max_length = 128;  // tokens per query / record text (capped by the encoder)
  // The frozen encoder's token states (half precision, as the head always reads them) are
  // kept across epochs up to this many MiB (up to 1.4 MiB an example of 21 texts of 128
  // tokens with a hidden-256 encoder), so epochs after the first run the head alone on the
  // examples kept. 0 = recompute every time; the results are the same.
  std::size_t state_cache_mb = 2048;
  // The candidates, recorded in attune_model.json so that the folder as a retriever spec
  // is rerank(initial_retriever, top_l, purple:OUT).
  std::string initial_retriever;
  std::size_t top_l = 20;
  // Learned initial prior (not in 003): the policy's Plackett-Luce log-weights are
  // log f + w z, z the first stage's z-scored scores of the candidates
  // (retrieval::initial_prior_z), w = prior_weight + a learned offset; the head's last layer
  // starts at zero, so the untrained selector's order is the first stage's own. Off: 003's
  // policy over f alone, whose untrained order is random. The folder records w, and as a
  // retriever it ranks rerank(initial, top_l, purple:DIR), which adds w z.
  bool initial_prior = false;
  double prior_weight = 0.25;
  // 003: batch 16, Adam lr 1e-4 (0.9, 0.999), clip 1, 10 epochs, best dev checkpoint.
  FitOptions fit = [] {
    FitOptions f;
    f.epochs = 10, f.batch_size = 16, f.micro_batch = 16, f.lr = 1e-4, f.warmup = 0, f.clip = 1.0;
    return f;
  }();

  // FieldError<UsageError> naming the field and its value.
  void validate() const;
};

struct PurpleEpoch {
  std::size_t epoch = 0;
  double loss = 0;
  double dev_reward = 0;  // mean log p(y | x, top-K by propensity) over dev
};

struct PurpleResult {
  std::size_t steps_done = 0, total_steps = 0;
  std::vector<PurpleEpoch> epochs;  // of the whole run
  std::size_t best_epoch = 0;       // the kept epoch (0 = the untrained start)
  std::vector<double> losses;       // per step of this process
  double init_dev_reward = 0;       // the untrained model's dev reward
  double first_stage_dev_reward = 0;// the first stage's own top K on dev
  // The kept selector's dev reward is below first_stage_dev_reward: on dev the first stage's
  // own order serves the reader better than the trained selector (recorded in
  // attune_train.json as "below_first_stage"; the CLI warns).
  bool below_first_stage = false;
  std::size_t reward_calls = 0;     // profiles rewarded by this process (cached ones included)
  double prior_weight_start = 0, prior_weight = 0;  // with initial_prior: w at the start and in the kept folder
  double seconds = 0;
};

// Trains the head over the frozen encoder of opts.init and writes out/ as a PURPLE folder
// (models::PurpleModel::load, purple:DIR, or the folder itself as a spec through
// attune_model.json): the encoder's files, purple.json, purple_head.safetensors,
// attune_train.json. Each epoch is scored on `dev` (mean reward of the top K by
// propensity, `dev_reward`) and the best is kept; the untrained head competes as epoch 0.
// Profiles are drawn from (seed, epoch, example id): a resumed run asks `reward` for the
// same profiles, which a cached workflow answers without the language model.
// UsageError for bad options or an out folder holding a run; Error when there is no
// training example, a training example has fewer than 2 records (a dev one none), an
// example lacks one initial score per record with initial_prior, or a reward is not finite.
PurpleResult train_purple(const std::vector<PurpleExample>& train, const std::vector<PurpleExample>& dev,
                          const ProfileReward& train_reward, const ProfileReward& dev_reward, const PurpleOptions& opts);

}  // namespace attune::train
