#include "attune/text/subword.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <thread>

#include "attune/core/error.h"

namespace attune::text {
namespace {

namespace fs = std::filesystem;
using Ids = std::vector<std::int32_t>;

const fs::path kShared = ATTUNE_SHARED_DIR;
const fs::path kFixtures = fs::path(ATTUNE_SOURCE_DIR) / "tests/fixtures/tokenizers";
const fs::path kBert = kShared / "models/bert-base-uncased-vocab";
const fs::path kStories = kShared / "models/stories260K";

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// ============================================================================ BERT WordPiece
class Bert : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kBert / "tokenizer.json") || !fs::exists(kBert / "vocab.txt"))
      GTEST_SKIP() << "needs " << kBert << " (the shared models folder)";
    json_ = SubwordTokenizer::load(kBert / "tokenizer.json");
    txt_ = SubwordTokenizer::load(kBert / "vocab.txt");
    dir_ = SubwordTokenizer::load(kBert);
  }
  std::shared_ptr<const SubwordTokenizer> json_, txt_, dir_;
};

TEST_F(Bert, KnownSentenceAndSpecialIds) {
  const Ids want = {101, 7592, 1010, 2026, 3899, 2003, 10140, 102};
  for (const auto* t : {json_.get(), txt_.get(), dir_.get()}) {
    EXPECT_EQ(t->encode("Hello, my dog is cute").ids, want) << t->name();
    EXPECT_EQ(t->pad_id(), 0);
    EXPECT_EQ(t->unk_id(), 100);
    EXPECT_EQ(t->cls_id(), 101);
    EXPECT_EQ(t->sep_id(), 102);
    EXPECT_EQ(t->mask_id(), 103);
    EXPECT_EQ(t->vocab_size(), 30522u);
    EXPECT_EQ(t->model_max_length(), 512u);
    EXPECT_EQ(t->num_special_tokens(false), 2u);
    EXPECT_EQ(t->num_special_tokens(true), 3u);
  }
  EXPECT_EQ(json_->encode("Hello, my dog is cute", false).ids, Ids(want.begin() + 1, want.end() - 1));
  EXPECT_EQ(json_->token_to_id("[MASK]"), 103);
  EXPECT_EQ(json_->token_to_id("dog"), 3899);
  EXPECT_EQ(json_->id_to_token(3899), "dog");
  EXPECT_EQ(json_->token_to_id("no-such-token"), std::nullopt);
  EXPECT_EQ(dir_->name(), "hf:" + kBert.string());
}

TEST_F(Bert, VocabTxtAndTokenizerJsonAgree) {
  const std::vector<std::string> texts = {
      "Café déjà vu",
      "我爱北京 and Tokyo",
      "Well... isn't it (really) great?! #1 @home $5.00",
      "unaffable supercalifragilisticexpialidocious",
      std::string(120, 'a') + " short",
      "tabs\tand\nnewlines\r\n and  double  spaces",
      "ÀÉÎÕÜ ñ ç ß",
      "emoji 😀 and control \x01 chars",
      "",
  };
  for (const auto& s : texts) {
    const auto a = json_->encode(s), b = txt_->encode(s);
    EXPECT_EQ(a.ids, b.ids) << s;
    EXPECT_EQ(a.offsets, b.offsets) << s;
  }
  // Accents are stripped after lowercasing: the same ids as the plain ASCII text.
  EXPECT_EQ(json_->encode("Café déjà vu").ids, json_->encode("cafe deja vu").ids);
  EXPECT_EQ(json_->encode("Café déjà vu").ids[1], 7668);  // "cafe"
  // CJK characters are split one per token; unknown ones become [UNK].
  EXPECT_EQ(json_->encode("我爱北京").ids, (Ids{101, 1855, 100, 1781, 1755, 102}));
  // A word longer than max_input_chars_per_word (100) is one [UNK].
  EXPECT_EQ(json_->encode(std::string(120, 'a')).ids, (Ids{101, 100, 102}));
  // A word with no WordPiece segmentation is one [UNK]; punctuation splits off.
  EXPECT_EQ(json_->encode("☃!").ids, (Ids{101, 100, 999, 102}));
  // Greedy longest-match-first with ## continuations: una ##ffa ##ble.
  EXPECT_EQ(json_->encode("unaffable", false).ids, (Ids{14477, 20961, 3468}));
}

