// evaluate() as its phases: plan -> retrieve and prompt -> generate -> score -> select ->
// compare. Selection (selectors, QPP baselines, oracles) is selection.cpp's; the
// significance tests are compare.cpp's; the text forms of the report are report.cpp's.
#include "attune/eval/evaluate.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <set>
#include <memory>
#include <unordered_map>
#include <unordered_set>

#include "attune/core/error.h"
#include "attune/core/parallel.h"
#include "attune/core/progress.h"
#include "attune/metrics/metrics.h"
#include "attune/llm/generate_check.h"
#include "attune/retrieval/spec.h"
#include "attune/text/lexical.h"
#include "compare.h"
#include "grid.h"
#include "selection.h"

namespace attune::eval {
namespace {

// What an evaluation runs, resolved from the options before anything is retrieved.
struct Plan {
  std::size_t n = 0;       // examples evaluated: the dataset's first n
  bool recall = false;     // a corpus task: r@5 against the gold documents
  std::size_t rank_k = 0;  // documents each retriever ranks: k, at least 5 for r@5
  std::vector<std::unique_ptr<retrieval::Retriever>> retrievers;  // EvalOptions::retrievers' order
  std::vector<const retrieval::CandidateSource*> sources;        // distinct, in order of first use
  std::vector<std::size_t> source_of;                             // per retriever, into sources
  std::vector<std::vector<std::size_t>> pools;  // per selector, its pool as indices into retrievers
  std::vector<bool> in_pool;                    // per retriever: a pool member, ranked in full for QPP
};

// Each retriever's candidate source (source_for's answer, else `source`), deduplicated.
void resolve_sources(Plan& p, const retrieval::CandidateSource& source, const EvalOptions& opts) {
  p.source_of.resize(p.retrievers.size());
  for (std::size_t r = 0; r < p.retrievers.size(); ++r) {
    const retrieval::CandidateSource* s = opts.source_for ? opts.source_for(opts.retrievers[r]) : nullptr;
    if (!s) s = &source;
    auto it = std::find(p.sources.begin(), p.sources.end(), s);
    p.source_of[r] = static_cast<std::size_t>(it - p.sources.begin());
    if (it == p.sources.end()) p.sources.push_back(s);
  }
}

// Each selector's pool as indices into the retrievers. UsageError for a pool of fewer
// than 2, a selector without a scoring function, or a member that is not evaluated.
void resolve_pools(Plan& p, const EvalOptions& opts) {
  p.in_pool.assign(p.retrievers.size(), false);
  for (const auto& sel : opts.selectors) {
    if (sel.pool.size() < 2) throw UsageError("selector " + sel.spec + " needs a pool of at least 2 retrievers");
    if (!sel.score) throw UsageError("selector " + sel.spec + " has no scoring function");
    std::vector<std::size_t> idx;
    for (const auto& member : sel.pool) {
      auto it = std::find(opts.retrievers.begin(), opts.retrievers.end(), member);
      if (it == opts.retrievers.end())
        throw UsageError("selector " + sel.spec + ": its pool member " + member + " is not among the retrievers evaluated");
      idx.push_back(static_cast<std::size_t>(it - opts.retrievers.begin()));
      p.in_pool[idx.back()] = true;
    }
    p.pools.push_back(std::move(idx));
  }
}

// Validates the dataset and the options, builds the retrievers, resolves each one's
// candidate source, prefetches the examples from each distinct source, then resolves the
// selectors' pools. Error without gold outputs; UsageError for bad options or specs.
Plan plan(const data::Dataset& ds, const tasks::Task& task, const retrieval::CandidateSource& source,
          const EvalOptions& opts) {
  if (!ds.has_outputs) throw Error("eval needs gold outputs, and " + ds.task + " " + ds.split + " has none");
  if (ds.examples.empty())
    throw Error((ds.sources.empty() ? "" : ds.sources.front().string() + ": ") + "no examples: " + ds.task + " " +
                ds.split + " is empty, and an evaluation of nothing would be a table of zeros");
  opts.validate();
  Plan p;
  p.n = opts.run.limit ? std::min(opts.run.limit, ds.examples.size()) : ds.examples.size();
  p.recall = task.uses_corpus();
  p.rank_k = std::max<std::size_t>({opts.k, p.recall ? std::size_t{5} : std::size_t{0}, opts.oracle_depth});
  // On a corpus task the first stage already ranked by corpus BM25: "bm25" keeps that order.
  for (const auto& spec : opts.retrievers) p.retrievers.push_back(retrieval::make_retriever(spec, opts.run.seed, p.recall));
  resolve_sources(p, source, opts);
  for (const auto* s : p.sources) s->prefetch(std::span<const Example>(ds.examples.data(), p.n));
  resolve_pools(p, opts);
  return p;
}

// The grid with the examples' golds and, per (retriever, example) cell: the candidates of
// the retriever's source ranked (each distinct source asked once per example), the prompt of
// the top k, r@5 and, for pool members, QPP values of the full ranking. Parallel over
// examples; throws what rank() throws (PrivacyError).
Grid retrieve_and_prompt(const data::Dataset& ds, const tasks::Task& task, const text::Tokenizer& tok,
                         const EvalOptions& opts, const Plan& p) {
  tasks::PromptOptions popts;
  popts.max_length = opts.max_length;
  popts.reference_quirks = opts.reference_quirks;
  const std::size_t qpp_k = opts.qpp_k ? opts.qpp_k : std::max<std::size_t>(1, opts.k);
  const std::size_t R = p.retrievers.size(), n = p.n;
  Grid g;
  g.n = n;
  for (std::size_t e = 0; e < n; ++e) {
    g.golds.push_back(ds.examples[e].output);
    g.queries.push_back(task.query(ds.examples[e]));
  }
  g.prompts.resize(R * n);
  if (opts.generate.cad > 0) g.without_documents.resize(R * n);
  g.retrieved.resize(R * n);
  g.r5.assign(R * n, 0.0);
  g.qpps.resize(R * n);
  std::vector<std::vector<std::string>> single(opts.oracle_depth ? R * n : 0);  // per cell: one-document prompts
  std::vector<std::vector<std::string>> orders(opts.oracle_orders ? R * n : 0);  // per cell: every order's prompt
  parallel_for(n, opts.run.threads, [&](std::size_t e) {
    const Example& ex = ds.examples[e];
    std::vector<std::vector<Document>> cand_sets(p.sources.size());
    for (std::size_t s = 0; s < p.sources.size(); ++s) cand_sets[s] = p.sources[s]->candidates(ex);
    retrieval::Query q{ex.id, ex.user, task.query(ex)};
    std::unordered_set<std::string> gold(ex.gold_docs.begin(), ex.gold_docs.end());
    // Context-aware decoding: the example's prompt without documents, built once for all rows.
    const std::string bare = opts.generate.cad > 0 ? task.prompt(ex, {}, tok, popts) : std::string();
    for (std::size_t r = 0; r < R; ++r) {
      const auto& cands = cand_sets[p.source_of[r]];
      const auto& ret = *p.retrievers[r];
      // A pool member is ranked in full for its QPP values; every retriever's full ranking
      // begins with its top-k one (stable sorts; random's draws come in the same order).
      auto ranking = ret.rank(q, cands, p.in_pool[r] ? 0 : p.rank_k);
      if (p.in_pool[r]) {
        std::vector<double> sc(ranking.scores.begin(), ranking.scores.end());
        // Scores of rank-only lists: reciprocal ranks (000 Table 4 does so for recency).
        if (ret.scores_are_ranks())
          for (std::size_t j = 0; j < sc.size(); ++j) sc[j] = 1.0 / static_cast<double>(j + 1);
        g.qpps[g.at(r, e)] = qpp(sc, qpp_k, text::bm25_tokens(q.text).size(), opts.qpp_sigma_percent);
        if (ranking.size() > p.rank_k) {
          ranking.indices.resize(p.rank_k);
          ranking.ids.resize(p.rank_k);
          ranking.scores.resize(p.rank_k);
        }
      }
      std::vector<const Document*> docs;
      for (std::size_t j = 0; j < ranking.size() && j < opts.k; ++j) docs.push_back(&cands[ranking.indices[j]]);
      for (auto* d : docs) g.retrieved[g.at(r, e)].push_back(d->id);
      if (p.recall) g.r5[g.at(r, e)] = metrics::recall_at_k(ranking.ids, gold, 5);
      g.prompts[g.at(r, e)] = task.prompt(ex, docs, tok, popts);
      if (opts.generate.cad > 0) g.without_documents[g.at(r, e)] = bare;
      if (opts.oracle_orders && docs.size() > 1) {
        std::vector<std::size_t> perm(docs.size());
        for (std::size_t j = 0; j < perm.size(); ++j) perm[j] = j;
        do {
          std::vector<const Document*> ordered;
          for (auto j : perm) ordered.push_back(docs[j]);
          orders[g.at(r, e)].push_back(task.prompt(ex, ordered, tok, popts));
        } while (std::next_permutation(perm.begin(), perm.end()));
      }
      for (std::size_t j = 0; j < ranking.size() && j < opts.oracle_depth; ++j) {
        const std::vector<const Document*> one = {&cands[ranking.indices[j]]};
        single[g.at(r, e)].push_back(task.prompt(ex, one, tok, popts));
      }
    }
  });
  // Distinct oracle prompts, generated once however many rows (or orders) share them.
  std::unordered_map<std::string, std::size_t> seen;
  const auto intern = [&](std::vector<std::vector<std::string>>& per_cell, std::vector<std::vector<std::size_t>>& cells) {
    cells.resize(R * n);
    for (std::size_t c = 0; c < per_cell.size(); ++c)
      for (auto& pr : per_cell[c]) {
        auto [it, fresh] = seen.emplace(pr, g.oracle_prompts.size());
        if (fresh) {
          g.oracle_prompts.push_back(std::move(pr));
          // An oracle prompt holds its example's input, so one example's form without documents.
          if (opts.generate.cad > 0) g.oracle_without_documents.push_back(g.without_documents[c]);
        }
        cells[c].push_back(it->second);
      }
  };
  if (opts.oracle_depth) intern(single, g.oracle_cells);
  if (opts.oracle_orders) intern(orders, g.order_cells);
  return g;
}

// The model's output for every prompt, in the prompts' order: batches of opts.run.batch (at
// least 1), in parallel over batches.
// without_documents: context-aware decoding's second form of each prompt (empty: none).
std::vector<std::string> generate(llm::LanguageModel& model, const std::vector<std::string>& prompts,
                                  const std::vector<std::string>& without_documents, const EvalOptions& opts) {
  std::vector<std::string> outputs(prompts.size());
  const std::size_t batch = std::max<std::size_t>(1, opts.run.batch);
  const std::size_t n_batches = (prompts.size() + batch - 1) / batch;
  Progress progress("eval", prompts.size(), opts.run.progress);
  parallel_for(n_batches, opts.run.threads, [&](std::size_t b) {
    const std::size_t lo = b * batch, hi = std::min(prompts.size(), lo + batch);
    std::vector<llm::Prompt> ps;
    for (std::size_t i = lo; i < hi; ++i) ps.push_back({prompts[i], without_documents.empty() ? std::string() : without_documents[i]});
    auto gens = model.generate(ps, opts.generate);
    for (std::size_t i = lo; i < hi; ++i) outputs[i] = gens[i - lo].text;
    progress.add(hi - lo);
  });
  progress.finish();
  return outputs;
}

// The report's header and one row per retriever: the task's metrics over its outputs, and
// per example the output, metrics and documents; on corpus tasks r@5 too (a last column).
EvalReport score(const data::Dataset& ds, const tasks::Task& task, const llm::LanguageModel& model,
                 const EvalOptions& opts, const Grid& g) {
  const std::size_t n = g.n;
  const bool recall = task.uses_corpus();
  EvalReport rep;
  rep.task = task.name();
  rep.split = ds.split;
  rep.llm = model.info().id;
  rep.generate = opts.generate.canonical();
  rep.k = opts.k;
  rep.seed = opts.run.seed;
  rep.examples = n;
  rep.metrics = task.metrics();
  rep.alpha = opts.alpha;
  for (std::size_t r = 0; r < opts.retrievers.size(); ++r) {
    RetrieverResult res;
    res.spec = opts.retrievers[r];
    std::vector<std::string> outs(g.outputs.begin() + r * n, g.outputs.begin() + (r + 1) * n);
    res.metrics = task.aggregate(outs, g.golds);
    double r5_sum = 0;
    for (std::size_t e = 0; e < n; ++e) {
      ExampleResult ex{ds.examples[e].id, outs[e], task.score(outs[e], g.golds[e]), g.retrieved[g.at(r, e)], {}};
      if (recall) {
        ex.metrics["r@5"] = g.r5[g.at(r, e)];
        r5_sum += g.r5[g.at(r, e)];
      }
      res.examples.push_back(std::move(ex));
    }
    if (recall) res.metrics["r@5"] = n ? r5_sum / n : 0;
    if (opts.oracle_depth) {
      // Per example, the best and the worst single document by the primary metric; an
      // example whose retriever gave no document (none) counts its own value for both.
      const auto& primary = rep.metrics.front();
      OracleBounds ob{opts.oracle_depth, primary.name, 0, 0};
      for (std::size_t e = 0; e < n; ++e) {
        const double own = res.examples[e].metrics.at(primary.name);
        double best = own, worst = own;
        bool any = false;
        for (auto i : g.oracle_cells[g.at(r, e)]) {
          const double v = task.score(g.oracle_outputs[i], g.golds[e]).at(primary.name);
          if (!any) best = worst = v, any = true;
          const bool better = primary.higher_is_better ? v > best : v < best;
          const bool lower = primary.higher_is_better ? v < worst : v > worst;
          if (better) best = v;
          if (lower) worst = v;
        }
        ob.best += best;
        ob.worst += worst;
      }
      if (n) ob.best /= static_cast<double>(n), ob.worst /= static_cast<double>(n);
      res.oracle = ob;
    }
    if (opts.oracle_orders) {
      // Per example, the best and the worst order of its top-k; a row with fewer than two
      // documents has one order, its own.
      const auto& primary = rep.metrics.front();
      OrderBounds ob{opts.k, primary.name, 0, 0, 0};
      for (std::size_t e = 0; e < n; ++e) {
        double best = res.examples[e].metrics.at(primary.name), worst = best;
        for (auto i : g.order_cells[g.at(r, e)]) {
          const double v = task.score(g.oracle_outputs[i], g.golds[e]).at(primary.name);
          if (primary.higher_is_better ? v > best : v < best) best = v;
          if (primary.higher_is_better ? v < worst : v > worst) worst = v;
          ++ob.prompts;
        }
        ob.best += best;
        ob.worst += worst;
      }
      if (n) ob.best /= static_cast<double>(n), ob.worst /= static_cast<double>(n);
      res.orders = ob;
    }
    rep.results.push_back(std::move(res));
  }
  if (recall) rep.metrics.push_back({"r@5", true, "mcnemar"});
  return rep;
}

}  // namespace

void EvalOptions::validate() const {
  if (retrievers.empty()) throw FieldError<UsageError>("retrievers", "eval needs at least one retriever");
  if (const auto twice = retrieval::first_repeated_spec(retrievers); !twice.empty())
    throw FieldError<UsageError>("retrievers", "retrievers lists \"" + twice + "\" twice: name each retriever once");
  llm::validate_generate_options(generate);
  if (oracle_depth > 1000)
    throw FieldError<UsageError>("oracle_depth", "oracle_depth = " + std::to_string(oracle_depth) + ": at most 1000 documents per row");
  if (oracle_orders && (k < 2 || k > kMaxOrderK))
    throw FieldError<UsageError>("oracle_orders", "the best-ordering oracle needs k from 2 to " + std::to_string(kMaxOrderK) +
                                                      " (k! orders per example and row), not k = " + std::to_string(k));
  if (!(alpha > 0 && alpha < 1)) throw FieldError<UsageError>("alpha", "alpha = " + std::to_string(alpha) + ": must be in (0, 1)");
  if (!(qpp_sigma_percent >= 0 && qpp_sigma_percent <= 100))
    throw FieldError<UsageError>("qpp_sigma_percent",
                                 "qpp_sigma_percent = " + std::to_string(qpp_sigma_percent) + ": must be in [0, 100]");
}

EvalReport evaluate(const data::Dataset& ds, const tasks::Task& task, const retrieval::CandidateSource& source,
                    llm::LanguageModel& model, const text::Tokenizer& tok, const EvalOptions& opts) {
  const auto start = std::chrono::steady_clock::now();
  const Plan p = plan(ds, task, source, opts);
  Grid g = retrieve_and_prompt(ds, task, tok, opts, p);
  g.outputs = generate(model, g.prompts, g.without_documents, opts);
  if (!g.oracle_prompts.empty()) g.oracle_outputs = generate(model, g.oracle_prompts, g.oracle_without_documents, opts);
  EvalReport rep = score(ds, task, model, opts, g);
  add_selections(task, opts, p.pools, g, rep);
  rep.comparisons = compare_pairs(rep);
  if (opts.list_overlap)
    for (std::size_t i = 0; i < rep.results.size(); ++i)
      for (std::size_t j = i + 1; j < rep.results.size(); ++j) {
        const auto& A = rep.results[i];
        const auto& B = rep.results[j];
        ListOverlap o{A.spec, B.spec};
        double tau_sum = 0;
        for (std::size_t e = 0; e < A.examples.size() && e < B.examples.size(); ++e) {
          o.jaccard += jaccard(A.examples[e].retrieved, B.examples[e].retrieved);
          ++o.examples;
          if (const auto t = kendall_tau_b(A.examples[e].retrieved, B.examples[e].retrieved)) {
            tau_sum += *t;
            ++o.tau_examples;
          }
        }
        if (o.examples) o.jaccard /= static_cast<double>(o.examples);
        if (o.tau_examples) o.kendall_tau = tau_sum / static_cast<double>(o.tau_examples);
        rep.overlaps.push_back(std::move(o));
      }
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return rep;
}

double jaccard(std::span<const DocId> a, std::span<const DocId> b) {
  std::set<DocId> sa(a.begin(), a.end()), sb(b.begin(), b.end()), u = sa;
  u.insert(sb.begin(), sb.end());
  if (u.empty()) return 1.0;
  std::size_t both = 0;
  for (const auto& d : sa) both += sb.count(d);
  return static_cast<double>(both) / static_cast<double>(u.size());
}

std::optional<double> kendall_tau_b(std::span<const DocId> a, std::span<const DocId> b) {
  // Rank in each list (first occurrence); a document missing from a list ranks after its last.
  std::vector<DocId> u;
  std::map<DocId, std::size_t> ra, rb;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (ra.emplace(a[i], i).second && std::find(u.begin(), u.end(), a[i]) == u.end()) u.push_back(a[i]);
  for (std::size_t i = 0; i < b.size(); ++i)
    if (rb.emplace(b[i], i).second && std::find(u.begin(), u.end(), b[i]) == u.end()) u.push_back(b[i]);
  if (u.size() < 2) return std::nullopt;
  const auto rank = [](const std::map<DocId, std::size_t>& r, const DocId& d, std::size_t missing) {
    const auto it = r.find(d);
    return it == r.end() ? missing : it->second;
  };
  double concordant = 0, discordant = 0, tied_a = 0, tied_b = 0, pairs = 0;
  for (std::size_t i = 0; i < u.size(); ++i)
    for (std::size_t j = i + 1; j < u.size(); ++j) {
      const auto xa = rank(ra, u[i], a.size()), ya = rank(ra, u[j], a.size());
      const auto xb = rank(rb, u[i], b.size()), yb = rank(rb, u[j], b.size());
      ++pairs;
      const bool ta = xa == ya, tb = xb == yb;
      tied_a += ta;
      tied_b += tb;
      if (ta || tb) continue;
      ((xa < ya) == (xb < yb) ? concordant : discordant) += 1;
    }
  const double denom = std::sqrt((pairs - tied_a) * (pairs - tied_b));
  if (denom == 0) return std::nullopt;
  return (concordant - discordant) / denom;
}

}  // namespace attune::eval
