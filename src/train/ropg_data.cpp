// Training examples for ROPG from the store's per-document feedback. Torch-free.
#include <cmath>
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
                                       std::size_t top_l, std::uint64_t seed, std::size_t limit,
                                       const std::vector<std::string>& document_fields,
                                       KdTarget values) {
  // The same ranking feedback::collect used, so the ids match the records.
  auto initial = retrieval::make_retriever(initial_retriever, seed, task.uses_corpus());
  const std::string key = feedback::dataset_key(ds);
  const bool likelihood = values == KdTarget::Likelihood;
  const std::string kind = likelihood ? "likelihood" : "doc";
  std::map<std::pair<std::string, std::string>, double> utility;
  for (const auto& r : store.feedback_get(key, kind, model_id)) utility[{r.example, r.item}] = r.value;
  const std::size_t n = limit ? std::min(limit, ds.examples.size()) : ds.examples.size();
  std::vector<RopgExample> out(n);
  std::vector<std::string> missing(n), bad(n);
  parallel_for(n, 0, [&](std::size_t e) {
    const Example& ex = ds.examples[e];
    auto cands = source.candidates(ex);
    retrieval::Query q{ex.id, ex.user, task.query(ex)};
    auto ranking = initial->rank(q, cands, top_l);
    RopgExample& r = out[e];
    r.id = ex.id;
    r.query = q.text;
    // Likelihood: log p(y | x, d) - log p(y | x), the no-document term stored as item "".
    double base = 0;
    if (likelihood) {
      auto it = utility.find({ex.id, ""});
      if (it == utility.end()) {
        missing[e] = "(none: the no-document prompt)";
        return;
      }
      base = it->second;
    }
    for (std::size_t pos = 0; pos < ranking.indices.size(); ++pos) {
      const auto i = ranking.indices[pos];
      auto it = utility.find({ex.id, cands[i].id});
      if (it == utility.end()) {
        missing[e] = cands[i].id;
        return;
      }
      const double v = it->second - base;
      // A -inf or NaN log-probability would poison the softmax target: refuse it.
      if (likelihood && !std::isfinite(v)) {
        bad[e] = "log p(y | x, d) - log p(y | x) = " + std::to_string(v) + " for document " + cands[i].id;
        return;
      }
      r.docs.push_back(document_fields.empty() ? task.document_text(cands[i])
                                               : retrieval::fielded_text(cands[i], task.document_text(cands[i]), document_fields));
      r.utility.push_back(v);
      r.initial_score.push_back(ranking.scores[pos]);
    }
  });
  for (std::size_t e = 0; e < n; ++e) {
    if (!missing[e].empty())
      throw Error("no per-document feedback (kind " + kind + ", model " + model_id + ") for example " + ds.examples[e].id +
                  ", document " + missing[e] + " of " + key + ": collect kind-" + kind + " feedback with the same model and "
                  "initial retriever first");
    if (!bad[e].empty())
      throw Error("ROPG-KD's likelihood target needs finite log-probabilities: " + model_id + " gave " + bad[e] +
                  " of example " + ds.examples[e].id);
  }
  std::erase_if(out, [](const RopgExample& r) { return r.docs.size() < 2; });
  return out;
}

}  // namespace attune::train
