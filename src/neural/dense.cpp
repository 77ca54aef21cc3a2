#include "attune/neural/dense.h"
#include "attune/neural/selector.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <map>
#include <numeric>
#include <optional>
#include <utility>

#include "attune/core/error.h"
#include "attune/core/sha256.h"
#include "attune/core/parallel.h"
#include "attune/models/config.h"
#include "attune/models/runtime.h"

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

Ranking sorted(std::span<const Document> c, const std::vector<float>& scores) {
  return sorted(c, std::vector<double>(scores.begin(), scores.end()));
}

std::vector<std::string> texts_of(std::span<const Document> c) {
  std::vector<std::string> texts;
  texts.reserve(c.size());
  for (const auto& d : c) texts.push_back(d.text);
  return texts;
}

struct Shared {
  std::mutex mu;
  std::map<std::string, std::weak_ptr<const models::TextEncoder>> encoders;
  std::map<std::string, std::weak_ptr<const CorpusEmbeddings>> embeddings;
};
Shared& shared() {
  static Shared s;
  return s;
}

}  // namespace

std::shared_ptr<const models::TextEncoder> shared_encoder(const std::string& dir, const models::EncoderOptions& o) {
  const std::string key = dir + '\n' + o.device.str() + '\n' + std::to_string(o.max_length) + '\n' +
                          std::to_string(o.batch_size) + '\n' + o.pooling + '\n' + std::to_string(o.normalize);
  auto& s = shared();
  std::lock_guard lock(s.mu);  // held while loading: two threads asking for one model load it once
  if (auto e = s.encoders[key].lock()) return e;
  auto e = models::TextEncoder::load(dir, o);
  s.encoders[key] = e;
  return e;
}

void publish_embeddings(const std::string& encoder_id, std::shared_ptr<const CorpusEmbeddings> e) {
  auto& s = shared();
  std::lock_guard lock(s.mu);
  s.embeddings[encoder_id] = e;
}

std::shared_ptr<const CorpusEmbeddings> published_embeddings(const std::string& encoder_id) {
  auto& s = shared();
  std::lock_guard lock(s.mu);
  auto it = s.embeddings.find(encoder_id);
  return it == s.embeddings.end() ? nullptr : it->second.lock();
}

std::string text_key(std::string_view text) { return sha256_hex(text); }

namespace {
std::atomic<std::size_t> micro_batch{1}, micro_batch_concurrency{1};
std::atomic<std::uint64_t> batched_calls{0}, batched_queries{0};

// A first-come-first-served counting semaphore over cross-encoder forward passes.
struct ForwardGate {
  std::mutex mu;
  std::condition_variable cv;
  std::size_t limit = 0, active = 0;  // limit 0: no gate
  std::uint64_t next = 0, admitted = 0;
};
ForwardGate& gate() {
  static ForwardGate g;
  return g;
}
// Holds a place in the gate for its lifetime.
class GatePass {
 public:
  GatePass() {
    auto& g = gate();
    std::unique_lock lock(g.mu);
    if (g.limit == 0) return;
    const std::uint64_t ticket = g.next++;
    g.cv.wait(lock, [&] { return g.limit == 0 || (ticket == g.admitted && g.active < g.limit); });
    ++g.admitted;
    ++g.active;
    held_ = true;
    g.cv.notify_all();  // the next ticket may enter too
  }
  ~GatePass() {
    if (!held_) return;
    auto& g = gate();
    std::lock_guard lock(g.mu);
    --g.active;
    g.cv.notify_all();
  }
  GatePass(const GatePass&) = delete;
  GatePass& operator=(const GatePass&) = delete;

 private:
  bool held_ = false;
};
}  // namespace

void set_forward_concurrency(std::size_t n) {
  auto& g = gate();
  std::lock_guard lock(g.mu);
  g.limit = n;
  if (n == 0) g.admitted = g.next;  // waiting callers go in
  g.cv.notify_all();
}

void set_query_micro_batch(std::size_t n, std::size_t concurrency) {
  micro_batch = n;
  micro_batch_concurrency = concurrency;
}
std::size_t query_micro_batch() { return micro_batch; }
std::size_t query_micro_batch_concurrency() { return micro_batch_concurrency; }

namespace {
struct OfferedQuery {
  std::string encoder_id, text;
  std::vector<float> v;
};
thread_local OfferedQuery offered;
// The offered embedding when it is of `text` by `encoder_id` (taken: an offer serves once).
std::optional<std::vector<float>> take_offered(const std::string& encoder_id, const std::string& text, std::size_t dim) {
  if (offered.v.empty() || offered.v.size() != dim || offered.encoder_id != encoder_id || offered.text != text)
    return std::nullopt;
  offered.text.clear();
  return std::exchange(offered.v, {});
}
}  // namespace

