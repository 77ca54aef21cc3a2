// IUM's reranker network (training and inference) and its inference facade.
#include "attune/models/ium.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "attune/core/error.h"
#include "attune/models/bert_native.h"
#include "attune/models/config.h"
#include "attune/models/ium_net.h"
#include "attune/models/runtime.h"
#include "attune/models/weights.h"

namespace attune::models {

namespace {
constexpr std::size_t kModelTokenBase = 500;

std::int64_t reserved(const text::SubwordTokenizer& tok, std::size_t n) {
  const std::string name = "[unused" + std::to_string(n) + "]";
  const auto id = tok.token_to_id(name);
  if (!id)
    throw Error("IUM: the encoder's vocabulary has no " + name +
                " token; the agent tokens use BERT's reserved [unusedN] tokens (start from an encoder with a BERT "
                "vocabulary, e.g. pretrain-encoder --tokenizer bert-base-uncased-vocab)");
  return *id;
}
}  // namespace

AgentTokens AgentTokens::make(const text::SubwordTokenizer& tok, std::vector<std::string> tasks, std::vector<std::string> models) {
  AgentTokens a;
  const auto unk = tok.unk_id();
  if (!unk) throw Error("IUM: the encoder's tokenizer has no unknown token, which unseen agents read");
  a.unk = *unk;
  if (tasks.size() > kModelTokenBase || models.size() > 400)
    throw UsageError("IUM: at most 500 tasks and 400 language models (" + std::to_string(tasks.size()) + " and " +
                     std::to_string(models.size()) + " given)");
  for (std::size_t i = 0; i < tasks.size(); ++i) a.task_ids.push_back(reserved(tok, i));
  for (std::size_t j = 0; j < models.size(); ++j) a.model_ids.push_back(reserved(tok, kModelTokenBase + j));
  a.tasks = std::move(tasks);
  a.models = std::move(models);
  return a;
}

std::int64_t AgentTokens::task(std::string_view t) const {
  const auto it = std::find(tasks.begin(), tasks.end(), t);
  return it == tasks.end() ? unk : task_ids[static_cast<std::size_t>(it - tasks.begin())];
}
std::int64_t AgentTokens::model(std::string_view m) const {
  const auto it = std::find(models.begin(), models.end(), m);
  return it == models.end() ? unk : model_ids[static_cast<std::size_t>(it - models.begin())];
}

std::vector<batches::Tokens> encode_ium_inputs(const text::SubwordTokenizer& tok, const std::vector<std::int64_t>& tids,
                                               const std::vector<std::int64_t>& mids,
                                               const std::vector<std::pair<std::string, std::string>>& pairs,
                                               std::size_t max_length) {
  if (tids.size() != pairs.size() || mids.size() != pairs.size()) throw Error("IUM: one task and one model token per pair");
  if (max_length < 5) throw FieldError<UsageError>("max_length", "max_length = " + std::to_string(max_length) + ": IUM needs at least 5 tokens");
  text::SubwordTokenizer::BatchOptions bo;
  bo.max_length = max_length - 2;  // room for tid and mid
  std::vector<batches::Tokens> out;
  out.reserve(pairs.size());
  for (std::size_t c0 = 0; c0 < pairs.size(); c0 += 256) {
    const auto n = std::min<std::size_t>(256, pairs.size() - c0);
    const auto b = tok.encode_batch(std::span<const std::pair<std::string, std::string>>(pairs).subspan(c0, n), bo);
    for (std::size_t r = 0; r < b.rows; ++r) {
      batches::Tokens t;
      for (std::size_t j = 0; j < b.cols && b.mask[r * b.cols + j]; ++j) {
        t.push_back(b.ids[r * b.cols + j]);
        if (j == 0) {  // after [CLS]
          t.push_back(tids[c0 + r]);
          t.push_back(mids[c0 + r]);
        }
      }
      out.push_back(std::move(t));
    }
  }
  return out;
}

struct IumModel::Impl {
  IumNet net;
  std::shared_ptr<const text::SubwordTokenizer> tok;
  AgentTokens agents;
  std::size_t max_length = 256;
  std::string dir;
  std::optional<double> prior_weight;  // ium.json "initial_prior": the weight of the first stage's z
  // The CPU inference path without torch operators (models/bert_native.h), as the dense: and
  // cross: encoders take; null on CUDA or with ATTUNE_ENCODER_KERNEL=torch. The head's
  // weights copied for it.
  std::unique_ptr<const BertNative> native;
  std::vector<float> head_w;
  float head_b = 0;
  static constexpr std::size_t kNativeBatch = 32;

