// attune demo: the whole loop on the bundled sample data: import -> feedback -> eval.
#include <cstdio>
#include <filesystem>

#include "attune/core/error.h"
#include "attune/eval/evaluate.h"
#include "attune/feedback/collect.h"
#include "attune/llm/cached.h"
#include "common.h"

#ifndef ATTUNE_SOURCE_DIR
#define ATTUNE_SOURCE_DIR "."
#endif

namespace fs = std::filesystem;

namespace attune::cli {

void add_demo(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand("demo", "run import -> feedback -> eval on the bundled sample data");
  auto r = std::make_shared<RunOptions>();
  auto data = std::make_shared<std::string>();
  r->add(*cmd);
  cmd->add_option("--data", *data, "sample data directory (default: data/sample here, else the source tree's)");
  cmd->callback([=, &rc] {
    DataOptions d;
    d.task = "commit_subject";
    d.data = *data;
    if (d.data.empty()) {
      d.data = fs::exists("data/sample/commit_subject") ? "data/sample" : std::string(ATTUNE_SOURCE_DIR) + "/data/sample";
    }
    if (!fs::exists(fs::path(d.data) / d.task))
      throw Error("no sample data at " + d.data + " (write it with `attune sample --out " + d.data + "`)");
    auto st = store::open_store(r->store_file());
    auto task = load_task(d);
    auto tok = engine::budget_tokenizer(r->tokenizer, std::string("reference"));
    std::printf("== 1. import (%s -> %s)\n", d.data.c_str(), r->store.c_str());
    data::Dataset dev;
    for (const char* split : {"train", "dev"}) {
      d.split = split;
      auto ds = load_dataset(d);
      auto res = st->import_dataset(ds);
      std::printf("   %s: %zu examples, %zu users, %zu documents%s\n", split, res.examples, res.users, res.documents,
                  res.already_present ? " (already imported)" : "");
      if (d.split == "dev") dev = std::move(ds);
    }
    d.split = "dev";
    auto model = engine::make_llm("reference", d, task.get(), r->models());
    auto source = engine::make_source(d, *task, *st, r->quiet);
    std::printf("== 2. feedback: per-document utility of the BM25 top-16 with the reference reader\n");
    feedback::CollectOptions fo;
    r->apply(fo.run);
    store::RunScope run(*st, "demo", "{}", r->seed);
    auto s = feedback::collect(dev, *task, *source, *model, *st, *tok, fo);
    std::printf("   %zu records (%zu model calls, %zu from cache), mean utility (ROUGE-1) %.4f\n", s.records,
                s.model_calls, s.cache_hits, s.mean_value);
    std::printf("== 3. eval on dev (k = 4)\n");
    eval::EvalOptions eo;
    eo.retrievers = {"none", "random", "recency", "bm25", "rrf(bm25,recency)"};
    r->apply(eo.run);
    llm::CachedModel cached(*model, *st);
    auto report = eval::evaluate(dev, *task, *source, cached, *tok, eo);
    std::fputs(eval::format_table(report).c_str(), stdout);
    run.end("ok", "{}");
    rc = 0;
  });
}

}  // namespace attune::cli
