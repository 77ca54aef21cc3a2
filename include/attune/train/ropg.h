#pragma once
// ROPG (000 §4): optimise a dense bi-encoder retriever on the language model's own
// per-document utilities. Torch-free header.
//  - ROPG-RL: sample one document from pi_theta over the top-l candidates of the initial
//    retriever, reward u(d) - u(d_b) (d_b: the initial retriever's top document), REINFORCE.
//  - ROPG-KD: KL(softmax(u) || pi_theta) over the same candidates.
// pi_theta = softmax over the candidates of <embed(phi_q(x)), embed(doc)> / tau (the
// encoder's own pooling, normalisation and temperature). Defaults follow the paper (5%
// linear warmup then linear decay, grad-clip 1.0, effective batch 64, 10 epochs, l = 16)
// except the learning rate: Adam lr 1e-3, not 1e-5 (see RopgOptions::fit).
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "attune/data/dataset.h"
#include "attune/retrieval/candidates.h"
#include "attune/store/store.h"
#include "attune/tasks/task.h"
#include "attune/train/fit_options.h"

namespace attune::train {

// One training query: its top-l candidate texts (initial retriever order) and their
// utilities u(d) from the store. baseline = 0: the initial retriever's top document.
struct RopgExample {
  std::string id;
  std::string query;
  std::vector<std::string> docs;
  std::vector<double> utility;
  // The initial retriever's score of each document (as it ranked them); needed by
  // InitialPrior::Learned, else may be empty.
  std::vector<double> initial_score;
  // LUF (RopgObjective::LUF): each document's LLM-judged label (feedback/judge.h): 2 contains
  // the answer (D+), 1 relevant (D^r, its graded score the utility), 0 irrelevant (D-), -1
  // not judged (left out of the losses and of dev). Empty for the other objectives.
  std::vector<std::int8_t> judgement;
};

// How the policy uses the initial retriever's order (RopgOptions::initial_prior).
//  None: pi = softmax(s(x, d) / tau), the encoder alone (000).
//  Learned: pi = softmax(s(x, d) / tau + w z(d)), z = the initial retriever's scores of the
//    l candidates z-scored among them (retrieval::initial_prior_z), w = w0 exp(theta): w0 the
//    weight of a grid {0, 0.25, ..., 64} with the best top-1 utility on (up to 512)
//    training queries before training, theta learned with the encoder. The trained folder
//    retrieves rerank(initial, l, dense:DIR, fuse=1/tau:w). A reranker that starts from
//    the initial order keeps what the initial retriever knows (with a relevance-like
//    reader BM25's top-1 beat the encoder alone, which did not catch up) and learns what
//    it misses; where the initial order carries nothing the grid picks w0 = 0.
enum class InitialPrior { None, Learned };
InitialPrior parse_initial_prior(const std::string& s);  // "none" | "learned"
std::string to_string(InitialPrior p);

// What ROPG-KD's target distribution is built from on the training queries
// (RopgOptions::kd_target). Dev always scores by the task metric's utility, which eval
// reports, so the kept epoch is chosen on it either way.
//  Utility: u(d), the task metric of the reader's output with d alone (000; feedback kind
//    doc: one generation per document).
//  Likelihood: log p(y | x, d) - log p(y | x), how much d raises the gold output's
//    likelihood (REPLUG-LSR's training signal; feedback kind likelihood: one scoring call
//    per document and one without). Dense where a generation's metric is coarse, and no
//    generation needed.
enum class KdTarget { Utility, Likelihood };
KdTarget parse_kd_target(const std::string& s);  // "utility" | "likelihood"
std::string to_string(KdTarget t);

// RL, KD: paper 000. LUF: paper 004's three losses on LLM-judged labels (objectives.h
// luf_*), weighted by RopgOptions::luf, on each query's judged candidates.
enum class RopgObjective { RL, KD, LUF };
RopgObjective parse_ropg_objective(const std::string& s);  // "ropg-rl" | "ropg-kd" | "luf"

// LUF's loss: lambda_strict L_s + lambda_flaccid L_f + lambda_hard L_h (METHODS.md §7), the
// margin gamma on the policy's scale (sim / tau); a negative at rank r (in the initial
// retriever's order) weighs 1 / (1 + r) in L_h.
// in_batch: L_s's denominator is every document of the micro-batch (paper 004 Eq. 2's B):
// the other queries' candidates are this query's in-batch negatives (a document that is
// also one of its own candidates counts once, with its own label; their scores carry no
// initial prior, which is defined for a query's own candidates only). L_f and L_h read a
// query's own candidates either way. relevance_batches (with in_batch): micro-batches are
// grouped by Eq. 1, greedily: each starts from the next query of the epoch's seeded order
// and adds the query sharing most relevant-or-answer documents (D+ u D^r, by text) with
// those already in it, so that batch-mates' documents are hard negatives.
// Paper 004 Eq. 1, greedily: `base` (a permutation of query indices) regrouped into groups
// of `group` queries. Each group starts from the earliest unused query of `base` and adds,
// one at a time, the unused query sharing the most documents of `relevant` (per query: its
// D+ u D^r, as document keys) with the group so far; ties and queries sharing none go in
// `base` order. Every query of `base` appears once.
std::vector<std::size_t> relevance_guided_order(std::vector<std::vector<std::uint64_t>> relevant,
                                                const std::vector<std::size_t>& base, std::size_t group);

struct LufWeights {
  double lambda_strict = 1, lambda_flaccid = 1, lambda_hard = 1;
  double gamma = 1;
  bool in_batch = false;
  bool relevance_batches = false;
};

struct RopgOptions {
  RopgObjective objective = RopgObjective::KD;
  bool double_softmax = false;        // KD: the reference code's softmax-then-cross-entropy
  double target_temperature = 1.0;    // KD: p_t = softmax(utility' / T); 000 uses 1
  // KD: pi = softmax(c * score) with c fitted per batch to the target (objectives.h
  // fit_policy_scale), so the target's overall sharpness does not reshape the encoder.
  // Unset: fitted for KD (but not the double softmax), and nothing for the other objectives;
  // false: c = 1 (000's); true where it does not apply: refused. The default since
  // 2026-11-27: from a sharp start, c = 1 flattened the ranking at once (docs/RESULTS.md).
  std::optional<bool> fit_policy_scale;
  bool fits_policy_scale() const {
    return fit_policy_scale.value_or(objective == RopgObjective::KD && !double_softmax);
  }
  // The encoder's word embeddings stay as loaded (most of a small encoder's parameters: 3.9M
  // of enc14's 4.5M). Adam moves a rare token's row as far as a common one's, so on a few
  // thousand queries they memorise the training queries' words.
  bool freeze_word_embeddings = false;
  // KD: utility' = the utilities z-scored per query (default) or raw (None, 000's). Raw
  // [0, 1] utilities at T = 1 give targets close to uniform (ratio e^0.25 ~ 1.3 for a 0.25
  // gap); z-scores make every query's target as sharp as its ranking is clear. With
  // planted:marker on commit_subject dev (docs/RESULTS.md) z-scores at T = 1 learned where
  // raw utilities at T = 1 did not move.
  TargetNormalization target_normalization = TargetNormalization::ZScore;
  // pi = softmax(score / tau) over the candidates. Unset: the encoder's own temperature,
  // the InfoNCE temperature it was trained at (pretrain-encoder's 0.05, recorded in its
  // attune_train.json; an earlier ROPG run's policy temperature), else 1 (000's raw
  // scores). With L2-normalised embeddings and tau = 1 the best of 16 documents can get at
  // most ~1/3 of the probability, so a sharp target cannot be fitted.
  std::optional<double> policy_temperature;
  // How the trained folder retrieves, recorded in its attune_model.json. Set (the default
  // of `attune train`): rerank(initial, top_l, this encoder), the protocol the encoder was
  // trained and its kept epoch chosen in. Unset: the encoder alone over all of a query's
  // candidates, as 000 evaluates it (`--protocol dense`).
  struct Rerank {
    std::string initial;
    std::size_t top_l = 0;
  };
  std::optional<Rerank> rerank;
  // Learned needs `rerank` (the prior is the initial retriever of the protocol).
  InitialPrior initial_prior = InitialPrior::None;
  // KD: leave out training queries whose candidates all have the same utility. Their
  // target is uniform, so KL(uniform || pi) only pulls every score together: with sparse
  // utilities (most queries all 0) that flattening outweighs what the rest teach. RL is
  // unaffected (its reward u(d) - u(d_b) is 0 there). false: every query, as the paper.
  bool skip_flat = true;
  // Each candidate's text + " FIELD: value" for these fields (retrieval::fielded_text):
  // {"date"} is paper 000's ROPG training (LaMP's reference code); any other name is a field
  // of the profile items (commit_area's `tag`). The folder records them, and dense:DIR then
  // reads documents the same way. None by default: a field is a string the encoder must
  // learn to read, and corpus passages have none (a document without one is refused).
  std::vector<std::string> document_fields;
  // KD only (Likelihood with RL is a UsageError).
  KdTarget kd_target = KdTarget::Utility;
  LufWeights luf;  // LUF only
  std::filesystem::path init;         // the encoder to start from (a dense: model folder)
  std::size_t query_max_length = 128; // tokens, specials included
  std::size_t doc_max_length = 128;
  // The loop: out (the trained model folder + out/checkpoint), 000's schedule (10 epochs,
  // effective batch 64 in micro-batches of 8, warmup 5%, clip 1) with Adam lr 1e-3. 000's
  // 1e-5 fine-tunes a pretrained 110M Contriever; attune's encoders are small and trained
  // from scratch, and at 1e-5 none moved from its start on dev (commit_subject with
  // planted:marker: 3 epochs kept the start), while 1e-3 learned both with the hidden-64
  // encoder (dev top-1 0.023 -> 0.043) and with pretrain-encoder's default one (hidden 256,
  // 4 layers: planted:gate 0.007 -> 0.061 after one epoch). docs/RESULTS.md has the runs.
  FitOptions fit = [] {
    FitOptions f;
    f.lr = 1e-3;
    return f;
  }();

