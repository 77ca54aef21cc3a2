// Reference-reader feedback throughput: per-document utility records/s over the real
// commit_subject dev split (BM25 top-16 per query, k = 1, max_length 512), the work of
// `attune feedback --kind doc`. The store is a fresh temporary SQLite file per iteration,
// so every record is a model call plus a write (no cache hits).
#include <benchmark/benchmark.h>

#include <filesystem>
#include <unistd.h>

#include "attune/feedback/collect.h"
#include "attune/llm/reference.h"
#include "attune/store/store.h"

namespace fs = std::filesystem;
using namespace attune;

namespace {

const fs::path kGit = fs::path(ATTUNE_SHARED_DIR) / "data/git/commit_subject";

void BM_FeedbackDocReference(benchmark::State& state) {
  if (!fs::exists(kGit / "dev_questions.json")) {
    state.SkipWithError("shared/data/git is missing");
    return;
  }
  auto ds = data::read_lamp(kGit / "dev_questions.json", kGit / "dev_outputs.json", "commit_subject", "dev");
  ds.examples.resize(std::min<std::size_t>(ds.examples.size(), 200));
  auto train = data::read_lamp(kGit / "train_questions.json", kGit / "train_outputs.json", "commit_subject", "train");
  std::vector<std::string> background;
  for (auto& ex : train.examples) background.push_back(ex.output);
  auto task = tasks::make_task("commit_subject");
  retrieval::ProfileCandidates source(*task);
  llm::ReferenceReader reader(background, {});
  text::WhitespaceTokenizer tok;
  feedback::CollectOptions o;
  o.run.progress = false;
  o.run.threads = static_cast<std::size_t>(state.range(0));
  std::size_t records = 0;
  for (auto _ : state) {
    state.PauseTiming();
    const fs::path path = fs::temp_directory_path() / ("attune_bench_fb_" + std::to_string(::getpid()) + ".db");
    fs::remove(path);
    fs::remove(path.string() + "-wal");
    auto store = store::open_sqlite(path);
    state.ResumeTiming();
    records += feedback::collect(ds, *task, source, reader, *store, tok, o).records;
    state.PauseTiming();
    store.reset();
    fs::remove(path);
    fs::remove(path.string() + "-wal");
    fs::remove(path.string() + "-shm");
    state.ResumeTiming();
  }
  state.SetItemsProcessed(static_cast<int64_t>(records));
}
BENCHMARK(BM_FeedbackDocReference)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