TEST_F(Bert, OffsetsPointIntoTheOriginalText) {
  const auto e = json_->encode("Hello, my dog");
  ASSERT_EQ(e.ids.size(), 6u);
  using O = std::pair<std::size_t, std::size_t>;
  EXPECT_EQ(e.offsets, (std::vector<O>{{0, 0}, {0, 5}, {5, 6}, {7, 9}, {10, 13}, {0, 0}}));
  // "Café" is 5 bytes; lowercasing and accent stripping keep the token aligned to it.
  const auto c = json_->encode("Café vu", false);
  ASSERT_EQ(c.ids.size(), 2u);
  EXPECT_EQ(c.offsets[0], (O{0, 5}));
  EXPECT_EQ(c.offsets[1], (O{6, 8}));
}

TEST_F(Bert, DecodeRoundTripAndPairs) {
  const auto e = json_->encode("Hello, my dog is cute");
  EXPECT_EQ(json_->decode(e.ids), "hello, my dog is cute");
  EXPECT_EQ(json_->decode(e.ids, false), "[CLS] hello, my dog is cute [SEP]");
  EXPECT_EQ(json_->decode(json_->encode("unaffable").ids), "unaffable");

  const auto p = json_->encode_pair("hello world", "my dog");
  EXPECT_EQ(p.ids, (Ids{101, 7592, 2088, 102, 2026, 3899, 102}));
  EXPECT_EQ(p.type_ids, (Ids{0, 0, 0, 0, 1, 1, 1}));
  EXPECT_EQ(txt_->encode_pair("hello world", "my dog").type_ids, p.type_ids);
  EXPECT_EQ(p.offsets[4], (std::pair<std::size_t, std::size_t>{0, 2}));  // into the second text
}

TEST_F(Bert, BatchPadsAndTruncatesKeepingSpecials) {
  const std::vector<std::string> texts = {"Hello, my dog is cute", "hi"};
  SubwordTokenizer::BatchOptions o;
  auto b = json_->encode_batch(texts, o);
  EXPECT_EQ(b.rows, 2u);
  EXPECT_EQ(b.cols, 8u);
  EXPECT_EQ(Ids(b.ids.begin() + 8, b.ids.end()), (Ids{101, 7632, 102, 0, 0, 0, 0, 0}));
  EXPECT_EQ(Ids(b.mask.begin(), b.mask.begin() + 8), Ids(8, 1));
  EXPECT_EQ(Ids(b.mask.begin() + 8, b.mask.end()), (Ids{1, 1, 1, 0, 0, 0, 0, 0}));

  o.max_length = 5;
  b = json_->encode_batch(texts, o);
  EXPECT_EQ(b.cols, 5u);
  EXPECT_EQ(Ids(b.ids.begin(), b.ids.begin() + 5), (Ids{101, 7592, 1010, 2026, 102}));
  EXPECT_EQ(Ids(b.ids.begin() + 5, b.ids.end()), (Ids{101, 7632, 102, 0, 0}));

  o.max_length = 10;
  o.pad_to_longest = false;
  b = json_->encode_batch(texts, o);
  EXPECT_EQ(b.cols, 10u);
  EXPECT_EQ(b.mask[9], 0);
  EXPECT_EQ(b.mask[7], 1);

  // Pairs: HF longest_first keeps the shorter text whole when the longer can absorb the cut,
  // else gives each half of the budget; only_second trims the second.
  const std::vector<std::pair<std::string, std::string>> pairs = {{"hello world", "my dog is cute"}};
  SubwordTokenizer::BatchOptions po;
  po.max_length = 7;
  b = json_->encode_batch(pairs, po);
  EXPECT_EQ(b.ids, (Ids{101, 7592, 2088, 102, 2026, 3899, 102}));
  EXPECT_EQ(b.type_ids, (Ids{0, 0, 0, 0, 1, 1, 1}));
  po.max_length = 6;
  b = json_->encode_batch(pairs, po);
  EXPECT_EQ(b.ids, (Ids{101, 7592, 102, 2026, 3899, 102}));
  po.max_length = 10;  // budget 7 for 4 + 4 tokens: 3 + 4
  b = json_->encode_batch(std::vector<std::pair<std::string, std::string>>{{"a b c d", "e f g h"}}, po);
  EXPECT_EQ(b.ids, (Ids{101, 1037, 1038, 1039, 102, 1041, 1042, 1043, 1044, 102}));
  po.max_length = 6;
  po.truncate_second_only = true;
  b = json_->encode_batch(pairs, po);
  EXPECT_EQ(b.ids, (Ids{101, 7592, 2088, 102, 2026, 102}));
}

