#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include "attune/core/error.h"
#include "attune/models/decoding.h"
#include "attune/models/llama.h"
#include "attune/models/llama2c_vocab.h"

using namespace attune;
using namespace attune::models;
namespace fs = std::filesystem;

namespace {
const fs::path kStories = fs::path(ATTUNE_SHARED_DIR) / "models" / "stories260K";

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

LlamaConfig tiny_llama_config() {
  LlamaConfig c;
  c.vocab_size = 11;
  c.hidden_size = 16;
  c.intermediate_size = 24;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;  // grouped-query attention
  c.head_dim = 4;
  c.rms_eps = 1e-5;
  c.tie_embeddings = true;
  return c;
}

// Teacher-forced definition: log_softmax of the full (cache-free) forward over prompt+target.
std::vector<double> teacher_forced(Llama& m, const TokenIds& prompt, const TokenIds& target) {
  TokenIds all = prompt;
  all.insert(all.end(), target.begin(), target.end());
  auto t = torch::tensor(std::vector<std::int64_t>(all.begin(), all.end())).view({1, -1});
  auto lp = torch::log_softmax(m.forward(t).to(torch::kFloat64), -1)[0];
  std::vector<double> out;
  for (std::size_t i = 0; i < target.size(); ++i)
    out.push_back(lp[static_cast<std::int64_t>(prompt.size() + i - 1)][target[i]].item<double>());
  return out;
}
}  // namespace

TEST(Stories260K, GreedyFromBosMatchesThePublishedSample) {
  if (!fs::exists(kStories / "model.safetensors")) GTEST_SKIP() << "needs ../shared/models/stories260K (absent in this checkout)";
  const std::string expected = read_text(kStories / "EXPECTED_GREEDY.txt");
  auto vocab = Llama2cVocab::load(kStories / "raw" / "tok512.bin");
  DecodeOptions o;
  o.max_new_tokens = 256;  // llama2.c -n 256: 256 forward steps, each printing one new token
  o.eos_ids = {};          // llama2.c stops only on its step budget (or BOS)
  for (auto which : {"hf", "raw"}) {
    auto m = std::string(which) == "hf" ? Llama::load(kStories, torch::kCPU) : Llama::load_llama2c(kStories / "raw" / "stories260K.bin", torch::kCPU);
    auto out = generate(*m, {{1}}, o);
    ASSERT_EQ(out.size(), 1u);
    std::string text = vocab.decode(out[0]);
    // The published sample stops mid-sentence; compare its whole text, word for word.
    ASSERT_GE(text.size(), expected.size() - 1) << which << ": " << text;
    std::istringstream a(expected), b(text);
    std::string wa, wb;
    int words = 0;
    while (a >> wa) {
      ASSERT_TRUE(static_cast<bool>(b >> wb)) << which << ": ran out after " << words << " words";
      ASSERT_EQ(wa, wb) << which << ": word " << words;
      ++words;
    }
    EXPECT_GT(words, 100) << which;
  }
}

TEST(Stories260K, RawAndSafetensorsGiveTheSameLogits) {
  if (!fs::exists(kStories / "model.safetensors")) GTEST_SKIP() << "needs ../shared/models/stories260K (absent in this checkout)";
  auto hf = Llama::load(kStories, torch::kCPU);
  auto raw = Llama::load_llama2c(kStories / "raw" / "stories260K.bin", torch::kCPU);
  auto t = torch::tensor({1, 403, 407, 261, 378, 29, 280}).view({1, -1});
  EXPECT_TRUE(torch::allclose(hf->forward(t), raw->forward(t), 1e-5, 1e-5));
  EXPECT_EQ(hf->config().num_kv_heads, 4);
  EXPECT_TRUE(hf->config().tie_embeddings);
}

TEST(Llama, ScoreEqualsTeacherForcedSum) {
  auto m = Llama::random(tiny_llama_config(), 3);
  TokenIds prompt = {1, 5, 7, 2};
  std::vector<TokenIds> targets = {{3}, {4, 4, 9}, {10, 0, 1, 2, 3}, {}};
  auto per = score_tokens(*m, prompt, targets);
  std::vector<ScoreItem> items;
  for (auto& t : targets) items.push_back({&prompt, &t});
  auto sums = score(*m, items, {});
  for (std::size_t i = 0; i < targets.size(); ++i) {
    auto ref = teacher_forced(*m, prompt, targets[i]);
    ASSERT_EQ(per[i].size(), ref.size());
    double s = 0;
    for (std::size_t j = 0; j < ref.size(); ++j) {
      EXPECT_NEAR(per[i][j], ref[j], 1e-5) << i << "," << j;
      s += ref[j];
    }
    EXPECT_NEAR(sums[i], s, 1e-4) << i;
  }
  EXPECT_EQ(sums[3], 0.0);
}

