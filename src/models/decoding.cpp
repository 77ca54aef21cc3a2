#include "attune/models/decoding.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>

#include "attune/core/error.h"
#include "attune/core/rng.h"

namespace attune::models {

namespace {

std::string ids_key(const TokenIds& ids) {
  return std::string(reinterpret_cast<const char*>(ids.data()), ids.size() * sizeof(std::int32_t));
}

bool is_eos(std::int64_t t, const DecodeOptions& o) {
  return std::find(o.eos_ids.begin(), o.eos_ids.end(), t) != o.eos_ids.end();
}

// Nucleus sampling on one row of logits (CPU, float64 for a stable cumulative sum).
std::int64_t sample_row(const torch::Tensor& logits_row, double temperature, double top_p, Rng& rng) {
  auto probs = torch::softmax(logits_row.to(torch::kFloat64) / temperature, -1).contiguous();
  auto sorted = probs.sort(/*dim=*/-1, /*descending=*/true);
  auto vals = std::get<0>(sorted).contiguous(), idx = std::get<1>(sorted).contiguous();
  const double* p = vals.data_ptr<double>();
  const std::int64_t* id = idx.data_ptr<std::int64_t>();
  const std::int64_t V = vals.size(0);
  std::int64_t keep = 0;
  double mass = 0;
  while (keep < V && (keep == 0 || mass < top_p)) mass += p[keep++];
  double u = rng.uniform() * mass, acc = 0;
  for (std::int64_t i = 0; i < keep; ++i) {
    acc += p[i];
    if (u < acc) return id[i];
  }
  return id[keep - 1];
}

// Sets the logits of each live row's repeated-n-gram tokens to -inf (a copy when any is).
torch::Tensor ban_repeats(torch::Tensor logits, const std::vector<TokenIds>& generated, const std::vector<bool>& done,
                          int n) {
  if (n <= 0) return logits;
  bool copied = false;
  for (std::size_t b = 0; b < generated.size(); ++b) {
    if (done[b]) continue;
    const auto banned = repeated_ngram_tokens(generated[b], n);
    if (banned.empty()) continue;
    if (!copied) logits = logits.clone(), copied = true;
    const auto idx = torch::tensor(std::vector<std::int64_t>(banned.begin(), banned.end()), torch::kInt64).to(logits.device());
    logits[static_cast<std::int64_t>(b)].index_fill_(0, idx, -std::numeric_limits<float>::infinity());
  }
  return logits;
}

// The most probable token of one row (float32 logits on the CPU) that o.allow accepts; -1
// when none is (a token whose logit is -inf, banned as a repeat, is never taken). Candidates
// are read in order of logit, the first 64 from topk and then, only if none of those is
// allowed, the whole row sorted.
std::int64_t best_allowed(const torch::Tensor& row_logits, std::size_t row, const TokenIds& generated,
                          const DecodeOptions& o) {
  const std::int64_t V = row_logits.size(0);
  const auto try_order = [&](const torch::Tensor& idx, std::int64_t from) -> std::int64_t {
    auto c = idx.contiguous();
    const std::int64_t* id = c.data_ptr<std::int64_t>();
    const float* v = row_logits.data_ptr<float>();
    for (std::int64_t i = from; i < c.size(0); ++i)
      if (v[id[i]] != -std::numeric_limits<float>::infinity() && o.allow(row, generated, static_cast<std::int32_t>(id[i])))
        return id[i];
    return -1;
  };
  const std::int64_t first = std::min<std::int64_t>(64, V);
  if (auto t = try_order(std::get<1>(row_logits.topk(first)), 0); t >= 0) return t;
  if (first == V) return -1;
  return try_order(std::get<1>(row_logits.sort(/*dim=*/-1, /*descending=*/true)), first);
}

std::vector<TokenIds> greedy_or_sample(Decoder& model, const std::vector<TokenIds>& prompts, const DecodeOptions& o,
                                       std::size_t first_row) {
  const auto B = static_cast<std::int64_t>(prompts.size());
  // Context-aware decoding: the rows without documents after the prompts' rows, in one batch
  // (2B rows), each fed the token its prompt's row chose. Rows whose two forms are the same
  // keep their plain logits; a batch where no row has a second form (retriever none's
  // prompts) runs as plain greedy.
  std::vector<TokenIds> rows = prompts;
  std::vector<std::uint8_t> contrasted;
  bool cad = false;
  if (o.cad > 0) {
    for (std::int64_t b = 0; b < B; ++b) {
      const TokenIds& w = (*o.without_documents)[first_row + static_cast<std::size_t>(b)];
      const bool differs = !w.empty() && w != prompts[b];
      contrasted.push_back(differs);
      rows.push_back(differs ? w : prompts[b]);
      cad = cad || differs;
    }
    if (!cad) rows.resize(prompts.size());
  }
  torch::Tensor all_logits, logits;
  auto state = model.start(rows, all_logits);
  // Which rows take the combined scores, made once for every step.
  const torch::Tensor mask = cad ? torch::tensor(std::vector<std::int64_t>(contrasted.begin(), contrasted.end()), torch::kInt64)
                                       .to(torch::kBool)
                                       .to(all_logits.device())
                                       .view({B, 1})
                                 : torch::Tensor();
  const auto combine = [&](const torch::Tensor& all) -> torch::Tensor {
    if (!cad) return all;
    const auto with_docs = all.slice(0, 0, B), without = all.slice(0, B, 2 * B);
    const auto a = static_cast<float>(o.cad);
    auto mixed = (1 + a) * torch::log_softmax(with_docs.to(torch::kFloat32), -1) -
                 a * torch::log_softmax(without.to(torch::kFloat32), -1);
    return torch::where(mask, mixed, with_docs.to(torch::kFloat32));
  };
  logits = combine(all_logits);
  std::vector<TokenIds> out(prompts.size());
  std::vector<bool> done(prompts.size(), false);
  std::vector<Rng> rngs;
  if (o.temperature > 0)
    for (auto& p : prompts) rngs.emplace_back(derive_seed(o.seed, ids_key(p)));
  std::int64_t pad = o.eos_ids.empty() ? 0 : o.eos_ids.front();
  for (std::size_t t = 0; t < o.max_new_tokens; ++t) {
    std::vector<std::int64_t> next(prompts.size(), pad);
    logits = ban_repeats(logits, out, done, o.no_repeat_ngram);
    if (o.temperature > 0) {
      auto cpu = logits.to(torch::kCPU);
      for (std::int64_t b = 0; b < B; ++b)
        if (!done[b]) next[b] = sample_row(cpu[b], o.temperature, o.top_p, rngs[b]);
    } else if (o.allow) {
      auto cpu = logits.to(torch::kCPU).to(torch::kFloat32);
      for (std::int64_t b = 0; b < B; ++b) {
        if (done[b]) continue;
        const std::int64_t t = best_allowed(cpu[b], first_row + static_cast<std::size_t>(b), out[b], o);
        // Nothing allowed: the row ends here (an EOS id, or the pad when there is none).
        next[b] = t >= 0 ? t : (o.eos_ids.empty() ? -1 : o.eos_ids.front());
      }
    } else {
      auto best = logits.max(-1);
      auto arg = std::get<1>(best).to(torch::kCPU);
      auto top = std::get<0>(best).to(torch::kCPU).to(torch::kFloat32);
      auto a = arg.accessor<std::int64_t, 1>();
      auto v = top.accessor<float, 1>();
      // A row whose every token is banned as a repeat (no end of text to fall back on) ends.
      for (std::int64_t b = 0; b < B; ++b)
        if (!done[b]) next[b] = v[b] == -std::numeric_limits<float>::infinity() ? -1 : a[b];
    }
    for (std::int64_t b = 0; b < B; ++b) {
      if (done[b]) continue;
      if (next[b] < 0 || is_eos(next[b], o)) {
        done[b] = true;
        if (next[b] < 0) next[b] = pad;
      } else {
        out[b].push_back(static_cast<std::int32_t>(next[b]));
      }
    }
    if (std::all_of(done.begin(), done.end(), [](bool d) { return d; }) || t + 1 == o.max_new_tokens) break;
    if (cad) next.insert(next.end(), next.begin(), next.end());  // the same token to both forms
    const auto R = static_cast<std::int64_t>(next.size());
    auto tok = torch::tensor(next, torch::kInt64).view({R, 1});
    logits = combine(state->step(tok, torch::ones({R, 1}, torch::kBool)).select(1, 0));
  }
  return out;
}

// Beam search for one prompt with the Hugging Face semantics of num_beams (early_stopping
// false): a finished hypothesis scores sum log p / length^length_penalty, where length counts
// the generated tokens including EOS; search stops when the best running beam can no
// longer beat the worst of `beams` finished ones.
TokenIds beam_search(Decoder& model, const TokenIds& prompt, const DecodeOptions& o) {
  const int K = o.beams;
  torch::Tensor logits;
  auto state = model.start({prompt}, logits);
  state->select(torch::zeros({K}, torch::kInt64));
  logits = logits.expand({K, logits.size(1)});
  struct Beam {
    TokenIds tokens;
    double score;
  };
  std::vector<Beam> running(K, Beam{{}, -std::numeric_limits<double>::infinity()});
  running[0].score = 0;  // only one live beam at first, so the K copies do not duplicate
  std::vector<std::pair<double, TokenIds>> finished;
  auto worst_finished = [&] {
    double w = std::numeric_limits<double>::infinity();
    for (auto& f : finished) w = std::min(w, f.first);
    return w;
  };
  auto add_finished = [&](double normed, TokenIds toks) {
    if (static_cast<int>(finished.size()) < K || normed > worst_finished()) {
      finished.emplace_back(normed, std::move(toks));
      if (static_cast<int>(finished.size()) > K) {
        auto it = std::min_element(finished.begin(), finished.end(), [](auto& a, auto& b) { return a.first < b.first; });
        finished.erase(it);
      }
    }
  };
  for (std::size_t t = 0; t < o.max_new_tokens; ++t) {
    auto lp = torch::log_softmax(logits.to(torch::kFloat64), -1).to(torch::kCPU);
    if (o.no_repeat_ngram > 0)
      for (int k = 0; k < K; ++k)
        for (auto id : repeated_ngram_tokens(running[k].tokens, o.no_repeat_ngram))
          lp[k][id] = -std::numeric_limits<double>::infinity();
    std::vector<double> base(K);
    for (int k = 0; k < K; ++k) base[k] = running[k].score;
    auto total = lp + torch::tensor(base, torch::kFloat64).view({K, 1});
    auto flat = total.view({-1});
    const auto V = lp.size(1);
    auto top = flat.topk(std::min<std::int64_t>(2 * K, flat.size(0)));
    auto vals = std::get<0>(top), idx = std::get<1>(top);
    std::vector<Beam> next;
    std::vector<std::int64_t> src, tok;
    const double len_pen = o.length_penalty;
    for (std::int64_t i = 0; i < vals.size(0) && static_cast<int>(next.size()) < K; ++i) {
      double s = vals[i].item<double>();
      if (!std::isfinite(s)) break;
      std::int64_t id = idx[i].item<std::int64_t>();
      std::int64_t b = id / V, token = id % V;
      if (is_eos(token, o)) {
        if (i < K) add_finished(s / std::pow(static_cast<double>(t + 1), len_pen), running[b].tokens);
        continue;
      }
      Beam nb{running[b].tokens, s};
      nb.tokens.push_back(static_cast<std::int32_t>(token));
      next.push_back(std::move(nb));
      src.push_back(b);
      tok.push_back(token);
    }
    if (next.empty()) break;
    double best_running = -std::numeric_limits<double>::infinity();
    for (auto& b : next) best_running = std::max(best_running, b.score);
    const bool last = t + 1 == o.max_new_tokens;
    if (static_cast<int>(finished.size()) >= K &&
        best_running / std::pow(static_cast<double>(t + 1), len_pen) <= worst_finished())
      break;
    while (static_cast<int>(next.size()) < K) {  // fewer candidates than beams (tiny vocab)
      next.push_back(Beam{next.front().tokens, -std::numeric_limits<double>::infinity()});
      src.push_back(src.front());
      tok.push_back(tok.front());
    }
    running = std::move(next);
    if (last) break;
    state->select(torch::tensor(src, torch::kInt64));
    logits = state->step(torch::tensor(tok, torch::kInt64).view({K, 1}), torch::ones({K, 1}, torch::kBool)).select(1, 0);
  }
  // Out of budget: running beams compete with the finished ones.
  for (auto& b : running)
    if (std::isfinite(b.score) && !b.tokens.empty())
      add_finished(b.score / std::pow(static_cast<double>(b.tokens.size()), o.length_penalty), b.tokens);
  if (finished.empty()) return {};
  auto best = std::max_element(finished.begin(), finished.end(), [](auto& a, auto& b) { return a.first < b.first; });
  return best->second;
}

// Scores targets[i] after the state's rows (one row per target, already positioned after
// its prompt); first [n, V] are the logits for each target's first token.
std::vector<double> score_rows(DecoderState& state, const torch::Tensor& first, const std::vector<const TokenIds*>& targets,
                               torch::Device dev, std::vector<std::vector<double>>* per_token = nullptr) {
  const auto n = static_cast<std::int64_t>(targets.size());
  std::size_t L = 0;
  for (auto* t : targets) L = std::max(L, t->size());
  std::vector<double> out(targets.size(), 0.0);
  if (per_token) per_token->assign(targets.size(), {});
  if (L == 0) return out;
  auto tgt = torch::zeros({n, static_cast<std::int64_t>(L)}, torch::kInt64);
  auto mask = torch::zeros({n, static_cast<std::int64_t>(L)}, torch::kBool);
  auto ta = tgt.accessor<std::int64_t, 2>();
  auto ma = mask.accessor<bool, 2>();
  for (std::int64_t r = 0; r < n; ++r)
    for (std::size_t i = 0; i < targets[r]->size(); ++i) {
      ta[r][static_cast<std::int64_t>(i)] = (*targets[r])[i];
      ma[r][static_cast<std::int64_t>(i)] = true;
    }
  tgt = tgt.to(dev);
  mask = mask.to(dev);
  torch::Tensor all = first.unsqueeze(1);
  if (L > 1) {
    auto rest = state.step(tgt.narrow(1, 0, static_cast<std::int64_t>(L) - 1), mask.narrow(1, 0, static_cast<std::int64_t>(L) - 1));
    all = torch::cat({all, rest}, 1);
  }
  // log p(token) = logit - logsumexp(logits): avoids a second [n, L, V] tensor.
  auto picked = all.gather(2, tgt.unsqueeze(2)).squeeze(2).to(torch::kFloat64);
  auto lse = all.to(torch::kFloat32).logsumexp(2).to(torch::kFloat64);
  auto lp = (picked - lse).masked_fill(mask.logical_not(), 0.0).to(torch::kCPU);
  auto sums = lp.sum(1);
  for (std::int64_t r = 0; r < n; ++r) {
    out[static_cast<std::size_t>(r)] = sums[r].item<double>();
    if (per_token)
      for (std::size_t i = 0; i < targets[r]->size(); ++i) (*per_token)[r].push_back(lp[r][static_cast<std::int64_t>(i)].item<double>());
  }
  return out;
}

}  // namespace

std::vector<std::int32_t> repeated_ngram_tokens(const TokenIds& generated, int n) {
  std::vector<std::int32_t> out;
  if (n <= 0) return out;
  const std::size_t m = static_cast<std::size_t>(n) - 1, len = generated.size();
  if (len < m) return out;
  // Every earlier position i where generated[i, i + m) equals the last m tokens.
  for (std::size_t i = 0; i + m < len; ++i)
    if (std::equal(generated.begin() + static_cast<std::ptrdiff_t>(i), generated.begin() + static_cast<std::ptrdiff_t>(i + m),
                   generated.end() - static_cast<std::ptrdiff_t>(m)))
      out.push_back(generated[i + m]);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

torch::Tensor causal_key_mask(const torch::Tensor& key_valid, std::int64_t L) {
  const auto dev = key_valid.device();
  const auto T = key_valid.size(1), T0 = T - L;
  auto qi = torch::arange(T0, T, torch::TensorOptions().dtype(torch::kInt64).device(dev)).view({L, 1});
  auto kj = torch::arange(0, T, torch::TensorOptions().dtype(torch::kInt64).device(dev)).view({1, T});
  auto allowed = (kj <= qi).unsqueeze(0).logical_and(key_valid.unsqueeze(1));  // [B, L, T]
  return torch::zeros(allowed.sizes(), torch::TensorOptions().dtype(torch::kFloat32).device(dev))
      .masked_fill(allowed.logical_not(), -1e30f)
      .unsqueeze(1);
}

std::vector<TokenIds> generate(Decoder& model, const std::vector<TokenIds>& prompts, const DecodeOptions& o) {
  torch::NoGradGuard g;
  if (o.beams < 1) throw UsageError("beams must be >= 1");
  if (o.temperature < 0) throw UsageError("temperature must be >= 0");
  if (!(o.top_p > 0 && o.top_p <= 1)) throw UsageError("top_p must be in (0, 1]");
  if (o.beams > 1 && o.temperature > 0) throw UsageError("beam search and sampling cannot be combined");
  if (o.allow && (o.beams > 1 || o.temperature > 0))
    throw UsageError("constrained decoding is greedy: it cannot be combined with beam search or sampling");
  if (!(o.cad >= 0)) throw UsageError("cad must be >= 0");
  if (o.no_repeat_ngram < 0) throw UsageError("no_repeat_ngram must be >= 0 (0 = off)");
  if (o.cad > 0 && (o.beams > 1 || o.temperature > 0))
    throw UsageError("context-aware decoding is greedy: it cannot be combined with beam search or sampling");
  if (o.cad > 0 && (!o.without_documents || o.without_documents->size() != prompts.size()))
    throw UsageError("context-aware decoding needs each prompt's form without documents (" +
                     std::to_string(o.without_documents ? o.without_documents->size() : 0) + " for " +
                     std::to_string(prompts.size()) + " prompts)");
  std::vector<TokenIds> out;
  out.reserve(prompts.size());
  if (o.max_new_tokens == 0) return std::vector<TokenIds>(prompts.size());
  if (o.beams > 1) {
    for (auto& p : prompts) out.push_back(beam_search(model, p, o));
    return out;
  }
  const std::size_t bs = std::max<std::size_t>(1, o.batch_size);
  for (std::size_t i = 0; i < prompts.size(); i += bs) {
    std::vector<TokenIds> chunk(prompts.begin() + static_cast<std::ptrdiff_t>(i),
                                prompts.begin() + static_cast<std::ptrdiff_t>(std::min(prompts.size(), i + bs)));
    for (auto& r : greedy_or_sample(model, chunk, o, i)) out.push_back(std::move(r));
  }
  return out;
}

std::vector<double> score(Decoder& model, const std::vector<ScoreItem>& items, const ScoreOptions& o) {
  torch::NoGradGuard g;
  std::vector<double> out(items.size(), 0.0);
  const std::size_t bs = std::max<std::size_t>(1, o.batch_size);
  if (o.share_prefix) {
    std::map<std::string, std::vector<std::size_t>> groups;  // prompt -> request indices
    std::vector<std::string> order;
    for (std::size_t i = 0; i < items.size(); ++i) {
      auto key = ids_key(*items[i].prompt);
      auto [it, fresh] = groups.try_emplace(key);
      if (fresh) order.push_back(key);
      it->second.push_back(i);
    }
    for (auto& key : order) {
      auto& idx = groups[key];
      for (std::size_t c = 0; c < idx.size(); c += bs) {
        const std::size_t n = std::min(bs, idx.size() - c);
        torch::Tensor first;
        auto state = model.start({*items[idx[c]].prompt}, first);
        state->select(torch::zeros({static_cast<std::int64_t>(n)}, torch::kInt64));
        std::vector<const TokenIds*> targets;
        for (std::size_t j = 0; j < n; ++j) targets.push_back(items[idx[c + j]].target);
        auto s = score_rows(*state, first.expand({static_cast<std::int64_t>(n), first.size(1)}), targets, model.device());
        for (std::size_t j = 0; j < n; ++j) out[idx[c + j]] = s[j];
      }
    }
    return out;
  }
  for (std::size_t c = 0; c < items.size(); c += bs) {
    const std::size_t n = std::min(bs, items.size() - c);
    std::vector<TokenIds> prompts;
    std::vector<const TokenIds*> targets;
    for (std::size_t j = 0; j < n; ++j) {
      prompts.push_back(*items[c + j].prompt);
      targets.push_back(items[c + j].target);
    }
    torch::Tensor first;
    auto state = model.start(prompts, first);
    auto s = score_rows(*state, first, targets, model.device());
    for (std::size_t j = 0; j < n; ++j) out[c + j] = s[j];
  }
  return out;
}

std::vector<std::vector<double>> score_tokens(Decoder& model, const TokenIds& prompt, const std::vector<TokenIds>& targets) {
  torch::NoGradGuard g;
  std::vector<std::vector<double>> per;
  if (targets.empty()) return per;
  torch::Tensor first;
  auto state = model.start({prompt}, first);
  const auto n = static_cast<std::int64_t>(targets.size());
  state->select(torch::zeros({n}, torch::kInt64));
  std::vector<const TokenIds*> t;
  for (auto& x : targets) t.push_back(&x);
  score_rows(*state, first.expand({n, first.size(1)}), t, model.device(), &per);
  return per;
}

}  // namespace attune::models