TEST_F(Bert, TokenizerInterface) {
  const Tokenizer& t = *json_;
  EXPECT_EQ(t.count("Hello, my dog is cute"), 8u);
  EXPECT_EQ(t.count(""), 2u);
  EXPECT_EQ(t.special_tokens(), 2u);
  EXPECT_EQ(t.truncate("Hello, my dog is cute", 5), "hello, my");
  EXPECT_EQ(t.truncate("Hello, my dog is cute", 2), "");
  EXPECT_EQ(t.truncate("Hello, my dog is cute", 100), "hello, my dog is cute");
  for (std::size_t n = 2; n < 10; ++n) EXPECT_LE(t.count(t.truncate("Hello, my dog is cute", n)), n);

  auto m = make_tokenizer(kBert.string());
  EXPECT_EQ(m->count("Hello, my dog is cute"), 8u);
  EXPECT_EQ(m->name(), "hf:" + kBert.string());
  EXPECT_EQ(make_tokenizer("hf:" + (kBert / "vocab.txt").string())->count("Hello, my dog is cute"), 8u);
  EXPECT_EQ(make_tokenizer((kBert / "tokenizer.json").string())->special_tokens(), 2u);
}

TEST_F(Bert, SharedBetweenThreads) {
  const std::vector<std::string> texts = {"Hello, my dog is cute", "Café déjà vu", "我爱北京", "unaffable words here"};
  std::vector<Ids> serial;
  for (const auto& s : texts) serial.push_back(json_->encode(s).ids);
  std::vector<std::thread> threads;
  std::vector<int> bad(4, 0);
  for (int k = 0; k < 4; ++k)
    threads.emplace_back([&, k] {
      for (int r = 0; r < 200; ++r)
        for (std::size_t i = 0; i < texts.size(); ++i)
          if (json_->encode(texts[i]).ids != serial[i]) ++bad[static_cast<std::size_t>(k)];
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad, std::vector<int>(4, 0));
}

// ============================================================================ stories260K
// llama2.c's tokenizer (tok512.bin) and its encode(): the reference the HF-form
// tokenizer.json must reproduce.
struct Llama2cTokenizer {
  std::vector<std::string> vocab;
  std::vector<float> scores;
  std::map<std::string, int> lookup;

  explicit Llama2cTokenizer(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::int32_t max_len = 0;
    in.read(reinterpret_cast<char*>(&max_len), 4);
    for (int i = 0; i < 512 && in; ++i) {
      float score = 0;
      std::int32_t len = 0;
      in.read(reinterpret_cast<char*>(&score), 4);
      in.read(reinterpret_cast<char*>(&len), 4);
      std::string s(static_cast<std::size_t>(len), '\0');
      in.read(s.data(), len);
      vocab.push_back(s);
      scores.push_back(score);
      lookup.emplace(s, i);
    }
  }
  int find(const std::string& s) const {
    auto it = lookup.find(s);
    return it == lookup.end() ? -1 : it->second;
  }
  // run.c encode(text, bos=1, eos=0).
  Ids encode(const std::string& text) const {
    Ids tokens = {1};
    if (!text.empty()) tokens.push_back(find(" "));
    std::string buf;
    for (std::size_t i = 0; i < text.size(); ++i) {
      if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) buf.clear();
      buf.push_back(text[i]);
      if (i + 1 < text.size() && (static_cast<unsigned char>(text[i + 1]) & 0xC0) == 0x80 && buf.size() < 4) continue;
      const int id = find(buf);
      if (id >= 0) {
        tokens.push_back(id);
      } else {
        for (unsigned char c : buf) tokens.push_back(c + 3);  // byte fallback
      }
      buf.clear();
    }
    while (true) {
      float best = -1e10f;
      int best_id = -1;
      std::size_t best_idx = 0;
      for (std::size_t i = 0; i + 1 < tokens.size(); ++i) {
        const int id = find(vocab[static_cast<std::size_t>(tokens[i])] + vocab[static_cast<std::size_t>(tokens[i + 1])]);
        if (id >= 0 && scores[static_cast<std::size_t>(id)] > best) {
          best = scores[static_cast<std::size_t>(id)];
          best_id = id;
          best_idx = i;
        }
      }
      if (best_id < 0) break;
      tokens[best_idx] = best_id;
      tokens.erase(tokens.begin() + static_cast<std::ptrdiff_t>(best_idx) + 1);
    }
    return tokens;
  }
};

// Varied sentences for the llama2.c cross-check: story text, punctuation, digits, spaces,
// and characters outside the 512-piece vocabulary (byte fallback).
const std::vector<std::string>& story_sentences() {
  static const std::vector<std::string> texts = {
      "Once upon a time, there was a little girl named Lily.",
      "She loved to play outside in the sunshine.",
      "One day, she saw a big, red ball in the park!",
      "\"Can I play with you?\" asked Tom.",
      "The dog said: 'Woof woof!'",
      "They were happy and played together all day long.",
      "It was 3 o'clock when 12 birds came.",
      "1234567890",
      "café 😀",
      "naïve résumé",
      "Hello\nworld",
      "tab\tseparated",
      "  leading and trailing spaces  ",
      "multiple   spaces   here",
      "UPPERCASE lowercase MiXeD",
      "x",
      "a-b_c/d\\e [x] {y} #z",
      "Ünïcödé ñ — “quotes” … ™",
      "日本語",
      "Ben and Mia went to the store to buy some candy.",
      "",
  };
  return texts;
}

