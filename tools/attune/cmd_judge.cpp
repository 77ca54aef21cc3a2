// attune judge: LLM-judged relevance labels (LUF, paper 004) for each query's top k ->
// JSONL, with multi-level judging (or every document, --exhaustive) and what it cost.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "attune/core/error.h"
#include "attune/core/file.h"
#include "attune/core/parallel.h"
#include "attune/feedback/collect.h"
#include "attune/feedback/judge.h"
#include "attune/llm/cached.h"
#include "attune/llm/openai.h"
#include "attune/neural/dense.h"
#include "common.h"

namespace attune::cli {

namespace {

struct Tally {
  std::size_t questions = 0, labelled = 0, answer = 0, relevant = 0, irrelevant = 0, failed = 0, found = 0;
};

}  // namespace

void add_judge(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand(
      "judge", "LLM-judged labels (answer / relevant with a score / irrelevant) for each query's top k; JSONL per query");
  auto d = std::make_shared<DataOptions>();
  auto r = std::make_shared<RunOptions>();
  auto spec = std::make_shared<std::string>("bm25");
  auto llm_spec = std::make_shared<std::string>();
  auto k = std::make_shared<std::size_t>(20);
  auto limit = std::make_shared<std::size_t>(0);
  auto groups = std::make_shared<std::string>("1,1,2,4,8");
  auto retries = std::make_shared<std::size_t>(2);
  auto exhaustive = std::make_shared<bool>(false);
  auto compare = std::make_shared<bool>(false);
  auto out = std::make_shared<std::string>();
  d->add(*cmd);
  r->add(*cmd);
  cmd->add_option("--retriever", *spec, "retriever whose top k is judged")->capture_default_str();
  cmd->add_option("--llm", *llm_spec, "the judging language model (e.g. openai:URL#MODEL; planted:judge for checks)")
      ->required();
  cmd->add_option("--k", *k, "ranks judged at most per query")->capture_default_str();
  cmd->add_option("--limit", *limit, "only the first N examples (0 = all)")->capture_default_str();
  cmd->add_option("--groups", *groups, "multi-level group sizes down the ranks; the last doubles from then on")
      ->capture_default_str();
  cmd->add_option("--retries", *retries, "asks again after a malformed reply, before the group counts as failed")
      ->capture_default_str();
  cmd->add_flag("--exhaustive", *exhaustive, "judge every document of the top k, one a prompt");
  cmd->add_flag("--compare", *compare, "also judge exhaustively and report both costs (the labels written are multi-level's)");
  cmd->add_option("--out", *out, "output JSONL file (\"-\": standard output)")->required();
  cmd->callback([=, &rc] {
    feedback::JudgeOptions o = *exhaustive ? feedback::exhaustive_judging() : feedback::JudgeOptions{};
    if (!*exhaustive) o.groups = positive_counts("--groups", *groups);
    o.retries = *retries;
    o.max_docs = *k;
    if (*k == 0) throw UsageError("--k must be at least 1");
    auto task = load_task(*d);
    auto ds = load_dataset(*d);
    if (*limit && ds.examples.size() > *limit) ds.examples.resize(*limit);
    auto st = store::open_store(r->store_file());
    neural::register_retrievers(r->device);
    auto ret = retrieval::make_retriever(*spec, r->seed, task->uses_corpus());
    auto sources = engine::make_sources(*d, *task, *st, r->models(), r->quiet, {*spec});
    const auto& source = sources.for_spec(*spec);
    source.prefetch(ds.examples);
    auto inner = engine::make_llm(*llm_spec, *d, task.get(), r->models());
    // Every reply is cached in the store: a rerun asks the model nothing, and a killed run
    // loses at most the level in flight.
    llm::CachedModel cached(*inner, *st);
    llm::LanguageModel* model = &cached;
    nlohmann::json args = {{"data", d->data}, {"task", d->task}, {"split", d->split}, {"retriever", *spec}, {"k", *k},
                           {"llm", llm::redact_url_passwords(*llm_spec)}, {"groups", *exhaustive ? "1" : *groups},
                           {"exhaustive", *exhaustive}, {"retries", *retries}, {"limit", *limit}};
    store::RunScope run_scope(*st, "judge", args.dump(), r->seed);
    // The ranked documents of every query (the text the task shows a reader).
    std::vector<std::string> questions(ds.examples.size());
    std::vector<std::vector<std::string>> texts(ds.examples.size()), ids(ds.examples.size());
    parallel_for(ds.examples.size(), r->threads, [&](std::size_t i) {
      const auto& ex = ds.examples[i];
      auto cands = source.candidates(ex);
      const auto ranking = ret->rank({ex.id, ex.user, task->query(ex)}, cands, *k);
      questions[i] = task->query(ex);
      for (std::size_t j = 0; j < ranking.size(); ++j) {
        texts[i].push_back(cands[ranking.indices[j]].text);
        ids[i].push_back(ranking.ids[j]);
      }
    });
    const auto run = [&](const feedback::JudgeOptions& opts, feedback::JudgeCounters& counters) {
      feedback::Judge judge(*model, opts);
      auto res = judge.judge(questions, texts);
      counters = judge.counters();
      return res;
    };
    feedback::JudgeCounters counters;
    const auto results = run(o, counters);
    std::string lines;
    Tally t;
    std::vector<store::FeedbackRecord> records;  // kind "judge": the label as output, its score as value
    const std::string ds_key = feedback::dataset_key(ds), model_id = model->info().id;
    for (std::size_t i = 0; i < results.size(); ++i) {
      const auto& res = results[i];
      nlohmann::json labels = nlohmann::json::array();
      for (std::size_t j = 0; j < res.docs.size(); ++j) {
        nlohmann::json l = {{"id", ids[i][j]}};
        if (res.docs[j]) {
          l["label"] = feedback::to_string(res.docs[j]->label);
          l["score"] = res.docs[j]->score;
          records.push_back({ds_key, ds.examples[i].id, "judge", ids[i][j], model_id,
                             std::string(feedback::to_string(res.docs[j]->label)), res.docs[j]->score});
          ++(res.docs[j]->label == feedback::JudgeLabel::Answer     ? t.answer
             : res.docs[j]->label == feedback::JudgeLabel::Relevant ? t.relevant
                                                                    : t.irrelevant);
        } else {
          l["label"] = res.failed[j] ? "failed" : "unjudged";
        }
        labels.push_back(std::move(l));
      }
      t.labelled += res.judged;
      t.found += res.first_relevant.has_value();
      nlohmann::json j = {{"id", ds.examples[i].id}, {"labels", labels}};
      j["first_relevant"] = res.first_relevant ? nlohmann::json(*res.first_relevant) : nlohmann::json(nullptr);
      lines += j.dump() + "\n";
    }
    t.questions = results.size();
    st->feedback_put(records);  // one transaction
    write_output(*out, lines);
    const auto words = counters.prompt_words + counters.reply_words;
    std::printf("judge %s on %s %s (%s top %zu, %s): %zu queries, %zu documents labelled (%zu answer, %zu relevant, "
                "%zu irrelevant), a relevant one found for %zu; %zu model calls (%zu retries), %zu groups failed "
                "(%zu documents, unlabelled), %zu words read and written\n",
                model->info().id.c_str(), d->task.c_str(), d->split.c_str(), spec->c_str(), *k,
                *exhaustive ? "every document" : ("groups " + *groups).c_str(), t.questions, t.labelled, t.answer,
                t.relevant, t.irrelevant, t.found, counters.calls, counters.retries, counters.failed_groups,
                counters.failed_documents, words);
    if (*compare && !*exhaustive) {
      feedback::JudgeCounters every;
      auto o2 = feedback::exhaustive_judging();
      o2.retries = *retries;
      o2.max_docs = *k;
      const auto all = run(o2, every);
      std::size_t found = 0;
      for (const auto& res : all) found += res.first_relevant.has_value();
      const auto words2 = every.prompt_words + every.reply_words;
      std::printf("judge --compare: every document: %zu model calls, %zu words, a relevant one found for %zu queries; "
                  "multi-level: %zu calls, %zu words (%.1f%%), found for %zu\n",
                  every.calls, words2, found, counters.calls, words,
                  words2 ? 100.0 * static_cast<double>(words) / static_cast<double>(words2) : 0.0, t.found);
    }
    nlohmann::json summary = {{"queries", t.questions}, {"labelled", t.labelled}, {"answer", t.answer},
                              {"relevant", t.relevant}, {"irrelevant", t.irrelevant}, {"found", t.found},
                              {"calls", counters.calls}, {"retries", counters.retries},
                              {"failed_groups", counters.failed_groups}, {"failed_documents", counters.failed_documents},
                              {"words", words}, {"llm", model_id}, {"seed", r->seed}};
    summary["llm_counters"] = llm_counters_json(*model);
    run_scope.end("ok", summary.dump());
    print_llm_counters(*model, r->quiet);
    rc = 0;
  });
}

}  // namespace attune::cli
