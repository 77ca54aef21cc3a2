// attune serve: personalized retrieval over HTTP for the tenants of a store (serve/http.h,
// docs/serve.md). Runs until SIGINT or SIGTERM, then lets the requests in flight finish.
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <mutex>
#include <pthread.h>
#include <thread>

#include "attune/core/error.h"
#include "attune/core/file.h"
#include "attune/feedback/judge.h"
#include "attune/neural/dense.h"
#include "attune/neural/selector.h"
#include "attune/retrieval/retriever.h"
#include "attune/serve/http.h"
#include "attune/serve/openapi.h"
#include "attune/store/store.h"
#include "attune/train/ium.h"
#include "attune/train/ropg.h"
#include "attune/train/rspg.h"
#include "common.h"

namespace attune::cli {

namespace {

// The server's learners. Each trains one slot (a tenant's default or one of its agents) on
// that slot's feedback and answers the spec of the trained folder; Service::learn_step
// measures it on the held-back requests itself before promoting it.
//
// One round of the dense reranker (ROPG-KD on the users' utilities, or LUF on a judge's
// labels), from the configured encoder, into rerank(BASE, top_l, dense:DIR).
serve::LearnOutcome train_ropg_round(const serve::LearnConfig& c, const serve::LearnRound& r, train::RopgObjective objective,
                                     const std::vector<train::RopgExample>& train_ex,
                                     const std::vector<train::RopgExample>& dev_ex) {
  train::RopgOptions o;
  o.objective = objective;
  o.init = c.init;
  o.rerank = train::RopgOptions::Rerank{r.base, c.top_l};
  o.fit.out = r.out;
  o.fit.epochs = c.epochs;
  o.fit.lr = c.lr;
  o.fit.batch_size = 16;
  o.fit.seed = r.seed;
  o.fit.quiet = true;
  const bool luf = objective == train::RopgObjective::LUF;
  o.fit.data_description = std::string("attune serve: ") + (luf ? "judged " : "") + "feedback of tenant " +
                           std::to_string(r.tenant) + " (" + std::to_string(r.train.size()) + " requests; " +
                           std::to_string(r.dev.size()) + " held back)";
  if (std::filesystem::exists(r.out)) remove_tree(r.out);  // a round cut short by a crash starts again
  const auto res = train::train_ropg(train_ex, dev_ex, o);
  const double kept = res.best_epoch ? res.epochs.at(res.best_epoch - 1).dev_top1 : res.init_dev_top1;
  char line[256];
  std::snprintf(line, sizeof line, "%s: held-back top-1 %s %.4f at the start -> %.4f (epoch %zu of %zu; oracle %.4f)",
                luf ? "luf" : "ropg-kd", luf ? "judged score" : "utility", res.init_dev_top1, kept, res.best_epoch,
                res.epochs.size(), res.dev_oracle);
  return {r.out.string(), line};
}

// A round's loop settings common to the IUM and RSPG learners: its folder (a round a crash cut
// short starts again), the config's schedule, the round's seed, and what it trained on.
void start_round(train::FitOptions& fit, const serve::LearnConfig& c, const serve::LearnRound& r) {
  fit.out = r.out;
  fit.epochs = c.epochs;
  fit.lr = c.lr;
  fit.seed = r.seed;
  fit.quiet = true;
  fit.data_description = "attune serve: feedback of tenant " + std::to_string(r.tenant) +
                         (r.agent.empty() ? "" : ", agent " + r.agent) + " (" + std::to_string(r.train.size()) +
                         " requests; " + std::to_string(r.dev.size()) + " held back)";
  if (std::filesystem::exists(r.out)) remove_tree(r.out);
}

// ROPG-KD (paper 000) on the per-document utilities of what was served, from the configured
// encoder, into rerank(BASE, top_l, dense:DIR) (the trained folder).
class RopgKdLearner final : public serve::Learner {
 public:
  explicit RopgKdLearner(serve::LearnConfig c) : c_(std::move(c)) {}
  serve::LearnOutcome learn(const serve::LearnRound& r) override {
    const auto examples = [](const std::vector<serve::LearnQuery>& qs) {
      std::vector<train::RopgExample> out;
      for (const auto& q : qs) out.push_back({q.request_id, q.query, q.docs, q.utility, {}, {}});
      return out;
    };
    return train_ropg_round(c_, r, train::RopgObjective::KD, examples(r.train), examples(r.dev));
  }

