#pragma once
// Model-independent generation and scoring over a decoder with a KV cache (includes torch).
// A model (Llama-family causal LM, T5) implements Decoder; greedy, beam search, sampling
// and prefix-shared target scoring are written once here.
#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace attune::models {

using TokenIds = std::vector<std::int32_t>;

// Per-batch decoding state: the KV caches of a batch of sequences.
class DecoderState {
 public:
  virtual ~DecoderState() = default;
  // Feeds tokens [B, L] (int64) to every row; valid [B, L] (bool) is false for right
  // padding, whose outputs are garbage and must be ignored. Returns float32 logits
  // [B, L, V]: row b, position i predicts the token after tokens[b][i].
  virtual torch::Tensor step(const torch::Tensor& tokens, const torch::Tensor& valid) = 0;
  // Keeps rows `index` (int64 [B'], may repeat) in that order: beam reordering, or
  // fanning one shared prompt out to many targets.
  virtual void select(const torch::Tensor& index) = 0;
};

// Additive attention mask [B, 1, L, T] for L new queries at buffer positions T0..T0+L-1
// over T = key_valid.size(1) keys: 0 where the key is valid and not after the query, a
// large finite negative elsewhere (finite so a fully masked padding row stays NaN-free).
torch::Tensor causal_key_mask(const torch::Tensor& key_valid, std::int64_t L);

class Decoder {
 public:
  virtual ~Decoder() = default;
  // Reads the prompts (a batch; each non-empty) and returns the state plus float32 logits
  // [B, V] for the first token to generate.
  virtual std::unique_ptr<DecoderState> start(const std::vector<TokenIds>& prompts, torch::Tensor& next_logits) = 0;
  virtual torch::Device device() const = 0;
  virtual std::int64_t vocab_size() const = 0;
};

struct DecodeOptions {
  std::size_t max_new_tokens = 128;
  // 1 = greedy (or sampling when temperature > 0); > 1 = beam search with that many beams.
  int beams = 1;
  double temperature = 0;  // > 0 samples
  double top_p = 1.0;      // nucleus mass kept when sampling
  std::uint64_t seed = 0;  // sampling seed; row i of a batch draws from derive_seed(seed, i)
  double length_penalty = 1.0;  // beam score = sum log p / length^length_penalty (HF default)
  std::vector<std::int32_t> eos_ids;  // generation of a row stops at any of these
  std::size_t batch_size = 16;        // prompts decoded together
  // Constrained greedy decoding (beams 1, no sampling): when set, each step of prompt `row`
  // (its index in generate()'s prompts) takes the most probable token t, EOS included, for
  // which allow(row, tokens generated so far, t) holds; a row with no allowed token stops.
  std::function<bool(std::size_t row, const TokenIds& generated, std::int32_t token)> allow;
  // Context-aware decoding (greedy, allow included; llm::GenerateOptions::cad): when cad > 0,
  // without_documents[row] is prompt row's form without documents, read beside it, and each
  // step chooses by (1 + cad) * log_softmax(logits | prompt) - cad * log_softmax(logits |
  // without_documents), the same token fed to both. A row whose without_documents equals its
  // prompt (or is empty) chooses by its plain logits, exactly as with cad = 0.
  double cad = 0;
  const std::vector<TokenIds>* without_documents = nullptr;
  // > 0: no n-gram of this many tokens occurs twice in a row's generated tokens (greedy,
  // copy, sampling and beam search alike): a token that would complete an n-gram already
  // generated is never chosen. The prompt does not count, so copying from it stays free
  // (transformers' no_repeat_ngram_size counts a decoder-only model's prompt too). End of
  // text is never banned, since it is never among the generated tokens.
  int no_repeat_ngram = 0;
};

// The tokens that would complete an n-gram (n = no_repeat_ngram) already in `generated`:
// those that follow an earlier occurrence of its last n - 1 tokens. Sorted, unique.
std::vector<std::int32_t> repeated_ngram_tokens(const TokenIds& generated, int no_repeat_ngram);

// Generated ids per prompt (without the prompt, without the final EOS).
std::vector<TokenIds> generate(Decoder& model, const std::vector<TokenIds>& prompts, const DecodeOptions& opts);

struct ScoreItem {
  const TokenIds* prompt = nullptr;
  const TokenIds* target = nullptr;
};

struct ScoreOptions {
  // Requests with the same prompt read it once and fan its cache out to their targets.
  bool share_prefix = true;
  // Rows per forward pass (targets with a shared prefix; prompts otherwise).
  std::size_t batch_size = 32;
};

// Sum over target tokens of log p(token | prompt, earlier target tokens), natural log;
// 0 for an empty target. Results in request order.
std::vector<double> score(Decoder& model, const std::vector<ScoreItem>& items, const ScoreOptions& opts);

// Log-probabilities per target token (for tests: the teacher-forced definition).
std::vector<std::vector<double>> score_tokens(Decoder& model, const TokenIds& prompt, const std::vector<TokenIds>& targets);

}  // namespace attune::models
