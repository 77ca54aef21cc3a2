#include "attune/models/encoder.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <numeric>

#include "attune/core/error.h"
#include "attune/models/bert.h"
#include "attune/models/bert_native.h"
#include "attune/models/runtime.h"
#include "attune/models/weights.h"
#include "attune/text/subword.h"

namespace attune::models {

namespace fs = std::filesystem;
using text::SubwordTokenizer;

// A named namespace, not an anonymous one: TextEncoder::Impl and CrossEncoder::Impl derive
// from Common, and in a unity build (ATTUNE_UNITY_BUILD) g++ warns of a base with internal
// linkage in a file it includes.
namespace encoder_detail {

// Texts tokenized per chunk: bounds the padded id matrix of one encode_batch call.
constexpr std::size_t kChunk = 1024;

struct Common {
  fs::path dir;
  torch::Device device{torch::kCPU};
  std::shared_ptr<const SubwordTokenizer> tok;
  LoadedBert bert;  // released once the native path holds its copy (one copy of the weights in memory)
  BertConfig cfg;
  std::size_t max_length = 0, batch_size = 32;

  void init(const fs::path& d, const EncoderOptions& opts, bool classifier, std::size_t st_max) {
    if (opts.batch_size == 0) throw UsageError("encoder batch size must be positive");
    if (opts.max_length < 2) throw UsageError("encoder max_length must be at least 2");
    dir = d;
    device = to_torch(opts.device);
    bert = load_bert(d, device, classifier);
    cfg = bert.model->cfg;
    tok = SubwordTokenizer::load(d);
    max_length = std::min<std::size_t>(opts.max_length, static_cast<std::size_t>(bert.model->cfg.max_positions));
    if (st_max > 0) max_length = std::min(max_length, st_max);
    if (tok->model_max_length() > 0) max_length = std::min(max_length, tok->model_max_length());
    batch_size = opts.batch_size;
    if (tok->vocab_size() > static_cast<std::size_t>(bert.model->cfg.vocab_size))
      throw Error(d.string() + ": the tokenizer has " + std::to_string(tok->vocab_size()) + " ids but config.json vocab_size is " +
                  std::to_string(bert.model->cfg.vocab_size));
  }

  // The CPU inference path without torch operators (models/bert_native.h); null on CUDA
  // or when ATTUNE_ENCODER_KERNEL=torch asks for torch's operators (for A/B measurements).
  std::unique_ptr<const BertNative> native;

  void init_native() {
    if (native_encoder_kernel() && device.is_cpu()) native = std::make_unique<const BertNative>(bert_native_weights(bert.model));
  }

  // One length-sorted batch of an encoded chunk: `rows` are its chunk rows, ids/types/mask
  // [rows.size(), L] row-major.
  struct HostBatch {
    std::vector<std::size_t> rows;
    std::int64_t L = 1;
    std::vector<std::int64_t> ids, types, mask;
  };

  template <class Fn>
  void for_host_batches(const SubwordTokenizer::Batch& b, Fn&& fn) const {
    std::vector<std::size_t> len(b.rows), order(b.rows);
    for (std::size_t r = 0; r < b.rows; ++r)
      len[r] = static_cast<std::size_t>(std::count_if(b.mask.begin() + r * b.cols, b.mask.begin() + (r + 1) * b.cols, [](int m) { return m != 0; }));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) { return len[x] < len[y]; });
    for (std::size_t lo = 0; lo < b.rows; lo += batch_size) {
      const std::size_t hi = std::min(b.rows, lo + batch_size);
      HostBatch h;
      h.rows.assign(order.begin() + lo, order.begin() + hi);
      std::size_t L = 1;
      for (auto r : h.rows) L = std::max(L, len[r]);
      h.L = static_cast<std::int64_t>(L);
      const std::size_t n = h.rows.size();
      h.ids.assign(n * L, 0), h.types.assign(n * L, 0), h.mask.assign(n * L, 0);
      for (std::size_t i = 0; i < n; ++i)
        for (std::size_t j = 0; j < L; ++j) {
          const std::size_t at = h.rows[i] * b.cols + j;
          h.ids[i * L + j] = b.ids[at];
          h.types[i * L + j] = b.type_ids[at];
          h.mask[i * L + j] = b.mask[at];
        }
      fn(h);
    }
  }

