// The local: language model: tokenizer + model folder behind the LanguageModel interface.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "attune/core/error.h"
#include "attune/models/decoding.h"
#include "attune/models/llama.h"
#include "attune/models/local_lm.h"
#include "attune/models/t5.h"
#include "attune/text/subword.h"

using namespace attune;
using namespace attune::models;
namespace fs = std::filesystem;

namespace {
const fs::path kStoriesModel = fs::path(ATTUNE_SHARED_DIR) / "models" / "stories260K";

// A writable copy of stories260K's files in TMP/<prefix><pid>/m (the caller removes its parent).
fs::path writable_copy_of_stories(const std::string& prefix) {
  const auto dir = fs::temp_directory_path() / (prefix + std::to_string(::getpid())) / "m";
  fs::remove_all(dir.parent_path());
  fs::create_directories(dir);
  for (auto& e : fs::directory_iterator(kStoriesModel))
    if (e.is_regular_file()) fs::copy_file(e.path(), dir / e.path().filename());
  for (auto& e : fs::directory_iterator(dir)) fs::permissions(e.path(), fs::perms::owner_write, fs::perm_options::add);
  return dir;
}
}

TEST(LocalModel, Stories260KGeneratesAndScores) {
  if (!fs::exists(kStoriesModel / "model.safetensors")) GTEST_SKIP() << "needs ../shared/models/stories260K (absent in this checkout)";
  LocalOptions lo;
  lo.device = "cpu";
  auto lm = LocalModel::load(kStoriesModel, lo);
  llm::GenerateOptions g;
  g.max_new_tokens = 30;
  std::vector<llm::Prompt> ps = {{""}, {"Once upon a time"}};
  auto out = lm->generate(ps, g);
  EXPECT_EQ(out[0].text.rfind("Once upon a time, there was a little girl named Lily.", 0), 0u) << out[0].text;
  EXPECT_FALSE(out[1].text.empty());
  // score = teacher-forced sum over the target's own tokens (no specials) after the prompt's.
  auto tok = text::SubwordTokenizer::load(kStoriesModel);
  auto model = Llama::load(kStoriesModel, torch::kCPU);
  std::vector<llm::ScoreRequest> reqs = {{"Once upon a", "time"}, {"Once upon a", "time there was"}, {"Lily", " went home."}, {"", "Lily"}};
  auto got = lm->score(reqs);
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    auto p = tok->encode(reqs[i].prompt, true).ids;
    auto t = tok->encode(reqs[i].target, false).ids;
    if (p.empty()) p = {1};
    auto per = score_tokens(*model, p, {t});
    double s = 0;
    for (double x : per[0]) s += x;
    EXPECT_NEAR(got[i], s, 1e-4) << i;
    // One request at a time gives the same number as the batch.
    std::vector<llm::ScoreRequest> one = {reqs[i]};
    EXPECT_NEAR(lm->score(one)[0], got[i], 1e-4) << i;
  }
  EXPECT_GT(got[0], got[1]);
  EXPECT_EQ(lm->info().id.rfind("local:stories260K@", 0), 0u) << lm->info().id;
  EXPECT_GT(lm->stats().generated_tokens, 0u);
}

TEST(LocalModel, IdChangesWithTheModelAndErrorsNameTheFolder) {
  if (!fs::exists(kStoriesModel / "model.safetensors")) GTEST_SKIP() << "needs ../shared/models/stories260K (absent in this checkout)";
  const auto dir = writable_copy_of_stories("attune_local_");
  LocalOptions lo;
  lo.device = "cpu";
  const auto id1 = LocalModel::load(dir, lo)->info().id;
  const auto id0 = LocalModel::load(kStoriesModel, lo)->info().id;
  EXPECT_EQ(id1.substr(id1.find('@')), id0.substr(id0.find('@')));  // same content, same hash
  {
    std::ifstream in(dir / "config.json");
    std::string cfg((std::istreambuf_iterator<char>(in)), {});
    cfg.replace(cfg.find("1e-05"), 5, "1e-06");
    std::ofstream(dir / "config.json") << cfg;
  }
  EXPECT_NE(LocalModel::load(dir, lo)->info().id, id1);
  fs::remove(dir / "model.safetensors");
  try {
    LocalModel::load(dir, lo);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no model.safetensors"), std::string::npos) << e.what();
  }
  fs::remove_all(dir.parent_path());
}

