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