void offer_query_embedding(std::string encoder_id, std::string text, std::vector<float> v) {
  offered = {std::move(encoder_id), std::move(text), std::move(v)};
}

void configure_for_serving(std::size_t n) {
  models::ensure_torch_runtime();
  const std::size_t groups = std::max<std::size_t>(1, physical_cores() / std::max<std::size_t>(1, models::torch_threads()));
  set_query_micro_batch(n, groups);
  set_forward_concurrency(groups);
}
QueryBatchStats query_batch_stats() { return {batched_calls.load(), batched_queries.load()}; }

DenseRetriever::DenseRetriever(std::shared_ptr<const models::TextEncoder> encoder, bool document_dates)
    : DenseRetriever(std::move(encoder), document_dates ? std::vector<std::string>{"date"} : std::vector<std::string>{}) {}

DenseRetriever::DenseRetriever(std::shared_ptr<const models::TextEncoder> encoder, std::vector<std::string> document_fields)
    : encoder_(std::move(encoder)), fields_(std::move(document_fields)) {
  if (const std::size_t n = micro_batch; n > 1)
    queries_ = std::make_unique<MicroBatcher<std::string, std::vector<float>>>(
        [enc = encoder_](std::span<const std::string> texts) {
          const std::size_t D = enc->dim();
          const auto emb = enc->embed(texts);
          std::vector<std::vector<float>> rows(texts.size());
          for (std::size_t i = 0; i < texts.size(); ++i) rows[i].assign(emb.begin() + i * D, emb.begin() + (i + 1) * D);
          ++batched_calls;
          batched_queries += texts.size();
          return rows;
        },
        n, micro_batch_concurrency);
}

std::size_t DenseRetriever::cached() const {
  std::lock_guard lock(mu_);
  return cache_.size();
}

Ranking DenseRetriever::do_rank(const retrieval::Query& q, std::span<const Document> c, std::size_t) const {
  if (c.empty()) return {};
  const std::size_t D = encoder_->dim();
  std::vector<std::string> keys(c.size());
  // Each candidate's embedding, where it lies: a cache entry (entries are never changed or
  // erased, and the map's nodes do not move), the published corpus rows, or `emb` below.
  std::vector<const float*> rows(c.size(), nullptr);
  std::vector<std::string> missing;
  std::vector<std::size_t> missing_at;
  const auto corpus = published_embeddings(encoder_->id());
  std::vector<std::string> fielded;
  if (!fields_.empty())
    for (const auto& d : c) fielded.push_back(retrieval::fielded_text(d, d.text, fields_));
  const auto text = [&](std::size_t i) -> const std::string& { return fields_.empty() ? c[i].text : fielded[i]; };
  for (std::size_t i = 0; i < c.size(); ++i) keys[i] = text_key(c[i].owner + '\0' + text(i));  // outside the lock
  {
    std::lock_guard lock(mu_);
    for (std::size_t i = 0; i < c.size(); ++i) {
      if (auto it = cache_.find(keys[i]); it != cache_.end()) rows[i] = it->second.data();
      else if (const float* v = corpus && corpus->dim == D ? corpus->find(text_key(text(i))) : nullptr)
        rows[i] = v;
      else {
        missing.push_back(text(i));
        missing_at.push_back(i);
      }
    }
  }
  std::vector<float> query, emb;
  if (auto v = take_offered(encoder_->id(), q.text, D)) query = std::move(*v);  // the first stage's
  if (query.empty() && missing.empty() && queries_) {
    query = queries_->run(q.text);  // with the queries of concurrent calls
  } else if (query.empty() || !missing.empty()) {
    // Embed outside the lock (another thread may embed the same text meanwhile; both agree),
    // the query with the documents when it has no embedding yet.
    const bool with_query = query.empty();
    if (with_query) missing.push_back(q.text);
    emb = encoder_->embed(missing);
    if (with_query) query.assign(emb.end() - static_cast<std::ptrdiff_t>(D), emb.end());
    std::lock_guard lock(mu_);
    for (std::size_t j = 0; j < missing_at.size(); ++j) {
      rows[missing_at[j]] = emb.data() + j * D;
      cache_.emplace(keys[missing_at[j]], std::vector<float>(emb.begin() + j * D, emb.begin() + (j + 1) * D));
    }
  }
  const float* qv = query.data();
  std::vector<double> scores(c.size());
  for (std::size_t i = 0; i < c.size(); ++i) {
    double s = 0;
    for (std::size_t d = 0; d < D; ++d) s += static_cast<double>(qv[d]) * rows[i][d];
    scores[i] = s;
  }
  return sorted(c, scores);
}

Ranking CrossEncoderRetriever::do_rank(const retrieval::Query& q, std::span<const Document> c, std::size_t) const {
  if (c.empty()) return {};
  GatePass pass;
  const auto texts = texts_of(c);
  return sorted(c, model_->score(q.text, texts));
}