 private:
  serve::LearnConfig c_;
};

// LUF (paper 004 §2): every rated request's served documents judged by learn.judge (one
// document a prompt, feedback/judge.h: answer / relevant with a score / irrelevant; a
// document whose replies stay malformed is left out), then the dense encoder trained on
// LUF's losses from the configured encoder, into rerank(BASE, top_l, dense:DIR). The
// server still promotes by the users' own utilities on the held-back requests.
class LufLearner final : public serve::Learner {
 public:
  LufLearner(serve::LearnConfig c, std::shared_ptr<llm::LanguageModel> judge) : c_(std::move(c)), judge_(std::move(judge)) {}
  serve::LearnOutcome learn(const serve::LearnRound& r) override {
    const auto examples = [&](const std::vector<serve::LearnQuery>& qs) {
      std::vector<std::string> questions;
      std::vector<std::vector<std::string>> docs;
      for (const auto& q : qs) questions.push_back(q.query), docs.push_back(q.docs);
      feedback::Judge judge(*judge_, feedback::exhaustive_judging());
      const auto res = judge.judge(questions, docs);
      std::vector<train::RopgExample> out;
      for (std::size_t i = 0; i < qs.size(); ++i) {
        train::RopgExample e{qs[i].request_id, qs[i].query, qs[i].docs, {}, {}, {}};
        for (const auto& l : res[i].docs) {
          e.judgement.push_back(!l ? -1 : l->label == feedback::JudgeLabel::Answer ? 2 : l->label == feedback::JudgeLabel::Relevant ? 1 : 0);
          e.utility.push_back(l ? l->score : 0.0);
        }
        out.push_back(std::move(e));
      }
      return out;
    };
    return train_ropg_round(c_, r, train::RopgObjective::LUF, examples(r.train), examples(r.dev));
  }

 private:
  serve::LearnConfig c_;
  std::shared_ptr<llm::LanguageModel> judge_;
};

// Online IUM (paper 002 §4): a cross-encoder that reads the agent's task and model tokens,
// trained pointwise on the slot's feedback (a document is useful when its utility reaches
// learn.positive_at), from the configured encoder each round, on all the slot's feedback so
// far and with no [UNK] replacement (002's online update); it reranks BASE's top 100.
class IumLearner final : public serve::Learner {
 public:
  explicit IumLearner(serve::LearnConfig c) : c_(std::move(c)) {}
  serve::LearnOutcome learn(const serve::LearnRound& r) override {
    // The tokens: the agent's task (its name when it has none) and model.
    const std::string task = r.task.empty() ? (r.agent.empty() ? "default" : r.agent) : r.task;
    const std::string model = r.model.empty() ? "default" : r.model;
    const auto samples = [&](const std::vector<serve::LearnQuery>& qs) {
      std::vector<train::IumSample> out;
      for (const auto& q : qs)
        for (std::size_t i = 0; i < q.docs.size(); ++i)
          out.push_back({task, model, q.query, q.docs[i], q.utility[i] >= c_.positive_at ? 1.0 : 0.0, q.request_id});
      return out;
    };
    train::IumOptions o;
    o.init = c_.init;
    o.unk_fraction = 0;
    o.tasks = {task};
    o.models = {model};
    o.fit.batch_size = 32;
    o.fit.micro_batch = 32;
    o.fit.warmup = 0.05;
    start_round(o.fit, c_, r);
    const auto train = samples(r.train);
    if (std::none_of(train.begin(), train.end(), [](const train::IumSample& x) { return x.label == 1; }))
      return {"", "ium: no served document reached positive_at " + std::to_string(c_.positive_at) + ": nothing to learn"};
    const auto res = train::train_ium(train, samples(r.dev), o);
    char line[256];
    std::snprintf(line, sizeof line,
                  "ium: %zu samples; held-back lists with a useful top document %.4f at the start -> %.4f (epoch %zu of "
                  "%zu; %.1f s)",
                  train.size(), res.init_dev_top1, res.best_epoch ? res.epochs.at(res.best_epoch - 1).dev_top1 : res.init_dev_top1,
                  res.best_epoch, res.epochs.size(), res.seconds);
    const std::string spec = "rerank(" + r.base + ",100,ium:" + r.out.string() + "?task=" + task + "&model=" + model + ")";
    return {spec, line};
  }