class Stories : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kStories / "tokenizer.json") || !fs::exists(kStories / "raw/tok512.bin"))
      GTEST_SKIP() << "needs " << kStories << " (the shared models folder)";
    tok_ = SubwordTokenizer::load(kStories);
  }
  std::shared_ptr<const SubwordTokenizer> tok_;
};

TEST_F(Stories, MatchesLlama2cEncode) {
  const Llama2cTokenizer ref(kStories / "raw/tok512.bin");
  ASSERT_EQ(ref.vocab.size(), 512u);
  const std::vector<std::string>& texts = story_sentences();
  std::size_t with_bytes = 0;
  for (const auto& s : texts) {
    const Ids got = tok_->encode(s).ids;
    EXPECT_EQ(got, ref.encode(s)) << s;
    EXPECT_EQ(tok_->decode(got), s) << s;
    for (std::int32_t id : got) with_bytes += id >= 3 && id <= 258;
  }
  EXPECT_GT(with_bytes, 5u);  // byte fallback was exercised
  EXPECT_EQ(tok_->encode("café 😀").ids.back(), 0x80 + 3);  // last byte of F0 9F 98 80
  EXPECT_EQ(tok_->bos_id(), 1);
  EXPECT_EQ(tok_->eos_id(), 2);
  EXPECT_EQ(tok_->unk_id(), 0);
  EXPECT_EQ(tok_->pad_id(), std::nullopt);  // tokenizer_config.json says null
  EXPECT_EQ(tok_->num_special_tokens(), 1u);
  EXPECT_EQ(tok_->decode(Ids{1, 2}, false), "<s></s>");
}

TEST_F(Stories, LongTextEncodesFast) {
  std::string text;
  while (text.size() < 200000) text += "Once upon a time, Lily saw 42 red birds in the big tree. ";
  const auto t0 = std::chrono::steady_clock::now();
  const auto e = tok_->encode(text);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GT(e.ids.size(), 20000u);
  EXPECT_EQ(tok_->decode(e.ids), text);
#ifdef NDEBUG
  EXPECT_LT(s, 2.0) << "200 kB in one BPE word took " << s << " s";
#else
  (void)s;
#endif
}

// ============================================================================ byte-level BPE
class ByteLevelBpe : public ::testing::Test {
 protected:
  void SetUp() override { tok_ = SubwordTokenizer::load(kFixtures / "byte_level_bpe.json"); }
  std::shared_ptr<const SubwordTokenizer> tok_;
};

TEST_F(ByteLevelBpe, Gpt2RegexAndMergeRanks) {
  // GPT-2 regex: "Hello" " world" "'s" " 123" "!!"; "Hello" merges by rank (l l first,
  // then ll o, then H e), not left to right; " world" stops at Ġwor + l + d.
  const auto e = tok_->encode("Hello world's 123!!");
  EXPECT_EQ(e.ids, (Ids{18, 21, 3, 8, 22, 24, 25, 23}));
  using O = std::pair<std::size_t, std::size_t>;
  EXPECT_EQ(e.offsets[1], (O{5, 9}));  // "Ġwor" covers " wor"
  EXPECT_EQ(tok_->decode(e.ids), "Hello world's 123!!");
  // \s+(?!\S): of two spaces, the first stands alone and the second joins the word.
  EXPECT_EQ(tok_->encode("Hello  world").ids, (Ids{18, 5, 21, 3, 8}));
  // Special added tokens are matched in the raw text and skipped on decode.
  const auto s = tok_->encode("Hello<|endoftext|>Hello");
  EXPECT_EQ(s.ids, (Ids{18, 0, 18}));
  EXPECT_EQ(tok_->decode(s.ids), "HelloHello");
  EXPECT_EQ(tok_->decode(s.ids, false), "Hello<|endoftext|>Hello");
  EXPECT_EQ(tok_->num_special_tokens(), 0u);
  EXPECT_EQ(tok_->eos_id(), 0);  // no configs: guessed from the GPT-2 name <|endoftext|>
  EXPECT_EQ(tok_->pad_id(), std::nullopt);
}

