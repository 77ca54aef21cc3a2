// RSPG examples from the store's per-retriever feedback. Torch-free.
#include <map>
#include <memory>

#include "attune/core/error.h"
#include "attune/core/parallel.h"
#include "attune/feedback/collect.h"
#include "attune/retrieval/retriever.h"
#include "attune/train/rspg.h"

namespace attune::train {

RspgVariant parse_rspg_variant(const std::string& s) {
  if (s == "rspg-pre" || s == "pre") return RspgVariant::Pre;
  if (s == "rspg-post" || s == "post") return RspgVariant::Post;
  throw UsageError("unknown RSPG variant \"" + s + "\" (expected rspg-pre or rspg-post)");
}

std::string rspg_variant_name(RspgVariant v) { return v == RspgVariant::Pre ? "rspg-pre" : "rspg-post"; }

std::vector<RspgExample> rspg_examples(const data::Dataset& ds, const tasks::Task& task,
                                       const retrieval::CandidateSource& source, store::FeedbackLog& store,
                                       const std::string& model_id, const text::Tokenizer& tok,
                                       const RspgDataOptions& o) {
  if (o.pool.size() < 2) throw UsageError("RSPG needs a pool of at least 2 retrievers");
  std::vector<std::unique_ptr<retrieval::Retriever>> rets;
  for (const auto& spec : o.pool) rets.push_back(retrieval::make_retriever(spec, o.seed, task.uses_corpus()));
  std::map<std::pair<std::string, std::string>, std::pair<double, std::string>> rec;
  for (auto& r : store.feedback_get(feedback::dataset_key(ds), "retriever", model_id))
    rec[{r.example, r.item}] = {r.value, r.output};
  tasks::PromptOptions popts;
  popts.max_length = o.max_length;
  popts.reference_quirks = o.reference_quirks;
  const std::size_t n = o.limit ? std::min(o.limit, ds.examples.size()) : ds.examples.size();
  std::vector<RspgExample> out(n);
  std::vector<std::string> missing(n);
  parallel_for(n, 0, [&](std::size_t e) {
    const Example& ex = ds.examples[e];
    retrieval::Query q{ex.id, ex.user, task.query(ex)};
    RspgExample& x = out[e];
    x.id = ex.id;
    x.query = q.text;
    for (std::size_t r = 0; r < rets.size(); ++r) {
      // As feedback::collect builds a retriever-kind prompt.
      const retrieval::CandidateSource* s = o.source_for ? o.source_for(o.pool[r]) : nullptr;
      auto cands = (s ? *s : source).candidates(ex);
      auto ranking = rets[r]->rank(q, cands, o.k);
      std::vector<const Document*> docs;
      for (auto i : ranking.indices) docs.push_back(&cands[i]);
      auto it = rec.find({ex.id, o.pool[r]});
      if (it == rec.end()) {
        missing[e] = o.pool[r];
        return;
      }
      x.prompts.push_back(task.prompt(ex, docs, tok, popts));
      x.outputs.push_back(it->second.second);
      x.utility.push_back(it->second.first);
    }
  });
  for (std::size_t e = 0; e < n; ++e)
    if (!missing[e].empty())
      throw Error("no per-retriever feedback (kind retriever, model " + model_id + ") for example " + ds.examples[e].id +
                  " and retriever " + missing[e] + ": collect kind-retriever feedback over the same pool first");
  return out;
}

}  // namespace attune::train
