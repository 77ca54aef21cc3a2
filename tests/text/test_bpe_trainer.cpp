// Byte-level BPE training: merges by count with ties to the lower ids, independent of the
// order texts come in; the written tokenizer.json loads with the ids the merges imply,
// applies merges in rank order, prepends BOS, and round-trips any UTF-8 text.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "attune/core/error.h"
#include "attune/core/file.h"
#include "attune/core/sha256.h"
#include "attune/text/bpe_trainer.h"
#include "attune/text/subword.h"

namespace attune::text {
namespace {

namespace fs = std::filesystem;
using Merges = std::vector<std::pair<std::string, std::string>>;

BpeTrainOptions small(std::size_t merges) {
  BpeTrainOptions o;
  o.vocab_size = 3 + 256 + merges;  // <s> </s> <pad>, the bytes, the merges
  o.min_frequency = 1;
  return o;
}

BpeModel train(const std::vector<std::string>& texts, const BpeTrainOptions& o) {
  BpeTrainer t(o);
  for (const auto& s : texts) t.add_text(s);
  return t.train();
}

TEST(BpeTrainer, MergesTheMostFrequentPairFirst) {
  // Words: "ab" 1, "Ġab" 2 (GPT-2 keeps the space with the word; Ġ is its byte symbol),
  // "abc" 1. Pairs: (a,b) 4, (Ġ,a) 2, (b,c) 1 -> a+b; then (Ġ,ab) 2 -> Ġ+ab; then (ab,c) 1.
  const auto m = train({"ab ab ab", "abc"}, small(3));
  EXPECT_EQ(m.merges, (Merges{{"a", "b"}, {"Ġ", "ab"}, {"ab", "c"}}));
  ASSERT_EQ(m.vocab.size(), 262u);
  EXPECT_EQ(m.specials, 3u);
  EXPECT_EQ(m.vocab[0], "<s>");
  EXPECT_EQ(m.vocab[3 + 'a'], "a");
  EXPECT_EQ(m.vocab[3 + ' '], "Ġ");
  EXPECT_EQ(m.vocab[259], "ab");
  EXPECT_EQ(m.vocab[260], "Ġab");
  EXPECT_EQ(m.vocab[261], "abc");
}

TEST(BpeTrainer, TiesGoToThePairOfLowerIdsWhateverTheOrderOfTheTexts) {
  // "xy" and "Ġzw" once each: every pair occurs once. (Ġ,z) has the lowest ids (Ġ is byte
  // 32), then (x,y), then (Ġz,w) (Ġz is a new symbol, id 256).
  const auto m = train({"xy zw"}, small(3));
  EXPECT_EQ(m.merges, (Merges{{"Ġ", "z"}, {"x", "y"}, {"Ġz", "w"}}));
  const std::vector<std::string> texts = {"the cat sat on the mat", "naïve café", "日本語のテキスト", "the the cat", "x = y + 1;"};
  std::vector<std::string> reversed(texts.rbegin(), texts.rend());
  const auto a = train(texts, small(40)), b = train(reversed, small(40));
  EXPECT_EQ(a.merges, b.merges);
  EXPECT_EQ(a.vocab, b.vocab);
}

TEST(BpeTrainer, StopsWhenNoPairIsFrequentEnough) {
  auto o = small(50);
  o.min_frequency = 2;
  const auto m = train({"ab ab ab", "abc"}, o);
  EXPECT_EQ(m.merges, (Merges{{"a", "b"}, {"Ġ", "ab"}}));  // (ab,c) occurs once
  EXPECT_EQ(m.vocab.size(), 261u);
}

class BpeFolder : public ::testing::Test {
 protected:
  void SetUp() override { fs::remove_all(dir_); }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_ = fs::temp_directory_path() / ("attune_bpe_" + std::to_string(::getpid()));
};

TEST_F(BpeFolder, TheWrittenTokenizerHasTheTrainedIdsAndAppliesMergesInRankOrder) {
  const auto o = small(3);
  write_bpe_tokenizer(dir_, train({"ab ab ab", "abc"}, o), o);
  for (const char* f : {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"}) EXPECT_TRUE(fs::exists(dir_ / f)) << f;
  const auto tok = SubwordTokenizer::load(dir_);
  EXPECT_EQ(tok->vocab_size(), 262u);
  EXPECT_EQ(tok->bos_id(), 0);
  EXPECT_EQ(tok->eos_id(), 1);
  EXPECT_EQ(tok->pad_id(), 2);
  EXPECT_EQ(tok->model_max_length(), 512u);
  // "Ġabc": (a,b) rank 0 first, then (Ġ,ab) rank 1; (ab,c) would need "ab c", which is no
  // longer there: Ġab + c, not Ġ + abc.
  EXPECT_EQ(tok->encode("ab abc").ids, (std::vector<std::int32_t>{0, 259, 260, 3 + 'c'}));
  EXPECT_EQ(tok->encode("abc", false).ids, (std::vector<std::int32_t>{261}));
  EXPECT_EQ(tok->decode(tok->encode("ab abc").ids), "ab abc");
}

TEST_F(BpeFolder, AnyUtf8TextRoundTripsAndSpecialTokensAreWhole) {
  auto o = small(60);
  o.reserved = 2;
  o.vocab_size += 2;
  const std::vector<std::string> texts = {"naïve café — 日本語 🚀", "Ünïcödé  spaces\tand\nlines", "the the the cat"};
  write_bpe_tokenizer(dir_, train(texts, o), o);
  const auto tok = SubwordTokenizer::load(dir_);
  for (const auto& t : texts) {
    const auto ids = tok->encode(t).ids;
    ASSERT_FALSE(ids.empty());
    EXPECT_EQ(ids.front(), 0);  // <s>
    EXPECT_EQ(tok->decode(ids), t);
  }
  const std::string never_seen = "Ωμέγα ∑ x² — ünseen ✓";  // bytes the merges never met
  EXPECT_EQ(tok->decode(tok->encode(never_seen).ids), never_seen);
  EXPECT_EQ(tok->token_to_id("<|reserved_0|>"), 3);
  EXPECT_EQ(tok->token_to_id("<|reserved_1|>"), 4);
  EXPECT_EQ(tok->encode("a</s>b", false).ids, (std::vector<std::int32_t>{5 + 'a', 1, 5 + 'b'}));
  o.add_bos = false;
  fs::remove_all(dir_);
  write_bpe_tokenizer(dir_, train(texts, o), o);
  EXPECT_EQ(SubwordTokenizer::load(dir_)->encode("cat").ids.front(), 5 + 'c');  // no <s>
}

TEST(BpeTrainer, BadOptionsAreRefusedNamingTheField) {
  const auto refused = [](BpeTrainOptions o, const std::string& field) {
    try {
      o.validate();
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
      return;
    }
    ADD_FAILURE() << "accepted " << field;
  };
  auto o = small(1);
  o.vocab_size = 259;  // no room for a merge
  refused(o, "vocab_size");
  o = small(1);
  o.special_tokens = {"<s>", "</s>", "<s>"};
  refused(o, "twice");
  o = small(1);
  o.bos = "<bos>";
  refused(o, "bos");
  o = small(1);
  o.special_tokens = {"<s>", ""};
  refused(o, "empty");
  o = small(1);
  o.min_frequency = 0;
  refused(o, "min_frequency");
  o = small(1);
  o.pad = "";  // no padding token is fine
  EXPECT_NO_THROW(o.validate());
}

// The tokenizer `attune train-tokenizer --input ../shared/data/text/commits.jsonl` writes
// (its defaults) is the one whose ids Hugging Face tokenizers and transformers gave in
// tests/fixtures/bpe_parity/hf_ids.json (made on the device machine): the same file, byte
// for byte, and the same ids for every text and pair.
TEST_F(BpeFolder, OnCommitsJsonlTheTokenizerIsTheOneHuggingFaceGaveTheseIdsFor) {
  const fs::path commits = fs::path(ATTUNE_SHARED_DIR) / "data/text/commits.jsonl";
  if (!fs::exists(commits)) GTEST_SKIP() << "needs " << commits << " (the shared data folder)";
  const auto fx = nlohmann::json::parse(read_file(fs::path(ATTUNE_SOURCE_DIR) / "tests/fixtures/bpe_parity/hf_ids.json"));
  BpeTrainOptions o;  // the CLI's defaults
  BpeTrainer t(o);
  std::ifstream in(commits);
  std::string line;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    for (const char* f : {"subject", "text"})
      if (j.contains(f) && j[f].is_string() && !j[f].get<std::string>().empty()) t.add_text(j[f].get<std::string>());
  }
  write_bpe_tokenizer(dir_, t.train(), o);
  EXPECT_EQ(sha256_hex(read_file(dir_ / "tokenizer.json")), fx.at("tokenizer_sha256").get<std::string>());
  const auto tok = SubwordTokenizer::load(dir_);
  const auto& texts = fx.at("texts");
  ASSERT_GT(texts.size(), 100u);
  for (std::size_t i = 0; i < texts.size(); ++i) {
    const auto text = texts[i].get<std::string>();
    EXPECT_EQ(tok->encode(text).ids, fx.at("ids")[i].get<std::vector<std::int32_t>>()) << text;
    EXPECT_EQ(tok->encode(text, false).ids, fx.at("ids_without_specials")[i].get<std::vector<std::int32_t>>()) << text;
  }
  for (const auto& p : fx.at("pairs"))
    EXPECT_EQ(tok->encode_pair(p[0].get<std::string>(), p[1].get<std::string>()).ids, p[2].get<std::vector<std::int32_t>>());
  EXPECT_TRUE(fx.at("transformers_same_ids").get<bool>());
}

}  // namespace
}  // namespace attune::text
