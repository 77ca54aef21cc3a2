// Training examples for ROPG from the store's per-document feedback. Torch-free.
#include <map>
#include <memory>

#include "attune/core/error.h"
#include "attune/core/parallel.h"
#include "attune/feedback/collect.h"
#include "attune/retrieval/retriever.h"
#include "attune/train/ropg.h"

namespace attune::train {

std::vector<RopgExample> ropg_examples(const data::Dataset& ds, const tasks::Task& task,
                                       const retrieval::CandidateSource& source, store::FeedbackLog& store,
                                       const std::string& model_id, const std::string& initial_retriever,
                                       std::size_t top_l, std::uint64_t seed, std::size_t limit) {
  // The same ranking feedback::collect used, so the ids match the records.
  auto initial = retrieval::make_retriever(initial_retriever, seed, task.uses_corpus());
  const std::string key = feedback::dataset_key(ds);
  std::map<std::pair<std::string, std::string>, double> utility;
  for (const auto& r : store.feedback_get(key, "doc", model_id)) utility[{r.example, r.item}] = r.value;
  const std::size_t n = limit ? std::min(limit, ds.examples.size()) : ds.examples.size();
  std::vector<RopgExample> out(n);
  std::vector<std::string> missing(n);
  parallel_for(n, 0, [&](std::size_t e) {
    const Example& ex = ds.examples[e];
    auto cands = source.candidates(ex);
    retrieval::Query q{ex.id, ex.user, task.query(ex)};
    auto ranking = initial->rank(q, cands, top_l);
    RopgExample& r = out[e];
    r.id = ex.id;
    r.query = q.text;
    for (std::size_t pos = 0; pos < ranking.indices.size(); ++pos) {
      const auto i = ranking.indices[pos];
      auto it = utility.find({ex.id, cands[i].id});
      if (it == utility.end()) {
        missing[e] = cands[i].id;
        return;
      }
      r.docs.push_back(task.document_text(cands[i]));
      r.utility.push_back(it->second);
      r.initial_score.push_back(ranking.scores[pos]);
    }
  });
  for (std::size_t e = 0; e < n; ++e)
    if (!missing[e].empty())
      throw Error("no per-document feedback (kind doc, model " + model_id + ") for example " + ds.examples[e].id +
                  ", document " + missing[e] + " of " + key + ": collect kind-doc feedback with the same model and "
                  "initial retriever first");
  std::erase_if(out, [](const RopgExample& r) { return r.docs.size() < 2; });
  return out;
}

}  // namespace attune::train