 private:
  serve::LearnConfig c_;
};

// RSPG-Pre (paper 000 §5) on the slot's feedback: a selector that picks one retriever of
// learn.pool per query. For each rated request every member ranks the served documents; its
// target is the mean utility of its first selector_k, and the selector reads the query and
// those documents' texts (neural::selector_documents_text, what it reads when it serves).
// The trained folder is itself the retriever spec (selector:DIR): each member ranks the
// candidates, the selector picks one, its ranking is served.
class RspgLearner final : public serve::Learner {
 public:
  RspgLearner(serve::LearnConfig c, std::uint64_t seed) : c_(std::move(c)) {
    for (const auto& spec : c_.pool) pool_.push_back(retrieval::make_retriever(spec, seed));
  }
  serve::LearnOutcome learn(const serve::LearnRound& r) override {
    const auto examples = [&](const std::vector<serve::LearnQuery>& qs) {
      std::vector<train::RspgExample> out;
      for (const auto& q : qs) {
        if (q.documents.size() != q.utility.size())
          throw Error("rspg: request " + q.request_id + " has " + std::to_string(q.documents.size()) + " rated documents but " +
                      std::to_string(q.utility.size()) + " utilities");
        retrieval::Query query;
        query.id = q.request_id;
        query.user = q.user;
        query.text = q.query;
        train::RspgExample e;
        e.id = q.request_id;
        e.query = q.query;
        for (const auto& member : pool_) {
          const Ranking ranked = member->rank(query, q.documents, c_.selector_k);
          e.prompts.push_back(neural::selector_documents_text(q.documents, ranked, c_.selector_k));
          double u = 0;
          for (std::size_t j = 0; j < ranked.size(); ++j) u += q.utility[ranked.indices[j]];
          e.utility.push_back(ranked.size() ? u / static_cast<double>(ranked.size()) : 0.0);
        }
        out.push_back(std::move(e));
      }
      return out;
    };
    const auto train_ex = examples(r.train);
    if (std::none_of(train_ex.begin(), train_ex.end(), [](const train::RspgExample& e) {
          return std::any_of(e.utility.begin(), e.utility.end(), [&](double u) { return u != e.utility.front(); });
        }))
      return {"", "rspg: on every rated request the pool's members serve documents of equal utility: nothing to learn"};
    train::RspgOptions o;
    o.variant = train::RspgVariant::Pre;
    o.init = c_.init;
    o.pool = c_.pool;
    o.k = c_.selector_k;
    o.texts = "documents";
    o.max_length = 256;
    start_round(o.fit, c_, r);
    const auto res = train::train_rspg(train_ex, examples(r.dev), o);
    char line[256];
    std::snprintf(line, sizeof line, "rspg: held-back utility of the selected retriever %.4f at the start -> %.4f (epoch %zu of %zu; oracle %.4f)",
                  res.init_dev_utility, res.best_epoch ? res.epochs.at(res.best_epoch - 1).dev_utility : res.init_dev_utility,
                  res.best_epoch, res.epochs.size(), res.dev_oracle);
    return {r.out.string(), line};
  }

