// attune rank: ranks each query's candidates (its profile, or the corpus) -> JSONL.
#include <nlohmann/json.hpp>

#include "attune/core/parallel.h"
#include "attune/neural/dense.h"
#include "attune/core/file.h"
#include "common.h"

namespace attune::cli {

void add_rank(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand("rank", "rank each query's candidates; JSONL {id, ranking, scores} per query");
  auto d = std::make_shared<DataOptions>();
  auto r = std::make_shared<RunOptions>();
  auto spec = std::make_shared<std::string>("bm25");
  auto k = std::make_shared<std::size_t>(10);
  auto out = std::make_shared<std::string>();
  d->add(*cmd);
  r->add(*cmd);
  cmd->add_option("--retriever", *spec, "retriever spec: none, random, recency, bm25, dense:DIR, cross:DIR, rrf(A,B,...)")->capture_default_str();
  cmd->add_option("--k", *k, "documents per query (0 = all)")->capture_default_str();
  cmd->add_option("--out", *out, "output JSONL file (\"-\": standard output)")->required();
  cmd->callback([=, &rc] {
    auto task = load_task(*d);
    auto ds = load_dataset(*d);
    auto st = store::open_store(r->store_file());
    neural::register_retrievers(r->device);  // dense:/cross: models run on --device
    auto ret = retrieval::make_retriever(*spec, r->seed, task->uses_corpus());
    // Corpus tasks: dense:DIR searches the whole corpus itself (see make_sources).
    auto sources = engine::make_sources(*d, *task, *st, r->models(), r->quiet, {*spec});
    const auto& source = sources.for_spec(*spec);
    source.prefetch(ds.examples);
    std::vector<std::string> lines(ds.examples.size());
    parallel_for(ds.examples.size(), r->threads, [&](std::size_t i) {
      const auto& ex = ds.examples[i];
      auto cands = source.candidates(ex);
      auto ranking = ret->rank({ex.id, ex.user, task->query(ex)}, cands, *k);
      nlohmann::json j = {{"id", ex.id}, {"ranking", ranking.ids}, {"scores", ranking.scores}};
      lines[i] = j.dump();
    });
    std::string text;
    for (auto& l : lines) text += l + "\n";
    write_output(*out, text);
    rc = 0;
  });
}

}  // namespace attune::cli
