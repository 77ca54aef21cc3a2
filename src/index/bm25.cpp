// BM25Okapi exactly as rank_bm25 0.2.2 computes it (LAMP.md "Baseline retrievers").
// Every floating-point operation below mirrors the Python/numpy reference one for one so
// that scores are bit-identical:
//   idf(w)      = math.log(N - n + 0.5) - math.log(n + 0.5), summed in first-seen order
//                 into average_idf (negative idfs included), then idf < 0 -> eps * avg;
//   get_scores  = for each query token q (duplicates each time):
//                 score += idf(q) * (tf * (k1 + 1) / (tf + k1 * ((1 - b) + b * dl / avgdl)))
// numpy adds that expression for every document; a document without q adds idf * 0 =
// +-0.0, which leaves any sum unchanged (a sum that starts at +0.0 is never -0.0), so
// we only visit q's postings. That needs every denominator > 0 (true unless k1 = 0 or
// b = 1 with an empty document, where numpy gets 0/0 = NaN); otherwise we take the dense
// path. The build uses -ffp-contract=off so no multiply-add is fused.
#include "attune/index/bm25.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace attune::index {

namespace {
std::vector<std::vector<std::string_view>> views_of(const std::vector<std::vector<std::string>>& docs) {
  std::vector<std::vector<std::string_view>> out;
  out.reserve(docs.size());
  for (const auto& d : docs) out.emplace_back(d.begin(), d.end());
  return out;
}
}  // namespace

Bm25Okapi::Bm25Okapi(const std::vector<std::vector<std::string>>& docs, Bm25Params p)
    : Bm25Okapi(std::span<const std::vector<std::string_view>>(views_of(docs)), p) {}

Bm25Okapi::Bm25Okapi(std::span<const std::vector<std::string_view>> docs, Bm25Params p)
    : p_(p) {
  const auto n_docs = static_cast<std::uint32_t>(docs.size());
  doc_len_.reserve(n_docs);
  // Pass 1: number terms in first-seen order (doc by doc, token by token — the insertion
  // order of rank_bm25's `nd` dict) and collect each document's (term, tf) pairs.
  std::vector<std::uint32_t> nd;         // per term: documents holding it
  std::vector<std::uint32_t> last_doc;   // per term: doc + 1 of its last occurrence
  std::vector<std::uint32_t> slot;       // per term: index of that doc's pair in pairs
  std::vector<std::uint32_t> pair_term, pair_tf;
  std::vector<std::uint32_t> doc_off{0};
  std::size_t num_tokens = 0;
  for (std::uint32_t d = 0; d < n_docs; ++d) {
    doc_len_.push_back(docs[d].size());
    num_tokens += docs[d].size();
    for (const auto& w : docs[d]) {
      auto it = term_ids_.find(w);
      const bool inserted = it == term_ids_.end();
      if (inserted) it = term_ids_.emplace(std::string(w), static_cast<std::uint32_t>(nd.size())).first;
      const std::uint32_t t = it->second;
      if (inserted) {
        nd.push_back(0);
        last_doc.push_back(0);
        slot.push_back(0);
      }
      if (last_doc[t] != d + 1) {
        last_doc[t] = d + 1;
        slot[t] = static_cast<std::uint32_t>(pair_term.size());
        pair_term.push_back(t);
        pair_tf.push_back(1);
        ++nd[t];
      } else {
        ++pair_tf[slot[t]];
      }
    }
    doc_off.push_back(static_cast<std::uint32_t>(pair_term.size()));
  }
  if (n_docs == 0) return;  // rank_bm25 divides by zero here; we score nothing.
  avgdl_ = static_cast<double>(num_tokens) / static_cast<double>(n_docs);

  // idf, average_idf and the epsilon floor, as BM25Okapi._calc_idf.
  const double n = static_cast<double>(n_docs);
  idf_.resize(nd.size());
  double idf_sum = 0;
  for (std::size_t t = 0; t < nd.size(); ++t) {
    const double freq = static_cast<double>(nd[t]);
    idf_[t] = std::log(n - freq + 0.5) - std::log(freq + 0.5);
    idf_sum += idf_[t];
  }
  // rank_bm25 divides by len(idf) even when it is 0 (all documents empty); 0 here.
  average_idf_ = nd.empty() ? 0.0 : idf_sum / static_cast<double>(nd.size());
  const double eps = p_.epsilon * average_idf_;
  for (auto& v : idf_) {
    if (v < 0) v = eps;
  }

  // Pass 2: postings by term (CSR), each list in document order.
  post_off_.assign(nd.size() + 1, 0);
  for (std::size_t t = 0; t < nd.size(); ++t) post_off_[t + 1] = post_off_[t] + nd[t];
  post_doc_.resize(pair_term.size());
  post_tf_.resize(pair_term.size());
  std::vector<std::uint32_t> fill(post_off_.begin(), post_off_.end() - 1);
  for (std::uint32_t d = 0; d < n_docs; ++d) {
    for (std::uint32_t i = doc_off[d]; i < doc_off[d + 1]; ++i) {
      const std::uint32_t at = fill[pair_term[i]]++;
      post_doc_[at] = d;
      post_tf_[at] = pair_tf[i];
    }
  }

  // k1 * ((1 - b) + (b * dl) / avgdl): numpy evaluates b * doc_len first, then / avgdl,
  // then adds the scalar (1 - b), then multiplies by k1. Same value for every token.
  norm_.resize(n_docs);
  for (std::uint32_t d = 0; d < n_docs; ++d) {
    norm_[d] = p_.k1 * ((1 - p_.b) + p_.b * static_cast<double>(doc_len_[d]) / avgdl_);
    if (!(norm_[d] > 0)) sparse_exact_ = false;
  }
  if (sparse_exact_) {
    const double k1p1 = p_.k1 + 1;
    post_factor_.resize(post_doc_.size());
    for (std::size_t i = 0; i < post_doc_.size(); ++i) {
      const double tf = static_cast<double>(post_tf_[i]);
      post_factor_[i] = tf * k1p1 / (tf + norm_[post_doc_[i]]);
    }
  }
}