// A reader folder's attune_reader.json: the score of a target is that of prefix + target,
// then EOS when it says so; the file is part of the model's id; a malformed one is refused.
TEST(LocalModel, AReaderFolderScoresItsAnswerInTheFormItWasTrainedOn) {
  if (!fs::exists(kStoriesModel / "model.safetensors")) GTEST_SKIP() << "needs ../shared/models/stories260K (absent in this checkout)";
  const auto dir = writable_copy_of_stories("attune_reader_");
  LocalOptions lo;
  lo.device = "cpu";
  const std::vector<llm::ScoreRequest> bare = {{"Once upon a", "time"}, {"Lily", "went home."}};
  const std::vector<llm::ScoreRequest> with_nl = {{"Once upon a", "\ntime"}, {"Lily", "\nwent home."}};
  const auto plain = LocalModel::load(dir, lo);
  const auto want = plain->score(with_nl);
  std::ofstream(dir / kReaderFile) << R"({"answer_prefix": "\n", "eos_after_answer": false})";
  const auto reader = LocalModel::load(dir, lo);
  EXPECT_NE(reader->info().id, plain->info().id);  // cached scores of the bare form are not reused
  const auto got = reader->score(bare);
  for (std::size_t i = 0; i < bare.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-4) << i;
  // With EOS after the answer: its log-probability is added, as teacher forcing gives it.
  std::ofstream(dir / kReaderFile) << R"({"answer_prefix": "\n", "eos_after_answer": true})";
  const auto with_eos = LocalModel::load(dir, lo)->score(bare);
  auto tok = text::SubwordTokenizer::load(dir);
  auto model = Llama::load(dir, torch::kCPU);
  for (std::size_t i = 0; i < bare.size(); ++i) {
    auto t = tok->encode(with_nl[i].target, false).ids;
    t.push_back(*tok->eos_id());
    const auto per = score_tokens(*model, tok->encode(bare[i].prompt, true).ids, {t});
    double s = 0;
    for (double x : per[0]) s += x;
    EXPECT_NEAR(with_eos[i], s, 1e-4) << i;
    EXPECT_LT(with_eos[i], got[i]) << i;
  }
  for (const char* bad : {"[1]", R"({"answer_prefix": 1, "eos_after_answer": true})", R"({"answer_prefix": "\n"})", "{"}) {
    std::ofstream(dir / kReaderFile) << bad;
    try {
      LocalModel::load(dir, lo);
      ADD_FAILURE() << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(kReaderFile), std::string::npos) << e.what();
    }
  }
  fs::remove_all(dir.parent_path());
}

// A reader folder made before attune_reader.json (its attune_train.json says it was trained
// on reader examples) generates, but refuses to score rather than score the wrong form.
TEST(LocalModel, AReaderFolderWithoutItsAnswerFormatRefusesToScore) {
  if (!fs::exists(kStoriesModel / "model.safetensors")) GTEST_SKIP() << "needs ../shared/models/stories260K (absent in this checkout)";
  const auto dir = writable_copy_of_stories("attune_old_reader_");
  LocalOptions lo;
  lo.device = "cpu";
  std::ofstream(dir / "attune_train.json") << R"({"method": "lm", "data": "reader examples (commit_subject 5) from 9 commits"})";
  const auto old = LocalModel::load(dir, lo);
  llm::GenerateOptions g;
  g.max_new_tokens = 4;
  const std::vector<llm::Prompt> ps = {{"Once upon a time"}};
  EXPECT_EQ(old->generate(ps, g).size(), 1u);
  const std::vector<llm::ScoreRequest> req = {{"Once upon a", "time"}};
  try {
    old->score(req);
    ADD_FAILURE() << "scored";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(kReaderFile), std::string::npos) << e.what();
  }
  // A pretrained (not reader) folder scores as before.
  std::ofstream(dir / "attune_train.json") << R"j({"method": "lm", "data": "commits.jsonl (67877 texts)"})j";
  EXPECT_EQ(LocalModel::load(dir, lo)->score(req).size(), 1u);
  fs::remove_all(dir.parent_path());
}

