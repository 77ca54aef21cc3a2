// Language-model pretraining: a tiny decoder learns a small corpus (dev loss falls far
// below the uniform start), the folder is a Hugging Face folder local: loads and whose
// scores match the trainer's loss, a resumed run ends with the weights of an uninterrupted
// one, and bad options are refused.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <set>

#include "attune/core/error.h"
#include "attune/core/file.h"
#include "attune/models/local_lm.h"
#include "attune/models/weights.h"
#include "attune/text/bpe_trainer.h"
#include "attune/text/subword.h"
#include "attune/tasks/task.h"
#include "attune/train/lm.h"
#include "attune/train/reader.h"
#include "tiny_bert.h"

namespace attune::train {
namespace {

namespace fs = std::filesystem;

// Sentences from a tiny grammar: predictable enough to learn in seconds.
std::vector<std::string> corpus(std::size_t n) {
  const char* subj[] = {"the cat", "a dog", "the small bird", "my friend"};
  const char* verb[] = {"sat on", "ran to", "looked at", "jumped over"};
  const char* obj[] = {"the mat.", "a red house.", "the old tree.", "the river."};
  std::vector<std::string> out;
  for (std::size_t i = 0; i < n; ++i) out.push_back(std::string(subj[i % 4]) + " " + verb[(i / 4) % 4] + " " + obj[(i / 16) % 4]);
  return out;
}

class Lm : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = testing::fresh_dir(std::string("lm_") + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    text::BpeTrainOptions t;
    t.vocab_size = 3 + 256 + 40;
    text::BpeTrainer tr(t);
    for (const auto& s : corpus(64)) tr.add_text(s);
    text::write_bpe_tokenizer(root_ / "tok", tr.train(), t);
  }
  void TearDown() override { fs::remove_all(root_); }
  LmOptions tiny(const std::string& out) const {
    LmOptions o;
    o.tokenizer = root_ / "tok";
    o.hidden = 32;
    o.layers = 2;
    o.heads = 2;
    o.kv_heads = 1;
    o.intermediate = 64;
    o.max_positions = 64;
    o.seq_len = 32;
    o.dev_fraction = 0.1;
    o.fit.out = root_ / out;
    o.fit.epochs = 3;
    o.fit.batch_size = 8;
    o.fit.micro_batch = 4;
    o.fit.lr = 1e-2;
    o.fit.quiet = true;
    o.fit.seed = 5;
    return o;
  }
  fs::path root_;
};

TEST_F(Lm, ATinyDecoderLearnsTheCorpusAndItsFolderIsALocalModel) {
  const auto o = tiny("lm");
  const auto res = train_lm(corpus(400), o);
  EXPECT_GT(res.train_sequences, 20u);
  EXPECT_GT(res.dev_sequences, 0u);
  EXPECT_NEAR(res.init_dev_loss, std::log(299.0), 0.5) << "an untrained model is near uniform";
  EXPECT_LT(res.dev_loss, res.init_dev_loss - 3.0) << res.init_dev_loss << " -> " << res.dev_loss;
  EXPECT_GT(res.best_epoch, 0u);
  for (const char* f : {"config.json", "model.safetensors", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
                        "attune_train.json"})
    EXPECT_TRUE(fs::exists(o.fit.out / f)) << f;
  const auto cfg = nlohmann::json::parse(read_file(o.fit.out / "config.json"));
  EXPECT_EQ(cfg.at("architectures").at(0), "LlamaForCausalLM");
  EXPECT_EQ(cfg.at("tie_word_embeddings"), true);
  EXPECT_EQ(cfg.at("num_key_value_heads"), 1);
  // local: loads it; a continuation the corpus always has is far likelier than one it never has.
  auto lm = models::LocalModel::load(o.fit.out);
  const std::vector<llm::ScoreRequest> reqs = {{"the cat sat on", " the mat."}, {"the cat sat on", " river bird dog"}};
  const auto s = lm->score(reqs);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_GT(s[0], s[1] + 5.0) << s[0] << " vs " << s[1];
  llm::GenerateOptions g;
  g.max_new_tokens = 8;
  const std::vector<llm::Prompt> p = {llm::Prompt{"my friend ran"}};
  EXPECT_FALSE(lm->generate(p, g).at(0).text.empty());
}

TEST_F(Lm, ResumeAfterAKillGivesTheWeightsOfAnUninterruptedRun) {
  auto full = tiny("full");
  full.fit.epochs = 2;
  full.fit.checkpoint_every = 3;
  const auto texts = corpus(200);
  const auto a = train_lm(texts, full);
  auto part = full;
  part.fit.out = root_ / "part";
  part.fit.stop_after = 4;
  EXPECT_EQ(train_lm(texts, part).steps_done, 4u);
  part.fit.stop_after = 0;
  part.fit.resume = true;
  EXPECT_EQ(train_lm(texts, part).steps_done, a.total_steps);
  const auto wa = models::WeightSet::open(full.fit.out), wb = models::WeightSet::open(part.fit.out);
  ASSERT_EQ(wa.names(), wb.names());
  for (const auto& n : wa.names()) EXPECT_TRUE(torch::equal(models::to_tensor(wa.get(n)), models::to_tensor(wb.get(n)))) << n;
}

TEST_F(Lm, BadOptionsAndTooLittleTextAreRefused) {
  auto o = tiny("bad");
  o.heads = 3;  // does not divide 32
  EXPECT_THROW(o.validate(), UsageError);
  o = tiny("bad");
  o.seq_len = 65;  // past max_positions
  EXPECT_THROW(o.validate(), UsageError);
  o = tiny("bad");
  o.kv_heads = 3;
  EXPECT_THROW(o.validate(), UsageError);
  o = tiny("bad");
  o.tokenizer = "";
  EXPECT_THROW(o.validate(), UsageError);
  EXPECT_THROW(train_lm({"too short"}, tiny("short")), Error);
  // Batches by length and an answer's head weight are the reader stage's: pretraining refuses
  // each, naming the field and the reader stage, before writing anything.
  const auto refused_in_pretraining = [&](LmOptions opts, const std::string& field) {
    try {
      train_lm(corpus(50), opts);
      ADD_FAILURE() << "pretraining accepted " << field;
    } catch (const UsageError& e) {
      const auto* named = dynamic_cast<const NamesField*>(&e);
      ASSERT_NE(named, nullptr) << e.what();
      EXPECT_EQ(named->field(), field);
      EXPECT_NE(std::string(e.what()).find("reader stage"), std::string::npos) << e.what();
    }
    EXPECT_FALSE(fs::exists(opts.fit.out)) << field;
  };
  o = tiny("windowed");
  o.length_window = 4;
  refused_in_pretraining(o, "length_window");
  o = tiny("headed");
  o.head_weight = 4;
  refused_in_pretraining(o, "head_weight");
  o = tiny("prefixed");
  o.answer_prefix = "\n\"";
  refused_in_pretraining(o, "answer_prefix");
  o.answer_prefix = "\n";
  // The head weight must be from 1 to 100.
  for (std::size_t w : {0, 101}) {
    o.head_weight = w;
    EXPECT_THROW(o.validate(), UsageError) << w;
  }
}

// --repeat-share: a share of the training texts goes into the stream twice in a row. On texts of
// eight random words, where nothing but the context predicts a word, a model trained with repeats
// learns to predict a repeat: it gives a text it has just read far more probability than one it
// has not, and a model trained on the same texts without repeats does not. (At this size and
// with texts of one length that can be a copy by position; on texts of 4-12 words the same tiny
// model did not learn to copy in 1,760 steps, nor did the 5.3M one in 430: docs/RESULTS.md.)
// Dev texts are never repeated.
TEST_F(Lm, RepeatedTextsTeachCopyingFromTheContext) {
  const char* words[] = {"cat", "dog", "bird", "friend", "sat", "ran", "looked", "jumped",
                         "mat", "red", "house", "old", "tree", "river", "small", "my"};
  std::mt19937 gen(11);
  const auto random_text = [&] {
    std::string t;
    for (int w = 0; w < 8; ++w) t += (t.empty() ? "" : " ") + std::string(words[gen() % 16]);
    return t;
  };
  std::vector<std::string> texts;
  for (int i = 0; i < 600; ++i) texts.push_back(random_text());
  auto plain = tiny("plain");
  plain.fit.epochs = 10;
  auto twice = plain;
  twice.fit.out = root_ / "twice";
  twice.repeat_share = 1.0;
  const auto a = train_lm(texts, plain), b = train_lm(texts, twice);
  // Every training text twice: twice the training tokens (up to the last, partial, sequence);
  // the same dev sequences.
  EXPECT_NEAR(static_cast<double>(b.train_sequences), 2.0 * static_cast<double>(a.train_sequences), 1.0);
  EXPECT_EQ(a.dev_sequences, b.dev_sequences);
  EXPECT_EQ(nlohmann::json::parse(read_file(twice.fit.out / "attune_train.json")).at("options").at("repeat_share"), 1.0);
  // The copy gap: log p(a text | the same text) - log p(the text | another text), summed over 12 texts.
  const auto copy_gap = [&](const fs::path& dir) {
    auto lm = models::LocalModel::load(dir);
    std::vector<llm::ScoreRequest> reqs;
    for (int i = 0; i < 12; ++i) {
      const auto t = random_text(), u = random_text();
      reqs.push_back({t + ". " + t.substr(0, t.find(' ')), t.substr(t.find(' '))});
      reqs.push_back({u + ". " + t.substr(0, t.find(' ')), t.substr(t.find(' '))});
    }
    const auto s = lm->score(reqs);
    double gap = 0;
    for (std::size_t i = 0; i < s.size(); i += 2) gap += s[i] - s[i + 1];
    return gap / 12;
  };
  const double gap_plain = copy_gap(plain.fit.out), gap_twice = copy_gap(twice.fit.out);
  EXPECT_GT(gap_twice, gap_plain + 4.0) << "per text: plain " << gap_plain << ", with repeats " << gap_twice;
  // The reader stage refuses it; the share is in [0, 1].
  auto o = tiny("bad");
  o.repeat_share = 1.5;
  EXPECT_THROW(o.validate(), UsageError);
  o.repeat_share = -0.1;
  EXPECT_THROW(o.validate(), UsageError);
  o.repeat_share = 0.5;
  o.init = twice.fit.out;
  try {
    train_reader({}, o);
    ADD_FAILURE() << "the reader stage accepted repeat_share";
  } catch (const UsageError& e) {
    const auto* named = dynamic_cast<const NamesField*>(&e);
    ASSERT_NE(named, nullptr) << e.what();
    EXPECT_EQ(named->field(), "repeat_share");
  }
}

// Commit histories as in ../shared/data/text/commits.jsonl: two authors, each subject
// "<area>: <verb> <thing>" in a personal style.
std::vector<Commit> histories() {
  std::vector<Commit> c;
  const char* things[] = {"parser", "cache", "buffer", "stream", "socket", "index"};
  for (int i = 0; i < 60; ++i) {
    const bool alice = i % 2 == 0;
    const std::string thing = things[i % 6];
    char date[16];
    std::snprintf(date, sizeof date, "2020-01-%02d", 1 + i / 2);
    c.push_back({"c" + std::to_string(i), "r", alice ? "alice" : "bob", date,
                 (alice ? "net: fix the " : "core: rework ") + thing, "the " + thing + " was wrong when the input was empty"});
  }
  return c;
}

// --group-by's order: groups in the order of their first record; within one, a chain from its first
// record to the remaining record BM25 scores highest for the current one, ties and records sharing
// no word to the earliest.
TEST(RelatedOrder, GroupsByKeyAndChainsEachGroupByBm25) {
  const std::vector<std::string> keys = {"a", "b", "a", "a", "a", "a", "b", "a", "c"};
  const std::vector<std::string> texts = {
      "apple banana",           // 0 a: the chain's start
      "zebra",                  // 1 b
      "car engine",             // 2 a
      "dog cat",                // 3 a
      "apple banana split",     // 4 a: the nearest to 0
      "car engine wheel",       // 5 a: the nearest to 2
      "zebra crossing",         // 6 b
      "dog bark",               // 7 a: shares "dog" with 3
      "alone"};                 // 8 c
  // a: 0 -> 4 (apple banana); 4 shares no word with the rest -> the earliest, 2 -> 5; then 3 -> 7.
  const std::vector<std::size_t> want = {0, 4, 2, 5, 3, 7, 1, 6, 8};
  EXPECT_EQ(related_order(keys, texts), want);
  EXPECT_EQ(related_order(keys, texts), want);  // no state, no seed
  // One key: the whole input is one chain; every key distinct: input order.
  const std::vector<std::string> one(texts.size(), "k");
  const auto chain = related_order(one, texts);
  EXPECT_EQ(chain.front(), 0U);
  EXPECT_EQ(chain[1], 4U);
  std::vector<std::string> distinct;
  for (std::size_t i = 0; i < texts.size(); ++i) distinct.push_back(std::to_string(i));
  const auto same = related_order(distinct, texts);
  for (std::size_t i = 0; i < same.size(); ++i) EXPECT_EQ(same[i], i);
  EXPECT_THROW(related_order({"a"}, {}), Error);
  EXPECT_TRUE(related_order({}, {}).empty());
}

TEST_F(Lm, ReaderExamplesAreTheTasksPromptsOverEarlierCommitsOfTheSameAuthor) {
  auto task = tasks::make_task("commit_subject");
  const auto tok = text::SubwordTokenizer::load(root_ / "tok");
  ReaderDataOptions ro;
  ro.seed = 3;
  const auto ex = commit_reader_examples(histories(), *task, *tok, ro);
  // Each author's first day has no strictly earlier commit: 60 commits, 2 without history.
  ASSERT_EQ(ex.size(), 58u);
  std::map<std::string, int> modes;
  for (const auto& e : ex) {
    ++modes[e.mode.substr(0, e.mode.find('@'))];
    EXPECT_EQ(e.target.front(), '\n');
    const bool alice = std::stoi(e.id.substr(1)) % 2 == 0;
    // Only the author's own subjects reach the prompt.
    EXPECT_EQ(e.prompt.find(alice ? "core: rework" : "net: fix the"), std::string::npos) << e.prompt;
    if (e.mode != "none") {
      EXPECT_NE(e.prompt.find(alice ? "net: fix the" : "core: rework"), std::string::npos) << e.mode << " " << e.prompt;
    }
    EXPECT_NE(e.prompt.find("Generate a subject line for the following commit description: the "), std::string::npos);
    // The head (--head-weight) is the answer's area through its ':'.
    EXPECT_EQ(e.target.substr(0, e.head_chars), alice ? "\nnet:" : "\ncore:") << e.target;
  }
  for (const char* m : {"none", "bm25", "random", "recency", "bm25+best"}) EXPECT_GT(modes[m], 3) << m;
  // A subject without an area has no head.
  auto no_area = histories();
  for (auto& c : no_area) c.subject = "Fix the " + c.subject.substr(c.subject.find(':') + 2);
  for (const auto& e : commit_reader_examples(no_area, *task, *tok, ro)) EXPECT_EQ(e.head_chars, 0u) << e.target;
  // Deterministic for a seed.
  EXPECT_EQ(commit_reader_examples(histories(), *task, *tok, ro)[7].prompt, ex[7].prompt);
  EXPECT_THROW(commit_reader_examples(histories(), *tasks::make_task("qa"), *tok, ro), UsageError);
  // A seeded sample keeps file order and is the same for the same seed.
  ro.limit = 10;
  const auto few = commit_reader_examples(histories(), *task, *tok, ro);
  ASSERT_EQ(few.size(), 10u);
  for (std::size_t i = 1; i < few.size(); ++i) EXPECT_LT(std::stoi(few[i - 1].id.substr(1)), std::stoi(few[i].id.substr(1)));
  EXPECT_EQ(commit_reader_examples(histories(), *task, *tok, ro)[3].id, few[3].id);
  ro.seed = 4;
  const auto other = commit_reader_examples(histories(), *task, *tok, ro);
  bool differs = false;
  for (std::size_t i = 0; i < few.size(); ++i) differs |= other[i].id != few[i].id;
  EXPECT_TRUE(differs) << "another seed samples other commits";
}

TEST_F(Lm, CommitAreaReaderExamplesListTheRepositorysAreasAndTagTheProfile) {
  EXPECT_EQ(commit_subject_area("net: fix the parser"), "net");
  EXPECT_EQ(commit_subject_area("builtin/am.c: stop"), "builtin/am.c");
  EXPECT_EQ(commit_subject_area("Fix the parser: again"), "");  // a space before the colon
  EXPECT_EQ(commit_subject_area("no area"), "");
  EXPECT_EQ(commit_subject_area(": empty"), "");
  auto c = histories();
  c.push_back({"x1", "r", "carol", "2020-02-01", "Merge branch 'x'", "a merge with no area at all in its subject"});
  c.push_back({"x2", "r", "carol", "2020-02-02", "Merge branch 'y'", "another merge"});
  auto task = tasks::make_task("commit_area");
  const auto tok = text::SubwordTokenizer::load(root_ / "tok");
  ReaderDataOptions ro;
  ro.seed = 1;
  const auto ex = commit_reader_examples(c, *task, *tok, ro);
  ASSERT_EQ(ex.size(), 58u);  // carol's commits have no area: no query
  for (const auto& e : ex) {
    EXPECT_EQ(e.task, "commit_area");
    EXPECT_EQ(e.head_chars, 0u);  // the whole answer is the area: no head to weigh
    EXPECT_EQ(e.id.substr(0, 5), "area-");
    const bool alice = std::stoi(e.id.substr(6)) % 2 == 0;
    EXPECT_EQ(e.target, alice ? "\nnet" : "\ncore");
    EXPECT_TRUE(e.prompt.find("areas: [net, core] description: ") != std::string::npos ||
                e.prompt.find("areas: [core, net] description: ") != std::string::npos)
        << e.prompt;
    if (e.mode != "none") {
      EXPECT_NE(e.prompt.find(std::string("is \"") + (alice ? "net" : "core") + "\""), std::string::npos) << e.prompt;
    }
    EXPECT_EQ(e.prompt.find(std::string("is \"") + (alice ? "core" : "net") + "\""), std::string::npos) << e.prompt;
  }
}

TEST_F(Lm, CommitPickReaderExamplesContrastAnotherAuthorsSubjectOfTheNearestDate) {
  auto c = histories();
  // dave's one commit is the nearest other author's for nobody's late query but carol's:
  // carol writes on 2020-03-10 and 2020-03-20; dave on 2020-03-18; the nearest contrast of
  // carol's second commit (2 days) is dave's, not bob's last (2020-01-30, 50 days).
  c.push_back({"y1", "r", "carol", "2020-03-10", "ui: first", "carol's first commit in the repository"});
  c.push_back({"y2", "r", "carol", "2020-03-20", "ui: second", "carol's second commit, the query"});
  c.push_back({"y3", "r", "dave", "2020-03-18", "db: dave's only", "dave's only commit"});
  // Another repository with one author: its commits have no contrast, so no query.
  c.push_back({"z1", "solo", "erin", "2020-01-01", "a: one", "erin alone"});
  c.push_back({"z2", "solo", "erin", "2020-01-02", "a: two", "erin alone again"});
  auto task = tasks::make_task("commit_pick");
  const auto tok = text::SubwordTokenizer::load(root_ / "tok");
  ReaderDataOptions ro;
  ro.seed = 5;
  const auto ex = commit_reader_examples(c, *task, *tok, ro);
  ASSERT_EQ(ex.size(), 59u);  // 58 of alice and bob, carol's second; dave's and erin's have no history / no contrast
  std::map<std::string, int> answers;
  bool saw_carol = false;
  for (const auto& e : ex) {
    EXPECT_EQ(e.task, "commit_pick");
    ASSERT_EQ(e.id.substr(0, 5), "pick-");
    ++answers[e.target];
    ASSERT_TRUE(e.target == "\n[1]" || e.target == "\n[2]") << e.target;
    EXPECT_NE(e.prompt.find("For an author who wrote the commit described as \""), std::string::npos) << e.prompt;
    const std::string id = e.id.substr(5);
    if (id == "y2") {
      saw_carol = true;
      const std::string gold = "\"ui: second\"", other = "\"db: dave's only\"";
      const auto want = e.target == "\n[1]" ? "[1]: " + gold + " [2]: " + other : "[1]: " + other + " [2]: " + gold;
      EXPECT_NE(e.prompt.find(want), std::string::npos) << e.prompt;
      continue;
    }
    if (id[0] != 'c') continue;
    const bool alice = std::stoi(id.substr(1)) % 2 == 0;
    // The contrast is the other author's subject; the gold sits where the answer says.
    const std::string mine = alice ? "[N]: \"net: fix the " : "[N]: \"core: rework ";
    std::string at = mine;
    at[1] = e.target[2];
    EXPECT_NE(e.prompt.find(at), std::string::npos) << e.target << " " << e.prompt;
  }
  EXPECT_TRUE(saw_carol);
  EXPECT_GT(answers["\n[1]"], 15);
  EXPECT_GT(answers["\n[2]"], 15);
  EXPECT_EQ(commit_reader_examples(c, *task, *tok, ro)[11].prompt, ex[11].prompt) << "deterministic for a seed";
  // The contrast is the nearest in date: a date that is not a day is refused, not read as some day.
  c.push_back({"bad", "r", "frank", "March 2020", "x: y", "a commit with a date of another form"});
  try {
    (void)commit_reader_examples(c, *task, *tok, ro);
    ADD_FAILURE() << "a commit dated \"March 2020\" was placed somewhere";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("commit bad: date \"March 2020\" is not YYYY-MM-DD"), std::string::npos) << e.what();
  }
}

