// Neural throughput on this machine (float32, CPU unless ATTUNE_BENCH_DEVICE=cuda).
//   Matmul/<n>: n x n x n float32 matmul; reports GFLOP/s (2 n^3 per product). The
//     machine's peak that the model benchmarks are measured against.
//   MatmulBf16/<n>: the same product in bfloat16 (CPU autocast would need it faster).
//   LlamaScore/<shared>/<shape>: log p(target | prompt) for 32 targets of 16 tokens sharing
//     one 256-token prompt, on a random 4-layer Llama: shape 0 = hidden 512, 8 heads, 4 kv
//     heads, vocab 8000; shape 1 = the default `attune train-lm` reader (hidden 256, 4
//     heads, SwiGLU 688, vocab 8192). shared=0 runs 32 full prompt+target rows (naive);
//     shared=1 reads the prompt once and fans its KV cache out to the 32 targets. items/s =
//     requests/s; the tokens/s counter counts prompt+target tokens per request.
//   LlamaGenerate/<batch>: greedy generation of 32 tokens after each of 16 different
//     256-token prompts, at the reader's shape, decoded <batch> prompts at a time.
//   EncoderForward/<shape>: BERT-family encoder forward (no grad) on batch 32 x 128 tokens,
//     shape 0 = MiniLM-L6 (384 hidden, 6 layers, 12 heads, 1536 FFN), 1 = BERT-base (768,
//     12, 12, 3072). items/s = sequences/s; GFLOP/s = the forward's matmul FLOPs per
//     second (2*L*(4H^2 + 2HI) + 4*L^2*H per sequence and layer).
//   IumRerank/<shape>: IUM's latency (002 §4): one query's 100 candidates scored by a
//     cross-encoder, 100 rows of [CLS] tid mid x [SEP] d [SEP] at 128 tokens, forward only,
//     no grad; shape 0 = `pretrain-encoder`'s default encoder (256 hidden, 4 layers, 4 heads,
//     1024 FFN), 1 = MiniLM-L6, 2 = BERT-base. items/s = queries/s; ms per iteration = the
//     reranking latency of one query.
//   ServeForward/<kernel>/<shape>: what a server encodes per request, on a random 2-layer,
//     128-wide encoder (2 heads, 512 FFN): shape 0 = one query of 32 tokens (dense
//     retrieval), shape 1 = 20 (query, document) pairs of 128 tokens whose first ([CLS])
//     states are wanted (a cross-encoder's rerank of 20). kernel 0 = torch's operators
//     (BertModel::forward), 1 = the native path (models/bert_native.h, first-token-only
//     last layer for shape 1). Run with torch on one thread for a server's per-pass cost.
//   LlamaTrainStep: one pretraining step of the default `attune train-lm` model (the shape
//     above, tied embeddings), as its loop runs it: 16 x 256 tokens, Llama::train_loss_sum,
//     backward, gradient clipping at 1, AdamW. tokens/s and GFLOP/s at 34.7 MFLOP a token
//     (6N + 12 layers T d, bench/RESULTS.md). ATTUNE_LM_TRAIN_KERNEL=torch compares torch's
//     operators for the attention and the output layer; set OMP_WAIT_POLICY / GOMP_SPINCOUNT as `attune` does
//     (GOMP_SPINCOUNT=1000) to measure what train-lm runs. ATTUNE_BENCH_TRACE=FILE writes
//     the timed steps' operators as a Chrome trace (torch's legacy profiler; it doubles the
//     step's time, so read it for which operators run, not for their shares).
//   TrainStep: one contrastive step of the MiniLM-L6-size encoder: two views of 16 x 128
//     tokens, InfoNCE (tau 0.05), backward, AdamW; reports seconds per step.
#include <benchmark/benchmark.h>

#include <cstdlib>

#include "attune/core/machine.h"
#include "attune/models/bert.h"
#include "attune/models/bert_native.h"
#include "attune/models/runtime.h"
#include "attune/models/decoding.h"
#include "attune/train/contrastive.h"
#include "attune/models/llama.h"
#include "attune/models/weights.h"

#include <torch/csrc/autograd/profiler_legacy.h>

using namespace attune::models;

