#pragma once
// RSPG's selector network (000 §5), for training and inference: a BERT-family encoder
// whose final-layer first-token vector goes through a linear layer to one score. Includes
// torch; inference code uses models/selector.h.
#include <torch/torch.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "attune/models/bert.h"
#include "attune/models/selector.h"
#include "attune/models/token_batches.h"
#include "attune/text/subword.h"

namespace attune::models {

// The head's file beside the encoder's weights in a selector folder.
inline constexpr const char* kSelectorHeadFile = "selector_head.safetensors";

struct SelectorNet {
  BertModel bert{nullptr};
  torch::nn::Linear head{nullptr};
  std::int64_t pad = 0;
  torch::Device device{torch::kCPU};

  // One score per row ([n]); rows are padded to the longest.
  torch::Tensor forward(const std::vector<const batches::Tokens*>& rows);
  // The encoder's parameters, then the head's.
  std::vector<torch::Tensor> parameters();
  // A network to train: the encoder of `init` on `device` and a fresh head (weights
  // N(0, 0.02), bias 0, drawn after torch::manual_seed(seed)); pad is left at 0. The head
  // is on the CPU until the caller moves it (after loading weights into it, if any).
  static SelectorNet start(const std::filesystem::path& init, const torch::Device& device, std::uint64_t seed);
  // A trained network for inference: the encoder of `dir` and the head in `dir / head_file`,
  // both on `device`, in eval mode; pad is left at 0 (the caller's tokenizer knows it).
  static SelectorNet open(const std::filesystem::path& dir, const torch::Device& device, const char* head_file);
};

// The selector's input rows (at most max_length tokens each): `queries` one per row (x of
// the row's example; QueryFirst only), `outputs` one per row for Post (`pairs`).
std::vector<batches::Tokens> encode_selector_inputs(const text::SubwordTokenizer& tok, const std::vector<std::string>& queries,
                                                    const std::vector<std::string>& prompts,
                                                    const std::vector<std::string>& outputs, bool pairs,
                                                    SelectorInput input, std::size_t max_length);

}  // namespace attune::models
