#pragma once
// RSPG (000 §5): learn to choose, per input, which retriever of a pool to use. Torch-free.
// The selector S(R_i, x) is an encoder over the text it sees (Pre: the prompt built from
// R_i's top-k; Post: that prompt and the LLM's output for it, as a pair) whose final-layer
// first-token vector goes through a linear layer to a scalar. Softmax over the pool; the
// loss is KL(softmax_i(Eval_i) || softmax_i(S_i)); inference picks the argmax.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "attune/data/dataset.h"
#include "attune/retrieval/candidates.h"
#include "attune/store/store.h"
#include "attune/tasks/task.h"
#include "attune/text/tokenizer.h"
#include "attune/models/selector.h"
#include "attune/train/fit_options.h"

namespace attune::train {

enum class RspgVariant { Pre, Post };
RspgVariant parse_rspg_variant(const std::string& s);  // "rspg-pre" | "rspg-post" (or "pre" | "post")
std::string rspg_variant_name(RspgVariant v);

// One input: for each retriever of the pool, the selector's text (Post: second = the
// output) and the utility Eval(y, M(prompt)).
struct RspgExample {
  std::string id;
  std::string query;                 // the input x (task.query): what a query-first selector reads first
  std::vector<std::string> prompts;
  std::vector<std::string> outputs;  // Post only (empty for Pre)
  std::vector<double> utility;
};

struct RspgOptions {
  RspgVariant variant = RspgVariant::Pre;
  std::filesystem::path init;          // the encoder to start from
  std::vector<std::string> pool;       // retriever specs, in the examples' order (recorded)
  std::size_t k = 4;                   // documents per prompt (recorded for inference)
  std::size_t prompt_max_length = 256; // the prompt budget the prompts were built with (recorded)
  std::size_t max_length = 512;        // selector input tokens (000 used Longformer's 1024)
  // What the selector reads (models/selector.h): x first, then the prompt (default), or the
  // prompt alone (000's; LaMP prompts end with x, which a 256-token cut drops). Recorded in
  // selector.json "input".
  models::SelectorInput input = models::SelectorInput::QueryFirst;
  // What each example's prompts are, recorded in selector.json "texts": "prompts" (the task's
  // prompts, built by feedback::collect: `attune eval` runs such a selector) or "documents"
  // (each pool member's top k documents' texts, one per line: `attune serve`'s learner, and a
  // selector that then serves as a retriever spec, neural/selector.h).
  std::string texts = "prompts";
  double temperature = 1.0;            // target softmax temperature over Eval values
  // The Eval values z-scored per input before softmax(. / T) (ZScore), or raw (None, 000's
  // and the default: docs/RESULTS.md compares them on dev).
  TargetNormalization target_normalization = TargetNormalization::None;
  // Learned pool prior (not in 000): each member's score gets a learned bias b_r, started at
  // its mean training target / T (the member with the best mean utility scores highest); the
  // head keeps 000's small initialisation, so the untrained selector picks among the members
  // that help on average and never one that clearly does not. Recorded in selector.json
  // "pool_bias".
  bool pool_prior = false;
  // The loop: 000's schedule (AdamW lr 1e-5, 20 epochs), batches of 16 in micro-batches of 4.
  FitOptions fit = [] { FitOptions f; f.epochs = 20; f.batch_size = 16; f.micro_batch = 4; return f; }();

  // FieldError<UsageError> naming the field and its value (pool: under 2 or a repeated entry).
  void validate() const;
};

struct RspgEpoch {
  std::size_t epoch = 0;
  double loss = 0;
  double dev_success = 0;  // the argmax is among the best retrievers of the input
  double dev_utility = 0;  // mean utility of the selected retriever
};

struct RspgResult {
  std::size_t steps_done = 0, total_steps = 0;
  double init_dev_success = 0, init_dev_utility = 0;
  double dev_oracle = 0;  // the pool's best utility per dev input, averaged: what a perfect selector gets
  std::vector<RspgEpoch> epochs;
  std::size_t best_epoch = 0;  // best dev utility (the last without dev)
  std::vector<double> losses;
  double seconds = 0;
};

// Trains and writes out/: the encoder (HF folder), selector_head.safetensors,
// selector.json {variant, pool, k, prompt_max_length, max_length} and attune_model.json
// {"kind": "selector"} (loaded for inference by neural::Selector). Checkpoints and resume
// as ROPG's (train/ropg.h).
RspgResult train_rspg(const std::vector<RspgExample>& train, const std::vector<RspgExample>& dev, const RspgOptions& opts);

// Builds RSPG examples from the store's "retriever" feedback of `model_id` (one record per
// (example, pool spec), with the output): the prompts are rebuilt exactly as
// feedback::collect built them (k, prompt budget, quirks). Error naming the example and
// spec when a record is missing.
struct RspgDataOptions {
  std::vector<std::string> pool;
  std::size_t k = 4;
  std::size_t max_length = 256;
  bool reference_quirks = true;
  std::uint64_t seed = 0;
  std::size_t limit = 0;
  std::function<const retrieval::CandidateSource*(const std::string& spec)> source_for;
};
std::vector<RspgExample> rspg_examples(const data::Dataset& ds, const tasks::Task& task,
                                       const retrieval::CandidateSource& source, store::FeedbackLog& store,
                                       const std::string& model_id, const text::Tokenizer& tok,
                                       const RspgDataOptions& opts);

}  // namespace attune::train