double Bm25Okapi::idf(const std::string& term) const {
  auto it = term_ids_.find(term);
  return it == term_ids_.end() ? 0.0 : idf_[it->second];
}

std::vector<double> Bm25Okapi::scores(const std::vector<std::string>& query) const {
  std::vector<std::string_view> views(query.begin(), query.end());
  std::vector<double> score;
  scores_into(views, score);
  return score;
}

void Bm25Okapi::scores_into(std::span<const std::string_view> query, std::vector<double>& score) const {
  const std::size_t n = doc_len_.size();
  score.assign(n, 0.0);
  if (n == 0) return;
  const double k1p1 = p_.k1 + 1;
  std::vector<double> dense_tf;
  for (const auto& q : query) {
    auto it = term_ids_.find(q);
    if (sparse_exact_) {
      if (it == term_ids_.end()) continue;  // idf 0 * finite = 0: adds nothing
      const std::uint32_t t = it->second;
      const double w = idf_[t];  // `self.idf.get(q) or 0`
      // w * (tf * k1p1 / (tf + norm)), with the parenthesis computed at build time.
      for (std::uint32_t i = post_off_[t]; i < post_off_[t + 1]; ++i) score[post_doc_[i]] += w * post_factor_[i];
    } else {
      // Degenerate parameters: numpy's dense evaluation, NaNs included.
      dense_tf.assign(n, 0.0);
      double w = 0;
      if (it != term_ids_.end()) {
        const std::uint32_t t = it->second;
        w = idf_[t];
        for (std::uint32_t i = post_off_[t]; i < post_off_[t + 1]; ++i) {
          dense_tf[post_doc_[i]] = static_cast<double>(post_tf_[i]);
        }
      }
      for (std::size_t d = 0; d < n; ++d) {
        score[d] += w * (dense_tf[d] * k1p1 / (dense_tf[d] + norm_[d]));
      }
    }
  }
}

std::vector<std::size_t> rank_bm25_order(const std::vector<double>& scores) {
  // LAMP.md: argsort ascending with ties kept in index order, then reversed, so equal
  // scores come out in descending index order.
  std::vector<std::size_t> idx(scores.size());
  std::iota(idx.begin(), idx.end(), std::size_t{0});
  // NaN sorts last in numpy (so first after the reversal); keep that order total.
  std::stable_sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) {
    const double x = scores[a], y = scores[b];
    return x < y || (!std::isnan(x) && std::isnan(y));
  });
  std::reverse(idx.begin(), idx.end());
  return idx;
}

std::vector<std::size_t> rank_bm25_top(const std::vector<double>& scores, std::size_t k) {
  if (k == 0 || k >= scores.size()) return rank_bm25_order(scores);
  // rank_bm25_order as a strict total order: NaN first (the reversed sort puts numpy's last
  // first), then higher scores, equal scores (+0 and -0 included) in descending index order.
  const auto before = [&](std::size_t a, std::size_t b) {
    const double x = scores[a], y = scores[b];
    const bool nx = std::isnan(x), ny = std::isnan(y);
    if (nx != ny) return nx;
    if (!nx && x != y) return x > y;
    return a > b;
  };
  std::vector<std::size_t> idx(scores.size());
  std::iota(idx.begin(), idx.end(), std::size_t{0});
  std::partial_sort(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(k), idx.end(), before);
  idx.resize(k);
  return idx;
}

}  // namespace attune::index
