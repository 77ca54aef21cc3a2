#include "attune/feedback/collect.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <mutex>

#include "attune/core/error.h"
#include "attune/core/parallel.h"
#include "attune/core/progress.h"
#include "attune/llm/cached.h"
#include "attune/llm/generate_check.h"
#include "attune/retrieval/spec.h"
#include "attune/store/store.h"

namespace attune::feedback {

Kind parse_kind(const std::string& s) {
  if (s == "doc") return Kind::Doc;
  if (s == "retriever") return Kind::Retriever;
  if (s == "likelihood") return Kind::Likelihood;
  throw UsageError("unknown feedback kind \"" + s + "\" (expected doc, retriever or likelihood)");
}

std::string kind_name(Kind k) {
  switch (k) {
    case Kind::Doc: return "doc";
    case Kind::Retriever: return "retriever";
    case Kind::Likelihood: return "likelihood";
  }
  return "?";
}

std::string dataset_key(const data::Dataset& ds) { return ds.task + "/" + ds.split + "/" + ds.content_hash; }

std::string feedback_model(const std::string& model_id, Kind kind, const llm::GenerateOptions& generate) {
  if (kind == Kind::Likelihood || generate.decode == "free") return model_id;
  return model_id + ";decode=" + generate.decode;
}

namespace {

// One LLM call to make: a prompt, and for likelihood the target.
struct Item {
  std::size_t example;
  std::string item;  // doc id, retriever spec, or ""
  std::string prompt;
};

}  // namespace

void CollectOptions::validate() const {
  if (kind == Kind::Retriever) {
    if (retrievers.empty()) throw FieldError<UsageError>("retrievers", "retriever feedback needs a pool of at least one retriever");
    if (const auto twice = retrieval::first_repeated_spec(retrievers); !twice.empty())
      throw FieldError<UsageError>("retrievers", "retrievers lists \"" + twice + "\" twice: name each retriever once");
  } else if (top_l == 0) {
    throw FieldError<UsageError>("top_l", "top_l = 0: " + kind_name(kind) + " feedback needs at least one candidate");
  }
  llm::validate_generate_options(generate);
  if (kind == Kind::Likelihood && generate.decode != "free")
    throw FieldError<UsageError>("decode", "decode = " + generate.decode +
                                               ": likelihood feedback scores the gold answer and generates nothing (decode applies to "
                                               "the doc and retriever kinds)");
}

Summary collect(const data::Dataset& ds, const tasks::Task& task, const retrieval::CandidateSource& source,
                llm::LanguageModel& model, store::LlmCache& cache, store::FeedbackLog& log,
                const text::Tokenizer& tok, const CollectOptions& opts) {
  const auto start = std::chrono::steady_clock::now();
  opts.validate();
  if (!ds.has_outputs) throw Error("feedback needs gold outputs, and " + ds.task + " " + ds.split + " has none");
  const std::size_t n_examples = opts.run.limit ? std::min(opts.run.limit, ds.examples.size()) : ds.examples.size();
  tasks::PromptOptions popts;
  popts.reference_quirks = opts.reference_quirks;
  popts.max_length = opts.max_length ? opts.max_length : (opts.kind == Kind::Retriever ? 256 : 512);

  // Build every prompt first (cheap), so progress has a total and batches are even.
  std::vector<std::unique_ptr<retrieval::Retriever>> pool;
  if (opts.kind == Kind::Retriever) {
    for (const auto& spec : opts.retrievers) pool.push_back(retrieval::make_retriever(spec, opts.run.seed, task.uses_corpus()));
  } else {
    pool.push_back(retrieval::make_retriever(opts.initial_retriever, opts.run.seed, task.uses_corpus()));
  }
  // Each pool member's candidate source; distinct sources are asked once per example.
  const std::vector<std::string> specs =
      opts.kind == Kind::Retriever ? opts.retrievers : std::vector<std::string>{opts.initial_retriever};
  std::vector<const retrieval::CandidateSource*> sources;
  std::vector<std::size_t> source_of(specs.size());
  for (std::size_t r = 0; r < specs.size(); ++r) {
    const retrieval::CandidateSource* s = opts.source_for ? opts.source_for(specs[r]) : nullptr;
    if (!s) s = &source;
    auto it = std::find(sources.begin(), sources.end(), s);
    source_of[r] = static_cast<std::size_t>(it - sources.begin());
    if (it == sources.end()) sources.push_back(s);
  }
  for (const auto* s : sources) s->prefetch(std::span<const Example>(ds.examples.data(), n_examples));
  std::vector<std::vector<Item>> per_example(n_examples);
  parallel_for(n_examples, opts.run.threads, [&](std::size_t e) {
    const Example& ex = ds.examples[e];
    std::vector<std::vector<Document>> cand_sets(sources.size());
    for (std::size_t s = 0; s < sources.size(); ++s) cand_sets[s] = sources[s]->candidates(ex);
    retrieval::Query q{ex.id, ex.user, task.query(ex)};
    auto& items = per_example[e];
    if (opts.kind == Kind::Retriever) {
      for (std::size_t r = 0; r < pool.size(); ++r) {
        const auto& cands = cand_sets[source_of[r]];
        auto ranking = pool[r]->rank(q, cands, opts.k);
        std::vector<const Document*> docs;
        for (auto i : ranking.indices) docs.push_back(&cands[i]);
        items.push_back({e, opts.retrievers[r], task.prompt(ex, docs, tok, popts)});
      }
    } else {
      const auto& cands = cand_sets[source_of[0]];
      auto ranking = pool[0]->rank(q, cands, opts.top_l);
      if (opts.kind == Kind::Likelihood) items.push_back({e, "", task.prompt(ex, {}, tok, popts)});
      for (auto i : ranking.indices) items.push_back({e, cands[i].id, task.prompt(ex, {&cands[i]}, tok, popts)});
    }
  });
  std::vector<Item> work;
  for (auto& v : per_example)
    for (auto& it : v) work.push_back(std::move(it));

  llm::CachedModel cached(model, cache);
  const std::string model_id = feedback_model(model.info().id, opts.kind, opts.generate), ds_key = dataset_key(ds),
                    kind = kind_name(opts.kind);
  const std::size_t batch = std::max<std::size_t>(1, opts.run.batch);
  const std::size_t n_batches = (work.size() + batch - 1) / batch;
  Progress progress("feedback " + kind, work.size(), opts.run.progress);
  std::mutex mu;
  double value_sum = 0;
  parallel_for(n_batches, opts.run.threads, [&](std::size_t b) {
    const std::size_t lo = b * batch, hi = std::min(work.size(), lo + batch);
    std::vector<store::FeedbackRecord> records;
    if (opts.kind == Kind::Likelihood) {
      std::vector<llm::ScoreRequest> reqs;
      for (std::size_t i = lo; i < hi; ++i) reqs.push_back({work[i].prompt, ds.examples[work[i].example].output});
      auto scores = cached.score(reqs);
      for (std::size_t i = lo; i < hi; ++i)
        records.push_back({ds_key, ds.examples[work[i].example].id, kind, work[i].item, model_id, "", scores[i - lo]});
    } else {
      std::vector<llm::Prompt> prompts;
      for (std::size_t i = lo; i < hi; ++i) prompts.push_back({work[i].prompt});
      auto gens = cached.generate(prompts, opts.generate);
      for (std::size_t i = lo; i < hi; ++i) {
        const Example& ex = ds.examples[work[i].example];
        const std::string& out = gens[i - lo].text;
        records.push_back({ds_key, ex.id, kind, work[i].item, model_id, out, task.reward(out, ex.output)});
      }
    }
    log.feedback_put(records);
    {
      std::lock_guard<std::mutex> lock(mu);
      for (auto& r : records) value_sum += r.value;
    }
    progress.add(hi - lo);
  });
  progress.finish();

  Summary s;
  s.examples = n_examples;
  s.records = work.size();
  s.model_calls = cached.misses();
  s.cache_hits = cached.hits();
  s.mean_value = work.empty() ? 0 : value_sum / static_cast<double>(work.size());
  s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return s;
}

Summary collect(const data::Dataset& ds, const tasks::Task& task, const retrieval::CandidateSource& source,
                llm::LanguageModel& model, store::Store& store, const text::Tokenizer& tok,
                const CollectOptions& opts) {
  return collect(ds, task, source, model, store, store, tok, opts);
}

}  // namespace attune::feedback
