// attune train --method ium: offline IUM (002 §4; METHODS.md §5), one reranker for many
// RAG agents. Agents (task, language model, k) come from an --agents JSON file; every
// iteration reranks BM25's top 100 with the current reranker (BM25 alone in the first),
// collects per-document feedback on the top --ium-feedback-k with each agent's language
// model (1 when its output with that document alone reaches the task's full utility, e.g.
// an exact match), and trains the reranker on all feedback so far. Iteration t is the
// folder OUT/iter-t; a finished one is skipped, so a killed run resumes. With
// --ium-relevance-start, OUT/iter-0 first learns the training data's own relevance (its
// gold_doc passages), and the EM starts from it.
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <unordered_map>
#include <unordered_set>

#include "attune/core/error.h"
#include "attune/feedback/collect.h"
#include "attune/llm/openai.h"
#include "attune/models/config.h"
#include "attune/models/ium.h"
#include "attune/neural/dense.h"
#include "attune/retrieval/retriever.h"
#include "attune/retrieval/spec.h"
#include "attune/train/ium.h"
#include "cmd_neural.h"
#include "common.h"

namespace fs = std::filesystem;

namespace attune::cli {

namespace {

struct IumArgs {
  std::string agents;
  bool online = false;
  bool online_promote = false;  // --ium-online-promote
  std::size_t online_batch = 256;
  std::size_t iterations = 3, feedback_k = 32, max_length = 256;
  bool relevance_start = false;
  std::size_t relevance_limit = 0;  // 0 = --limit
  double unk_fraction = 0.1, positive_weight = 0, positive_at = 1;
  std::string balance = "pooled";  // pooled or agent (--ium-balance)
  std::string initial_prior = "none";  // none (002's reranker) or learned
};

// Per document id, the first stage's score z-scored over the kIumInitialDepth candidates that
// rerank(bm25,100,ium:...) gives the reranker (retrieval::initial_prior_z): a training
// sample's prior with --ium-initial-prior learned. `first` is prior_stage()'s retriever; none
// (the prior off): nothing is ranked, and every prior reads 0.
std::unordered_map<std::string, double> prior_z(const retrieval::Retriever* first, const retrieval::Query& q,
                                                std::span<const Document> cands) {
  if (!first) return {};
  const auto r = first->rank(q, cands, 0);
  std::vector<std::string> ids;
  std::vector<double> scores;
  std::unordered_set<std::string> seen;
  for (std::size_t pos = 0; pos < r.size() && ids.size() < models::kIumInitialDepth; ++pos)
    if (seen.insert(r.ids[pos]).second) {
      ids.push_back(r.ids[pos]);
      scores.push_back(r.scores[pos]);
    }
  const auto z = retrieval::initial_prior_z(scores);
  std::unordered_map<std::string, double> out;
  for (std::size_t i = 0; i < ids.size(); ++i) out[ids[i]] = z[i];
  return out;
}

// The first stage whose order is the prior (a corpus task's first-stage order, else BM25 over
// the candidates), or none when the prior is off.
std::unique_ptr<retrieval::Retriever> prior_stage(bool on, const tasks::Task& task, std::uint64_t seed) {
  return on ? retrieval::make_retriever("bm25", seed, task.uses_corpus()) : nullptr;
}

// The reranker spec of `agent` over BM25's top 100, given the previous iteration's folder (a
// folder trained with the initial prior fuses with it by itself).
std::string agent_spec(const std::string& prev, const Agent& a) {
  return prev.empty() ? "bm25"
                      : "rerank(bm25," + std::to_string(models::kIumInitialDepth) + ",ium:" + prev + "?task=" + a.task +
                            "&model=" + a.llm + ")";
}

// An agent's data (--data with the agent's task), task, prompt-budget tokenizer and model.
struct AgentBench {
  DataOptions data;
  std::unique_ptr<tasks::Task> task;
  std::unique_ptr<text::Tokenizer> tok;
  std::unique_ptr<llm::LanguageModel> model;
  AgentBench(const DataOptions& d0, const Agent& g, const RunOptions& r) : data(d0) {
    data.task = g.task;
    task = load_task(data);
    tok = engine::budget_tokenizer(r.tokenizer, g.llm);
    model = engine::make_llm(g.llm, data, task.get(), r.models());
  }
  // The agent's per-document feedback on the top `top_l` of `spec` for `view`'s examples,
  // collected into the store (what it holds is not asked again); then every value the store
  // holds for `ds`, by (example, document).
  std::map<std::pair<std::string, std::string>, double> doc_feedback(store::Store& st, const train::SplitSource& view,
                                                                    const data::Dataset& ds, const std::string& spec,
                                                                    std::size_t top_l, const RunOptions& r,
                                                                    const TrainArgs& a, bool progress) {
    train::Bench b{*task, *model, st, *tok, r.threads, progress};
    b.generate.max_new_tokens = a.max_new_tokens;
    b.generate.decode = a.decode;
    feedback::CollectOptions co;
    co.kind = feedback::Kind::Doc;
    co.initial_retriever = spec;
    co.top_l = top_l;
    co.max_length = a.feedback_max_length;
    co.run.seed = r.seed;
    train::collect_feedback(b, view, co);
    std::map<std::pair<std::string, std::string>, double> value;
    for (const auto& rec : st.feedback_get(feedback::dataset_key(ds), "doc", feedback::feedback_model(model->info().id, co.kind, b.generate)))
      value[{rec.example, rec.item}] = rec.value;
    return value;
  }
};

// The relevance start's samples from one split of a corpus task: per example, BM25's top
// `top` passages, a gold_doc labelled 1 and the others 0; with `add_gold`, a gold passage
// found further down BM25's top 100 is added as one more useful sample (training: the
// reranker should see every gold passage it can; dev lists stay BM25's top `top`, so their
// measure is reranking's). The agent's task and model are empty: every sample reads [UNK],
// so the reranker learns relevance for any agent.
void relevance_samples(const DataOptions& d, const tasks::Task& task, store::Store& st, const RunOptions& r,
                       std::size_t limit, std::size_t top, bool add_gold, bool prior, std::vector<train::IumSample>& into) {
  const auto sp = load_workflow_split(d, task, st, r, {"bm25"}, limit);
  const auto& source = sp.sources.for_spec("bm25");
  const auto first = prior_stage(prior, task, r.seed);
  const std::size_t n = limit ? std::min(limit, sp.dataset.examples.size()) : sp.dataset.examples.size();
  for (std::size_t e = 0; e < n; ++e) {
    const auto& ex = sp.dataset.examples[e];
    if (ex.gold_docs.empty())
      throw UsageError("--ium-relevance-start: example " + ex.id + " of " + d.task + " (" + d.split +
                       ") names no gold_doc: the relevance start learns from the gold passages of the training data");
    const std::unordered_set<std::string> gold(ex.gold_docs.begin(), ex.gold_docs.end());
    const auto cands = source.candidates(ex);
    const std::string group = "relevance\x1f" + d.task + '\x1f' + ex.id, q = task.query(ex);
    const auto z = prior_z(first.get(), {ex.id, ex.user, q}, cands);
    for (std::size_t i = 0; i < cands.size(); ++i) {
      const bool g = gold.count(cands[i].id) > 0;
      const auto it = z.find(cands[i].id);
      if (i < top || (add_gold && g)) into.push_back({"", "", q, cands[i].text, g ? 1.0 : 0.0, group, it == z.end() ? 0.0 : it->second});
    }
  }
}

// "0.1234, 0.2345, ...": the dev top-1 share of each epoch, for the progress line.
std::string dev_curve(const train::IumResult& res) {
  std::string curve;
  for (const auto& e : res.epochs) curve += (curve.empty() ? "" : ", ") + std::to_string(e.dev_top1).substr(0, 6);
  return curve;
}

// "5.73", or "per agent: qa|reference 48.20, factcheck|planted:first 0.96" with --ium-balance agent.
std::string weights_note(const train::IumResult& r) {
  char buf[64];
  if (r.agent_positive_weights.empty()) {
    std::snprintf(buf, sizeof buf, "%.2f", r.positive_weight);
    return buf;
  }
  std::string out = "per agent:";
  for (const auto& [agent, w] : r.agent_positive_weights) {
    std::snprintf(buf, sizeof buf, " %.2f,", w);
    out += " " + agent + buf;
  }
  out.pop_back();
  return out;
}

// "; initial-prior weight 0.83 -> 0.91" with --ium-initial-prior learned, else "".
std::string prior_note(const train::IumResult& res, const train::IumOptions& o) {
  if (!o.initial_prior) return "";
  char b[96];
  std::snprintf(b, sizeof b, "; initial-prior weight %.4f -> %.4f", res.prior_weight_start, res.prior_weight);
  return b;
}

// A document is useful to an agent when its utility reaches --ium-positive-at.
double useful_label(double utility, const IumArgs& p) { return utility >= p.positive_at - 1e-9 ? 1.0 : 0.0; }

// Online IUM (002 §4; METHODS.md §5). Per agent, its own copy of the reranker, starting from
// --init: serve the next b training queries with the copy (BM25's top 100 reranked by it;
// BM25 alone while --init is a bare encoder), collect the agent's feedback on the k documents
// each query was served, update the copy on all of that agent's served feedback so far (2
// epochs, no unk replacement), and serve the next b. Each update is the folder
// OUT/AGENT/round-R; a finished one is not trained again, so a killed run resumes (the
// feedback of served lists is in the store). The learning curve is each round's served top-1:
// the share of its queries whose first served document was useful, before the copy saw them.
void run_online(const IumArgs& p, const std::vector<Agent>& agents, const train::IumOptions& base, const DataOptions& d0,
                const RunOptions& r, const TrainArgs& a, store::Store& st) {
  for (const auto& g : agents) {
    AgentBench ab(d0, g, r);
    const auto& d = ab.data;
    const auto& task = ab.task;
    const auto sp = load_workflow_split(d, *task, st, r, {"bm25"}, a.limit);
    const auto& source = sp.sources.for_spec("bm25");
    const std::size_t n = a.limit ? std::min(a.limit, sp.dataset.examples.size()) : sp.dataset.examples.size();
    fs::path copy = a.init;
    bool copy_is_ium = fs::exists(copy / models::kIumConfigFile);
    const auto spec_of = [&](const fs::path& folder, bool is_ium) {
      return is_ium ? "rerank(bm25,100,ium:" + folder.string() + "?task=" + g.task + "&model=" + g.llm + ")" : std::string("bm25");
    };
    // --ium-online-promote: the share of the agent's dev queries (--dev-split, --dev-limit)
    // whose first document under `spec` is useful, asked of the agent's model once per
    // (query, document) and kept in the store, so a resumed run decides the same way.
    const std::unique_ptr<WorkflowSplit> dev = p.online_promote ? load_dev_split(d, a, *task, st, r, {"bm25"}) : nullptr;
    data::Dataset dev_block;  // the dev queries the gate reads
    if (dev) {
      dev_block = dev->dataset;
      if (a.dev_limit && a.dev_limit < dev_block.examples.size()) dev_block.examples.resize(a.dev_limit);
    }
    const auto dev_top1 = [&](const std::string& spec) {
      const std::size_t m = dev_block.examples.size();
      const auto value = ab.doc_feedback(st, train::SplitSource{&dev_block, dev->sources.base.get(), dev->sources.lookup(), 0}, dev_block,
                                         spec, 1, r, a, false);
      const auto retriever = retrieval::make_retriever(spec, r.seed, task->uses_corpus());
      const auto& dsource = dev->sources.for_spec("bm25");
      double useful = 0;
      for (const auto& ex : dev_block.examples) {
        const auto cands = dsource.candidates(ex);
        const auto ranking = retriever->rank({ex.id, ex.user, task->query(ex)}, cands, 1);
        if (ranking.indices.empty()) continue;
        const auto it = value.find({ex.id, cands[ranking.indices[0]].id});
        if (it == value.end())
          throw Error("ium online: no dev feedback stored for (" + ex.id + ", " + cands[ranking.indices[0]].id + ") of agent " + g.name);
        useful += useful_label(it->second, p);
      }
      return m ? useful / static_cast<double>(m) : 0.0;
    };
    double serving_dev = p.online_promote ? dev_top1(spec_of(copy, copy_is_ium)) : 0.0;
    // The gate: the round's copy serves from now on unless it does worse than the serving one on
    // dev (a bad update is not promoted); the served feedback is kept either way.
    const auto promote = [&](const fs::path& out, std::size_t round, nlohmann::json& entry) {
      if (!p.online_promote) {
        copy = out;
        copy_is_ium = true;
        return;
      }
      const double cand = dev_top1(spec_of(out, true));
      const bool up = cand >= serving_dev;  // a tie serves the update, so that neutral rounds still accumulate
      entry["dev_top1_useful"] = cand;
      entry["serving_dev_top1_useful"] = serving_dev;
      entry["promoted"] = up;
      if (!r.quiet)
        std::fprintf(stderr, "train: ium online %s round %zu: dev top-1 useful %.4f against the serving copy's %.4f: %s\n",
                     g.name.c_str(), round, cand, serving_dev, up ? "promoted" : "not promoted, the serving copy stays");
      if (up) {
        copy = out;
        copy_is_ium = true;
        serving_dev = cand;
      }
    };
    std::vector<train::IumSample> served;
    std::string curve;
    nlohmann::json rounds = nlohmann::json::array();
    fs::create_directories(fs::path(a.out) / g.name);
    const auto write_rounds = [&] {
      models::write_json_file(fs::path(a.out) / g.name / "online.json",
                              {{"agent", g.name}, {"task", g.task}, {"llm", g.llm}, {"k", g.k}, {"batch", p.online_batch},
                               {"seed", r.seed}, {"promote", p.online_promote}, {"rounds", rounds}});
    };
    for (std::size_t lo = 0, round = 1; lo < n; lo += p.online_batch, ++round) {
      const std::size_t hi = std::min(n, lo + p.online_batch);
      const std::string spec = spec_of(copy, copy_is_ium);
      data::Dataset block = sp.dataset;  // the same dataset key: the store's feedback is shared
      block.examples.assign(sp.dataset.examples.begin() + static_cast<std::ptrdiff_t>(lo),
                            sp.dataset.examples.begin() + static_cast<std::ptrdiff_t>(hi));
      const auto value = ab.doc_feedback(st, train::SplitSource{&block, sp.sources.base.get(), sp.sources.lookup(), 0}, block,
                                         spec, g.k, r, a, false);
      const auto retriever = retrieval::make_retriever(spec, r.seed, task->uses_corpus());
      const auto first = prior_stage(base.initial_prior, *task, r.seed);
      double top1 = 0;
      std::size_t useful = 0, docs = 0;
      for (const auto& ex : block.examples) {
        const auto cands = source.candidates(ex);
        const auto ranking = retriever->rank({ex.id, ex.user, task->query(ex)}, cands, g.k);
        const auto z = prior_z(first.get(), {ex.id, ex.user, task->query(ex)}, cands);
        for (std::size_t i = 0; i < ranking.indices.size(); ++i) {
          const auto& c = cands[ranking.indices[i]];
          const auto it = value.find({ex.id, c.id});
          if (it == value.end())
            throw Error("ium online: no feedback stored for a served document (" + ex.id + ", " + c.id + ") of agent " + g.name);
          const double label = useful_label(it->second, p);
          const auto zi = z.find(c.id);
          served.push_back({g.task, g.llm, task->query(ex), c.text, label, g.name + '\x1f' + ex.id, zi == z.end() ? 0.0 : zi->second});
          useful += label > 0;
          ++docs;
          if (i == 0) top1 += label;
        }
      }
      top1 /= static_cast<double>(hi - lo);
      curve += (curve.empty() ? "" : ", ") + std::to_string(top1).substr(0, 6);
      rounds.push_back({{"round", round}, {"queries", {lo + 1, hi}}, {"served_by", copy_is_ium ? copy.string() : "bm25"},
                        {"served_top1_useful", top1}, {"useful_documents", useful}, {"documents", docs}});
      write_rounds();
      if (!r.quiet)
        std::fprintf(stderr, "train: ium online %s round %zu: queries %zu-%zu served with %s: top-1 useful %.4f, %zu of %zu documents useful\n",
                     g.name.c_str(), round, lo + 1, hi, copy_is_ium ? "its copy" : "bm25", top1, useful, docs);
      const fs::path out = fs::path(a.out) / g.name / ("round-" + std::to_string(round));
      const auto marker = out / "attune_model.json";
      if (fs::exists(marker) && models::read_json_file(marker).value("complete", false)) {
        promote(out, round, rounds.back());
        write_rounds();
        continue;
      }
      std::size_t positives = 0;
      for (const auto& x : served) positives += x.label > 0;
      if (positives == 0) {
        if (!r.quiet) std::fprintf(stderr, "train: ium online %s round %zu: no useful document served yet: the copy stays\n", g.name.c_str(), round);
        continue;
      }
      auto o = base;
      o.init = copy;
      o.unk_fraction = 0;  // 002: online updates read the agent's own tokens
      if (copy_is_ium) {  // the copy's own agent tokens are kept, this agent's added if it lacks them
        const auto cfg = models::read_json_file(copy / models::kIumConfigFile);
        o.tasks = cfg.at("tasks").template get<std::vector<std::string>>();
        o.models = cfg.at("models").template get<std::vector<std::string>>();
        if (std::find(o.tasks.begin(), o.tasks.end(), g.task) == o.tasks.end()) o.tasks.push_back(g.task);
        if (std::find(o.models.begin(), o.models.end(), g.llm) == o.models.end()) o.models.push_back(g.llm);
      }
      o.fit.out = out;
      o.fit.resume = fs::exists(out / "checkpoint");
      o.fit.data_description = d.data + " " + g.task + ", agent " + g.name + ", online round " + std::to_string(round) + " (" +
                               std::to_string(served.size()) + " served documents)";
      const auto res = train::train_ium(served, {}, o);
      if (res.steps_done != res.total_steps) return;  // stopped early (testing)
      promote(out, round, rounds.back());
      write_rounds();
    }
    // OUT/AGENT/serving: the copy that serves at the end (the last round, or with --ium-online-promote the last
    // promoted one, or --init), so that one spec names every agent's: ium:OUT/{name}/serving.
    const fs::path link = fs::path(a.out) / g.name / "serving";
    if (fs::is_symlink(link))
      fs::remove(link);
    else if (fs::exists(link))
      throw Error("ium online: " + link.string() + " exists and is not the link to the serving copy this run writes there");
    fs::create_directory_symlink(fs::absolute(copy), link);
    if (!r.quiet)
      std::fprintf(stderr, "train: ium online %s: served top-1 useful by round: %s; its reranker: %s\n", g.name.c_str(), curve.c_str(),
                   copy.c_str());
    std::printf("ium online agent %s: %s (retrieve with rerank(bm25,100,ium:%s?task=%s&model=%s))\n", g.name.c_str(), copy.c_str(),
                copy.c_str(), g.task.c_str(), g.llm.c_str());
  }
}

}  // namespace

TrainRunner add_ium_options(CLI::App* train) {
  auto p = std::make_shared<IumArgs>();
  train->add_option("--agents", p->agents,
                    "IUM: a JSON file {\"agents\": [{\"name\", \"task\", \"llm\", \"k\"}, ...]}: each agent a task of --data "
                    "(e.g. the Debian qa, factcheck, slot) and the language model that answers it");
  train->add_flag("--ium-online", p->online,
                  "IUM: online (002 §4): per agent, serve --ium-online-batch training queries with its own copy of the "
                  "reranker (from --init: an IUM folder, or an encoder), update the copy on the feedback of what it served, "
                  "repeat; OUT/AGENT/round-R");
  auto* promote_opt = train->add_flag(
      "--ium-online-promote", p->online_promote,
      "IUM online: after each update, the new copy serves unless its dev top-1 useful (the agent's --dev-split queries, "
      "--dev-limit of them, each list's first document given feedback) is below the serving copy's; then the serving "
      "copy stays (a bad update is not promoted; 002 serves every update)");
  auto* batch_opt = train->add_option("--ium-online-batch", p->online_batch, "IUM online: queries served between two updates (002: 256)")
                        ->capture_default_str();
  train->add_option("--ium-iterations", p->iterations, "IUM: EM iterations, each the folder OUT/iter-N (002: 3)")->capture_default_str();
  train->add_option("--ium-feedback-k", p->feedback_k, "IUM: documents per query given feedback each iteration (002: 32)")
      ->capture_default_str();
  train->add_flag("--ium-relevance-start", p->relevance_start,
                  "IUM: first train OUT/iter-0 on the training data's own relevance (a corpus task's gold_doc passages "
                  "against the rest of BM25's top --ium-feedback-k; no language model asked), and start the EM from it: "
                  "002 starts from a reranker trained on relevance (MS MARCO)");
  auto* rel_limit_opt = train->add_option("--ium-relevance-limit", p->relevance_limit,
                                          "IUM: training queries per task for --ium-relevance-start (0 = --limit)");
  train->add_option("--ium-initial-prior", p->initial_prior,
                    "IUM: none = 002's reranker; learned = its logit plus w times the first stage's score z-scored over "
                    "BM25's top 100 (w fitted to the labels, then learned; ium.json records it and rerank(bm25,100,ium:...) "
                    "adds it), so the reranker learns what BM25's order misses instead of relearning it")
      ->check(CLI::IsMember({"none", "learned"}))
      ->capture_default_str();
  train->add_option("--ium-max-length", p->max_length, "IUM: tokens of [CLS] tid mid x [SEP] d [SEP]")->capture_default_str();
  train->add_option("--ium-unk-fraction", p->unk_fraction, "IUM: share of samples whose agent tokens read [UNK] (002: 0.1)")
      ->capture_default_str();
  train->add_option("--ium-positive-weight", p->positive_weight,
                    "IUM: weight of a useful sample in the loss (0 = balanced: useless / useful samples; 1 = 002's plain "
                    "cross-entropy)")
      ->capture_default_str();
  train->add_option("--ium-balance", p->balance,
                    "IUM: with --ium-positive-weight 0, pooled = one ratio over all agents' samples; agent = each agent's "
                    "useful samples weighed by that agent's own useless / useful ratio")
      ->check(CLI::IsMember({"pooled", "agent"}))
      ->capture_default_str();
  train->add_option("--ium-positive-at", p->positive_at,
                    "IUM: a document is useful when the agent's output with it alone scores at least this (the task's "
                    "metric; 1 = exact match or a right label, as in 002)")
      ->capture_default_str();
  return [p, batch_opt, rel_limit_opt, promote_opt](const DataOptions& d0, const RunOptions& r, const TrainArgs& a) {
    if (p->agents.empty()) throw UsageError("--method ium needs --agents FILE: the agents (task, llm, k) that share the reranker");
    const auto agents = read_agents(p->agents);  // a bad file first: it costs nothing to read
    if (a.init.empty())
      throw UsageError("--method ium needs --init MODEL_DIR: the encoder to start the reranker from (a BERT vocabulary, "
                       "e.g. from `attune pretrain-encoder`)");
    if (!fs::is_directory(a.init)) throw UsageError("--init " + a.init + ": no such model folder");
    if (p->iterations == 0 && !p->relevance_start)
      throw UsageError("--ium-iterations must be at least 1 (0 only with --ium-relevance-start: the relevance start alone)");
    if (rel_limit_opt->count() && !p->relevance_start)
      throw UsageError("--ium-relevance-limit applies to --ium-relevance-start: add it");
    if (p->feedback_k == 0) throw UsageError("--ium-feedback-k must be at least 1");
    // --method ium-online (the issue's spelling) is --method ium --ium-online.
    const bool online = p->online || a.method == "ium-online";
    if (batch_opt->count() && !online)
      throw UsageError("--ium-online-batch applies to online IUM: add --ium-online (or use --method ium-online)");
    if (p->online_batch == 0) throw UsageError("--ium-online-batch must be at least 1");
    if (promote_opt->count() && !online)
      throw UsageError("--ium-online-promote applies to online IUM: add --ium-online (or use --method ium-online)");
    if (p->online_promote && a.dev_split.empty())
      throw UsageError("--ium-online-promote compares each update with the serving copy on --dev-split: give one");
    if (online && p->relevance_start)
      throw UsageError("--ium-relevance-start applies to offline IUM; for online IUM, start from an offline run's "
                       "OUT/iter-0 with --init");
    std::vector<std::string> tasks, models;
    for (const auto& g : agents) {
      if (std::find(tasks.begin(), tasks.end(), g.task) == tasks.end()) tasks.push_back(g.task);
      if (std::find(models.begin(), models.end(), g.llm) == models.end()) models.push_back(g.llm);
    }
    train::IumOptions base;
    base.max_length = p->max_length;
    base.unk_fraction = p->unk_fraction;
    base.positive_weight = p->positive_weight;
    base.balance_per_agent = p->balance == "agent";
    if (base.balance_per_agent && p->positive_weight != 0)
      throw UsageError("--ium-balance agent applies to --ium-positive-weight 0 (balanced), not " + std::to_string(p->positive_weight));
    base.initial_prior = p->initial_prior == "learned";
    if (!(p->positive_at > 0) || !std::isfinite(p->positive_at))
      throw UsageError("--ium-positive-at must be a number above 0 (a document is useful when its utility reaches it)");
    base.tasks = tasks;
    base.models = models;
    apply_fit_options(a, r, base.fit);
    base.init = a.init;
    base.validate();
    auto st = store::open_store(r.store_file());
    neural::register_retrievers(r.device);
    // The relevance start needs gold passages: a corpus task (checked before any work).
    std::vector<std::unique_ptr<tasks::Task>> rel_tasks;
    if (p->relevance_start)
      for (const auto& t : tasks) {
        DataOptions d = d0;
        d.task = t;
        rel_tasks.push_back(load_task(d));
        if (!rel_tasks.back()->uses_corpus())
          throw UsageError("--ium-relevance-start: task " + t + " ranks each user's profile, which names no gold passage; "
                           "the relevance start needs a corpus task whose examples name their gold_doc (e.g. Debian qa)");
      }
    nlohmann::json args = {{"method", "ium"}, {"data", d0.data}, {"agents", p->agents}, {"out", a.out}, {"init", a.init},
                           {"iterations", p->iterations}, {"feedback_k", p->feedback_k}, {"limit", a.limit},
                           {"initial_prior", p->initial_prior}};
    if (p->relevance_start) args["relevance_limit"] = p->relevance_limit ? p->relevance_limit : a.limit;
    if (online) args["online_batch"] = p->online_batch;
    store::RunScope run(*st, "train", args.dump(), r.seed);
    fs::create_directories(a.out);
    if (online) {
      run_online(*p, agents, base, d0, r, a, *st);
      run.end("ok", nlohmann::json({{"method", "ium"}, {"online", true}, {"out", a.out}, {"seed", r.seed}}).dump());
      return;
    }
    std::string prev;
    train::IumResult last;
    if (p->relevance_start) {
      const fs::path out = fs::path(a.out) / "iter-0";
      const auto marker = out / "attune_model.json";
      if (fs::exists(marker) && models::read_json_file(marker).value("complete", false)) {
        if (!r.quiet) std::fprintf(stderr, "train: ium relevance start already in %s\n", out.c_str());
      } else {
        std::vector<train::IumSample> tr_samples, dv_samples;
        for (std::size_t i = 0; i < tasks.size(); ++i) {
          DataOptions d = d0;
          d.task = tasks[i];
          relevance_samples(d, *rel_tasks[i], *st, r, p->relevance_limit ? p->relevance_limit : a.limit, p->feedback_k,
                            true, base.initial_prior, tr_samples);
          if (!a.dev_split.empty()) {
            d.split = a.dev_split;
            relevance_samples(d, *rel_tasks[i], *st, r, a.dev_limit, p->feedback_k, false, base.initial_prior, dv_samples);
          }
        }
        std::size_t positives = 0;
        for (const auto& s : tr_samples) positives += s.label > 0;
        if (!r.quiet)
          std::fprintf(stderr, "train: ium relevance start: %zu samples (%zu gold), dev %zu\n", tr_samples.size(), positives,
                       dv_samples.size());
        auto o = base;
        o.tasks.clear();  // no agent yet: every sample reads [UNK]
        o.models.clear();
        o.fit.out = out;
        o.fit.resume = fs::exists(out / "checkpoint");
        o.fit.data_description = d0.data + " gold passages of the training split (relevance start, " +
                                 std::to_string(tr_samples.size()) + " samples)";
        last = train::train_ium(tr_samples, dv_samples, o);
        if (last.steps_done != last.total_steps) return;  // stopped early (testing)
        if (!r.quiet && !dv_samples.empty())
          std::fprintf(stderr, "train: ium relevance start: dev top-1 gold: BM25 %.4f, untrained %.4f, epochs %s (kept %zu)%s\n",
                       last.first_stage_dev_top1, last.init_dev_top1, dev_curve(last).c_str(), last.best_epoch,
                       prior_note(last, o).c_str());
      }
      prev = out.string();
    }
    for (std::size_t t = 1; t <= p->iterations; ++t) {
      const fs::path out = fs::path(a.out) / ("iter-" + std::to_string(t));
      const auto marker = out / "attune_model.json";
      if (fs::exists(marker) && models::read_json_file(marker).value("complete", false)) {
        if (!r.quiet) std::fprintf(stderr, "train: ium iteration %zu already in %s\n", t, out.c_str());
        prev = out.string();
        continue;
      }
      std::vector<train::IumSample> tr_samples, dv_samples;
      for (const auto& g : agents) {
        AgentBench ab(d0, g, r);
        const auto& d = ab.data;
        const auto& task = ab.task;
        const std::string spec = agent_spec(prev, g);
        const auto collect = [&](const DataOptions& dd, std::size_t limit, std::vector<train::IumSample>& into) {
          const auto sp = load_workflow_split(dd, *task, *st, r, {spec}, limit);
          const auto value = ab.doc_feedback(*st, sp.view(), sp.dataset, spec, p->feedback_k, r, a, !r.quiet);
          const auto& source = sp.sources.for_spec(spec);
          const auto first = prior_stage(base.initial_prior, *task, r.seed);
          const std::size_t n = limit ? std::min(limit, sp.dataset.examples.size()) : sp.dataset.examples.size();
          for (std::size_t e = 0; e < n; ++e) {
            const auto& ex = sp.dataset.examples[e];
            const auto cands = source.candidates(ex);
            const auto z = prior_z(first.get(), {ex.id, ex.user, task->query(ex)}, cands);
            for (const auto& c : cands)
              if (auto it = value.find({ex.id, c.id}); it != value.end()) {
                const auto zi = z.find(c.id);
                into.push_back({g.task, g.llm, task->query(ex), c.text, useful_label(it->second, *p),
                                g.name + '\x1f' + ex.id, zi == z.end() ? 0.0 : zi->second});
              }
          }
        };
        collect(d, a.limit, tr_samples);
        if (!a.dev_split.empty()) {
          DataOptions dd = d;
          dd.split = a.dev_split;
          collect(dd, a.dev_limit, dv_samples);
        }
      }
      std::size_t positives = 0;
      for (const auto& s : tr_samples) positives += s.label > 0;
      if (!r.quiet)
        std::fprintf(stderr, "train: ium iteration %zu/%zu: %zu feedback samples (%zu useful), dev %zu\n", t, p->iterations,
                     tr_samples.size(), positives, dv_samples.size());
      auto o = base;
      o.init = prev.empty() ? fs::path(a.init) : fs::path(prev);
      o.fit.out = out;
      o.fit.resume = fs::exists(out / "checkpoint");
      o.fit.data_description = d0.data + " agents of " + p->agents + ", iteration " + std::to_string(t) + " (" +
                               std::to_string(tr_samples.size()) + " samples)";
      last = train::train_ium(tr_samples, dv_samples, o);
      if (last.steps_done != last.total_steps) return;  // stopped early (testing)
      if (!r.quiet && !dv_samples.empty())
        std::fprintf(stderr,
                     "train: ium iteration %zu: dev top-1 useful: first stage %.4f, untrained %.4f, epochs %s (kept %zu); "
                     "useful samples weighed %s%s\n",
                     t, last.first_stage_dev_top1, last.init_dev_top1, dev_curve(last).c_str(), last.best_epoch,
                     weights_note(last).c_str(), prior_note(last, o).c_str());
      prev = out.string();
    }
    nlohmann::json summary = {{"method", "ium"}, {"out", a.out}, {"final", prev}, {"iterations", p->iterations}, {"seed", r.seed}};
    run.end("ok", summary.dump());
    std::printf("trained ium for %zu agents (%zu iterations) -> %s; retrieve for an agent with "
                "rerank(bm25,100,ium:%s?task=TASK&model=LLM)\n",
                agents.size(), p->iterations, prev.c_str(), prev.c_str());
  };
}

}  // namespace attune::cli