// bm25+best: BM25's top k with the earlier commit closest to the answer put in. Subjects
// "a<i%5>: fix alpha<i%5>" and descriptions that share words with i%3's: BM25 on the
// description finds other commits than the one whose subject (and area) is the answer's.
TEST_F(Lm, Bm25BestPutsTheEarlierCommitClosestToTheAnswerIntoThePrompt) {
  std::vector<Commit> c;
  for (int i = 0; i < 30; ++i) {
    char date[16];
    std::snprintf(date, sizeof date, "2020-01-%02d", 1 + i);
    const auto a = std::to_string(i % 5), z = std::to_string(i % 3);
    c.push_back({"c" + std::to_string(i), "r", "ann", date, "a" + a + ": fix alpha" + a, "the change touches zeta" + z + " and omega" + z});
  }
  const auto tok = text::SubwordTokenizer::load(root_ / "tok");
  EXPECT_THROW(reader_modes("qa", {"bm25+best"}), UsageError);
  EXPECT_EQ(reader_modes("commit_subject", {}),
            (std::vector<std::string>{"none", "bm25", "bm25-shuffled", "random", "recency", "bm25+best"}));
  for (const char* name : {"commit_subject", "commit_area"}) {
    auto task = tasks::make_task(name);
    const bool area = std::string(name) == "commit_area";
    ReaderDataOptions ro;
    ro.ks = {1};
    ro.modes = {"bm25+best"};
    const auto best = commit_reader_examples(c, *task, *tok, ro);
    ro.modes = {"bm25"};
    const auto plain = commit_reader_examples(c, *task, *tok, ro);
    ASSERT_EQ(best.size(), 29u) << name;
    ASSERT_EQ(plain.size(), 29u) << name;
    int missed_by_bm25 = 0, with_answer = 0;
    for (std::size_t e = 0; e < best.size(); ++e) {
      const int i = std::stoi(best[e].id.substr(area ? 6 : 1));
      EXPECT_EQ(best[e].mode, "bm25+best@1");
      const auto a = std::to_string(i % 5);
      // What the answer's document shows: its subject, or its area tag.
      const std::string shown = area ? "is \"a" + a + "\"" : "\"a" + a + ": fix alpha" + a + "\"";
      if (i < 5) {  // no earlier commit of its area: BM25's top 1 as it is
        EXPECT_EQ(best[e].prompt, plain[e].prompt) << name << " " << i;
        continue;
      }
      ++with_answer;
      EXPECT_NE(best[e].prompt.find(shown), std::string::npos) << name << " " << i << ": " << best[e].prompt;
      missed_by_bm25 += plain[e].prompt.find(shown) == std::string::npos;
    }
    EXPECT_EQ(with_answer, 25) << name;  // c5..c29
    EXPECT_GT(missed_by_bm25, 5) << name << ": the test needs BM25 to miss the answer's document often";
    ro.modes = {"bm25+best"};
    EXPECT_EQ(commit_reader_examples(c, *task, *tok, ro)[9].prompt, best[9].prompt) << "deterministic for a seed";
  }
}

