#pragma once
// IUM (002 §4; METHODS.md §5): one reranker for many RAG agents. Torch-free.
//
// The reranker (models/ium.h) reads [CLS] tid mid x [SEP] d [SEP], tid and mid naming the
// agent's task and language model, and is trained pointwise (Eq. 4: binary cross-entropy)
// on per-document feedback: did the agent's output with that single document meet its
// utility (1) or not (0). A share of the samples (10%) read the unknown token for both
// tid and mid, so that an agent the reranker never saw still gets a reranker.
#include <cstddef>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "attune/train/fit_options.h"

namespace attune::train {

// One feedback sample.
struct IumSample {
  std::string task, model;  // the agent's task and language model (their tokens; an empty one reads [UNK])
  std::string query, doc;
  double label = 0;         // 0 or 1
  // The candidate list the sample came from (e.g. agent + query id), in the first stage's
  // order: dev picks the epoch whose top-ranked candidate per list is most often useful.
  std::string group;
  // With IumOptions::initial_prior: the first stage's score of the document z-scored over the
  // list the reranker reorders (retrieval::initial_prior_z over rerank(bm25,100,.)'s 100).
  double prior = 0;
};

struct IumOptions {
  std::filesystem::path init;   // the encoder to start from (its vocabulary must hold BERT's [unusedN])
  std::size_t max_length = 256; // tokens of [CLS] tid mid x [SEP] d [SEP] (002: 256)
  double unk_fraction = 0.1;    // samples whose tid and mid read [UNK] (002: 10%; 0 for online updates)
  // Weight of a useful sample in the loss: 0 = the training samples' ratio of useless to
  // useful ones (balanced), 1 = 002's plain cross-entropy. Feedback on a first stage's top 32
  // is mostly useless (2-3% useful on Debian qa); unweighted, the first planted run learned
  // only the majority class (docs/RESULTS.md).
  double positive_weight = 0;
  // With positive_weight 0: balance each agent's samples by that agent's own ratio (its task
  // and model), not the ratio of all agents' samples pooled. Agents' useful shares differ
  // (0.8% to 51% on the Debian table, docs/RESULTS.md), and a pooled ratio then weighs one
  // agent's useful samples too little and another's too much. Off by default (not yet chosen
  // on dev).
  bool balance_per_agent = false;
  // The initial order as a learned prior: the logit is Enc(...)_CLS . W + w z, z each
  // sample's `prior` and w = w0 + theta, w0 the weighted logistic fit of the labels on z
  // alone (or the weight of an --init folder trained this way) and theta a parameter from 0.
  // The reranker then learns what the first stage misses instead of relearning its order.
  // The folder records w (ium.json "initial_prior"), and rerank(A,L,ium:DIR...) fuses with
  // it. Off (002's reranker) by default.
  bool initial_prior = false;
  // The agents' tokens; empty: the tasks / models of the training samples, in the order
  // they first appear.
  std::vector<std::string> tasks, models;
  // 002: Adam lr 1e-5, 2 epochs, 5% warmup, effective batch 512 (micro-batches of 16 here).
  FitOptions fit = [] {
    FitOptions f;
    f.epochs = 2, f.batch_size = 512, f.micro_batch = 16, f.lr = 1e-5, f.warmup = 0.05, f.clip = 1.0;
    return f;
  }();
  void validate() const;  // FieldError<UsageError> naming the field
};

struct IumEpoch {
  std::size_t epoch = 0;
  double loss = 0;
  double dev_top1 = 0;            // share of dev lists whose top-ranked candidate is useful (the kept epoch's measure)
  double dev_log_likelihood = 0;  // mean log p(label | x, d) over dev
  double dev_accuracy = 0;        // share of dev samples with p >= 0.5 exactly when label = 1
};

struct IumResult {
  std::size_t steps_done = 0, total_steps = 0;
  std::vector<IumEpoch> epochs;
  std::size_t best_epoch = 0;  // with dev: the best by dev_top1, ties by log-likelihood (0 = the start); else the last
  std::vector<double> losses;
  double init_dev_top1 = 0, init_dev_log_likelihood = 0, init_dev_accuracy = 0;
  double first_stage_dev_top1 = 0;  // the same share for the lists in their given order
  double positive_weight = 1;       // the weight used (balance_per_agent: the pooled ratio, for comparison)
  std::map<std::string, double> agent_positive_weights;  // balance_per_agent: "task|model" -> its weight
  double prior_weight_start = 0, prior_weight = 0;  // initial_prior: w0 and the kept epoch's w
  double seconds = 0;
};

// Trains and writes out/ as an IUM folder (models::IumModel::load, ium:DIR?task=T&model=M):
// the encoder, ium.json {tasks, models, max_length} and ium_head.safetensors. UsageError for
// bad options, a label other than 0 or 1, or an out folder holding a run; Error without a
// training sample or when the encoder's vocabulary has no reserved tokens.
IumResult train_ium(const std::vector<IumSample>& train, const std::vector<IumSample>& dev, const IumOptions& opts);

}  // namespace attune::train