// ============================================================================ Unigram
TEST(Unigram, ViterbiBeatsGreedyAndFusesUnknowns) {
  const auto tok = SubwordTokenizer::load(kFixtures / "unigram.json");
  // "▁abc": greedy longest match gives ▁ ab c (-1-2-3 = -6); the best path is ▁ a bc (-5).
  EXPECT_EQ(tok->encode("abc").ids, (Ids{2, 3, 7, 1}));
  EXPECT_EQ(tok->encode("abc ab").ids, (Ids{2, 3, 7, 2, 6, 1}));
  // Unknown characters get the unk score (min - 10) and fuse into one <unk>.
  EXPECT_EQ(tok->encode("abx").ids, (Ids{2, 6, 0, 1}));
  EXPECT_EQ(tok->encode("xyz").ids, (Ids{2, 0, 1}));
  EXPECT_EQ(tok->decode(tok->encode("abc   ab").ids), "abc ab");
  // Precompiled stands in as NFKC: full-width letters are the ASCII ones, offsets stay on
  // the 3-byte originals.
  const auto w = tok->encode("ａｂｃ", false);
  EXPECT_EQ(w.ids, (Ids{2, 3, 7}));
  using O = std::pair<std::size_t, std::size_t>;
  EXPECT_EQ(w.offsets, (std::vector<O>{{0, 3}, {0, 3}, {3, 9}}));
  EXPECT_EQ(tok->eos_id(), 1);
  EXPECT_EQ(tok->unk_id(), 0);
}

TEST(Unigram, ByteFallback) {
  const std::string json = R"({"model": {"type": "Unigram", "unk_id": 0, "byte_fallback": true,
      "vocab": [["<unk>", 0], ["a", -1], ["<0x78>", -5], ["<0xC3>", -5], ["<0xA9>", -5]]},
      "decoder": {"type": "ByteFallback"}})";
  const auto tok = SubwordTokenizer::from_json(json, "bf.json");
  EXPECT_EQ(tok->encode("axé").ids, (Ids{1, 2, 3, 4}));  // x -> <0x78>, é -> <0xC3><0xA9>
  EXPECT_EQ(tok->encode("aq").ids, (Ids{1, 0}));         // no <0x71>: unk
  EXPECT_EQ(tok->decode(Ids{1, 2, 3, 4}), "axé");
  EXPECT_EQ(tok->decode(Ids{3}), "\xEF\xBF\xBD");  // a lone lead byte
}

// ============================================================================ Llama 3 Split
TEST(SplitPreTokenizer, Llama3RegexGroupsDigitsAndFoldsContractions) {
  const std::string json = R"({
    "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
      {"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
       "behavior": "Isolated", "invert": false},
      {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}]},
    "model": {"type": "WordLevel", "unk_token": "[UNK]",
      "vocab": {"[UNK]": 0, "I": 1, "'M": 2, "\u0120": 3, "123": 4, "456": 5, "7": 6, "\u0120ok": 7, "'s": 8,
                "\u0120dog": 9, "!!!": 10, "\u0120\u010a\u010a": 11, "Yes": 12, "!!!\u010a": 13, "s": 14}},
    "decoder": {"type": "ByteLevel"}})";
  const auto tok = SubwordTokenizer::from_json(json, "llama3.json");
  EXPECT_EQ(tok->encode("I'M 1234567 ok").ids, (Ids{1, 2, 3, 4, 5, 6, 7}));
  // " ?[^\s\p{L}\p{N}]+[\r\n]*" keeps newlines after punctuation; "\s*[\r\n]+" groups
  // spaces with the newlines that follow.
  EXPECT_EQ(tok->encode("I's dog!!! \n\nYes").ids, (Ids{1, 8, 9, 10, 11, 12}));
  // (?i:'m): "'M" splits off "I'Ms" (case-sensitively it would be one piece "'Ms").
  EXPECT_EQ(tok->encode("I'Ms!!!\nYes").ids, (Ids{1, 2, 14, 13, 12}));
  EXPECT_EQ(tok->decode(tok->encode("I'M 1234567 ok").ids), "I'M 1234567 ok");
}

TEST(SplitPreTokenizer, Behaviors) {
  auto ids = [](const std::string& behavior, bool invert, const std::string& text) {
    const std::string json = R"({"pre_tokenizer": {"type": "Split", "pattern": {"String": "-"}, "behavior": ")" +
                             behavior + R"(", "invert": )" + (invert ? "true" : "false") +
                             R"(}, "model": {"type": "WordLevel", "unk_token": "?",
        "vocab": {"?": 0, "a": 1, "b": 2, "-": 3, "a-": 4, "-b": 5, "--": 6, "a--": 7, "--b": 8}}})";
    return SubwordTokenizer::from_json(json, "split.json")->encode(text).ids;
  };
  EXPECT_EQ(ids("Removed", false, "a-b"), (Ids{1, 2}));
  EXPECT_EQ(ids("Isolated", false, "a-b"), (Ids{1, 3, 2}));
  EXPECT_EQ(ids("MergedWithPrevious", false, "a-b"), (Ids{4, 2}));
  EXPECT_EQ(ids("MergedWithNext", false, "a-b"), (Ids{1, 5}));
  EXPECT_EQ(ids("Contiguous", false, "a--b"), (Ids{1, 6, 2}));
  EXPECT_EQ(ids("Isolated", false, "a--b"), (Ids{1, 3, 3, 2}));
  EXPECT_EQ(ids("Removed", true, "a-b"), (Ids{3}));  // inverted: the matches are kept
}