// train-lm's loss (Llama::train_loss_sum): the summed cross-entropy at some positions (the
// reader stage's answers) or at all, computed in blocks of rows, equals the full forward's
// cross-entropy there, and so do its gradients, however the rows are blocked.
TEST(Llama, TrainingLossInBlocksAtSomePositionsEqualsTheFullForwardsLoss) {
  auto m = Llama::random(tiny_llama_config(), 5);
  auto tokens = torch::tensor(std::vector<std::int64_t>{1, 5, 7, 2, 3, 9, 4, 4, 10, 0, 6, 8}).view({2, 6});
  const auto grads = [&](const torch::Tensor& loss) {
    for (auto& p : m->module().parameters()) p.mutable_grad() = torch::Tensor();
    loss.backward();
    std::vector<torch::Tensor> g;
    for (auto& p : m->module().parameters()) g.push_back(p.grad().clone());
    return g;
  };
  const auto sum = torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum);
  auto at = torch::tensor(std::vector<std::int64_t>{3, 4, 5, 8, 11});
  auto targets = torch::tensor(std::vector<std::int64_t>{2, 3, 9, 1, 7});
  auto all_targets = torch::tensor(std::vector<std::int64_t>{5, 7, 2, 3, 9, 1, 4, 10, 0, 6, 8, 2});
  for (const bool some : {true, false}) {
    auto full = m->forward_train(tokens);
    ASSERT_EQ(full.sizes(), (std::vector<std::int64_t>{2, 6, 11}));
    auto logits = full.reshape({12, 11});
    if (some) logits = logits.index_select(0, at);
    const auto& want = some ? targets : all_targets;
    auto ref = torch::nn::functional::cross_entropy(logits, want, sum);
    const double ref_value = ref.item<double>();
    const auto g_ref = grads(ref);
    for (const std::int64_t block : {0, 1, 2, 5, 100}) {
      auto loss = m->train_loss_sum(tokens, want, some ? at : torch::Tensor(), block);
      EXPECT_NEAR(loss.item<double>(), ref_value, 1e-5 * std::abs(ref_value)) << some << " " << block;
      const auto g = grads(loss);
      ASSERT_EQ(g.size(), g_ref.size());
      for (std::size_t i = 0; i < g.size(); ++i)
        EXPECT_TRUE(torch::allclose(g[i], g_ref[i], 1e-4, 1e-5))
            << some << " " << block << " " << i << ": " << (g[i] - g_ref[i]).abs().max().item<double>() << " of "
            << g_ref[i].abs().max().item<double>();
    }
  }
  // Other positions give another loss (the selection is used), and a count mismatch is refused.
  auto other = m->train_loss_sum(tokens, targets, torch::tensor(std::vector<std::int64_t>{0, 1, 2, 6, 7}));
  auto mine = m->train_loss_sum(tokens, targets, at);
  EXPECT_GT(std::abs(other.item<double>() - mine.item<double>()), 1e-3);
  EXPECT_THROW(m->train_loss_sum(tokens, targets), Error);
}