  // Runs `fn(hidden, mask_tensor, rows)` over length-sorted batches with torch's operators.
  template <class Fn>
  void for_batches(const SubwordTokenizer::Batch& b, Fn&& fn) {
    for_host_batches(b, [&](HostBatch& h) {
      const auto n = static_cast<std::int64_t>(h.rows.size());
      auto ids = torch::from_blob(h.ids.data(), {n, h.L}, torch::kInt64).to(device);
      auto types = torch::from_blob(h.types.data(), {n, h.L}, torch::kInt64).to(device);
      auto mask = torch::from_blob(h.mask.data(), {n, h.L}, torch::kInt64).to(device);
      // from_blob on the CPU reads h's vectors in place; they outlive fn.
      auto hidden = bert.model->forward(ids, types, mask);
      fn(hidden, mask, h.rows);
    });
  }
};

}  // namespace encoder_detail
using namespace encoder_detail;

// ---------------------------------------------------------------- TextEncoder

struct TextEncoder::Impl : Common {
  Pooling pooling = Pooling::Mean;
  bool normalize = false;
};

TextEncoder::TextEncoder(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TextEncoder::~TextEncoder() = default;

std::shared_ptr<const TextEncoder> TextEncoder::load(const fs::path& dir, const EncoderOptions& opts) {
  auto impl = std::make_unique<Impl>();
  const PoolingSpec spec = read_pooling_spec(dir);
  const Pooling asked = parse_pooling(opts.pooling);
  impl->init(dir, opts, /*classifier=*/false, spec.max_seq_length);
  impl->init_native();
  if (impl->native) impl->bert = LoadedBert{};
  impl->pooling = asked == Pooling::Auto ? spec.pooling : asked;
  impl->normalize = opts.normalize < 0 ? spec.normalize : opts.normalize > 0;
  return std::make_shared<const TextEncoder>(std::move(impl));
}

std::size_t TextEncoder::dim() const { return static_cast<std::size_t>(impl_->cfg.hidden_size); }
std::string TextEncoder::id() const { return "dense:" + impl_->dir.string(); }

std::vector<float> TextEncoder::embed(std::span<const std::string> texts) const {
  const std::size_t D = dim();
  std::vector<float> out(texts.size() * D);
  torch::NoGradGuard no_grad;
  SubwordTokenizer::BatchOptions bo;
  bo.max_length = impl_->max_length;
  for (std::size_t c0 = 0; c0 < texts.size(); c0 += kChunk) {
    const auto chunk = texts.subspan(c0, std::min(kChunk, texts.size() - c0));
    const auto batch = impl_->tok->encode_batch(chunk, bo);
    if (impl_->native) {
      // torch_threads() also gives this thread torch's OpenMP thread count, which the
      // sgemm calls under BertNative follow.
      const std::size_t threads = torch_threads();
      const bool cls = impl_->pooling == Pooling::Cls;
      std::vector<float> hidden;
      impl_->for_host_batches(batch, [&](const Common::HostBatch& h) {
        const auto n = static_cast<std::int64_t>(h.rows.size());
        impl_->native->forward(h.ids.data(), h.types.data(), h.mask.data(), n, h.L, cls, hidden, threads);
        for (std::int64_t i = 0; i < n; ++i) {
          float* e = out.data() + (c0 + h.rows[static_cast<std::size_t>(i)]) * D;
          if (cls) {
            std::copy(hidden.begin() + i * static_cast<std::int64_t>(D), hidden.begin() + (i + 1) * static_cast<std::int64_t>(D), e);
          } else {
            // Mean over the sequence's tokens (pool_embeddings).
            double count = 0;
            std::fill(e, e + D, 0.0f);
            for (std::int64_t j = 0; j < h.L; ++j) {
              if (!h.mask[static_cast<std::size_t>(i * h.L + j)]) continue;
              count += 1;
              const float* v = hidden.data() + (i * h.L + j) * static_cast<std::int64_t>(D);
              for (std::size_t c = 0; c < D; ++c) e[c] += v[c];
            }
            const auto inv = static_cast<float>(1.0 / std::max(count, 1e-9));
            for (std::size_t c = 0; c < D; ++c) e[c] *= inv;
          }
          if (impl_->normalize) {  // sentence-transformers' Normalize
            double sq = 0;
            for (std::size_t c = 0; c < D; ++c) sq += static_cast<double>(e[c]) * e[c];
            const auto inv = static_cast<float>(1.0 / std::max(std::sqrt(sq), 1e-12));
            for (std::size_t c = 0; c < D; ++c) e[c] *= inv;
          }
        }
      });
      continue;
    }
    impl_->for_batches(batch, [&](const torch::Tensor& hidden, const torch::Tensor& mask, const std::vector<std::size_t>& rows) {
      auto e = pool_embeddings(hidden, mask, impl_->pooling, impl_->normalize).to(torch::kCPU, torch::kFloat32).contiguous();
      const float* p = e.data_ptr<float>();
      for (std::size_t i = 0; i < rows.size(); ++i) std::copy(p + i * D, p + (i + 1) * D, out.begin() + (c0 + rows[i]) * D);
    });
  }
  return out;
}

// ---------------------------------------------------------------- CrossEncoder

struct CrossEncoder::Impl : Common {
  std::vector<float> classifier_w, classifier_b;  // the native path's copy of classifier.{weight,bias}
};

CrossEncoder::CrossEncoder(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CrossEncoder::~CrossEncoder() = default;

std::shared_ptr<const CrossEncoder> CrossEncoder::load(const fs::path& dir, const EncoderOptions& opts) {
  auto impl = std::make_unique<Impl>();
  impl->init(dir, opts, /*classifier=*/true, read_pooling_spec(dir).max_seq_length);
  impl->init_native();
  if (impl->native) {
    auto cw = impl->bert.classifier->weight.detach().to(torch::kCPU, torch::kFloat32).contiguous();
    auto cb = impl->bert.classifier->bias.detach().to(torch::kCPU, torch::kFloat32).contiguous();
    impl->classifier_w.assign(cw.data_ptr<float>(), cw.data_ptr<float>() + cw.numel());
    impl->classifier_b.assign(cb.data_ptr<float>(), cb.data_ptr<float>() + cb.numel());
    impl->bert = LoadedBert{};
  }
  return std::make_shared<const CrossEncoder>(std::move(impl));
}

std::string CrossEncoder::id() const { return "cross:" + impl_->dir.string(); }

std::vector<float> CrossEncoder::score(std::string_view query, std::span<const std::string> docs) const {
  std::vector<float> out(docs.size());
  torch::NoGradGuard no_grad;
  SubwordTokenizer::BatchOptions bo;
  bo.max_length = impl_->max_length;
  for (std::size_t c0 = 0; c0 < docs.size(); c0 += kChunk) {
    std::vector<std::pair<std::string, std::string>> pairs;
    for (std::size_t i = c0; i < std::min(docs.size(), c0 + kChunk); ++i) pairs.emplace_back(std::string(query), docs[i]);
    const auto batch = impl_->tok->encode_batch(std::span<const std::pair<std::string, std::string>>(pairs), bo);
    if (impl_->native) {
      const std::size_t threads = torch_threads();  // also sets this thread's OpenMP count (TextEncoder::embed)
      const auto& w = impl_->classifier_w;
      const auto& bias = impl_->classifier_b;
      const auto labels = static_cast<std::int64_t>(bias.size());
      const std::int64_t H = impl_->cfg.hidden_size;
      std::vector<float> first, pooled;
      impl_->for_host_batches(batch, [&](const Common::HostBatch& h) {
        const auto n = static_cast<std::int64_t>(h.rows.size());
        impl_->native->forward(h.ids.data(), h.types.data(), h.mask.data(), n, h.L, /*first_only=*/true, first, threads);
        impl_->native->pool(first.data(), n, pooled);
        for (std::int64_t i = 0; i < n; ++i) {
          // logits = classifier(pooled); the score is the logit, or log p(last label).
          std::vector<double> logit(static_cast<std::size_t>(labels));
          for (std::int64_t c = 0; c < labels; ++c) {
            float z = bias[static_cast<std::size_t>(c)];
            for (std::int64_t j = 0; j < H; ++j) z += w[static_cast<std::size_t>(c * H + j)] * pooled[static_cast<std::size_t>(i * H + j)];
            logit[static_cast<std::size_t>(c)] = z;
          }
          double v = logit.back();
          if (labels > 1) {
            const double top = *std::max_element(logit.begin(), logit.end());
            double sum = 0;
            for (double z : logit) sum += std::exp(z - top);
            v = logit.back() - top - std::log(sum);
          }
          out[c0 + h.rows[static_cast<std::size_t>(i)]] = static_cast<float>(v);
        }
      });
      continue;
    }
    impl_->for_batches(batch, [&](const torch::Tensor& hidden, const torch::Tensor&, const std::vector<std::size_t>& rows) {
      auto logits = impl_->bert.classifier->forward(impl_->bert.model->pool(hidden)).to(torch::kCPU, torch::kFloat32);
      auto s = logits.size(1) == 1 ? logits.select(1, 0) : torch::log_softmax(logits, 1).select(1, logits.size(1) - 1);
      s = s.contiguous();
      const float* p = s.data_ptr<float>();
      for (std::size_t i = 0; i < rows.size(); ++i) out[c0 + rows[i]] = p[i];
    });
  }
  return out;
}

}  // namespace attune::models
