// Neural throughput on this machine (float32, CPU unless ATTUNE_BENCH_DEVICE=cuda).
//   Matmul/<n>: n x n x n float32 matmul; reports GFLOP/s (2 n^3 per product). The
//     machine's peak that the model benchmarks are measured against.
//   LlamaScore/<shared>: log p(target | prompt) for 32 targets of 16 tokens sharing one
//     256-token prompt, on a random 4-layer Llama (hidden 512, 8 heads, 4 kv heads,
//     vocab 8000). shared=0 runs 32 full prompt+target rows (naive); shared=1 reads the
//     prompt once and fans its KV cache out to the 32 targets. items/s = requests/s;
//     the tokens/s counter counts prompt+target tokens per request (the logical work).
#include <benchmark/benchmark.h>

#include <cstdlib>

#include "attune/models/decoding.h"
#include "attune/models/llama.h"
#include "attune/models/weights.h"

using namespace attune::models;

namespace {

torch::Device bench_device() {
  const char* d = std::getenv("ATTUNE_BENCH_DEVICE");
  return parse_device(d ? d : "cpu");
}

void Matmul(benchmark::State& state) {
  torch::NoGradGuard g;
  const auto n = state.range(0);
  auto dev = bench_device();
  auto a = torch::randn({n, n}, torch::TensorOptions().device(dev)), b = torch::randn({n, n}, torch::TensorOptions().device(dev));
  auto c = torch::matmul(a, b);
  for (auto _ : state) {
    c = torch::matmul(a, b);
    if (dev.is_cuda()) torch::cuda::synchronize();
    benchmark::DoNotOptimize(c.data_ptr());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * n * n * n / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(Matmul)->Arg(512)->Arg(1024)->Arg(2048)->Unit(benchmark::kMillisecond)->UseRealTime();

void LlamaScore(benchmark::State& state) {
  const bool shared = state.range(0) != 0;
  LlamaConfig c;
  c.vocab_size = 8000;
  c.hidden_size = 512;
  c.intermediate_size = 1376;
  c.num_layers = 4;
  c.num_heads = 8;
  c.num_kv_heads = 4;
  c.head_dim = 64;
  c.rms_eps = 1e-5;
  c.max_positions = 1024;
  auto m = Llama::random(c, 1, bench_device());
  TokenIds prompt(256);
  for (std::size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<std::int32_t>((i * 7919) % c.vocab_size);
  std::vector<TokenIds> targets(32, TokenIds(16));
  for (std::size_t t = 0; t < targets.size(); ++t)
    for (std::size_t i = 0; i < 16; ++i) targets[t][i] = static_cast<std::int32_t>((t * 131 + i * 17) % c.vocab_size);
  std::vector<ScoreItem> items;
  for (auto& t : targets) items.push_back({&prompt, &t});
  ScoreOptions o{shared, 32};
  for (auto _ : state) benchmark::DoNotOptimize(score(*m, items, o));
  state.SetItemsProcessed(state.iterations() * 32);
  state.counters["tokens/s"] = benchmark::Counter(32.0 * (256 + 16), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(LlamaScore)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