TEST(LocalModel, T5FolderWithAUnigramTokenizer) {
  // A tiny random T5 saved as a Hugging Face folder with a hand-written Unigram
  // tokenizer.json (tests/fixtures/tokenizers/unigram.json: </s> = 1).
  T5Config c;
  c.vocab_size = 8;
  c.d_model = 8;
  c.d_kv = 4;
  c.d_ff = 12;
  c.num_heads = 2;
  c.num_layers = 2;
  c.num_decoder_layers = 2;
  c.num_buckets = 8;
  c.max_distance = 12;
  c.feed_forward_proj = "gated-gelu";
  c.tie_embeddings = false;
  auto dir = fs::temp_directory_path() / ("attune_local_t5_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  auto t5 = T5::random(c, 3);
  t5->save(dir);
  fs::copy_file(fs::path(ATTUNE_SOURCE_DIR) / "tests/fixtures/tokenizers/unigram.json", dir / "tokenizer.json");
  LocalOptions lo;
  lo.device = "cpu";
  auto lm = LocalModel::load(dir, lo);
  auto tok = text::SubwordTokenizer::load(dir);
  std::vector<llm::ScoreRequest> reqs = {{"ab bc", "abc"}, {"ab bc", "c"}, {"c", "ab"}};
  auto got = lm->score(reqs);
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    auto p = tok->encode(reqs[i].prompt, true).ids;
    auto t = tok->encode(reqs[i].target, true).ids;  // T5 labels end in </s>
    ASSERT_EQ(t.back(), 1);
    auto per = score_tokens(*t5, p, {t});
    double s = 0;
    for (double x : per[0]) s += x;
    EXPECT_NEAR(got[i], s, 1e-4) << i;
  }
  llm::GenerateOptions g;
  g.max_new_tokens = 6;
  std::vector<llm::Prompt> ps = {{"ab bc"}, {"c"}};
  auto out = lm->generate(ps, g);
  // Greedy generation through the text interface equals decode(generate(ids)).
  DecodeOptions o;
  o.max_new_tokens = 6;
  o.eos_ids = {1};
  for (std::size_t i = 0; i < ps.size(); ++i) {
    auto ids = generate(*t5, {tok->encode(ps[i].text, true).ids}, o)[0];
    EXPECT_EQ(out[i].text, tok->decode(ids, true)) << i;
  }
  fs::remove_all(dir);
}

namespace {
// A decoder whose logits are fixed: token v scores -v at every step (token 0 is the most
// probable, then 1, ...), so the constrained choice is the lowest allowed id.
class FixedDecoder final : public Decoder {
 public:
  explicit FixedDecoder(std::int64_t vocab) : vocab_(vocab) {}
  struct State final : DecoderState {
    std::int64_t vocab;
    torch::Tensor step(const torch::Tensor& tokens, const torch::Tensor&) override {
      return -torch::arange(vocab, torch::kFloat32).view({1, 1, vocab}).expand({tokens.size(0), tokens.size(1), vocab}).clone();
    }
    void select(const torch::Tensor&) override {}
  };
  std::unique_ptr<DecoderState> start(const std::vector<TokenIds>& prompts, torch::Tensor& next) override {
    auto s = std::make_unique<State>();
    s->vocab = vocab_;
    next = -torch::arange(vocab_, torch::kFloat32).view({1, vocab_}).expand({static_cast<std::int64_t>(prompts.size()), vocab_}).clone();
    return s;
  }
  torch::Device device() const override { return torch::kCPU; }
  std::int64_t vocab_size() const override { return vocab_; }

 private:
  std::int64_t vocab_;
};
}  // namespace

