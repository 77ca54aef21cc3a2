// RSPG's selector network (training and inference) and its inference facade.
#include "attune/models/selector.h"

#include "attune/core/error.h"
#include "attune/models/runtime.h"
#include "attune/models/selector_net.h"
#include "attune/models/weights.h"

namespace attune::models {

torch::Tensor SelectorNet::forward(const std::vector<const batches::Tokens*>& rows) {
  return batches::by_length(rows, batches::kLengthGroup, device, [&](const std::vector<const batches::Tokens*>& g) {
    auto [ids, mask] = batches::pad_rows(g, pad, device);
    auto hidden = bert->forward(ids, torch::zeros_like(ids), mask);
    return head->forward(hidden.select(1, 0)).squeeze(1);
  });
}

std::vector<torch::Tensor> SelectorNet::parameters() {
  auto p = bert->parameters();
  for (auto& t : head->parameters()) p.push_back(t);
  return p;
}

SelectorNet SelectorNet::start(const std::filesystem::path& init, const torch::Device& device, std::uint64_t seed) {
  SelectorNet n;
  n.device = device;
  torch::manual_seed(seed);
  n.bert = load_bert(init, device).model;
  n.head = torch::nn::Linear(n.bert->cfg.hidden_size, 1);
  torch::NoGradGuard g;
  n.head->weight.normal_(0, 0.02);
  n.head->bias.zero_();
  return n;
}

SelectorNet SelectorNet::open(const std::filesystem::path& dir, const torch::Device& device, const char* head_file) {
  SelectorNet n;
  n.device = device;
  n.bert = load_bert(dir, device).model;
  n.bert->eval();
  n.head = torch::nn::Linear(n.bert->cfg.hidden_size, 1);
  {
    torch::NoGradGuard g;
    load_module(*n.head, WeightSet::open_file(dir / head_file));
  }
  n.head->to(device);
  n.head->eval();
  return n;
}

SelectorInput parse_selector_input(const std::string& s) {
  if (s == "prompt") return SelectorInput::Prompt;
  if (s == "query-first") return SelectorInput::QueryFirst;
  throw UsageError("unknown selector input \"" + s + "\" (expected query-first or prompt)");
}
std::string to_string(SelectorInput i) { return i == SelectorInput::QueryFirst ? "query-first" : "prompt"; }

std::vector<batches::Tokens> encode_selector_inputs(const text::SubwordTokenizer& tok, const std::vector<std::string>& queries,
                                                    const std::vector<std::string>& prompts,
                                                    const std::vector<std::string>& outputs, bool pairs,
                                                    SelectorInput input, std::size_t max_length) {
  if (pairs && outputs.size() != prompts.size())
    throw Error("an RSPG-Post selector needs one output per prompt (" + std::to_string(outputs.size()) + " for " +
                std::to_string(prompts.size()) + ")");
  if (input == SelectorInput::QueryFirst && queries.size() != prompts.size())
    throw Error("a query-first selector needs the input x of each prompt (" + std::to_string(queries.size()) + " for " +
                std::to_string(prompts.size()) + ")");
  if (!pairs && input == SelectorInput::Prompt) return batches::tokenize(tok, prompts, max_length);
  std::vector<std::pair<std::string, std::string>> texts;
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    if (input == SelectorInput::Prompt) texts.emplace_back(prompts[i], outputs[i]);
    else texts.emplace_back(queries[i], pairs ? outputs[i] + "\n" + prompts[i] : prompts[i]);
  }
  text::SubwordTokenizer::BatchOptions bo;
  bo.max_length = max_length;
  std::vector<batches::Tokens> out;
  for (std::size_t c0 = 0; c0 < texts.size(); c0 += 256) {
    const auto span = std::span<const std::pair<std::string, std::string>>(texts).subspan(c0, std::min<std::size_t>(256, texts.size() - c0));
    const auto b = tok.encode_batch(span, bo);
    for (std::size_t r = 0; r < b.rows; ++r) {
      batches::Tokens t;
      for (std::size_t j = 0; j < b.cols && b.mask[r * b.cols + j]; ++j) t.push_back(b.ids[r * b.cols + j]);
      out.push_back(std::move(t));
    }
  }
  return out;
}

struct SelectorModel::Impl {
  SelectorNet net;
  std::shared_ptr<const text::SubwordTokenizer> tok;
  bool pairs = false;
  SelectorInput input = SelectorInput::Prompt;
  std::size_t max_length = 512;
};

SelectorModel::SelectorModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SelectorModel::~SelectorModel() = default;

std::shared_ptr<const SelectorModel> SelectorModel::load(const std::filesystem::path& dir, const Device& device, bool pairs,
                                                         SelectorInput input, std::size_t max_length) {
  auto impl = std::make_unique<Impl>();
  impl->pairs = pairs;
  impl->input = input;
  impl->max_length = max_length;
  impl->net = SelectorNet::open(dir, to_torch(device), kSelectorHeadFile);
  impl->tok = text::SubwordTokenizer::load(dir);
  impl->net.pad = impl->tok->pad_id().value_or(0);
  return std::make_shared<const SelectorModel>(std::move(impl));
}

std::vector<float> SelectorModel::score(std::string_view query, std::span<const std::string> prompts,
                                        std::span<const std::string> outputs) const {
  torch::NoGradGuard ng;
  std::vector<std::string> p(prompts.begin(), prompts.end()), out(outputs.begin(), outputs.end());
  if (impl_->pairs && out.size() != p.size()) throw Error("an RSPG-Post selector needs one output per prompt");
  const std::vector<std::string> q(p.size(), std::string(query));
  auto rows = encode_selector_inputs(*impl_->tok, q, p, out, impl_->pairs, impl_->input, impl_->max_length);
  std::vector<const batches::Tokens*> ptrs;
  for (auto& r : rows) ptrs.push_back(&r);
  auto s = const_cast<SelectorNet&>(impl_->net).forward(ptrs).to(torch::kCPU, torch::kFloat32).contiguous();
  return std::vector<float>(s.data_ptr<float>(), s.data_ptr<float>() + s.numel());
}

}  // namespace attune::models