namespace {

torch::Device bench_device() {
  const char* d = std::getenv("ATTUNE_BENCH_DEVICE");
  return parse_device(d ? d : "cpu");
}

// float32, the peak the model benchmarks are measured against; bfloat16, whether this
// libtorch's CPU bf16 product is faster on a CPU with avx512_bf16 (the machine context
// says), which CPU autocast (`train-lm --precision bf16`) needs.
void MatmulOf(benchmark::State& state, torch::ScalarType dtype) {
  torch::NoGradGuard g;
  const auto n = state.range(0);
  const auto dev = bench_device();
  const auto opt = torch::TensorOptions().device(dev).dtype(dtype);
  auto a = torch::randn({n, n}, opt), b = torch::randn({n, n}, opt);
  auto c = torch::matmul(a, b);
  for (auto _ : state) {
    c = torch::matmul(a, b);
    if (dev.is_cuda()) torch::cuda::synchronize();
    benchmark::DoNotOptimize(c.data_ptr());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * n * n * n / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}
void Matmul(benchmark::State& state) { MatmulOf(state, torch::kFloat32); }
void MatmulBf16(benchmark::State& state) { MatmulOf(state, torch::kBFloat16); }
BENCHMARK(Matmul)->Arg(512)->Arg(1024)->Arg(2048)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(MatmulBf16)->Arg(512)->Arg(1024)->Arg(2048)->Unit(benchmark::kMillisecond)->UseRealTime();

// The encoder's own matmul shapes: (tokens x in) @ (in x out) for 32 x 128 = 4096 tokens,
// as torch::linear runs them (weight stored out x in). MiniLM-L6: 384->384, 384->1536,
// 1536->384; BERT-base: 768->768, 768->3072, 3072->768.
void LinearShape(benchmark::State& state) {
  torch::NoGradGuard g;
  const auto M = state.range(0), K = state.range(1), N = state.range(2);
  auto dev = bench_device();
  auto x = torch::randn({M, K}, torch::TensorOptions().device(dev)), w = torch::randn({N, K}, torch::TensorOptions().device(dev));
  for (auto _ : state) {
    auto y = torch::linear(x, w);
    if (dev.is_cuda()) torch::cuda::synchronize();
    benchmark::DoNotOptimize(y.data_ptr());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * M * K * N / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(LinearShape)
    ->Args({4096, 384, 384})->Args({4096, 384, 1152})->Args({4096, 384, 1536})->Args({4096, 1536, 384})
    ->Args({4096, 768, 768})->Args({4096, 768, 3072})->Args({4096, 3072, 768})
    ->Unit(benchmark::kMillisecond)->UseRealTime();

// shape 0: the random 4-layer Llama of the issue-3 measurements (hidden 512); shape 1: the
// default `attune train-lm` reader (hidden 256, 4 layers, 4 heads, SwiGLU 688, vocab 8192).
LlamaConfig llama_shape(std::int64_t shape) {
  LlamaConfig c;
  c.vocab_size = shape == 0 ? 8000 : 8192;
  c.hidden_size = shape == 0 ? 512 : 256;
  c.intermediate_size = shape == 0 ? 1376 : 688;
  c.num_layers = 4;
  c.num_heads = shape == 0 ? 8 : 4;
  c.num_kv_heads = 4;
  c.head_dim = 64;
  c.rms_eps = 1e-5;
  c.max_positions = shape == 0 ? 1024 : 512;
  return c;
}

TokenIds bench_prompt(std::size_t n, std::int64_t vocab, std::size_t salt = 0) {
  TokenIds p(n);
  for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<std::int32_t>((i * 7919 + salt * 104729) % static_cast<std::size_t>(vocab));
  return p;
}

void LlamaScore(benchmark::State& state) {
  const bool shared = state.range(0) != 0;
  const LlamaConfig c = llama_shape(state.range(1));
  auto m = Llama::random(c, 1, bench_device());
  const TokenIds prompt = bench_prompt(256, c.vocab_size);
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
BENCHMARK(LlamaScore)->Args({0, 0})->Args({1, 0})->Args({0, 1})->Args({1, 1})->Unit(benchmark::kMillisecond)->UseRealTime();

// Greedy generation of 32 tokens after each of 16 different 256-token prompts, decoded
// together (eval's batch), at the default reader's shape: items/s = prompts/s.
void LlamaGenerate(benchmark::State& state) {
  const LlamaConfig c = llama_shape(1);
  auto m = Llama::random(c, 1, bench_device());
  std::vector<TokenIds> prompts;
  for (std::size_t i = 0; i < 16; ++i) prompts.push_back(bench_prompt(256, c.vocab_size, i + 1));
  DecodeOptions o;
  o.max_new_tokens = 32;  // no EOS: every row generates all 32
  o.batch_size = static_cast<std::size_t>(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(generate(*m, prompts, o));
  state.SetItemsProcessed(state.iterations() * 16);
  state.counters["new tokens/s"] = benchmark::Counter(16.0 * 32, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(LlamaGenerate)->Arg(1)->Arg(16)->Unit(benchmark::kMillisecond)->UseRealTime();

BertConfig encoder_shape(int which) {
  BertConfig c;
  c.vocab_size = 30522;
  if (which == 0) {
    c.hidden_size = 384, c.num_layers = 6, c.num_heads = 12, c.intermediate_size = 1536;
  } else {
    c.hidden_size = 768, c.num_layers = 12, c.num_heads = 12, c.intermediate_size = 3072;
  }
  return c;
}

double encoder_flops(const BertConfig& c, double batch, double len) {
  const double H = static_cast<double>(c.hidden_size), I = static_cast<double>(c.intermediate_size);
  return batch * static_cast<double>(c.num_layers) * (2 * len * (4 * H * H + 2 * H * I) + 4 * len * len * H);
}

// A BERT-family encoder's forward (no grad) on B x L random tokens, timed per iteration;
// GFLOP/s of its matmuls (encoder_flops).
void encoder_forward(benchmark::State& state, const BertConfig& c, std::int64_t B, std::int64_t L) {
  torch::NoGradGuard g;
  torch::manual_seed(0);
  BertModel m(c, false);
  m->init_weights();
  m->eval();
  auto dev = bench_device();
  m->to(dev);
  auto ids = torch::randint(1000, 30000, {B, L}, torch::TensorOptions().dtype(torch::kInt64).device(dev));
  auto types = torch::zeros({B, L}, ids.options()), mask = torch::ones({B, L}, ids.options());
  for (auto _ : state) {
    auto h = m->forward(ids, types, mask);
    if (dev.is_cuda()) torch::cuda::synchronize();
    benchmark::DoNotOptimize(h.data_ptr());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(encoder_flops(c, static_cast<double>(B), static_cast<double>(L)) / 1e9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

void EncoderForward(benchmark::State& state) {
  encoder_forward(state, encoder_shape(static_cast<int>(state.range(0))), 32, 128);
  state.SetItemsProcessed(state.iterations() * 32);
  state.SetLabel(state.range(0) == 0 ? "MiniLM-L6 32x128" : "BERT-base 32x128");
}
BENCHMARK(EncoderForward)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();

void IumRerank(benchmark::State& state) {
  BertConfig c;
  if (state.range(0) == 0) {
    c.vocab_size = 30522, c.hidden_size = 256, c.num_layers = 4, c.num_heads = 4, c.intermediate_size = 1024;
  } else {
    c = encoder_shape(static_cast<int>(state.range(0)) - 1);
  }
  encoder_forward(state, c, 100, 128);
  state.SetItemsProcessed(state.iterations());
  static const char* names[] = {"pretrain-encoder default, 100 x 128", "MiniLM-L6, 100 x 128", "BERT-base, 100 x 128"};
  state.SetLabel(names[state.range(0)]);
}
BENCHMARK(IumRerank)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

void ServeForward(benchmark::State& state) {
  const bool native_kernel = state.range(0) == 1, pairs = state.range(1) == 1;
  BertConfig c;
  c.vocab_size = 30522, c.hidden_size = 128, c.num_layers = 2, c.num_heads = 2, c.intermediate_size = 512;
  torch::NoGradGuard g;
  torch::manual_seed(0);
  BertModel m(c, /*with_pooler=*/true);
  m->init_weights();
  m->eval();
  const std::int64_t B = pairs ? 20 : 1, L = pairs ? 128 : 32;
  auto ids = torch::randint(1000, 30000, {B, L}, torch::kInt64);
  auto types = torch::zeros({B, L}, ids.options()), mask = torch::ones({B, L}, ids.options());
  const BertNative native(bert_native_weights(m));
  const std::size_t threads = torch_threads();
  std::vector<float> out, pooled;
  for (auto _ : state) {
    if (native_kernel) {
      native.forward(ids.data_ptr<std::int64_t>(), types.data_ptr<std::int64_t>(), mask.data_ptr<std::int64_t>(), B, L, pairs, out,
                     threads);
      if (pairs) native.pool(out.data(), B, pooled);
      benchmark::DoNotOptimize(out.data());
    } else {
      auto h = m->forward(ids, types, mask);
      if (pairs) h = m->pool(h);
      benchmark::DoNotOptimize(h.data_ptr());
    }
  }
  state.SetItemsProcessed(state.iterations());
  state.SetLabel(std::string(native_kernel ? "native" : "torch") + (pairs ? ", 20 pairs x 128" : ", 1 query x 32"));
}
BENCHMARK(ServeForward)->ArgsProduct({{0, 1}, {0, 1}})->Unit(benchmark::kMicrosecond)->UseRealTime();

void TrainStep(benchmark::State& state) {
  torch::manual_seed(0);
  auto c = encoder_shape(0);
  BertModel m(c, false);
  m->init_weights();
  m->train();
  auto dev = bench_device();
  m->to(dev);
  torch::optim::AdamW opt(m->parameters(), torch::optim::AdamWOptions(1e-4));
  const std::int64_t B = 16, L = 128;
  auto opts = torch::TensorOptions().dtype(torch::kInt64).device(dev);
  auto q_ids = torch::randint(1000, 30000, {B, L}, opts), k_ids = torch::randint(1000, 30000, {B, L}, opts);
  auto types = torch::zeros({B, L}, opts), mask = torch::ones({B, L}, opts);
  for (auto _ : state) {
    opt.zero_grad();
    auto q = pool_embeddings(m->forward(q_ids, types, mask), mask, Pooling::Mean, true);
    auto k = pool_embeddings(m->forward(k_ids, types, mask), mask, Pooling::Mean, true);
    auto loss = attune::train::info_nce(q, k, 0.05);
    loss.backward();
    opt.step();
    if (dev.is_cuda()) torch::cuda::synchronize();
  }
  state.SetLabel("MiniLM-L6 size, 2 x 16 x 128");
}
void LlamaTrainStep(benchmark::State& state) {
  ensure_torch_runtime();  // torch's threads as attune sets them (one per physical core)
  LlamaConfig c = llama_shape(1);
  c.tie_embeddings = true;
  auto m = Llama::random(c, 1, bench_device());
  {  // train-lm's start (N(0, 0.02) matrices, unit norms), not random()'s wide test weights
    torch::NoGradGuard g;
    for (auto& p : m->module().parameters()) p.dim() >= 2 ? p.normal_(0, 0.02) : p.fill_(1.0);
  }
  m->module().train();
  torch::optim::AdamW opt(m->module().parameters(), torch::optim::AdamWOptions(1e-3).betas({0.9, 0.95}).weight_decay(0.1));
  const std::int64_t B = 16, L = 256;
  auto ids = torch::randint(3, c.vocab_size, {B, L + 1}, torch::kInt64);
  auto input = ids.narrow(1, 0, L), want = ids.narrow(1, 1, L).contiguous();
  auto one = [&] {
    opt.zero_grad();
    auto loss = m->train_loss_sum(input, want, torch::Tensor()) / static_cast<double>(B * L);
    loss.backward();
    torch::nn::utils::clip_grad_norm_(m->module().parameters(), 1.0);
    opt.step();
    if (m->device().is_cuda()) torch::cuda::synchronize();
  };
  one();  // AdamW's state and the allocator's first blocks
  const char* trace = std::getenv("ATTUNE_BENCH_TRACE");
  std::unique_ptr<torch::autograd::profiler::RecordProfile> prof;
  if (trace && *trace) prof = std::make_unique<torch::autograd::profiler::RecordProfile>(std::string(trace));
  for (auto _ : state) one();
  prof.reset();
  state.counters["tokens/s"] = benchmark::Counter(static_cast<double>(B * L), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GFLOP/s"] = benchmark::Counter(B * L * 34.7e6 / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel("train-lm default, 16 x 256 tokens");
}
BENCHMARK(LlamaTrainStep)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(5);

BENCHMARK(TrainStep)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);

}  // namespace

// The machine beside the results: a GFLOP/s means little without the CPU and BLAS core it ran on.
int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("machine", attune::this_machine().line());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
