#include "baselines.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>

#include "attune/core/rng.h"
#include "attune/index/bm25.h"
#include "attune/text/lexical.h"

namespace attune::retrieval {
namespace {

void push(Ranking& r, std::span<const Document> c, std::size_t i, Score s) {
  r.indices.push_back(i);
  r.ids.push_back(c[i].id);
  r.scores.push_back(s);
}

}  // namespace

Ranking NoneRetriever::do_rank(const Query&, std::span<const Document>, std::size_t) const {
  return {};
}

Ranking RandomRetriever::do_rank(const Query& q, std::span<const Document> c,
                                 std::size_t k) const {
  Ranking r;
  if (c.empty()) return r;
  Rng rng(derive_seed(seed_, q.id));
  // The Retriever contract caps the list at the number of candidates; below that this is
  // random.choices(profile, k=k).
  const std::size_t draws = k == 0 ? c.size() : std::min(k, c.size());
  for (std::size_t i = 0; i < draws; ++i) push(r, c, static_cast<std::size_t>(rng.below(c.size())), 0.0);
  return r;
}

Ranking RecencyRetriever::do_rank(const Query&, std::span<const Document> c, std::size_t) const {
  std::vector<std::size_t> idx(c.size());
  std::iota(idx.begin(), idx.end(), std::size_t{0});
  std::stable_sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) {
    const auto& da = c[a].date;
    const auto& db = c[b].date;
    if (!db) return false;  // nothing is older than undated
    if (!da) return true;
    return *da < *db;
  });
  std::reverse(idx.begin(), idx.end());
  Ranking r;
  for (std::size_t pos = 0; pos < idx.size(); ++pos) {
    push(r, c, idx[pos], static_cast<Score>(idx.size() - pos));
  }
  return r;
}

Ranking Bm25Retriever::do_rank(const Query& q, std::span<const Document> c, std::size_t k) const {
  Ranking r;
  if (c.empty()) return r;
  std::vector<std::vector<std::string_view>> docs;  // views into the candidates' texts
  docs.reserve(c.size());
  for (const auto& d : c) docs.push_back(text::bm25_token_views(d.text));
  const index::Bm25Okapi bm25(docs);
  std::vector<double> scores;
  bm25.scores_text_into(q.text, scores);  // the query split, hashed and looked up in one pass
  for (std::size_t i : index::rank_bm25_top(scores, k)) push(r, c, i, scores[i]);
  return r;
}

RrfRetriever::RrfRetriever(std::vector<std::unique_ptr<Retriever>> parts)
    : parts_(std::move(parts)) {}

std::string RrfRetriever::name() const {
  std::string s = "rrf(";
  for (std::size_t i = 0; i < parts_.size(); ++i) {
    if (i) s += ',';
    s += parts_[i]->name();
  }
  return s + ")";
}

Ranking RrfRetriever::do_rank(const Query& q, std::span<const Document> c, std::size_t) const {
  constexpr double kRrfK = 60;
  std::vector<double> fused(c.size(), 0.0);
  std::vector<bool> listed(c.size(), false);
  std::vector<bool> seen(c.size());
  for (const auto& part : parts_) {
    const Ranking list = part->rank(q, c, 0);
    std::fill(seen.begin(), seen.end(), false);
    for (std::size_t pos = 0; pos < list.size(); ++pos) {
      const std::size_t i = list.indices[pos];
      if (seen[i]) continue;  // repeated draws of a random list: first rank counts
      seen[i] = true;
      listed[i] = true;
      fused[i] += 1.0 / (kRrfK + static_cast<double>(pos + 1));
    }
  }
  std::vector<std::size_t> idx;
  for (std::size_t i = 0; i < c.size(); ++i) {
    if (listed[i]) idx.push_back(i);
  }
  std::stable_sort(idx.begin(), idx.end(),
                   [&](std::size_t a, std::size_t b) { return fused[a] > fused[b]; });
  Ranking r;
  for (std::size_t i : idx) push(r, c, i, fused[i]);
  return r;
}

RerankRetriever::RerankRetriever(std::unique_ptr<Retriever> initial, std::size_t depth, std::unique_ptr<Retriever> reranker,
                                 std::optional<RetrieverSpec::Fusion> fusion)
    : initial_(std::move(initial)), reranker_(std::move(reranker)), depth_(depth), fusion_(fusion) {
  if (const auto w = reranker_->initial_prior_weight()) {
    if (!fusion_) fusion_ = RetrieverSpec::Fusion{1.0, *w};  // the order it was trained in
    reranker_->mark_fused();
  }
}

std::string RerankRetriever::name() const {
  std::string fuse;
  if (fusion_) {
    char buf[96];
    std::snprintf(buf, sizeof buf, ",fuse=%.17g:%.17g", fusion_->reranker_scale, fusion_->initial_weight);
    fuse = buf;
  }
  return "rerank(" + initial_->name() + "," + std::to_string(depth_) + "," + reranker_->name() + fuse + ")";
}

Ranking RerankRetriever::do_rank(const Query& q, std::span<const Document> c, std::size_t k) const {
  const Ranking first = initial_->rank(q, c, 0);
  std::vector<std::size_t> keep;  // candidate positions, initial order, no repeats
  std::vector<double> initial_scores;
  std::vector<bool> seen(c.size(), false);
  for (std::size_t pos = 0; pos < first.size() && keep.size() < depth_; ++pos) {
    const std::size_t i = first.indices[pos];
    if (seen[i]) continue;  // a random list draws with replacement
    seen[i] = true;
    keep.push_back(i);
    initial_scores.push_back(first.scores[pos]);
  }
  std::vector<Document> docs;
  docs.reserve(keep.size());
  for (std::size_t i : keep) docs.push_back(c[i]);
  Ranking r;
  if (fusion_) {
    const Ranking all = reranker_->rank(q, docs, 0);
    const auto z = initial_prior_z(initial_scores);
    std::vector<double> fused(keep.size(), -std::numeric_limits<double>::infinity());
    for (std::size_t pos = 0; pos < all.size(); ++pos)
      fused[all.indices[pos]] = fusion_->reranker_scale * all.scores[pos] + fusion_->initial_weight * z[all.indices[pos]];
    std::vector<std::size_t> order(keep.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return fused[a] > fused[b]; });
    for (std::size_t j : order) {
      if (k != 0 && r.size() >= k) break;
      if (!std::isfinite(fused[j])) continue;  // a document the reranker left out
      push(r, c, keep[j], fused[j]);
    }
    return r;
  }
  const Ranking second = reranker_->rank(q, docs, k);
  for (std::size_t pos = 0; pos < second.size(); ++pos) push(r, c, keep[second.indices[pos]], second.scores[pos]);
  return r;
}

}  // namespace attune::retrieval