// ============================================================================ other components
TEST(Components, BpeWithSuffixPrefixAndUnk) {
  // Classic BPE with a word-end suffix, Whitespace pre-tokenizer, BPEDecoder.
  const std::string json = R"({
    "normalizer": {"type": "Sequence", "normalizers": [{"type": "NFD"}, {"type": "StripAccents"}, {"type": "Lowercase"}]},
    "pre_tokenizer": {"type": "Whitespace"},
    "model": {"type": "BPE", "unk_token": "<unk>", "end_of_word_suffix": "</w>", "fuse_unk": true,
      "vocab": {"<unk>": 0, "l": 1, "o": 2, "w</w>": 3, "lo": 4, "low</w>": 5, "e": 6, "r</w>": 7, "!</w>": 8},
      "merges": [["l", "o"], ["lo", "w</w>"]]},
    "decoder": {"type": "BPEDecoder", "suffix": "</w>"}})";
  const auto tok = SubwordTokenizer::from_json(json, "suffix.json");
  EXPECT_EQ(tok->encode("LÖW low!").ids, (Ids{5, 5, 8}));
  EXPECT_EQ(tok->encode("lozzw").ids, (Ids{4, 0, 3}));  // zz fused into one <unk>
  EXPECT_EQ(tok->decode(Ids{5, 5, 8}), "low low !");
}

TEST(Components, MetaspaceFirstAndAddedTokenFlags) {
  const std::string json = R"({
    "added_tokens": [
      {"id": 10, "content": "<mask>", "special": true, "lstrip": true, "rstrip": false, "single_word": false, "normalized": false},
      {"id": 11, "content": "cat", "special": false, "lstrip": false, "rstrip": false, "single_word": true, "normalized": true}],
    "normalizer": {"type": "Lowercase"},
    "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": true},
    "model": {"type": "WordLevel", "unk_token": "<unk>",
      "vocab": {"<unk>": 0, "\u2581a": 1, "a": 2, "\u2581b": 3, "\u2581cats": 4, "\u2581": 5}},
    "decoder": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first"}})";
  const auto tok = SubwordTokenizer::from_json(json, "meta.json");
  // lstrip swallows the space before <mask>; the text after it is not "first": no ▁.
  EXPECT_EQ(tok->encode("A <mask>a b").ids, (Ids{1, 10, 2, 3}));
  // single_word: "CAT" (normalized to cat) matches alone but not inside "cats".
  EXPECT_EQ(tok->encode("a CAT").ids, (Ids{1, 5, 11}));
  EXPECT_EQ(tok->encode("a cats").ids, (Ids{1, 4}));
  EXPECT_EQ(tok->decode(Ids{1, 3}), "a b");
  EXPECT_EQ(tok->mask_id(), 10);  // guessed from the well-known name
}

TEST(Components, RobertaAndBertProcessing) {
  const std::string base = R"("pre_tokenizer": {"type": "WhitespaceSplit"},
    "model": {"type": "WordLevel", "unk_token": "<unk>", "vocab": {"<unk>": 0, "<s>": 1, "</s>": 2, "x": 3, "y": 4}})";
  const auto rob = SubwordTokenizer::from_json(
      "{" + base + R"(, "post_processor": {"type": "RobertaProcessing", "sep": ["</s>", 2], "cls": ["<s>", 1]}})", "r.json");
  EXPECT_EQ(rob->encode_pair("x", "y").ids, (Ids{1, 3, 2, 2, 4, 2}));
  EXPECT_EQ(rob->encode_pair("x", "y").type_ids, Ids(6, 0));
  EXPECT_EQ(rob->num_special_tokens(true), 4u);
  const auto bert = SubwordTokenizer::from_json(
      "{" + base + R"(, "post_processor": {"type": "Sequence", "processors": [{"type": "ByteLevel"},
        {"type": "BertProcessing", "sep": ["</s>", 2], "cls": ["<s>", 1]}]}})", "b.json");
  EXPECT_EQ(bert->encode_pair("x", "y").ids, (Ids{1, 3, 2, 4, 2}));
  EXPECT_EQ(bert->encode_pair("x", "y").type_ids, (Ids{0, 0, 0, 1, 1}));
  EXPECT_EQ(bert->encode("x y", false).ids, (Ids{3, 4}));
}

