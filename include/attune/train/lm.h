#pragma once
// Language-model pretraining from scratch (issue 15, stage 1): a Llama-architecture decoder
// (models/llama.h: RoPE, RMSNorm, SwiGLU, tied embeddings) trained on the next token of
// texts packed into fixed-length sequences. The output is a Hugging Face folder
// (config.json, model.safetensors, generation_config.json and the tokenizer's files) that
// `local:DIR` loads. Torch-free header.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "attune/train/fit_options.h"

namespace attune::train {

struct LmOptions {
  std::filesystem::path tokenizer;  // a tokenizer folder (attune train-tokenizer) with BOS and EOS
  // A language-model folder to start from (train_reader: required; its architecture and
  // tokenizer replace the fields below and `tokenizer`). Empty: random initialisation.
  std::filesystem::path init;
  // The decoder: ~5.3M parameters with an 8k vocabulary (embeddings tied to the output).
  std::size_t hidden = 256, layers = 4, heads = 4, kv_heads = 4, intermediate = 688;
  std::size_t max_positions = 512;  // the model's context (config.json max_position_embeddings)
  std::size_t seq_len = 256;        // tokens per training sequence (<= max_positions)
  double rope_theta = 10000.0;
  double weight_decay = 0.1;        // AdamW, on matrices only
  // Held out for dev loss (and the kept epoch): every text whose hash falls in this share.
  double dev_fraction = 0.01;
  // "auto" (bf16 autocast on CUDA, float32 on CPU), "fp32" or "bf16" (CUDA only): the
  // forward passes' matrix products; weights, gradients and AdamW's state stay float32.
  std::string precision = "auto";
  // train_reader: 0 = each epoch's batches straight from its seeded order; N = that order
  // cut into runs of N batches, each run sorted by length and cut into batches again, whose
  // order within the run is shuffled (seeded): batches of like length, less padding. Pretraining's
  // packed sequences are all one length, so it is refused there.
  std::size_t length_window = 0;
  // train_reader: each target token of an example's head (ReaderExample::head_chars, e.g.
  // commit_subject's area) counts this many times in the training loss; dev loss stays the
  // plain mean over answer tokens. 1 = off; pretraining refuses any other value.
  std::size_t head_weight = 1;
  // train_reader: the answer prefix its examples' targets were built with
  // (ReaderDataOptions::answer_prefix), written to the folder's attune_reader.json: a newline
  // then at most 8 characters, none of them a control character. Pretraining refuses another.
  std::string answer_prefix = "\n";
  // Pretraining: this share of the training texts (a seeded draw per text) is put in the
  // stream twice in a row (BOS t EOS BOS t EOS), so that predicting the second copy rewards
  // looking back at the first: in-context copying (induction heads). Dev texts are never
  // repeated, so dev loss compares with a run without it. 0 = off; the reader stage refuses another.
  double repeat_share = 0;
  // The loop (train::fit): 1 epoch over the packed sequences, 16 sequences a step in
  // one micro-batch (4,096 tokens a matmul: 8% more tokens/s than 4 micro-batches of 4 on
  // 2 cores, the same weights up to float rounding), AdamW lr 1e-3, 2% warmup then linear decay, clip 1.
  FitOptions fit = [] {
    FitOptions f;
    f.epochs = 1;
    f.batch_size = 16;
    f.micro_batch = 16;
    f.lr = 1e-3;
    f.warmup = 0.02;
    f.checkpoint_every = 100;
    return f;
  }();

  // FieldError<UsageError> naming the field.
  void validate() const;
};

struct LmResult {
  std::size_t steps_done = 0, total_steps = 0;
  std::size_t train_sequences = 0, dev_sequences = 0, train_tokens = 0;
  double init_dev_loss = 0, dev_loss = 0;  // mean next-token cross-entropy (nats) on dev: start, kept
  std::size_t best_epoch = 0;
  std::vector<double> losses;              // per step of this process
  double seconds = 0, tokens_per_second = 0;
  std::size_t parameters = 0;
  std::string device, precision;           // where it ran: "cpu" / "cuda:0", "fp32" / "bf16"
  std::size_t too_long = 0;                // train_reader: examples left out, longer than the context
  // train_reader: of the first epoch's token positions (each micro-batch padded to its
  // longest row), the share that is padding, which the forward and backward pay for too.
  double padding_share = 0;
  // train_reader: target tokens in the training examples' heads (ReaderExample::head_chars), and
  // examples whose head ends inside a token, left unweighted.
  std::size_t head_tokens = 0, heads_lost = 0;
};

// Trains on `texts` (each becomes BOS + its tokens + EOS; all of them concatenated and cut
// into seq_len + 1 token sequences, the last partial one dropped) and writes fit.out.
// Checkpoints and resume as every learner (train/fit_options.h). UsageError for bad
// options; Error when the texts give no training sequence.
// The checks train_lm's output folder gets (UsageError: it holds a run and resume is off,
// or resume is on without a checkpoint), for callers to run before reading their texts.
void prepare_lm_out(const LmOptions& o);

LmResult train_lm(const std::vector<std::string>& texts, const LmOptions& o);

// An order of records that puts related ones next to each other, so that a packed training
// sequence holds several of them, as a reader's prompt holds a user's retrieved records
// (in-context pretraining: train-lm --group-by). Records with the same key form a group;
// groups come in the order of their first record. Within a group the order is a chain of
// nearest neighbours: it starts at the group's first record, and each next record is the
// unused one with the highest BM25 score (rank_bm25's Okapi, over the group's texts) for the
// current record's text as the query; ties, and records sharing no word, go to the earliest.
// Deterministic; returns a permutation of 0 .. keys.size() - 1. Error if the sizes differ.
std::vector<std::size_t> related_order(const std::vector<std::string>& keys, const std::vector<std::string>& texts);

// Stage 2: fine-tunes the language model in o.init as a reader on retrieval-augmented
// examples (train/reader.h): each is BOS + prompt + target + EOS, the loss on the target's
// tokens and EOS only. Examples longer than the model's context are left out (counted in
// the result); dev examples by a hash of their id (o.dev_fraction). The output folder is a
// language-model folder like train_lm's.
struct ReaderExample;
LmResult train_reader(const std::vector<ReaderExample>& examples, const LmOptions& o);

}  // namespace attune::train