TEST_F(Lm, QaReaderExamplesComeFromSupportedClaimsAndRetrieveFromTheCorpus) {
  std::vector<Document> corpus;
  const char* pk[][2] = {{"zsh", "Section: shells. A shell with powerful completion and scripting"},
                         {"vim", "Section: editors. A text editor that is upwards compatible with vi"},
                         {"gcc", "Section: devel. The GNU C compiler for many architectures"}};
  for (auto& p : pk) {
    Document d;
    d.id = p[0];
    d.fields["title"] = p[0];
    d.fields["text"] = p[1];
    corpus.push_back(d);
  }
  std::vector<Example> claims;
  const auto claim = [&](std::string id, std::string input, std::string out) {
    Example e;
    e.id = id;
    e.user = id;
    e.input = input;
    e.output = out;
    claims.push_back(e);
  };
  for (int i = 0; i < 12; ++i) {
    claim("fc-vim" + std::to_string(i), "Claim: The Debian package vim is Vi IMproved - enhanced vi editor.", "SUPPORTS");
    claim("fc-gcc" + std::to_string(i), "Claim: The Debian package gcc is A shell with completion.", "REFUTES");
  }
  claim("fc-odd", "Something else entirely.", "SUPPORTS");
  auto task = tasks::make_task("qa");
  const auto tok = text::SubwordTokenizer::load(root_ / "tok");
  ReaderDataOptions ro;
  const auto ex = claim_qa_reader_examples(claims, corpus, *task, *tok, ro);
  ASSERT_EQ(ex.size(), 12u);  // REFUTES claims and other forms are skipped
  std::map<std::string, int> modes;
  for (const auto& e : ex) {
    ++modes[e.mode.substr(0, e.mode.find('@'))];
    EXPECT_EQ(e.target, "\nvim");
    EXPECT_NE(e.prompt.find("Which Debian package is described as: Vi IMproved - enhanced vi editor?"), std::string::npos) << e.prompt;
    if (e.mode.rfind("bm25", 0) == 0) {
      EXPECT_NE(e.prompt.find("is the description of the package \"vim\""), std::string::npos) << e.prompt;
    }
    if (e.mode == "none") {
      EXPECT_EQ(e.prompt.find("is the description of the package"), std::string::npos) << e.prompt;
    }
  }
  // By default only the modes whose prompts can hold the answer.
  for (const auto& [m, n] : modes) EXPECT_TRUE(m == "bm25" || m == "bm25+gold") << m << " drawn " << n << " times";
  EXPECT_EQ(modes.size(), 2u);
  // bm25+gold holds the claim's own passage even where BM25 would miss it.
  ReaderDataOptions one;
  one.ks = {1};
  std::vector<Example> hard;
  for (int i = 0; i < 30; ++i) {
    Example e;
    e.id = "fc-hard" + std::to_string(i);
    e.user = e.id;
    e.input = "Claim: The Debian package vim is A shell with completion.";
    e.output = "SUPPORTS";
    hard.push_back(e);
  }
  std::size_t gold = 0;
  for (const auto& e : claim_qa_reader_examples(hard, corpus, *task, *tok, one)) {
    if (e.mode != "bm25+gold@1") continue;
    ++gold;
    EXPECT_NE(e.prompt.find("is the description of the package \"vim\""), std::string::npos) << e.prompt;
  }
  EXPECT_GT(gold, 0u);
  // --reader-modes: only the named modes are drawn; a task keeps the ones it has, and one
  // left with none is refused.
  ReaderDataOptions only = one;
  only.modes = {"bm25+gold", "recency"};  // recency is a commit mode: qa keeps bm25+gold
  const auto gold_only = claim_qa_reader_examples(hard, corpus, *task, *tok, only);
  ASSERT_EQ(gold_only.size(), hard.size());
  for (const auto& e : gold_only) {
    EXPECT_EQ(e.mode, "bm25+gold@1");
    EXPECT_NE(e.prompt.find("is the description of the package \"vim\""), std::string::npos) << e.prompt;
  }
  only.modes = {"recency"};
  EXPECT_THROW(claim_qa_reader_examples(hard, corpus, *task, *tok, only), UsageError);
  only.modes = {"none", "bm25+gold"};
  const auto none_or_gold = claim_qa_reader_examples(hard, corpus, *task, *tok, only);
  std::set<std::string> seen;
  for (const auto& e : none_or_gold) seen.insert(e.mode);
  EXPECT_EQ(seen, (std::set<std::string>{"none", "bm25+gold@1"}));
  EXPECT_THROW(claim_qa_reader_examples(claims, corpus, *tasks::make_task("commit_area"), *tok, ro), UsageError);
  EXPECT_THROW(claim_qa_reader_examples(claims, {}, *task, *tok, ro), UsageError);
}

