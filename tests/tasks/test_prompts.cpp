// phi_p: the LAMP.md budget, checked by hand with toy tokenizers (toy_tokenizers.h).
// Every expected prompt was worked out from the arithmetic written beside it.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "attune/core/error.h"
#include "attune/tasks/task.h"
#include "toy_tokenizers.h"

namespace attune::tasks {
namespace {

using testing::CharTokenizer;
using testing::WordTokenizer;

Document doc(std::string id, Fields fields) {
  Document d;
  d.id = std::move(id);
  d.fields = std::move(fields);
  return d;
}

std::string build(std::string_view task, const std::string& input, const std::vector<Document>& docs,
                  const text::Tokenizer& tok, std::size_t max_length, bool quirks = true) {
  auto t = make_task(task);
  Example ex;
  ex.id = "q";
  ex.input = input;
  std::vector<const Document*> ptrs;
  for (const auto& d : docs) ptrs.push_back(&d);
  PromptOptions opts;
  opts.max_length = max_length;
  opts.reference_quirks = quirks;
  return t->prompt(ex, ptrs, tok, opts);
}

// LaMP-2, words. input "description: a b c" = 4 tokens; max_length 40 -> int(0.6*40) = 24,
// max_len_prompt = 40 - 4 = 36; k = 2: per_item = (36 - 1 - 2) // 2 = 16.
const std::vector<Document> kMovies = {
    doc("m1", {{"description", "alpha beta"}, {"tag", "comedy"}}),
    doc("m2", {{"description", "one two three four five six seven eight nine ten eleven twelve"},
               {"tag", "classic"}})};

TEST(Lamp2Prompt, ReferenceQuirksMeasureQuoteSpaceQuote) {
  // need = count(`the tag for the movie: " " is "comedy" `) = 9 words + EOS = 10.
  // m1: limit 16 - 10 = 6, "alpha beta" (3) fits; saved = 16 - 3 - 10 = 3.
  // m2: limit 16 + 3 - 10 = 9 -> 8 words; saved = 3 + 16 - 9 - 10 = 0.
  EXPECT_EQ(build("lamp2", "description: a b c", kMovies, WordTokenizer(), 40),
            "the tag for the movie: \"alpha beta\" is \"comedy\" , and "
            "the tag for the movie: \"one two three four five six seven eight\" is \"classic\" "
            ". description: a b c");
}

TEST(Lamp2Prompt, WithoutQuirksMeasuresWhatIsEmitted) {
  // need = count(`the tag for the movie: "" is "comedy" `) = 8 words + EOS = 9.
  // m1: limit 7, fits (3); saved = 16 - 3 - 9 = 4. m2: limit 16 + 4 - 9 = 11 -> 10 words.
  EXPECT_EQ(build("lamp2", "description: a b c", kMovies, WordTokenizer(), 40, false),
            "the tag for the movie: \"alpha beta\" is \"comedy\" , and "
            "the tag for the movie: \"one two three four five six seven eight nine ten\" is "
            "\"classic\" . description: a b c");
}

// LaMP-4, words. input = 9 words + EOS = 10; max_length 30 -> max_len_prompt 20;
// k = 1: per_item = 20 - 1 = 19.
const std::string kHeadlineInput = "Generate a headline for the following article: x y";
const std::vector<Document> kNews = {
    doc("n1", {{"title", "Big News"},
               {"text", "t1 t2 t3 t4 t5 t6 t7 t8 t9 t10 t11 t12 t13 t14 t15 t16 t17 t18 t19 t20"}})};

TEST(Lamp4Prompt, ReferenceQuirks) {
  // need = count(`"Big News" is the title for " " `) = 8 + 1 = 9 -> limit 10 -> 9 words.
  EXPECT_EQ(build("lamp4", kHeadlineInput, kNews, WordTokenizer(), 30),
            "\"Big News\" is the title for \"t1 t2 t3 t4 t5 t6 t7 t8 t9\" . " + kHeadlineInput);
}

TEST(Lamp4Prompt, WithoutQuirks) {
  // need = count(`"Big News" is the title for "" `) = 7 + 1 = 8 -> limit 11 -> 10 words.
  EXPECT_EQ(build("lamp4", kHeadlineInput, kNews, WordTokenizer(), 30, false),
            "\"Big News\" is the title for \"t1 t2 t3 t4 t5 t6 t7 t8 t9 t10\" . " + kHeadlineInput);
}

TEST(Lamp6Prompt, SameTemplateAsLamp4) {
  EXPECT_EQ(build("lamp6", kHeadlineInput, kNews, WordTokenizer(), 30),
            "\"Big News\" is the title for \"t1 t2 t3 t4 t5 t6 t7 t8 t9\" . " + kHeadlineInput);
}

// LaMP-5, characters. input "paper: q r" = 10 + 1 = 11; max_length 100 -> int(60) = 60,
// max_len_prompt 89; suffix "Following the given patterns" = 28 + 1 = 29;
// k = 2: per_item = (89 - 1 - 2 - 29) // 2 = 28.
const std::vector<Document> kPapers = {
    doc("p1", {{"title", "T1"}, {"abstract", "abcdefghijklmnopqrstuvwxyz"}}),
    doc("p2", {{"title", "T2"}, {"abstract", "0123456789"}})};

TEST(Lamp5Prompt, ReferenceQuirkMeasuresIsATitle) {
  // need = count(`"T1" is a title " " `) = 20 + 1 = 21 -> limit 7 -> 6 characters;
  // saved = 28 - 7 - 21 = 0; the same for p2. The emitted template says "is a title for".
  EXPECT_EQ(build("lamp5", "paper: q r", kPapers, CharTokenizer(), 100),
            "\"T1\" is a title for \"abcdef\" , and \"T2\" is a title for \"012345\" . "
            "Following the given patterns paper: q r");
}

TEST(Lamp5Prompt, WithoutQuirksMeasuresIsATitleFor) {
  // need = count(`"T1" is a title for "" `) = 23 + 1 = 24 -> limit 4 -> 3 characters.
  EXPECT_EQ(build("lamp5", "paper: q r", kPapers, CharTokenizer(), 100, false),
            "\"T1\" is a title for \"abc\" , and \"T2\" is a title for \"012\" . "
            "Following the given patterns paper: q r");
}

// LaMP-7, words. input = 6 words + EOS = 7; max_length 41 -> int(24.6) = 24,
// max_len_prompt 34; k = 2; need = count(`"" `) = 2.
const std::string kTweetInput = "Paraphrase the following tweet: u v";
const std::vector<Document> kTweets = {doc("t1", {{"text", "a b c d e f g h i j k l"}}),
                                       doc("t2", {{"text", "m n o p q r s t u v w x"}})};

TEST(Lamp7Prompt, ReferenceQuirkSubtractsWrittenByUser) {
  // suffix "are written by user. Following the given patterns" = 8 + 1 = 9:
  // per_item = (34 - 1 - 2 - 9) // 2 = 11; limit 9 -> 8 words; saved = 11 - 9 - 2 = 0.
  EXPECT_EQ(build("lamp7", kTweetInput, kTweets, WordTokenizer(), 41),
            "\"a b c d e f g h\" , and \"m n o p q r s t\"  are written by a person. "
            "Following the given patterns " + kTweetInput);
}

TEST(Lamp7Prompt, WithoutQuirksSubtractsWhatIsEmitted) {
  // suffix "are written by a person. Following the given patterns" = 9 + 1 = 10:
  // per_item = (34 - 1 - 2 - 10) // 2 = 10; limit 8 -> 7 words.
  EXPECT_EQ(build("lamp7", kTweetInput, kTweets, WordTokenizer(), 41, false),
            "\"a b c d e f g\" , and \"m n o p q r s\"  are written by a person. "
            "Following the given patterns " + kTweetInput);
}

TEST(Lamp3Prompt, ScoreTemplate) {
  // input = 10 words + EOS = 11; max_length 24 -> int(14.4) = 14, max_len_prompt 13;
  // per_item = 12; need = count(`5 is the score for " " `) = 8 -> limit 4 -> 3 words.
  EXPECT_EQ(build("lamp3", "What is the score of the following review? review: good",
                  {doc("r1", {{"score", "5"}, {"text", "great food and nice people here"}})},
                  WordTokenizer(), 24),
            "5 is the score for \"great food and\" . "
            "What is the score of the following review? review: good");
}

// LaMP-1: input = 28 words + EOS = 29; max_length 40 -> min(29, 24) = 24, max_len_prompt 16.
const std::string kCitationInput =
    "For an author who has written the paper with the title \"P\", which reference is "
    "related? Just answer with [1] or [2] without explanation. [1]: \"R1\" [2]: \"R2\"";
const std::vector<Document> kCitations = {
    doc("c1", {{"title", "a b c d e f g h i j"}, {"abstract", "x"}}),
    doc("c2", {{"title", "k l"}, {"abstract", "y"}})};

TEST(Lamp1Prompt, ReferenceInsertsAfterTitleWithConstantNeed) {
  // Reference: per_item = (16 - 2) // 2 = 7, need = 2: limit 5 -> 4 words; saved 0.
  EXPECT_EQ(build("lamp1", kCitationInput, kCitations, WordTokenizer(), 40),
            "For an author who has written the paper with the title, and \"a b c d\", and "
            "\"k l\" \"P\", which reference is related? Just answer with [1] or [2] without "
            "explanation. [1]: \"R1\" [2]: \"R2\"");
}

TEST(Lamp1Prompt, WithoutQuirks) {
  // per_item = (16 - 1 - 2) // 2 = 6, need = count(`""`) = 2: limit 4 -> 3 words.
  EXPECT_EQ(build("lamp1", kCitationInput, kCitations, WordTokenizer(), 40, false),
            "For an author who has written the paper with the title, and \"a b c\", and "
            "\"k l\" \"P\", which reference is related? Just answer with [1] or [2] without "
            "explanation. [1]: \"R1\" [2]: \"R2\"");
}

TEST(Lamp1Prompt, NoTitleWordLeavesTheInput) {
  EXPECT_EQ(build("lamp1", "which one? [1]: \"a\" [2]: \"b\"", kCitations, WordTokenizer(), 40),
            "which one? [1]: \"a\" [2]: \"b\"");
}

// The factor retry. input = 14 words + EOS = 15.
const std::string kLongInput = "i1 i2 i3 i4 i5 i6 i7 i8 i9 i10 i11 i12 i13 i14";

TEST(PromptBudget, RetriesWithASmallerFactor) {
  // need = count(`"A" is the title for " " `) = 8.
  // factor 0.6: max_len_prompt = 20 - min(15, 12) = 8, per_item 7, limit -1: retry.
  // factor 0.5: max_len_prompt = 20 - 10 = 10, per_item 9, limit 1 -> "" (EOS only).
  EXPECT_EQ(build("lamp4", kLongInput, {doc("d", {{"title", "A"}, {"text", "w1 w2 w3"}})},
                  WordTokenizer(), 20),
            "\"A\" is the title for \"\" . " + kLongInput);
}

TEST(PromptBudget, RetriesTwice) {
  // need = count(`"A B" is the title for " " `) = 9.
  // factor 0.6: per_item 7, limit -2; factor 0.5: per_item 9, limit 0 (not positive);
  // factor 0.4: max_len_prompt = 20 - 8 = 12, per_item 11, limit 2 -> one word.
  EXPECT_EQ(build("lamp4", kLongInput, {doc("d", {{"title", "A B"}, {"text", "w1 w2 w3"}})},
                  WordTokenizer(), 20),
            "\"A B\" is the title for \"w1\" . " + kLongInput);
}

TEST(PromptBudget, GivesUpWithTheInputAlone) {
  // need = count(`"A B C D E F G H" is the title for " " `) = 15 > any per_item (at most 9
  // even at factor 0, where max_len_prompt = 10): every attempt fails.
  EXPECT_EQ(build("lamp4", "x y z w",
                  {doc("d", {{"title", "A B C D E F G H"}, {"text", "w1 w2"}})},
                  WordTokenizer(), 10),
            "x y z w");
}

TEST(PromptBudget, NoDocumentsGiveTheInput) {
  for (const auto& name : task_names())
    EXPECT_EQ(build(name, "just the input", {}, WordTokenizer(), 256), "just the input") << name;
}

TEST(PromptBudget, ZeroMaxLengthGivesTheInput) {
  EXPECT_EQ(build("lamp4", kHeadlineInput, kNews, WordTokenizer(), 0), kHeadlineInput);
}

TEST(PromptBudget, MissingSlotFieldNamesTaskDocumentAndField) {
  try {
    build("lamp4", kHeadlineInput, {doc("n9", {{"title", "T"}})}, WordTokenizer(), 64);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("lamp4"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("n9"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("\"text\""), std::string::npos);
  }
}

TEST(CommitPrompt, SubjectLikeLamp4) {
  // input = 12 words + EOS = 13; max_length 30 -> max_len_prompt 17, per_item 16;
  // need = count(`"t: s" is the title for "" `) = 8 -> limit 8 -> 7 words.
  const std::string input =
      "Generate a subject line for the following commit description: make it faster";
  EXPECT_EQ(build("commit_subject", input,
                  {doc("c", {{"title", "t: s"}, {"text", "one two three four five six seven eight"}})},
                  WordTokenizer(), 30),
            "\"t: s\" is the title for \"one two three four five six seven\" . " + input);
}

TEST(CommitPrompt, AreaLikeLamp2) {
  // input = 10 + 1 = 11; max_length 28 -> max_len_prompt 17, per_item 16;
  // need = count(`the area for the commit: "" is "refs" `) = 10 -> limit 6 -> 5 words.
  const std::string input = "Which area? areas: [gitk, refs] description: fix the refs code";
  EXPECT_EQ(build("commit_area", input,
                  {doc("c", {{"description", "Teach refs to pack loose objects faster and safer"},
                             {"tag", "refs"}})},
                  WordTokenizer(), 28),
            "the area for the commit: \"Teach refs to pack loose objects\" is \"refs\" . " + input);
}

TEST(CommitPrompt, PickInsertsAfterSubjectFollowingTheDescription) {
  // The description holds "subject" in quotes; the anchor is the later "which subject".
  // input = 32 words + EOS = 33; max_length 45 -> min(33, 27) = 27, max_len_prompt 18;
  // per_item = (18 - 1 - 2) // 2 = 7; need = count(`""`) = 2: limit 5 -> 4 words.
  const std::string input =
      "For an author who wrote the commit described as \"Fix the \"subject\" parsing.\", "
      "which subject did they write? Just answer with [1] or [2] without explanation. "
      "[1]: \"x: y\" [2]: \"z: w\"";
  EXPECT_EQ(build("commit_pick", input,
                  {doc("a", {{"title", "parse: one two three four"}, {"text", "zz"}}),
                   doc("b", {{"title", "doc: five"}, {"text", "yy"}})},
                  WordTokenizer(), 45),
            "For an author who wrote the commit described as \"Fix the \"subject\" parsing.\", "
            "which subject, and \"parse: one two three\", and \"doc: five\" did they write? "
            "Just answer with [1] or [2] without explanation. [1]: \"x: y\" [2]: \"z: w\"");
}

TEST(CorpusPrompt, PassagesWithPackageNames) {
  // input = 8 + 1 = 9; max_length 48 -> max_len_prompt 39; per_item = (39 - 1 - 2) // 2 = 18;
  // need = count(`"" is the description of the package "nano" `) = 8 -> limit 10 -> 9 words;
  // saved = 0; vim: the same.
  const std::string input = "Which Debian package is described as: tiny editor?";
  EXPECT_EQ(
      build("qa", input,
            {doc("nano", {{"title", "nano"},
                          {"text", "Section: editors. GNU nano is a small and friendly text "
                                   "editor for the console"}}),
             doc("vim", {{"title", "vim"},
                         {"text", "Section: editors. Vim is an almost compatible version of "
                                  "the UNIX editor Vi."}})},
            WordTokenizer(), 48),
      "\"Section: editors. GNU nano is a small and\" is the description of the package "
      "\"nano\" , and \"Section: editors. Vim is an almost compatible version\" is the "
      "description of the package \"vim\" . " + input);
}

TEST(CorpusPrompt, QuirksDoNotApplyOutsideLamp) {
  const std::vector<Document> d = {doc("x", {{"title", "x"}, {"text", "a b c d e f g h"}})};
  for (const char* t : {"qa", "factcheck", "slot"})
    EXPECT_EQ(build(t, "q", d, WordTokenizer(), 16, true),
              build(t, "q", d, WordTokenizer(), 16, false)) << t;
}

}  // namespace
}  // namespace attune::tasks