Ranking PurpleRetriever::do_rank(const retrieval::Query& q, std::span<const Document> c, std::size_t) const {
  if (c.empty()) return {};
  GatePass pass;
  const auto texts = texts_of(c);
  const auto f = model_->propensities(q.text, texts);
  if (model_->initial_prior_weight()) {
    if (!fused_)
      throw UsageError("retriever " + name() + ": this folder was trained with the first stage's order as a prior (its purple.json "
                       "has initial_prior), so its propensities alone are not the order it learned; rank with the folder itself "
                       "as the spec, or rerank(FIRST,L," + name() + ") with the first stage and depth it was trained on");
    // log f, as the trainer's Plackett-Luce log-weights (f clamped at 1e-6 there too).
    std::vector<double> logf(f.size());
    for (std::size_t i = 0; i < f.size(); ++i) logf[i] = std::log(std::max(static_cast<double>(f[i]), 1e-6));
    return sorted(c, logf);
  }
  return sorted(c, f);
}

Ranking IumRetriever::do_rank(const retrieval::Query& q, std::span<const Document> c, std::size_t) const {
  if (c.empty()) return {};
  GatePass pass;
  const auto texts = texts_of(c);
  if (model_->initial_prior_weight()) {
    if (!fused_)
      throw UsageError("retriever " + name() + ": this folder was trained with the first stage's order as a prior (its ium.json "
                       "has initial_prior), so its scores alone are not the order it learned; rank with rerank(bm25," +
                       std::to_string(models::kIumInitialDepth) + "," + name() + "), which adds the prior");
    return sorted(c, model_->logits(task_, llm_, q.text, texts));
  }
  return sorted(c, model_->score(task_, llm_, q.text, texts));
}

IumSpec parse_ium_arg(std::string_view arg) {
  const auto bad = [&](const std::string& why) {
    return UsageError("retriever spec \"ium:" + std::string(arg) + "\": " + why +
                      " (expected ium:DIR?task=TASK&model=MODEL, the agent whose reranker it is)");
  };
  IumSpec s;
  const auto q = arg.find('?');
  s.dir = std::string(arg.substr(0, q));
  if (q == std::string_view::npos) throw bad("names no agent");
  std::string_view rest = arg.substr(q + 1);
  while (!rest.empty()) {
    const auto amp = rest.find('&');
    const auto part = rest.substr(0, amp);
    const auto eq = part.find('=');
    if (eq == std::string_view::npos) throw bad("\"" + std::string(part) + "\" is not KEY=VALUE");
    const auto key = part.substr(0, eq), value = part.substr(eq + 1);
    if (key == "task") s.task = std::string(value);
    else if (key == "model") s.model = std::string(value);
    else throw bad("unknown key \"" + std::string(key) + "\"");
    rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
  }
  if (s.dir.empty() || s.task.empty() || s.model.empty()) throw bad("needs a folder, a task and a model");
  return s;
}

void register_retrievers(const Device& device) {
  models::EncoderOptions o;
  o.device = device;
  retrieval::register_retriever_kind("dense", [o](std::string_view dir, std::uint64_t) {
    // A folder trained with --document-fields (or --document-dates) says so in its marker.
    std::vector<std::string> fields;
    const auto marker = std::filesystem::path(dir) / "attune_model.json";
    if (std::filesystem::exists(marker)) {
      const auto m = models::read_json_file(marker);
      if (m.contains("document_fields")) {
        if (!m["document_fields"].is_array()) throw Error(marker.string() + ": \"document_fields\" is not a list of names");
        for (const auto& f : m["document_fields"]) {
          if (!f.is_string() || f.get<std::string>().empty())
            throw Error(marker.string() + ": \"document_fields\" holds something other than a field name");
          fields.push_back(f.get<std::string>());
        }
      } else if (m.value("document_dates", false)) {
        fields = {"date"};
      }
    }
    return std::make_unique<DenseRetriever>(shared_encoder(std::string(dir), o), std::move(fields));
  });
  retrieval::register_retriever_kind("cross", [o](std::string_view dir, std::uint64_t) {
    return std::make_unique<CrossEncoderRetriever>(models::CrossEncoder::load(std::string(dir), o));
  });
  retrieval::register_retriever_kind("purple", [device](std::string_view dir, std::uint64_t) {
    return std::make_unique<PurpleRetriever>(models::PurpleModel::load(std::string(dir), device));
  });
  register_selector_retriever(device);
  retrieval::register_retriever_kind("ium", [device](std::string_view arg, std::uint64_t) {
    const auto s = parse_ium_arg(arg);
    return std::make_unique<IumRetriever>(models::IumModel::load(s.dir, device), s.task, s.model);
  });
}

}  // namespace attune::neural
