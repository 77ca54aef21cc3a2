#include "attune/models/encoder.h"

#include <algorithm>
#include <numeric>

#include "attune/core/error.h"
#include "attune/models/bert.h"
#include "attune/models/weights.h"
#include "attune/text/subword.h"

namespace attune::models {

namespace fs = std::filesystem;
using text::SubwordTokenizer;

namespace {

// Texts tokenized per chunk: bounds the padded id matrix of one encode_batch call.
constexpr std::size_t kChunk = 1024;

struct Common {
  fs::path dir;
  torch::Device device{torch::kCPU};
  std::shared_ptr<const SubwordTokenizer> tok;
  LoadedBert bert;
  std::size_t max_length = 0, batch_size = 32;

  void init(const fs::path& d, const EncoderOptions& opts, bool classifier, std::size_t st_max) {
    if (opts.batch_size == 0) throw UsageError("encoder batch size must be positive");
    if (opts.max_length < 2) throw UsageError("encoder max_length must be at least 2");
    dir = d;
    device = to_torch(opts.device);
    bert = load_bert(d, device, classifier);
    tok = SubwordTokenizer::load(d);
    max_length = std::min<std::size_t>(opts.max_length, static_cast<std::size_t>(bert.model->cfg.max_positions));
    if (st_max > 0) max_length = std::min(max_length, st_max);
    if (tok->model_max_length() > 0) max_length = std::min(max_length, tok->model_max_length());
    batch_size = opts.batch_size;
    if (tok->vocab_size() > static_cast<std::size_t>(bert.model->cfg.vocab_size))
      throw Error(d.string() + ": the tokenizer has " + std::to_string(tok->vocab_size()) + " ids but config.json vocab_size is " +
                  std::to_string(bert.model->cfg.vocab_size));
  }

  // Runs `fn(hidden, mask_tensor, rows)` over length-sorted batches of an encoded chunk;
  // `rows` are the chunk rows of the batch.
  template <class Fn>
  void for_batches(const SubwordTokenizer::Batch& b, Fn&& fn) {
    std::vector<std::size_t> len(b.rows), order(b.rows);
    for (std::size_t r = 0; r < b.rows; ++r)
      len[r] = static_cast<std::size_t>(std::count_if(b.mask.begin() + r * b.cols, b.mask.begin() + (r + 1) * b.cols, [](int m) { return m != 0; }));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) { return len[x] < len[y]; });
    for (std::size_t lo = 0; lo < b.rows; lo += batch_size) {
      const std::size_t hi = std::min(b.rows, lo + batch_size);
      std::vector<std::size_t> rows(order.begin() + lo, order.begin() + hi);
      std::size_t L = 1;
      for (auto r : rows) L = std::max(L, len[r]);
      const auto n = static_cast<std::int64_t>(rows.size());
      auto ids = torch::zeros({n, static_cast<std::int64_t>(L)}, torch::kInt64);
      auto types = torch::zeros_like(ids), mask = torch::zeros_like(ids);
      auto ia = ids.accessor<std::int64_t, 2>(), ta = types.accessor<std::int64_t, 2>(), ma = mask.accessor<std::int64_t, 2>();
      for (std::int64_t i = 0; i < n; ++i)
        for (std::size_t j = 0; j < L; ++j) {
          const std::size_t at = rows[i] * b.cols + j;
          ia[i][j] = b.ids[at];
          ta[i][j] = b.type_ids[at];
          ma[i][j] = b.mask[at];
        }
      ids = ids.to(device);
      types = types.to(device);
      mask = mask.to(device);
      auto hidden = bert.model->forward(ids, types, mask);
      fn(hidden, mask, rows);
    }
  }
};

}  // namespace

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
  impl->pooling = asked == Pooling::Auto ? spec.pooling : asked;
  impl->normalize = opts.normalize < 0 ? spec.normalize : opts.normalize > 0;
  return std::make_shared<const TextEncoder>(std::move(impl));
}

std::size_t TextEncoder::dim() const { return static_cast<std::size_t>(impl_->bert.model->cfg.hidden_size); }
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
    impl_->for_batches(batch, [&](const torch::Tensor& hidden, const torch::Tensor& mask, const std::vector<std::size_t>& rows) {
      auto e = pool_embeddings(hidden, mask, impl_->pooling, impl_->normalize).to(torch::kCPU, torch::kFloat32).contiguous();
      const float* p = e.data_ptr<float>();
      for (std::size_t i = 0; i < rows.size(); ++i) std::copy(p + i * D, p + (i + 1) * D, out.begin() + (c0 + rows[i]) * D);
    });
  }
  return out;
}

// ---------------------------------------------------------------- CrossEncoder

struct CrossEncoder::Impl : Common {};

CrossEncoder::CrossEncoder(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CrossEncoder::~CrossEncoder() = default;

std::shared_ptr<const CrossEncoder> CrossEncoder::load(const fs::path& dir, const EncoderOptions& opts) {
  auto impl = std::make_unique<Impl>();
  impl->init(dir, opts, /*classifier=*/true, read_pooling_spec(dir).max_seq_length);
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