// DecodeOptions::allow: each step takes the most probable allowed token, past the first 64
// candidates when none of those is allowed; the row index is the prompt's, across batches;
// a row with nothing allowed stops; EOS counts only when allowed.
TEST(Decoding, ConstrainedGreedyTakesTheMostProbableAllowedToken) {
  FixedDecoder model(200);
  DecodeOptions o;
  o.max_new_tokens = 4;
  o.eos_ids = {0};
  o.batch_size = 2;  // three prompts: rows 0 and 1 in one batch, row 2 in the next
  std::vector<std::pair<std::size_t, std::size_t>> calls;
  o.allow = [&](std::size_t row, const TokenIds& generated, std::int32_t t) {
    calls.emplace_back(row, generated.size());
    if (row == 0) return t >= 5 && (generated.empty() || t > generated.back());  // increasing ids from 5
    if (row == 1) return t == 150 || (t == 0 && !generated.empty());            // 150, then EOS
    return false;                                                               // nothing: stops at once
  };
  const std::vector<TokenIds> prompts = {{1}, {2}, {3}};
  const auto out = generate(model, prompts, o);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0], (TokenIds{5, 6, 7, 8}));
  EXPECT_EQ(out[1], (TokenIds{150}));  // found past the top 64, then EOS (id 0, the most probable) ended it
  EXPECT_TRUE(out[2].empty());
  EXPECT_TRUE(std::any_of(calls.begin(), calls.end(), [](auto& c) { return c.first == 2; }));
  // Free greedy decoding of the same model: EOS at once.
  o.allow = nullptr;
  EXPECT_TRUE(generate(model, prompts, o)[0].empty());
  // Constrained decoding is greedy.
  o.allow = [](std::size_t, const TokenIds&, std::int32_t) { return true; };
  o.beams = 2;
  EXPECT_THROW(generate(model, prompts, o), UsageError);
}

// decode = copy with a real model: every answer is a non-empty span of its prompt (ASCII and
// multi-byte text), free decoding of the same prompts is not, and the options are checked.
TEST(LocalModel, CopyDecodingAnswersWithSpansOfThePrompt) {
  if (!fs::exists(kStoriesModel / "model.safetensors")) GTEST_SKIP() << "needs ../shared/models/stories260K (absent in this checkout)";
  const auto lm = LocalModel::load(kStoriesModel, LocalOptions{.device = "cpu"});
  llm::GenerateOptions g{.max_new_tokens = 12};
  const std::vector<llm::Prompt> ps = {{"Tom had a red ball. Lily had a big blue kite. Who had the kite?"},
                                       {"Zoë went to the café with her dog Max. The dog was happy."},
                                       {"purple elephant"}};
  const auto free = lm->generate(ps, g);
  g.decode = "copy";
  const auto copy = lm->generate(ps, g);
  std::size_t free_spans = 0;
  for (std::size_t i = 0; i < ps.size(); ++i) {
    std::string a = copy[i].text;
    a.erase(0, a.find_first_not_of(" \t\n"));
    EXPECT_FALSE(a.empty()) << i;
    EXPECT_NE(ps[i].text.find(a), std::string::npos) << i << ": '" << copy[i].text << "'";
    std::string f = free[i].text;
    f.erase(0, f.find_first_not_of(" \t\n"));
    free_spans += !f.empty() && ps[i].text.find(f) != std::string::npos;
  }
  EXPECT_LT(free_spans, ps.size());  // the constraint changed something
  g.beams = 2;
  EXPECT_THROW(lm->generate(ps, g), UsageError);
  g.beams = 1;
  g.decode = "extract";
  EXPECT_THROW(lm->generate(ps, g), UsageError);
}