// The fused training kernels (the CPU float32 default: causal attention and the output
// layer) against torch's operators (ATTUNE_LM_TRAIN_KERNEL=torch): the loss and every
// parameter's gradient, at a vocabulary that is not a multiple of the kernel's 16-float
// vectors, sequence lengths that are not multiples of its 4-row blocks, head sizes below and
// at 16-float multiples, grouped-query attention (torch's attention, the fused loss), logits
// large enough that an unshifted exp would overflow, blocks of several sizes, a frozen output
// layer; and what it refuses.
TEST(Llama, FusedTrainingKernelsEqualTorchs) {
  struct Shape {
    std::int64_t hidden, heads, kv_heads, head_dim, length;
  };
  for (const Shape sh : {Shape{32, 4, 2, 8, 17}, Shape{32, 4, 4, 8, 17}, Shape{64, 2, 2, 32, 38}, Shape{96, 1, 1, 96, 5}}) {
    auto c = tiny_llama_config();
    c.vocab_size = 301;
    c.hidden_size = sh.hidden;
    c.num_heads = sh.heads;
    c.num_kv_heads = sh.kv_heads;
    c.head_dim = sh.head_dim;
    auto m = Llama::random(c, 9);
    torch::manual_seed(3);
    auto tokens = torch::randint(0, c.vocab_size, {3, sh.length}, torch::kInt64);
    auto targets = torch::randint(0, c.vocab_size, {3 * sh.length}, torch::kInt64);
    auto emb = m->module().named_parameters()["model.embed_tokens.weight"];
    const auto run = [&](const char* kernel, std::int64_t block) {
      setenv("ATTUNE_LM_TRAIN_KERNEL", kernel, 1);
      for (auto& p : m->module().parameters()) p.mutable_grad() = torch::Tensor();
      auto loss = m->train_loss_sum(tokens, targets, torch::Tensor(), block);
      loss.backward();
      unsetenv("ATTUNE_LM_TRAIN_KERNEL");
      std::vector<torch::Tensor> out{loss.detach()};
      for (auto& p : m->module().parameters()) out.push_back(p.grad().defined() ? p.grad().clone() : torch::Tensor());
      return out;
    };
    const std::string where = std::to_string(sh.heads) + "/" + std::to_string(sh.kv_heads) + " heads of " +
                              std::to_string(sh.head_dim) + ", length " + std::to_string(sh.length);
    for (const double scale : {1.0, 30.0}) {
      {
        torch::NoGradGuard g;
        emb.mul_(scale);
      }
      const auto ref = run("torch", 0);
      ASSERT_TRUE(std::isfinite(ref[0].item<double>())) << where;
      for (const std::int64_t block : {0, 1, 7, 51}) {
        const auto got = run("fused", block);
        EXPECT_NEAR(got[0].item<double>(), ref[0].item<double>(), 1e-5 * std::abs(ref[0].item<double>()))
            << where << " x" << scale << " block " << block;
        for (std::size_t i = 1; i < got.size(); ++i) {
          const double tol = 1e-4 * ref[i].abs().max().item<double>() + 1e-6;
          EXPECT_LE((got[i] - ref[i]).abs().max().item<double>(), tol) << where << " x" << scale << " block " << block << " parameter " << i;
        }
      }
      {
        torch::NoGradGuard g;
        emb.div_(scale);
      }
    }
  }
  auto c = tiny_llama_config();
  c.vocab_size = 301;
  c.hidden_size = 32;
  c.num_kv_heads = 4;
  c.head_dim = 8;
  auto m = Llama::random(c, 9);
  auto tokens = torch::randint(0, c.vocab_size, {3, 17}, torch::kInt64);
  auto targets = torch::randint(0, c.vocab_size, {3 * 17}, torch::kInt64);
  auto emb = m->module().named_parameters()["model.embed_tokens.weight"];
  const auto run = [&](const char* kernel) {
    setenv("ATTUNE_LM_TRAIN_KERNEL", kernel, 1);
    for (auto& p : m->module().parameters()) p.mutable_grad() = torch::Tensor();
    auto loss = m->train_loss_sum(tokens, targets);
    loss.backward();
    unsetenv("ATTUNE_LM_TRAIN_KERNEL");
    std::vector<torch::Tensor> out{loss.detach()};
    for (auto& p : m->module().parameters()) out.push_back(p.grad().defined() ? p.grad().clone() : torch::Tensor());
    return out;
  };
  // A frozen output layer: the gradients of everything else still agree.
  emb.set_requires_grad(false);
  const auto ref = run("torch"), got = run("fused");
  EXPECT_FALSE(got[1].defined());
  for (std::size_t i = 2; i < got.size(); ++i) EXPECT_TRUE(torch::allclose(got[i], ref[i], 1e-4, 1e-5)) << i;
  emb.set_requires_grad(true);
  // A target outside the vocabulary, an unknown kernel name, and a second backward are refused.
  auto bad = targets.clone();
  bad[5] = c.vocab_size;
  EXPECT_THROW(m->train_loss_sum(tokens, bad), Error);
  setenv("ATTUNE_LM_TRAIN_KERNEL", "fast", 1);
  EXPECT_THROW(m->train_loss_sum(tokens, targets), UsageError);
  unsetenv("ATTUNE_LM_TRAIN_KERNEL");
  auto loss = m->train_loss_sum(tokens, targets);
  loss.backward(torch::Tensor(), /*retain_graph=*/true);
  EXPECT_THROW(loss.backward(), std::exception);
}