TEST(Components, DigitsPunctuationAndBertPre) {
  const std::string json = R"({
    "pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "WhitespaceSplit"},
       {"type": "Digits", "individual_digits": true}, {"type": "Punctuation"}]},
    "model": {"type": "WordLevel", "unk_token": "?", "vocab": {"?": 0, "a": 1, "1": 2, "2": 3, ",": 4, "12": 5}}})";
  const auto tok = SubwordTokenizer::from_json(json, "d.json");
  EXPECT_EQ(tok->encode("a12,a").ids, (Ids{1, 2, 3, 4, 1}));
  std::string grouped = json;
  grouped.replace(grouped.find("true"), 4, "false");
  EXPECT_EQ(SubwordTokenizer::from_json(grouped, "d2.json")->encode("a12,a").ids, (Ids{1, 5, 4, 1}));
}

TEST(Components, BpeMergesAsStringsOrPairsAgree) {
  auto make = [](const std::string& merges) {
    return SubwordTokenizer::from_json(R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "abb": 3},
        "merges": )" + merges + "}}", "m.json");
  };
  EXPECT_EQ(make(R"(["a b", "ab b"])")->encode("abbab").ids, (Ids{3, 2}));
  EXPECT_EQ(make(R"([["a", "b"], ["ab", "b"]])")->encode("abbab").ids, (Ids{3, 2}));
}

// ============================================================================ errors
TEST(Errors, NameTheFileAndTheThing) {
  std::string m = error_of([] { SubwordTokenizer::from_json(R"({"model": {"type": "Foo", "vocab": {}}})", "my/tokenizer.json"); });
  EXPECT_NE(m.find("my/tokenizer.json"), std::string::npos) << m;
  EXPECT_NE(m.find("unsupported model type \"Foo\""), std::string::npos) << m;

  m = error_of([] {
    SubwordTokenizer::from_json(R"({"pre_tokenizer": {"type": "Foo"}, "model": {"type": "WordLevel", "vocab": {"a": 0}, "unk_token": "a"}})",
                                "tokenizer.json");
  });
  EXPECT_NE(m.find("tokenizer.json: unsupported pre_tokenizer type \"Foo\""), std::string::npos) << m;

  m = error_of([] { SubwordTokenizer::from_json(R"({"normalizer": {"type": "Bar"}})", "t.json"); });
  EXPECT_NE(m.find("unsupported normalizer type \"Bar\""), std::string::npos) << m;

  m = error_of([] { SubwordTokenizer::from_json("{\"model\": ", "broken.json"); });
  EXPECT_NE(m.find("broken.json: malformed JSON"), std::string::npos) << m;

  m = error_of([] { SubwordTokenizer::from_json(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a z"]}})", "bpe.json"); });
  EXPECT_NE(m.find("bpe.json"), std::string::npos) << m;
  EXPECT_NE(m.find("a z"), std::string::npos) << m;

  // An unk token missing from the vocabulary fails when it is needed, naming the file.
  const auto no_unk = SubwordTokenizer::from_json(R"({"model": {"type": "BPE", "unk_token": "<unk>", "vocab": {"a": 0}, "merges": []}})", "nounk.json");
  EXPECT_EQ(no_unk->encode("aa").ids, (Ids{0, 0}));
  m = error_of([&] { no_unk->encode("ab"); });
  EXPECT_NE(m.find("nounk.json: BPE unk_token \"<unk>\""), std::string::npos) << m;

  const fs::path missing = fs::temp_directory_path() / "attune-no-such-tokenizer.json";
  m = error_of([&] { SubwordTokenizer::load(missing); });
  EXPECT_NE(m.find(missing.string()), std::string::npos) << m;

  try {
    make_tokenizer(missing.string());
    FAIL() << "expected UsageError";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(missing.string()), std::string::npos) << e.what();
  }
  EXPECT_THROW(make_tokenizer("hf:/no/such/folder"), UsageError);
}

