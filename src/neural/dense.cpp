#include "attune/neural/dense.h"

#include <algorithm>
#include <numeric>

#include "attune/core/hash.h"

namespace attune::neural {
namespace {

// Best first by score; ties keep candidate order.
Ranking sorted(std::span<const Document> c, const std::vector<double>& scores) {
  std::vector<std::size_t> order(c.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return scores[a] > scores[b]; });
  Ranking r;
  for (auto i : order) {
    r.indices.push_back(i);
    r.ids.push_back(c[i].id);
    r.scores.push_back(scores[i]);
  }
  return r;
}

}  // namespace

DenseRetriever::DenseRetriever(std::shared_ptr<const models::TextEncoder> encoder) : encoder_(std::move(encoder)) {}

std::size_t DenseRetriever::cached() const {
  std::lock_guard lock(mu_);
  return cache_.size();
}

Ranking DenseRetriever::do_rank(const retrieval::Query& q, std::span<const Document> c, std::size_t) const {
  if (c.empty()) return {};
  const std::size_t D = encoder_->dim();
  std::vector<std::uint64_t> keys(c.size());
  std::vector<std::vector<float>> vecs(c.size());
  std::vector<std::string> missing;
  std::vector<std::size_t> missing_at;
  {
    std::lock_guard lock(mu_);
    for (std::size_t i = 0; i < c.size(); ++i) {
      keys[i] = hash64(c[i].text);
      if (auto it = cache_.find(keys[i]); it != cache_.end()) vecs[i] = it->second;
      else {
        missing.push_back(c[i].text);
        missing_at.push_back(i);
      }
    }
  }
  // Embed outside the lock (another thread may embed the same text meanwhile; both agree).
  missing.push_back(q.text);
  const auto emb = encoder_->embed(missing);
  const float* qv = emb.data() + (missing.size() - 1) * D;
  {
    std::lock_guard lock(mu_);
    for (std::size_t j = 0; j + 1 < missing.size(); ++j) {
      auto& v = vecs[missing_at[j]];
      v.assign(emb.begin() + j * D, emb.begin() + (j + 1) * D);
      cache_.emplace(keys[missing_at[j]], v);
    }
  }
  std::vector<double> scores(c.size());
  for (std::size_t i = 0; i < c.size(); ++i) {
    double s = 0;
    for (std::size_t d = 0; d < D; ++d) s += static_cast<double>(qv[d]) * vecs[i][d];
    scores[i] = s;
  }
  return sorted(c, scores);
}

Ranking CrossEncoderRetriever::do_rank(const retrieval::Query& q, std::span<const Document> c, std::size_t) const {
  if (c.empty()) return {};
  std::vector<std::string> texts;
  texts.reserve(c.size());
  for (const auto& d : c) texts.push_back(d.text);
  const auto s = model_->score(q.text, texts);
  return sorted(c, std::vector<double>(s.begin(), s.end()));
}

void register_retrievers() {
  retrieval::register_retriever_kind("dense", [](std::string_view dir, std::uint64_t) {
    return std::make_unique<DenseRetriever>(models::TextEncoder::load(std::string(dir)));
  });
  retrieval::register_retriever_kind("cross", [](std::string_view dir, std::uint64_t) {
    return std::make_unique<CrossEncoderRetriever>(models::CrossEncoder::load(std::string(dir)));
  });
}

}  // namespace attune::neural