 private:
  serve::LearnConfig c_;
  std::vector<std::unique_ptr<retrieval::Retriever>> pool_;
};

}  // namespace

void add_serve(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand("serve", "serve personalized retrieval over HTTP (docs/serve.md): /v1/retrieve, "
                                          "/v1/feedback, users' documents, the tenant's corpus, /v1/rerank, /search, "
                                          "/metrics; tenants and keys from `attune tenant`");
  auto r = std::make_shared<RunOptions>();
  auto config = std::make_shared<std::string>();
  auto http = std::make_shared<serve::HttpOptions>();
  auto port_file = std::make_shared<std::string>();
  cmd->add_option("--store", r->store, "the store: tenants, keys, documents, requests and feedback; a SQLite file, or a "
                                   "postgresql:// URL that several replicas share")->capture_default_str();
  cmd->add_option("--config", *config, "the deployment's JSON file: retriever spec per tenant, limits, learning "
                                       "(docs/serve.md; for serve --config is this file, not the options file other "
                                       "verbs take); default: bm25 for every tenant, the default limits, learning off");
  cmd->add_option("--host", http->host, "address to listen on (loopback by default)")->capture_default_str();
  cmd->add_option("--port", http->port, "port to listen on (0 = any free port; see --port-file)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  cmd->add_option("--port-file", *port_file, "write the port listened on to this file once listening");
  cmd->add_flag("--quiet", r->quiet, "no start and stop lines on stderr");
  auto learn = std::make_shared<std::string>();
  auto learn_init = std::make_shared<std::string>();
  auto learn_interval = std::make_shared<double>(0);
  auto learn_batch = std::make_shared<std::size_t>(0);
  cmd->add_option("--learn", *learn, "on or off: learning while serving (overrides the config's learn.on)")
      ->check(CLI::IsMember({"on", "off"}));
  cmd->add_option("--learn-init", *learn_init, "the encoder learning starts from (overrides learn.init)");
  cmd->add_option("--learn-interval", *learn_interval, "seconds between learning checks (overrides learn.interval_seconds)")
      ->check(CLI::Range(0.1, 86400.0));
  cmd->add_option("--learn-batch", *learn_batch,
                  "new per-document utilities before a tenant is retrained (overrides learn.min_new_feedback)")
      ->check(CLI::Range(std::size_t{1}, std::size_t{100000000}));
  cmd->callback([=, &rc] {
    serve::ServeConfig cfg = config->empty() ? serve::ServeConfig{} : serve::read_config(*config);
    if (!learn->empty()) cfg.learn.on = *learn == "on";
    if (!learn_init->empty()) cfg.learn.init = *learn_init;
    if (*learn_interval > 0) cfg.learn.interval_seconds = *learn_interval;
    if (*learn_batch > 0) cfg.learn.min_new_feedback = *learn_batch;
    if (cfg.learn.on && cfg.learn.init.empty())
      throw UsageError("learning is on but names no encoder to start from: --learn-init DIR or the config's learn.init");
    if (cfg.learn.on && !std::filesystem::is_directory(cfg.learn.init))
      throw UsageError("learn.init " + cfg.learn.init + ": no such model folder");
    if (cfg.learn.on && cfg.learn.method == "luf" && cfg.learn.judge.empty())
      throw UsageError("learn.method luf needs learn.judge: the language model that judges what was served");
    if (!cfg.learn.judge.empty() && cfg.learn.method != "luf")
      throw UsageError("learn.judge is luf's judge; learn.method is " + cfg.learn.method);
    if (cfg.learn.on && cfg.learn.method == "rspg" && cfg.learn.pool.size() < 2)
      throw UsageError("learn.method rspg needs learn.pool: the retriever specs (at least 2) its selector chooses among");
    if (!cfg.learn.pool.empty() && cfg.learn.method != "rspg")
      throw UsageError("learn.pool is rspg's pool; learn.method is " + cfg.learn.method);
    for (const auto& spec : cfg.learn.pool) {  // a bad member fails now, not in the first round
      try {
        retrieval::make_retriever(spec, r->seed);
      } catch (const UsageError& e) {
        throw UsageError("learn.pool: " + std::string(e.what()));
      }
    }
    std::shared_ptr<llm::LanguageModel> judge;
    if (cfg.learn.on && cfg.learn.method == "luf") judge = engine::make_llm(cfg.learn.judge, engine::DataSpec{}, nullptr, r->models());
    neural::configure_for_serving(cfg.dense_micro_batch);  // before the service makes its retrievers
    auto st = store::open_store(r->store_file());
    serve::Service service(*st, cfg);
    if (!cfg.user_feedback.llm.empty()) {
      if (cfg.user_feedback.llm == "reference")
        throw UsageError("user_feedback.llm: the reference reader cannot judge feedback; name a model that follows "
                         "instructions (openai:URL#MODEL, local:DIR) or planted:curator for checks");
      service.set_curator(engine::make_llm(cfg.user_feedback.llm, engine::DataSpec{}, nullptr, r->models()));
    }
    http->openapi = serve::openapi_document();
    http->extra_metrics = [] {
      const auto b = neural::query_batch_stats();
      return "# HELP attune_dense_queries_total Queries encoded through the dense micro-batcher.\n"
             "# TYPE attune_dense_queries_total counter\nattune_dense_queries_total " +
             std::to_string(b.queries) +
             "\n# HELP attune_dense_query_batches_total Forward passes of the dense micro-batcher (queries / "
             "passes = the mean batch).\n# TYPE attune_dense_query_batches_total counter\n"
             "attune_dense_query_batches_total " +
             std::to_string(b.batches) + "\n";
    };
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);  // the server's threads inherit the mask
    serve::HttpServer server(service, *http);
    server.start();
    // The learner thread: a round every interval, none while one runs; stops with the server.
    std::mutex learn_mu;
    std::condition_variable learn_cv;
    bool stopping = false;
    std::thread learn_thread;
    if (cfg.learn.on) {
      learn_thread = std::thread([&, quiet = r->quiet] {
        std::unique_ptr<serve::Learner> learner;
        if (cfg.learn.method == "ium")
          learner = std::make_unique<IumLearner>(cfg.learn);
        else if (cfg.learn.method == "luf")
          learner = std::make_unique<LufLearner>(cfg.learn, judge);
        else if (cfg.learn.method == "rspg")
          learner = std::make_unique<RspgLearner>(cfg.learn, r->seed);
        else
          learner = std::make_unique<RopgKdLearner>(cfg.learn);
        std::unique_lock lock(learn_mu);
        while (!learn_cv.wait_for(lock, std::chrono::duration<double>(cfg.learn.interval_seconds), [&] { return stopping; })) {
          lock.unlock();
          try {
            for (const auto& rep : service.learn_step(*learner))
              if (!quiet)
                std::fprintf(stderr, "serve: learn, tenant %lld%s%s: %zu requests, %zu held back, served top-1 %.4f, new %.4f: %s; "
                                     "%s (%s)\n",
                             static_cast<long long>(rep.tenant), rep.agent.empty() ? "" : ", agent ",
                             rep.agent.c_str(), rep.train, rep.dev, rep.served_dev_top1, rep.new_dev_top1,
                             rep.promoted ? "promoted" : "kept the served model", rep.model_version.c_str(),
                             rep.report.c_str());
          } catch (const std::exception& e) {
            std::fprintf(stderr, "serve: learning round failed: %s\n", e.what());
          }
          lock.lock();
        }
      });
    }
    if (!port_file->empty()) write_file_atomic(*port_file, std::to_string(server.port()) + "\n");
    if (!r->quiet)
      std::fprintf(stderr, "serve: http://%s:%d (store %s, retriever %s, %zu tenants, learning %s); Ctrl-C stops\n",
                   http->host.c_str(), server.port(), store::store_display_name(r->store).c_str(), cfg.retriever.c_str(), st->tenant_list().size(),
                   cfg.learn.on ? ("on, " + cfg.learn.method + " from " + cfg.learn.init).c_str() : "off");
    int sig = 0;
    sigwait(&stop_signals, &sig);
    server.stop();  // drains the requests in flight
    if (learn_thread.joinable()) {
      {
        std::lock_guard lock(learn_mu);
        stopping = true;
      }
      learn_cv.notify_all();
      learn_thread.join();  // a round in progress finishes first (its model is not half-promoted)
    }
    if (!r->quiet) {
      const auto c = service.counts();
      std::fprintf(stderr, "serve: stopped (%s) after %llu retrievals, %llu feedback records, %llu learning rounds and %llu "
                           "promotions\n",
                   sig == SIGTERM ? "SIGTERM" : "SIGINT", static_cast<unsigned long long>(c.retrieves),
                   static_cast<unsigned long long>(c.feedback_records), static_cast<unsigned long long>(c.learn_rounds),
                   static_cast<unsigned long long>(c.promotions));
    }
    rc = 0;
  });
}

}  // namespace attune::cli