// A reader whose answer prefix is "\n\"" (train-lm --answer-prefix): copy decoding lets it
// write the quote, which no prompt here holds, and the answer after it must be a span; the
// generation comes back without the quote.
TEST(LocalModel, CopyDecodingOfAQuotePrefixedReaderSpansTheAnswerAfterItsQuote) {
  if (!fs::exists(kStoriesModel / "model.safetensors")) GTEST_SKIP() << "needs ../shared/models/stories260K (absent in this checkout)";
  const auto dir = writable_copy_of_stories("attune_quoted_");
  std::ofstream(dir / kReaderFile) << R"({"answer_prefix": "\n\"", "eos_after_answer": true})";
  const auto lm = LocalModel::load(dir, LocalOptions{.device = "cpu"});
  llm::GenerateOptions g{.max_new_tokens = 12, .decode = "copy"};
  const std::vector<llm::Prompt> ps = {{"Tom had a red ball. Lily had a big blue kite. Who had the kite?"}, {"purple elephant"}};
  for (const auto& p : ps) ASSERT_EQ(p.text.find('"'), std::string::npos);
  const auto copy = lm->generate(ps, g);
  for (std::size_t i = 0; i < ps.size(); ++i) {
    std::string a = copy[i].text;
    a.erase(0, a.find_first_not_of(" \t\n"));
    EXPECT_FALSE(a.empty()) << i;
    EXPECT_EQ(a.find('"'), std::string::npos) << i << ": '" << copy[i].text << "'";
    EXPECT_NE(ps[i].text.find(a), std::string::npos) << i << ": '" << copy[i].text << "'";
  }
  fs::remove_all(dir.parent_path());
}

namespace {
// A decoder whose logits at every step depend only on the row's prompt: token v scores
// prior[v], plus bonus[v] when v is in the prompt. It records the tokens fed to each row.
class BagDecoder final : public Decoder {
 public:
  BagDecoder(std::vector<float> prior, std::vector<float> bonus) : prior_(std::move(prior)), bonus_(std::move(bonus)) {}
  std::vector<std::vector<std::int64_t>> fed;  // per row of the last start(): the tokens stepped in
  struct State final : DecoderState {
    BagDecoder* owner;
    torch::Tensor rows;  // [B, V]
    torch::Tensor step(const torch::Tensor& tokens, const torch::Tensor&) override {
      EXPECT_EQ(tokens.size(0), rows.size(0));
      for (std::int64_t b = 0; b < tokens.size(0); ++b) owner->fed[b].push_back(tokens[b][0].item<std::int64_t>());
      return rows.unsqueeze(1).clone();
    }
    void select(const torch::Tensor&) override {}
  };
  std::unique_ptr<DecoderState> start(const std::vector<TokenIds>& prompts, torch::Tensor& next) override {
    auto s = std::make_unique<State>();
    s->owner = this;
    const auto V = static_cast<std::int64_t>(prior_.size());
    s->rows = torch::zeros({static_cast<std::int64_t>(prompts.size()), V});
    fed.assign(prompts.size(), {});
    for (std::size_t b = 0; b < prompts.size(); ++b)
      for (std::int64_t v = 0; v < V; ++v) {
        const bool in = std::find(prompts[b].begin(), prompts[b].end(), v) != prompts[b].end();
        s->rows[static_cast<std::int64_t>(b)][v] = prior_[v] + (in ? bonus_[v] : 0.0f);
      }
    next = s->rows.clone();
    return s;
  }
  torch::Device device() const override { return torch::kCPU; }
  std::int64_t vocab_size() const override { return static_cast<std::int64_t>(prior_.size()); }

 private:
  std::vector<float> prior_, bonus_;
};
}  // namespace