  // FieldError<UsageError> naming the field and its value.
  void validate() const;
};

// The tau a run with these options uses: RopgOptions::policy_temperature, else the
// temperature recorded by the run that made `init` (encoder_temperature), else 1.
double resolve_policy_temperature(const RopgOptions& o);
// The similarity temperature an encoder folder was trained at, from its attune_train.json
// (pretrain-encoder, objective contriever-infonce: options.temperature; a ROPG run:
// options.policy_temperature); nullopt when the folder records none (a Hugging Face
// encoder, or an RSPG / Pearl folder, whose "temperature" is a target's). Error for a recorded value that is not
// a positive number.
std::optional<double> encoder_temperature(const std::filesystem::path& dir);

struct RopgEpoch {
  std::size_t epoch = 0;              // 1-based
  double loss = 0;                    // mean training loss of the epoch
  double dev_top1 = 0;                // mean u(argmax pi) over the dev examples
  double dev_expected = 0;            // mean E_pi[u] over the dev examples
};

struct RopgResult {
  std::size_t steps_done = 0, total_steps = 0;
  double init_dev_top1 = 0, init_dev_expected = 0;  // the initial encoder on dev
  double dev_oracle = 0;              // mean max_d u(d) over the dev candidates: the best top-1 any ranking gets
  double policy_temperature = 1;      // the tau the run used
  double initial_weight_start = 0;    // InitialPrior::Learned: w0, the grid's choice
  double initial_weight = 0;          // InitialPrior::Learned: w of the kept epoch
  std::size_t flat_skipped = 0;       // KD training queries left out as flat (skip_flat)
  double train_top1_before = 0;       // mean u(argmax pi) on train before training
  std::vector<RopgEpoch> epochs;      // of the whole run (resumed ones included)
  std::size_t best_epoch = 0;         // the epoch saved in out/ (best dev_top1; last without dev)
  std::vector<double> losses;         // per step of this process
  double seconds = 0;
};

// Trains and writes out/ as a dense-encoder folder (loadable as dense:DIR or by its plain
// folder path as a retriever spec) holding the epoch with the best dev top-1 utility (the
// last epoch when dev is empty), with attune_train.json {method, seed, options, epochs,
// ...}. Checkpoints (model + optimizer + state) go to out/checkpoint every
// checkpoint_every steps and at every epoch end; `resume` continues from there and ends
// with the same weights as an uninterrupted run. UsageError for bad options or an out
// folder that already holds a run (without resume); Error when no example has two or
// more candidates.
RopgResult train_ropg(const std::vector<RopgExample>& train, const std::vector<RopgExample>& dev,
                      const RopgOptions& opts);

// Builds ROPG examples for `ds`: the initial retriever's top-l candidates of each example
// (as feedback::collect ranked them) and their "doc" utilities for `model_id` from the
// store. Examples with fewer than 2 candidates are skipped. Error naming the example and
// document when a utility is missing (run `attune feedback --kind doc` first; `attune
// train` does it for you).
std::vector<RopgExample> ropg_examples(const data::Dataset& ds, const tasks::Task& task,
                                       const retrieval::CandidateSource& source, store::FeedbackLog& store,
                                       const std::string& model_id, const std::string& initial_retriever,
                                       std::size_t top_l, std::uint64_t seed, std::size_t limit = 0,
                                       const std::vector<std::string>& document_fields = {},
                                       KdTarget values = KdTarget::Utility);

}  // namespace attune::train
