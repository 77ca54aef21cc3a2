#pragma once
// IUM's reranker network, for training and inference (models/ium.h has the facade): a
// BERT-family encoder whose final-layer [CLS] vector goes through a linear layer to one
// logit (models/selector_net.h's network), and its agent-token inputs. Includes torch.
#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "attune/models/bert.h"
#include "attune/models/ium.h"
#include "attune/models/selector_net.h"
#include "attune/models/token_batches.h"
#include "attune/text/subword.h"

namespace attune::models {


// The agent tokens of a folder: ids of "[unused<i>]" for tasks[i] and "[unused<500 + j>]"
// for models[j] in `tok`, and the unknown token's id for any other. Error naming the
// token when the vocabulary lacks one (an encoder without BERT's reserved tokens) or has
// no unknown token.
struct AgentTokens {
  std::vector<std::string> tasks, models;
  std::vector<std::int64_t> task_ids, model_ids;
  std::int64_t unk = 0;
  static AgentTokens make(const text::SubwordTokenizer& tok, std::vector<std::string> tasks, std::vector<std::string> models);
  std::int64_t task(std::string_view t) const;
  std::int64_t model(std::string_view m) const;
};

// [CLS] tid mid query [SEP] doc [SEP] for each (query, doc) pair, with its row's tid and
// mid (max_length tokens in all; query and doc truncated longest-first).
std::vector<batches::Tokens> encode_ium_inputs(const text::SubwordTokenizer& tok, const std::vector<std::int64_t>& tids,
                                               const std::vector<std::int64_t>& mids,
                                               const std::vector<std::pair<std::string, std::string>>& pairs,
                                               std::size_t max_length);

// The network is RSPG's selector network: a linear layer on the final [CLS] vector.
using IumNet = SelectorNet;

}  // namespace attune::models