// Context-aware decoding: token 1 is likely with or without the documents (logit 2.5 both
// ways), token 5 only with them (2.3 against 0). Plain greedy takes 1; with a = 1 the scores
// are 2 * 2.5 - 2.5 = 2.5 for 1 and 2 * 2.3 - 0 = 4.6 for 5 (log-normalisers aside), so 5.
// A prompt whose form without documents is itself (or empty) decodes as plain greedy, in
// the same batch; both forms are fed the same tokens; allow() still constrains the choice.
TEST(Decoding, ContextAwareDecodingFavoursWhatTheDocumentsMakeLikelier) {
  BagDecoder model({-1, 2.0f, 0, 0, 0, 0, 0, 0}, {0, 0.5f, 0, 0, 0, 2.3f, 0, 0});
  DecodeOptions o;
  o.max_new_tokens = 2;
  o.eos_ids = {0};
  const std::vector<TokenIds> prompts = {{1, 5, 6}, {1, 5, 6}, {1, 5, 6}};
  const std::vector<TokenIds> without = {{1}, {1, 5, 6}, {}};
  EXPECT_EQ(generate(model, prompts, o), (std::vector<TokenIds>{{1, 1}, {1, 1}, {1, 1}}));  // plain greedy
  o.cad = 1.0;
  o.without_documents = &without;
  EXPECT_EQ(generate(model, prompts, o), (std::vector<TokenIds>{{5, 5}, {1, 1}, {1, 1}}));
  ASSERT_EQ(model.fed.size(), 6u);  // three prompts, then their three forms without documents
  for (std::size_t b = 0; b < 3; ++b) EXPECT_EQ(model.fed[b], model.fed[b + 3]) << b;
  EXPECT_EQ(model.fed[0], (std::vector<std::int64_t>{5}));  // the second step's token is never fed back
  // A weight too small to overturn the prior: a = 0.05 gives 2.5 against 2.3 * 1.05 = 2.415.
  o.cad = 0.05;
  EXPECT_EQ(generate(model, prompts, o)[0], (TokenIds{1, 1}));
  // With a constraint: 5 not allowed, so the best allowed by the combined scores.
  o.cad = 1.0;
  o.allow = [](std::size_t, const TokenIds&, std::int32_t t) { return t != 5; };
  EXPECT_EQ(generate(model, prompts, o)[0], (TokenIds{1, 1}));
  o.allow = nullptr;
  // Refused: a missing or short list of forms, beams, sampling.
  const std::vector<TokenIds> short_list = {{1}};
  o.without_documents = &short_list;
  EXPECT_THROW(generate(model, prompts, o), UsageError);
  o.without_documents = nullptr;
  EXPECT_THROW(generate(model, prompts, o), UsageError);
  o.without_documents = &without;
  o.beams = 2;
  EXPECT_THROW(generate(model, prompts, o), UsageError);
  o.beams = 1;
  o.temperature = 0.7;
  EXPECT_THROW(generate(model, prompts, o), UsageError);
}

// The same through a real model: cad with every prompt's form without documents equal to
// itself, or empty, gives exactly plain greedy's answers; the options are checked.
TEST(LocalModel, ContextAwareDecodingWithoutDocumentsIsPlainGreedy) {
  if (!fs::exists(kStoriesModel / "model.safetensors")) GTEST_SKIP() << "needs ../shared/models/stories260K (absent in this checkout)";
  const auto lm = LocalModel::load(kStoriesModel, LocalOptions{.device = "cpu"});
  llm::GenerateOptions g{.max_new_tokens = 10};
  std::vector<llm::Prompt> ps = {{"Once upon a time", ""}, {"Lily had a big blue kite.", "Lily had a big blue kite."}};
  const auto plain = lm->generate(ps, g);
  g.cad = 1.0;
  const auto same = lm->generate(ps, g);
  for (std::size_t i = 0; i < ps.size(); ++i) EXPECT_EQ(same[i].text, plain[i].text) << i;
  // A real second form: it runs, in a batch with a prompt that has none, and for copy decoding too.
  ps.push_back({"Tom had a red ball. Lily had a big blue kite. Who had the kite?", "Who had the kite?"});
  const auto mixed = lm->generate(ps, g);
  ASSERT_EQ(mixed.size(), 3u);
  EXPECT_EQ(mixed[0].text, plain[0].text);
  EXPECT_EQ(mixed[1].text, plain[1].text);
  g.decode = "copy";
  const auto copy = lm->generate(ps, g);
  std::string a = copy[2].text;
  a.erase(0, a.find_first_not_of(" \t\n"));
  EXPECT_NE(ps[2].text.find(a), std::string::npos) << copy[2].text;
  g.decode = "free";
  g.cad = -1;
  EXPECT_THROW(lm->generate(ps, g), UsageError);
  g.cad = 1;
  g.beams = 2;
  EXPECT_THROW(lm->generate(ps, g), UsageError);
}
