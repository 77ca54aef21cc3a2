#pragma once
// Token batches for training and scoring BERT-family models: tokenise texts once, pad rows
// per batch. Includes torch.
#include <torch/torch.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "attune/text/subword.h"

namespace attune::models::batches {

using Tokens = std::vector<std::int64_t>;

// Each text's ids with [CLS]/[SEP], truncated to max_length (specials included).
inline std::vector<Tokens> tokenize(const text::SubwordTokenizer& tok, const std::vector<std::string>& texts,
                                    std::size_t max_length) {
  text::SubwordTokenizer::BatchOptions bo;
  bo.max_length = max_length;
  std::vector<Tokens> out;
  out.reserve(texts.size());
  constexpr std::size_t kChunk = 512;
  for (std::size_t c0 = 0; c0 < texts.size(); c0 += kChunk) {
    const auto span = std::span<const std::string>(texts).subspan(c0, std::min(kChunk, texts.size() - c0));
    const auto b = tok.encode_batch(span, bo);
    for (std::size_t r = 0; r < b.rows; ++r) {
      Tokens t;
      for (std::size_t j = 0; j < b.cols && b.mask[r * b.cols + j]; ++j) t.push_back(b.ids[r * b.cols + j]);
      out.push_back(std::move(t));
    }
  }
  return out;
}

// ids, mask [n, L] (L = the longest row) on `dev`; padding id `pad`, mask 0.
inline std::pair<torch::Tensor, torch::Tensor> pad_rows(const std::vector<const Tokens*>& rows, std::int64_t pad,
                                                        const torch::Device& dev) {
  std::size_t L = 1;
  for (auto* r : rows) L = std::max(L, r->size());
  auto ids = torch::full({static_cast<std::int64_t>(rows.size()), static_cast<std::int64_t>(L)}, pad, torch::kInt64);
  auto mask = torch::zeros_like(ids);
  auto ia = ids.accessor<std::int64_t, 2>(), ma = mask.accessor<std::int64_t, 2>();
  for (std::size_t i = 0; i < rows.size(); ++i)
    for (std::size_t j = 0; j < rows[i]->size(); ++j) {
      ia[static_cast<std::int64_t>(i)][static_cast<std::int64_t>(j)] = (*rows[i])[j];
      ma[static_cast<std::int64_t>(i)][static_cast<std::int64_t>(j)] = 1;
    }
  return {ids.to(dev), mask.to(dev)};
}

// fn(group) -> a tensor whose dim 0 has a row per row of the group, over `rows` sorted by
// length in groups of at most `group` rows, each of which pad_rows pads only to its own
// longest row; the results concatenated back in the rows' order. A batch of texts ranges
// from a subject line to the length cap, and padding every row to the longest one does
// several times the work (attention's, more still); padding is masked, so a row's result
// does not depend on its group. Gradients flow through.
template <class Fn>
torch::Tensor by_length(const std::vector<const Tokens*>& rows, std::size_t group, const torch::Device& dev, Fn&& fn) {
  group = std::max<std::size_t>(group, 1);
  if (rows.size() <= group) return fn(rows);
  std::vector<std::size_t> order(rows.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return rows[a]->size() < rows[b]->size(); });
  std::vector<torch::Tensor> parts;
  for (std::size_t lo = 0; lo < order.size(); lo += group) {
    std::vector<const Tokens*> g;
    for (std::size_t i = lo; i < std::min(order.size(), lo + group); ++i) g.push_back(rows[order[i]]);
    parts.push_back(fn(g));
  }
  std::vector<std::int64_t> at(rows.size());  // row i's place in the sorted order
  for (std::size_t i = 0; i < order.size(); ++i) at[order[i]] = static_cast<std::int64_t>(i);
  return torch::cat(parts, 0).index_select(0, torch::tensor(at, torch::kInt64).to(dev));
}

// Rows per length group (by_length) for training and scoring batches: a few groups a
// training step, each large enough that torch's per-operator cost stays small.
inline constexpr std::size_t kLengthGroup = 64;

// The longest input a model folder accepts: its positions, sentence-transformers'
// max_seq_length and the tokenizer's model_max_length, whichever is smallest (0 = unset).
inline std::size_t length_cap(std::int64_t max_positions, std::size_t st_max, std::size_t tok_max) {
  std::size_t cap = static_cast<std::size_t>(max_positions);
  if (st_max > 0) cap = std::min(cap, st_max);
  if (tok_max > 0) cap = std::min(cap, tok_max);
  return cap;
}

}  // namespace attune::models::batches