TEST_F(Lm, AReaderFineTunedFromAPretrainedModelLearnsTheAnswersAndLeavesThePromptUntrained) {
  auto pre = tiny("pre");
  pre.max_positions = 256;
  pre.fit.epochs = 1;
  train_lm(corpus(200), pre);
  auto task = tasks::make_task("commit_subject");
  const auto tok = text::SubwordTokenizer::load(pre.fit.out);
  ReaderDataOptions ro;
  ro.prompt_max_length = 128;
  auto ex = commit_reader_examples(histories(), *task, *tok, ro);
  LmOptions o = tiny("reader");
  o.init = pre.fit.out;
  o.fit.epochs = 6;
  o.dev_fraction = 0.2;
  const auto res = train_reader(ex, o);
  EXPECT_GT(res.train_sequences, 30u);
  // Micro-batches of 4 prompts of several lengths are partly padding; one prompt a step is none.
  EXPECT_GT(res.padding_share, 0.0);
  EXPECT_LT(res.padding_share, 0.9);
  LmOptions single = o;
  single.fit.out = o.fit.out.parent_path() / "reader1";
  single.fit.epochs = 1;
  single.fit.batch_size = single.fit.micro_batch = 1;
  EXPECT_EQ(train_reader(ex, single).padding_share, 0.0);
  // Batches of like length: less padding, and still a reader that learns.
  LmOptions windowed = o;
  windowed.fit.out = o.fit.out.parent_path() / "reader_windowed";
  windowed.length_window = 4;
  const auto w = train_reader(ex, windowed);
  EXPECT_LT(w.padding_share, res.padding_share / 2) << w.padding_share << " vs " << res.padding_share;
  EXPECT_LT(w.dev_loss, w.init_dev_loss - 1.0) << w.init_dev_loss << " -> " << w.dev_loss;
  EXPECT_LT(res.dev_loss, res.init_dev_loss - 1.0) << res.init_dev_loss << " -> " << res.dev_loss;
  // The answers' heads ("net:", "core:") weighed 5 times: every training example's head is
  // found in its target's tokens, the training differs, and dev loss stays the plain mean
  // (the same start as the unweighted run's).
  LmOptions headed = o;
  headed.fit.out = o.fit.out.parent_path() / "reader_headed";
  headed.head_weight = 5;
  const auto h = train_reader(ex, headed);
  EXPECT_EQ(h.heads_lost, 0u);
  EXPECT_GE(h.head_tokens, 2 * h.train_sequences);  // "\n" + area + ":" is at least 2 tokens
  EXPECT_EQ(h.head_tokens, res.head_tokens);         // counted at any weight (weight 1: counted, not weighed)
  EXPECT_DOUBLE_EQ(h.init_dev_loss, res.init_dev_loss);
  EXPECT_NE(h.dev_loss, res.dev_loss);
  EXPECT_LT(h.dev_loss, h.init_dev_loss - 1.0) << h.init_dev_loss << " -> " << h.dev_loss;
  EXPECT_EQ(nlohmann::json::parse(read_file(headed.fit.out / "attune_train.json")).at("options").at("head_weight"), 5);
  const auto rec = nlohmann::json::parse(read_file(o.fit.out / "attune_train.json"));
  EXPECT_EQ(rec.at("options").at("max_positions"), 256);  // --init's, not the options' 64
  EXPECT_EQ(rec.at("options").at("kv_heads"), 1);
  // The author's style: after alice's prompt, her subject beats bob's.
  auto lm = models::LocalModel::load(o.fit.out);
  const auto& e = ex[10];  // an alice commit (even id)
  ASSERT_EQ(std::stoi(e.id.substr(1)) % 2, 0);
  const std::string thing = e.target.substr(e.target.rfind(' ') + 1);
  // The folder says how it answers (after a newline, then EOS), and `local:` scores a bare
  // answer in that form.
  const auto fmt = nlohmann::json::parse(read_file(o.fit.out / models::kReaderFile));
  EXPECT_EQ(fmt.at("answer_prefix"), "\n");
  EXPECT_EQ(fmt.at("eos_after_answer"), true);
  const std::vector<llm::ScoreRequest> reqs = {{e.prompt, "net: fix the " + thing}, {e.prompt, "core: rework " + thing}};
  const auto s = lm->score(reqs);
  EXPECT_GT(s[0], s[1]) << s[0] << " vs " << s[1];
  LmOptions none = tiny("none");
  EXPECT_THROW(train_reader(ex, none), UsageError);  // no --init
  // Another answer prefix (train-lm --answer-prefix): the examples' targets start with it, the
  // folder records it, and examples built with another prefix than the options' are refused.
  ReaderDataOptions quoted_data = ro;
  quoted_data.answer_prefix = "\n\"";
  const auto quoted_ex = commit_reader_examples(histories(), *task, *tok, quoted_data);
  ASSERT_EQ(quoted_ex.size(), ex.size());
  for (std::size_t i = 0; i < ex.size(); ++i) {
    EXPECT_EQ(quoted_ex[i].target, "\n\"" + ex[i].target.substr(1)) << i;
    EXPECT_EQ(quoted_ex[i].prompt, ex[i].prompt) << i;
    if (ex[i].head_chars) EXPECT_EQ(quoted_ex[i].head_chars, ex[i].head_chars + 1) << i;  // the head still ends at the ':'
  }
  LmOptions quoted = o;
  quoted.fit.out = o.fit.out.parent_path() / "reader_quoted";
  quoted.fit.epochs = 1;
  quoted.answer_prefix = "\n\"";
  EXPECT_THROW(train_reader(ex, quoted), UsageError);  // targets with "\n" only
  EXPECT_FALSE(fs::exists(quoted.fit.out / models::kReaderFile));
  train_reader(quoted_ex, quoted);
  EXPECT_EQ(nlohmann::json::parse(read_file(quoted.fit.out / models::kReaderFile)).at("answer_prefix"), "\n\"");
  EXPECT_EQ(nlohmann::json::parse(read_file(quoted.fit.out / "attune_train.json")).at("options").at("answer_prefix"), "\n\"");
}