TEST(Errors, FolderWithoutTokenizerFiles) {
  const fs::path dir = fs::temp_directory_path() / ("attune-empty-tok-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string m = error_of([&] { SubwordTokenizer::load(dir); });
  EXPECT_NE(m.find(dir.string()), std::string::npos) << m;
  EXPECT_NE(m.find("tokenizer.json"), std::string::npos) << m;
  // A malformed tokenizer.json in a folder: the message names the file.
  { std::ofstream(dir / "tokenizer.json") << "{not json"; }
  const std::string m2 = error_of([&] { SubwordTokenizer::load(dir); });
  EXPECT_NE(m2.find((dir / "tokenizer.json").string() + ": malformed JSON"), std::string::npos) << m2;
  fs::remove_all(dir);
}

// ============================================================================ spiece.model
// A hand-written sentencepiece ModelProto (unigram) exercises the protobuf reader.
std::string varint(std::uint64_t v) {
  std::string out;
  do {
    unsigned char b = v & 0x7F;
    v >>= 7;
    if (v) b |= 0x80;
    out.push_back(static_cast<char>(b));
  } while (v);
  return out;
}
std::string field_bytes(int f, const std::string& b) { return varint(static_cast<std::uint64_t>(f) << 3 | 2) + varint(b.size()) + b; }
std::string field_varint(int f, std::uint64_t v) { return varint(static_cast<std::uint64_t>(f) << 3) + varint(v); }
std::string piece(const std::string& p, float score, int type) {
  std::uint32_t u;
  std::memcpy(&u, &score, 4);
  std::string f = varint(2 << 3 | 5);
  for (int k = 0; k < 4; ++k) f.push_back(static_cast<char>((u >> (8 * k)) & 0xFF));
  return field_bytes(1, field_bytes(1, p) + f + field_varint(3, static_cast<std::uint64_t>(type)));
}

TEST(SentencePiece, UnigramModelProto) {
  std::string model;
  model += piece("<unk>", 0, 2) + piece("<s>", 0, 3) + piece("</s>", 0, 3);
  model += piece("\xE2\x96\x81", -1, 1) + piece("a", -3, 1) + piece("b", -3, 1) + piece("c", -3, 1) +
           piece("ab", -2, 1) + piece("bc", -1, 1);
  model += field_bytes(2, field_varint(3, 1) + field_varint(40, 0) + field_varint(41, 1) + field_varint(42, 2) +
                              field_varint(43, static_cast<std::uint64_t>(-1)));
  model += field_bytes(3, field_bytes(1, "nmt_nfkc") + field_varint(3, 1) + field_varint(4, 1));
  const fs::path dir = fs::temp_directory_path() / ("attune-spm-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  { std::ofstream(dir / "spiece.model", std::ios::binary) << model; }
  const auto tok = SubwordTokenizer::load(dir);
  EXPECT_EQ(tok->encode("abc  ab").ids, (Ids{3, 4, 8, 3, 7, 2}));  // T5-style: </s> appended
  EXPECT_EQ(tok->decode(tok->encode("abc  ab").ids), "abc ab");
  EXPECT_EQ(tok->eos_id(), 2);
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->pad_id(), std::nullopt);
  EXPECT_EQ(tok->encode("<s>").ids, (Ids{1, 2}));  // control pieces are special added tokens
  { std::ofstream(dir / "spiece.model", std::ios::binary) << std::string("\x0a\xff", 2); }
  const std::string m = error_of([&] { SubwordTokenizer::load(dir); });
  EXPECT_NE(m.find("spiece.model"), std::string::npos) << m;
  fs::remove_all(dir);
}

// A Llama-style sentencepiece BPE model written from llama2.c's tok512.bin: the merges that
// load() derives from the piece scores must reproduce llama2.c's encode().
TEST(SentencePiece, BpeModelProtoMatchesLlama2c) {
  if (!fs::exists(kStories / "raw/tok512.bin")) GTEST_SKIP() << "needs " << kStories;
  const Llama2cTokenizer ref(kStories / "raw/tok512.bin");
  std::string model;
  for (std::size_t id = 0; id < ref.vocab.size(); ++id) {
    std::string p = id == 0 ? "<unk>" : id == 1 ? "<s>" : id == 2 ? "</s>" : ref.vocab[id];
    for (std::size_t k; (k = p.find(' ')) != std::string::npos;) p.replace(k, 1, "\xE2\x96\x81");
    const int type = id == 0 ? 2 : id <= 2 ? 3 : id <= 258 ? 6 : 1;
    model += piece(p, ref.scores[id], type);
  }
  model += field_bytes(2, field_varint(3, 2) + field_varint(35, 1));
  model += field_bytes(3, field_bytes(1, "identity") + field_varint(3, 1) + field_varint(4, 0));
  const fs::path dir = fs::temp_directory_path() / ("attune-spm-bpe-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  { std::ofstream(dir / "tokenizer.model", std::ios::binary) << model; }
  const auto tok = SubwordTokenizer::load(dir / "tokenizer.model");
  for (const auto& s : story_sentences()) {
    EXPECT_EQ(tok->encode(s).ids, ref.encode(s)) << s;
    EXPECT_EQ(tok->decode(tok->encode(s).ids), s) << s;
  }
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_id(), 2);
  EXPECT_EQ(tok->unk_id(), 0);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace attune::text
