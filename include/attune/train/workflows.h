#pragma once
// The methods end to end, callable by the CLI and the server alike: feedback from the
// language model (collected, or read from the store's cache), the method's examples, the
// training run, and for Pearl the dev calibration. Torch-free.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "attune/data/dataset.h"
#include "attune/feedback/collect.h"
#include "attune/llm/language_model.h"
#include "attune/retrieval/candidates.h"
#include "attune/store/store.h"
#include "attune/tasks/task.h"
#include "attune/text/tokenizer.h"
#include "attune/train/pearl.h"
#include "attune/train/purple.h"
#include "attune/train/ropg.h"
#include "attune/train/rspg.h"

namespace attune::train {

// One split a workflow reads: its examples and where each retriever's candidates come from.
struct SplitSource {
  const data::Dataset* dataset = nullptr;            // null: no such split (e.g. no dev set)
  const retrieval::CandidateSource* base = nullptr;  // every spec that source_for does not name
  std::function<const retrieval::CandidateSource*(const std::string& spec)> source_for;  // may be empty
  std::size_t limit = 0;                             // the first N examples (0 = all)
};

// What a workflow runs against: the task, the frozen language model whose feedback is
// learned, the store that caches its calls and keeps the feedback, and the tokenizer the
// prompt budgets are counted in.
struct Bench {
  const tasks::Task& task;
  llm::LanguageModel& model;
  store::Store& store;
  const text::Tokenizer& tok;
  std::size_t threads = 0;  // worker threads for feedback (0 = all cores)
  bool progress = true;     // progress lines on stderr
  // How the model generates when feedback (and Pearl's dev) needs its outputs: eval's
  // --max-new-tokens, so a trainer learns from the outputs its evaluation will score.
  llm::GenerateOptions generate = {};
};

// ROPG: per-document feedback on the initial retriever's top-l of each query.
struct RopgWorkflow {
  std::string initial = "bm25";          // picks the top-l candidates (and d_b, ROPG-RL's baseline)
  std::size_t top_l = 16;                // candidates per query (000: 16)
  std::size_t feedback_max_length = 0;   // prompt budget of the feedback prompts (0 = 512)
  std::string data_label;                // recorded: "DATA TASK SPLIT" (the example count and model are added)
  RopgOptions options;                   // options.fit.seed seeds the feedback too
};
struct RopgRun {
  std::size_t train_examples = 0, dev_examples = 0;
  RopgResult result;
};
RopgRun run_ropg(const Bench& bench, const SplitSource& train, const SplitSource& dev, RopgWorkflow wf);

// RSPG: per-retriever feedback of the pool (options.pool, options.k, options.prompt_max_length).
struct RspgWorkflow {
  std::string data_label;
  RspgOptions options;
};
struct RspgRun {
  std::size_t train_examples = 0, dev_examples = 0;
  RspgResult result;
};
RspgRun run_rspg(const Bench& bench, const SplitSource& train, const SplitSource& dev, RspgWorkflow wf);

// Pearl: labels (Eq. 1) on train, training, then, when the run finished and there is a dev
// split, calibration and selective revision with the trained folder, recorded as "dev" in
// its attune_train.json.
struct PearlWorkflow {
  PearlLabelOptions labels;  // labels.seed and .threads/.progress/.limit/.source_for are set from the run
  std::size_t k = 4;         // documents in the writing prompt on dev (top-k by the cross-encoder)
  std::string data_label;
  PearlOptions options;
};
struct PearlRun {
  PearlLabelSummary labels;
  PearlResult result;
  std::optional<PearlDevResult> dev;
  nlohmann::json dev_json;  // what attune_train.json records as "dev" (null without dev)
};
PearlRun run_pearl(const Bench& bench, const SplitSource& train, const SplitSource& dev, PearlWorkflow wf);

// PURPLE: each example's top-l candidates of the initial retriever; the rewards log p(y |
// phi_p(x, P)) asked of the bench's model inside the training loop, through its cache in
// the store (a resumed or repeated run asks the model only for profiles it has not
// scored). `prompt_max_length` is the prompt budget (eval's --max-length).
struct PurpleWorkflow {
  std::string initial = "bm25";        // the first stage (the CLI's default: dense over --init)
  std::size_t top_l = 20;              // candidates per example (003: 20)
  std::size_t prompt_max_length = 256; // eval's default --max-length
  std::size_t batch = 64;              // score requests per model call
  std::string data_label;
  PurpleOptions options;
};
struct PurpleRun {
  std::size_t train_examples = 0, dev_examples = 0;
  std::size_t model_calls = 0, cache_hits = 0;  // score requests of this process
  PurpleResult result;
};
PurpleRun run_purple(const Bench& bench, const SplitSource& train, const SplitSource& dev, PurpleWorkflow wf);

// feedback::collect for a workflow: `co`'s kind-specific fields as given, the split's
// limit and sources, the run's seed, threads and progress; prints "train: KIND feedback on
// TASK SPLIT: ..." unless !bench.progress. Cached records cost no model call.
feedback::Summary collect_feedback(const Bench& bench, const SplitSource& split, feedback::CollectOptions co);

}  // namespace attune::train
