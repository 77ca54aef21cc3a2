#pragma once
// Contriever-style unsupervised contrastive learning (Izacard et al. 2021, "Unsupervised
// Dense Information Retrieval with Contrastive Learning"): the pieces as pure functions.
// Includes torch; the training loop's torch-free entry point is train/pretrain.h.
#include <torch/torch.h>

#include <cstddef>
#include <cstdint>

#include "attune/core/rng.h"

namespace attune::train {

// InfoNCE with in-batch negatives (Contriever Eq. 1): row i of q is positive with row i of
// k and negative with every other row. logits = q k^T / temperature;
// loss = mean_i CE(logits_i, i), and when `symmetric` the average of that and the same
// over logits^T (k -> q). q, k: [B, D]; returns a scalar.
torch::Tensor info_nce(const torch::Tensor& q, const torch::Tensor& k, double temperature, bool symmetric = true);

// A contiguous span [begin, end) of a text's tokens.
struct Crop {
  std::size_t begin = 0, end = 0;
  std::size_t size() const { return end - begin; }
};

struct CropOptions {
  double ratio_min = 0.1;        // crop length / text length, uniform in [ratio_min, ratio_max]
  double ratio_max = 0.5;        // (Contriever's defaults)
  std::size_t min_tokens = 4;    // at least this many tokens (or the whole text when shorter)
  std::size_t max_tokens = 0;    // at most this many (0 = no cap); e.g. max_length - 2 specials
};

// Contriever's RandomCrop: length = max(min_tokens, floor(n * ratio)), ratio ~ U[min, max],
// capped at n and max_tokens; start uniform over the valid positions. Always within
// [0, n]; empty only when n == 0. Deterministic given the Rng state.
Crop random_crop(std::size_t n, Rng& rng, const CropOptions& opts = {});

}  // namespace attune::train
