// attune import: loads dataset splits into the store (a no-op when already there).
#include <cstdio>
#include <filesystem>

#include "attune/retrieval/retriever.h"
#include "common.h"

namespace attune::cli {

void add_import(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand("import", "import dataset splits into the store");
  auto d = std::make_shared<DataOptions>();
  auto r = std::make_shared<RunOptions>();
  auto splits = std::make_shared<std::string>("train,dev");
  d->add(*cmd, false);
  r->add(*cmd);
  cmd->add_option("--splits", *splits, "comma-separated splits to import (those that exist)")->capture_default_str();
  cmd->callback([=, &rc] {
    auto st = store::open_store(r->store_file());
    std::size_t done = 0;
    for (const auto& split : retrieval::split_specs(*splits)) {
      DataOptions one = *d;
      one.split = split;
      auto ds = load_dataset(one);
      auto res = st->import_dataset(ds);
      ++done;
      std::printf("import %s %s: %zu examples, %zu users, %zu documents%s\n", ds.task.c_str(), split.c_str(),
                  res.examples, res.users, res.documents, res.already_present ? " (already in the store: nothing written)" : "");
    }
    rc = done ? 0 : 1;
  });
}

}  // namespace attune::cli
