#pragma once
// `attune pretrain-encoder`: Contriever-style contrastive pretraining of a small BERT
// encoder from scratch (train/contrastive.h has the objective). Torch-free header.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace attune::train {

struct PretrainOptions {
  std::filesystem::path out;        // the model folder written (and the checkpoint kept in it)
  std::filesystem::path tokenizer;  // a tokenizer folder (vocab.txt / tokenizer.json); copied into out
  // Encoder shape (BERT; MiniLM-like but small for 2-core CPUs).
  std::size_t hidden = 256, layers = 4, heads = 4, intermediate = 0;  // intermediate 0 = 4 * hidden
  std::size_t max_length = 128;     // tokens per crop, [CLS] and [SEP] included
  // Optimisation.
  std::size_t steps = 300;
  std::size_t batch_size = 32;      // texts per step; each gives two crops (B positives, B(B-1) negatives)
  double lr = 1e-4;                 // AdamW peak learning rate
  double weight_decay = 0.01;
  std::size_t warmup = 0;           // linear warmup steps (0 = 10% of steps), then linear decay to 0
  double temperature = 0.05;        // InfoNCE tau
  bool normalize = true;            // cosine similarity (L2-normalised embeddings); saved as a Normalize module
  double ratio_min = 0.1, ratio_max = 0.5;  // crop length ratio (Contriever's defaults)
  std::uint64_t seed = 0;           // torch::manual_seed for the init; crops/batches from Rng(seed, step)
  std::string device = "cpu";       // cpu | cuda | auto
  std::size_t checkpoint_every = 100;  // steps between checkpoints (0 = only at the end)
  bool resume = false;              // continue from out/checkpoint (UsageError when absent)
  bool quiet = false;               // no progress lines on stderr
  std::size_t log_every = 10;       // steps between loss lines
  std::string data_description;     // recorded in attune_train.json (e.g. the data dir and task)
  std::size_t stop_after = 0;       // testing: return after this many steps of this run (0 = run to the end)
};

struct PretrainResult {
  std::size_t steps_done = 0;       // total steps (including resumed ones)
  std::size_t texts = 0;            // texts kept (those with at least 2 * min crop tokens)
  double first_loss = 0, last_loss = 0;  // mean loss over the first / last log_every steps of this run
  std::vector<double> losses;       // per step of this run
  double seconds = 0;
};

// Tokenizes `texts` once, trains, writes out/ as a Hugging Face + sentence-transformers
// folder (models/bert.h save_bert) with attune_train.json {seed, data, steps, loss, ...},
// and checkpoints into out/checkpoint/ (model + optimizer.pt + state.json) every
// checkpoint_every steps. With `resume` the run continues from that checkpoint and ends
// with the same weights as an uninterrupted run with the same options. UsageError for bad
// options or an out folder that already holds a run (without resume); Error for too few
// usable texts.
PretrainResult pretrain_encoder(const std::vector<std::string>& texts, const PretrainOptions& opts);

// The checks pretrain_encoder starts with, callable before the texts are read: UsageError
// when `out` already holds a run and `resume` is off, or when `resume` is on and there is
// no checkpoint (a checkpoint killed mid-swap is swapped in first).
void prepare_pretrain_out(const PretrainOptions& opts);

}  // namespace attune::train