TEST(Llama, BatchedSharedAndOneByOneAgree) {
  auto m = Llama::random(tiny_llama_config(), 5);
  std::vector<TokenIds> prompts = {{1, 2, 3}, {1}, {4, 5, 6, 7, 8, 9}, {1, 2, 3}};
  std::vector<TokenIds> targets = {{5, 6}, {7}, {8, 9, 10, 1}, {2, 2, 2}, {3}, {6, 5, 4, 3, 2, 1}};
  std::vector<ScoreItem> items;
  for (std::size_t i = 0; i < 12; ++i) items.push_back({&prompts[i % prompts.size()], &targets[i % targets.size()]});
  ScoreOptions shared{true, 32}, naive{false, 32}, single{false, 1}, small_chunks{true, 2};
  auto a = score(*m, items, shared), b = score(*m, items, naive), c = score(*m, items, single), d = score(*m, items, small_chunks);
  for (std::size_t i = 0; i < items.size(); ++i) {
    EXPECT_NEAR(a[i], c[i], 1e-4) << i;
    EXPECT_NEAR(b[i], c[i], 1e-4) << i;
    EXPECT_NEAR(d[i], c[i], 1e-4) << i;
    EXPECT_LT(c[i], 0.0);
  }
}

TEST(Llama, BatchedGenerationEqualsOneByOne) {
  auto m = Llama::random(tiny_llama_config(), 7);
  std::vector<TokenIds> prompts = {{1, 2, 3}, {1}, {4, 5, 6, 7, 8, 9}};
  DecodeOptions o;
  o.max_new_tokens = 8;
  o.eos_ids = {0};
  auto batched = generate(*m, prompts, o);
  o.batch_size = 1;
  for (std::size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(generate(*m, {prompts[i]}, o)[0], batched[i]) << i;
  // Greedy continuation equals repeated argmax of the cache-free forward.
  TokenIds seq = prompts[2];
  for (auto tok : batched[2]) {
    auto t = torch::tensor(std::vector<std::int64_t>(seq.begin(), seq.end())).view({1, -1});
    EXPECT_EQ(m->forward(t)[0][-1].argmax().item<std::int64_t>(), tok);
    seq.push_back(tok);
  }
}

TEST(Llama, BeamSearchWithEnoughBeamsIsExhaustive) {
  // With beams >= V^(T-1) no prefix is ever pruned, so beam search must return the
  // best-scoring sequence of length T (no EOS, length penalty irrelevant at fixed length).
  auto cfg = tiny_llama_config();
  cfg.vocab_size = 5;
  auto m = Llama::random(cfg, 11);
  TokenIds prompt = {1, 2};
  const int T = 3;
  std::vector<TokenIds> all;
  for (int a = 0; a < 5; ++a)
    for (int b = 0; b < 5; ++b)
      for (int c = 0; c < 5; ++c) all.push_back({a, b, c});
  std::vector<ScoreItem> items;
  for (auto& s : all) items.push_back({&prompt, &s});
  auto scores = score(*m, items, {});
  auto best = std::max_element(scores.begin(), scores.end()) - scores.begin();
  DecodeOptions o;
  o.max_new_tokens = T;
  o.beams = 25;
  EXPECT_EQ(generate(*m, {prompt}, o)[0], all[static_cast<std::size_t>(best)]);
  o.beams = 4;
  auto four = generate(*m, {prompt}, o)[0];
  EXPECT_EQ(four.size(), 3u);
}

TEST(Llama, RepeatedNgramTokensAreTheContinuationsOfTheLastTokens) {
  EXPECT_EQ(repeated_ngram_tokens({1, 2, 3, 1, 2}, 3), (std::vector<std::int32_t>{3}));
  EXPECT_EQ(repeated_ngram_tokens({1, 2, 3, 1, 2, 4, 1, 2}, 3), (std::vector<std::int32_t>{3, 4}));
  EXPECT_EQ(repeated_ngram_tokens({1, 2, 3, 1, 2}, 2), (std::vector<std::int32_t>{3}));
  EXPECT_EQ(repeated_ngram_tokens({4, 1, 4, 1}, 1), (std::vector<std::int32_t>{1, 4}));
  EXPECT_TRUE(repeated_ngram_tokens({1, 2, 3, 1, 2}, 0).empty());
  EXPECT_TRUE(repeated_ngram_tokens({1, 2}, 3).empty());         // no earlier pair
  EXPECT_TRUE(repeated_ngram_tokens({1, 2, 3, 4}, 3).empty());   // (3, 4) is new
  EXPECT_TRUE(repeated_ngram_tokens({7, 7}, 3).empty());
  EXPECT_EQ(repeated_ngram_tokens({7, 7, 7}, 3), (std::vector<std::int32_t>{7}));
}

TEST(Llama, NoRepeatNgramNeverRepeatsAndIsOtherwiseTheSameSearch) {
  auto m = Llama::random(tiny_llama_config(), 3);
  const std::vector<TokenIds> prompts = {{1, 2, 3}, {4}, {5, 6, 7, 8, 9, 10}};
  const auto repeats = [](const TokenIds& g, std::size_t n) {
    std::set<TokenIds> seen;
    for (std::size_t i = 0; i + n <= g.size(); ++i)
      if (!seen.insert(TokenIds(g.begin() + static_cast<std::ptrdiff_t>(i), g.begin() + static_cast<std::ptrdiff_t>(i + n))).second)
        return true;
    return false;
  };
  DecodeOptions o;
  o.max_new_tokens = 40;  // no end of text: a random model loops within 40 tokens of 11
  const auto plain = generate(*m, prompts, o);
  bool plain_repeats = false;
  for (auto& g : plain) plain_repeats = plain_repeats || repeats(g, 2);
  ASSERT_TRUE(plain_repeats) << "the check needs a model that repeats itself";
  o.no_repeat_ngram = 2;
  const auto banned = generate(*m, prompts, o);
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_FALSE(repeats(banned[i], 2)) << i;
    // Greedy among the allowed tokens, step by step on the cache-free forward.
    TokenIds seq = prompts[i], gen;
    for (auto tok : banned[i]) {
      auto t = torch::tensor(std::vector<std::int64_t>(seq.begin(), seq.end())).view({1, -1});
      auto logits = m->forward(t)[0][-1].clone();
      for (auto b : repeated_ngram_tokens(gen, 2)) logits[b] = -std::numeric_limits<float>::infinity();
      EXPECT_EQ(logits.argmax().item<std::int64_t>(), tok) << i;
      seq.push_back(tok);
      gen.push_back(tok);
    }
  }
  o.batch_size = 1;  // independent of batching
  for (std::size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(generate(*m, {prompts[i]}, o)[0], banned[i]) << i;
  o.batch_size = 16;
  // n longer than any answer bans nothing.
  o.no_repeat_ngram = 41;
  EXPECT_EQ(generate(*m, prompts, o), plain);
  // n = 1: every token at most once, so without end of text a row stops when all 11 are used.
  o.no_repeat_ngram = 1;
  for (auto& g : generate(*m, prompts, o)) {
    EXPECT_FALSE(repeats(g, 1));
    EXPECT_LE(g.size(), 11u);
  }
  // Beam search, sampling and constrained (copy-like) decoding keep the ban too.
  o.no_repeat_ngram = 2;
  o.beams = 3;
  for (auto& p : prompts) EXPECT_FALSE(repeats(generate(*m, {p}, o)[0], 2));
  o.beams = 1;
  o.temperature = 1.0;
  o.seed = 9;
  for (auto& g : generate(*m, prompts, o)) EXPECT_FALSE(repeats(g, 2));
  o.temperature = 0;
  o.allow = [](std::size_t, const TokenIds&, std::int32_t t) { return t != 5; };
  for (auto& g : generate(*m, prompts, o)) {
    EXPECT_FALSE(repeats(g, 2));
    EXPECT_EQ(std::count(g.begin(), g.end(), 5), 0);
  }
  o.allow = nullptr;
  o.no_repeat_ngram = -1;
  EXPECT_THROW(generate(*m, prompts, o), UsageError);
}

TEST(Llama, SamplingIsSeededAndTinyTopPIsGreedy) {
  auto m = Llama::random(tiny_llama_config(), 13);
  std::vector<TokenIds> prompts = {{1, 2, 3}, {4}};
  DecodeOptions o;
  o.max_new_tokens = 12;
  auto greedy = generate(*m, prompts, o);
  o.temperature = 1.0;
  o.seed = 42;
  auto s1 = generate(*m, prompts, o), s2 = generate(*m, prompts, o);
  EXPECT_EQ(s1, s2);
  o.batch_size = 1;
  EXPECT_EQ(generate(*m, {prompts[1]}, o)[0], s1[1]);  // independent of batching
  o.batch_size = 16;
  bool differs = false;
  for (std::uint64_t seed = 43; seed < 48 && !differs; ++seed) {
    o.seed = seed;
    differs = generate(*m, prompts, o) != s1;
  }
  EXPECT_TRUE(differs);
  o.top_p = 1e-9;
  EXPECT_EQ(generate(*m, prompts, o), greedy);
}

TEST(Llama, SaveLoadRoundTripAndConfigErrors) {
  auto m = Llama::random(tiny_llama_config(), 17);
  auto dir = fs::temp_directory_path() / ("attune_llama_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  m->save(dir);
  auto back = Llama::load(dir, torch::kCPU);
  auto t = torch::tensor({1, 2, 3, 4}).view({1, -1});
  EXPECT_TRUE(torch::equal(m->forward(t), back->forward(t)));
  auto bad = [](const std::string& json) {
    try {
      LlamaConfig::from(ConfigFile::parse(json, "config.json"));
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(bad(R"({"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2"})").find("unsupported architecture \"GPT2LMHeadModel\""), std::string::npos);
  EXPECT_NE(bad(R"({"model_type": "llama", "hidden_size": 8})").find("field \"vocab_size\": missing"), std::string::npos);
  EXPECT_NE(bad(R"({"model_type": "llama", "vocab_size": 8, "hidden_size": 8, "intermediate_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2, "rope_scaling": {"rope_type": "yarn"}})").find("unsupported rope type \"yarn\""), std::string::npos);
  // A shape that disagrees with config.json names the tensor.
  std::ofstream(dir / "config.json") << R"({"model_type": "llama", "vocab_size": 11, "hidden_size": 16, "intermediate_size": 25, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "tie_word_embeddings": true})";
  try {
    Llama::load(dir, torch::kCPU);
    FAIL() << "expected a shape error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("field \"intermediate_size\": gives 25 but tensor \"model.layers.0.mlp.gate_proj.weight\""), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("has shape [24, 16] (expected [25, 16])"), std::string::npos) << e.what();
  }
  // Absurd sizes are refused against the weights' header before anything is allocated
  // (these used to allocate 13-15 GB), naming config.json and the field.
  auto expect_refused = [&](const std::string& json, const std::vector<std::string>& parts) {
    std::ofstream(dir / "config.json") << json;
    try {
      Llama::load(dir, torch::kCPU);
      ADD_FAILURE() << "no error for " << json;
    } catch (const Error& e) {
      for (const auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
    }
  };
  const std::string head = R"({"model_type": "llama", "vocab_size": 11, "hidden_size": 16, "intermediate_size": 24, "num_attention_heads": 4, "num_key_value_heads": 2, "tie_word_embeddings": true, )";
  expect_refused(head + R"("num_hidden_layers": 1000000})",
                 {(dir / "config.json").string(), "field \"num_hidden_layers\": 1000000 layers", "holds 2", "model.layers.2."});
  expect_refused(head + R"("num_hidden_layers": 2, "head_dim": 1000000})",
                 {"config.json", "num_attention_heads x head_dim", "gives 4000000", "q_proj.weight"});
  expect_refused(head + R"("num_hidden_layers": 0})", {"config.json", "num_hidden_layers", "must be at least 1"});
  expect_refused(head + R"("num_hidden_layers": 1})", {"num_hidden_layers", "holds more", "model.layers.1."});
  // NaN weights are refused naming the tensor, not run into garbage.
  std::ofstream(dir / "config.json") << head + R"("num_hidden_layers": 2})";
  {
    auto nan = Llama::random(tiny_llama_config(), 17);
    torch::NoGradGuard g;
    nan->module().named_parameters()["model.norm.weight"].fill_(std::nan(""));
    fs::remove_all(dir);
    nan->save(dir);
  }
  try {
    Llama::load(dir, torch::kCPU);
    ADD_FAILURE() << "NaN weights were loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("\"model.norm.weight\" holds NaN"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}