// What --answer-prefix accepts, and how a generation loses the prefix.
TEST(ReaderAnswerPrefix, IsANewlineThenAFewPrintableCharactersAndGenerationsLoseIt) {
  for (const char* ok : {"\n", "\n\"", "\nA: ", "\n12345678"}) EXPECT_TRUE(models::valid_answer_prefix(ok)) << ok;
  for (const char* bad : {"", "\"", " \n", "\n123456789", "\n\n", "\n\t", "\nx\x7f"})
    EXPECT_FALSE(models::valid_answer_prefix(bad)) << bad;
  EXPECT_EQ(models::strip_answer_prefix("\n\"refs: fix", "\n\""), "refs: fix");
  EXPECT_EQ(models::strip_answer_prefix("\"refs: fix", "\n\""), "refs: fix");
  EXPECT_EQ(models::strip_answer_prefix("\nrefs: \"x\"", "\n\""), "\nrefs: \"x\"");  // no prefix: as it is
  EXPECT_EQ(models::strip_answer_prefix("\nrefs: fix", "\n"), "\nrefs: fix");              // the default: as it is
  EXPECT_EQ(models::strip_answer_prefix("\n\"", "\n\""), "");
  LmOptions o;
  o.answer_prefix = "\"";
  EXPECT_THROW(o.validate(), UsageError);
}

}  // namespace
}  // namespace attune::train
