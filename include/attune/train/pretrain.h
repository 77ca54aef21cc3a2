#pragma once
// `attune pretrain-encoder`: Contriever-style contrastive pretraining of a small BERT
// encoder from scratch (train/contrastive.h has the objective). Torch-free header.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "attune/train/fit_options.h"

namespace attune::train {

struct PretrainOptions {
  std::filesystem::path tokenizer;  // a tokenizer folder (vocab.txt / tokenizer.json); copied into out
  // Encoder shape (BERT; MiniLM-like but small for 2-core CPUs).
  std::size_t hidden = 256, layers = 4, heads = 4, intermediate = 0;  // intermediate 0 = 4 * hidden
  std::size_t max_length = 128;     // tokens per crop, [CLS] and [SEP] included
  std::size_t steps = 300;          // optimiser steps (one epoch of the loop)
  double weight_decay = 0.01;       // AdamW, not on biases and LayerNorm weights
  double temperature = 0.05;        // InfoNCE tau
  bool normalize = true;            // cosine similarity (L2-normalised embeddings); saved as a Normalize module
  double ratio_min = 0.1, ratio_max = 0.5;  // crop length ratio (Contriever's defaults)
  // The loop: fit.batch_size texts per step, each giving two crops (B positives, B(B-1)
  // negatives; never split into micro-batches); AdamW peak lr 1e-4; fit.warmup_steps linear
  // warmup steps (unset or 0 = 10% of steps), then linear decay to 0; clip 1; a checkpoint
  // every 100 steps. fit.seed seeds the init (torch::manual_seed) and each step's batch and
  // crops (Rng(seed, step)). epochs, micro_batch and warmup (the fraction) are not used.
  FitOptions fit = [] {
    FitOptions f;
    f.epochs = 1, f.batch_size = 32, f.micro_batch = 32, f.lr = 1e-4, f.checkpoint_every = 100;
    return f;
  }();

  // FieldError<UsageError> naming the field and its value.
  void validate() const;
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
// when fit.out already holds a run and fit.resume is off, or when it is on and there is no
// checkpoint (a checkpoint killed mid-swap is swapped in first).
void prepare_pretrain_out(const PretrainOptions& opts);

}  // namespace attune::train