  std::vector<float> native_logits(const std::vector<batches::Tokens>& rows) const;
};

// The final-layer [CLS] state of each row through the head, over length-sorted batches.
std::vector<float> IumModel::Impl::native_logits(const std::vector<batches::Tokens>& rows) const {
  std::vector<std::size_t> order(rows.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return rows[a].size() < rows[b].size(); });
  std::vector<float> out(rows.size()), first;
  const auto H = static_cast<std::size_t>(head_w.size());
  const std::size_t threads = torch_threads();  // also sets this thread's OpenMP count for the sgemm calls
  std::vector<std::int64_t> ids, types, mask;
  for (std::size_t lo = 0; lo < order.size(); lo += kNativeBatch) {
    const std::size_t n = std::min(kNativeBatch, order.size() - lo);
    std::size_t L = 1;
    for (std::size_t i = 0; i < n; ++i) L = std::max(L, rows[order[lo + i]].size());
    ids.assign(n * L, net.pad), types.assign(n * L, 0), mask.assign(n * L, 0);
    for (std::size_t i = 0; i < n; ++i) {
      const auto& r = rows[order[lo + i]];
      std::copy(r.begin(), r.end(), ids.begin() + static_cast<std::ptrdiff_t>(i * L));
      std::fill_n(mask.begin() + static_cast<std::ptrdiff_t>(i * L), r.size(), 1);
    }
    native->forward(ids.data(), types.data(), mask.data(), static_cast<std::int64_t>(n), static_cast<std::int64_t>(L),
                    /*first_only=*/true, first, threads);
    for (std::size_t i = 0; i < n; ++i) {
      float z = head_b;
      for (std::size_t j = 0; j < H; ++j) z += head_w[j] * first[i * H + j];
      out[order[lo + i]] = z;
    }
  }
  return out;
}

IumModel::IumModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
IumModel::~IumModel() = default;

std::shared_ptr<const IumModel> IumModel::load(const std::filesystem::path& dir, const Device& device) {
  const auto file = dir / kIumConfigFile;
  if (!std::filesystem::exists(file)) throw Error(file.string() + ": no such file (not an IUM model folder)");
  auto impl = std::make_unique<Impl>();
  impl->dir = dir.string();
  std::vector<std::string> tasks, models;
  try {
    const auto j = read_json_file(file);
    tasks = j.at("tasks").get<std::vector<std::string>>();
    models = j.at("models").get<std::vector<std::string>>();
    impl->max_length = j.at("max_length").get<std::size_t>();
    if (j.contains("initial_prior")) {
      impl->prior_weight = j["initial_prior"].at("weight").get<double>();
      if (!std::isfinite(*impl->prior_weight)) throw Error(file.string() + ": initial_prior.weight is not a finite number");
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error(file.string() + ": " + e.what());
  }
  impl->net = SelectorNet::open(dir, to_torch(device), kIumHeadFile);
  impl->tok = text::SubwordTokenizer::load(dir);
  impl->net.pad = impl->tok->pad_id().value_or(0);
  impl->agents = AgentTokens::make(*impl->tok, std::move(tasks), std::move(models));
  if (native_encoder_kernel() && impl->net.device.is_cpu()) {
    impl->native = std::make_unique<const BertNative>(bert_native_weights(impl->net.bert));
    auto w = impl->net.head->weight.detach().to(torch::kCPU, torch::kFloat32).contiguous();
    impl->head_w.assign(w.data_ptr<float>(), w.data_ptr<float>() + w.numel());
    impl->head_b = impl->net.head->bias.detach().to(torch::kCPU, torch::kFloat32).item<float>();
  }
  return std::make_shared<const IumModel>(std::move(impl));
}

std::vector<float> IumModel::score(std::string_view task, std::string_view model, std::string_view query,
                                   std::span<const std::string> docs) const {
  auto v = logits(task, model, query, docs);
  if (v.empty()) return v;
  const auto p = torch::sigmoid(torch::tensor(v, torch::kFloat32)).contiguous();
  return std::vector<float>(p.data_ptr<float>(), p.data_ptr<float>() + p.numel());
}

std::optional<double> IumModel::initial_prior_weight() const { return impl_->prior_weight; }

std::vector<float> IumModel::logits(std::string_view task, std::string_view model, std::string_view query,
                                    std::span<const std::string> docs) const {
  if (docs.empty()) return {};
  torch::NoGradGuard ng;
  std::vector<std::pair<std::string, std::string>> pairs;
  for (const auto& d : docs) pairs.emplace_back(std::string(query), d);
  const std::vector<std::int64_t> tids(pairs.size(), impl_->agents.task(task)), mids(pairs.size(), impl_->agents.model(model));
  const auto rows = encode_ium_inputs(*impl_->tok, tids, mids, pairs, impl_->max_length);
  if (impl_->native) return impl_->native_logits(rows);
  std::vector<const batches::Tokens*> ptrs;
  for (const auto& r : rows) ptrs.push_back(&r);
  auto p = const_cast<IumNet&>(impl_->net).forward(ptrs).to(torch::kCPU, torch::kFloat32).contiguous();
  return std::vector<float>(p.data_ptr<float>(), p.data_ptr<float>() + p.numel());
}

const std::vector<std::string>& IumModel::tasks() const { return impl_->agents.tasks; }
const std::vector<std::string>& IumModel::models() const { return impl_->agents.models; }
std::string IumModel::id() const { return "ium:" + impl_->dir; }

}  // namespace attune::models
