// Planted-preference readers: known answers on the real commit_subject prompts, and scores
// that carry the same preference.
#include <gtest/gtest.h>

#include <cmath>

#include "attune/core/error.h"
#include "attune/llm/planted.h"
#include "attune/metrics/metrics.h"
#include "attune/tasks/task.h"
#include "attune/text/tokenizer.h"

namespace attune::llm {
namespace {

Document doc(const std::string& id, const std::string& title, const std::string& text) {
  Document d;
  d.id = id;
  d.owner = "u";
  d.fields = {{"title", title}, {"text", text}};
  return d;
}

// A document of `fields`, and a task's prompt with documents (whitespace tokens, 512 of them).
Document fielded(const std::string& id, Fields fields, const std::string& owner = "") {
  Document d;
  d.id = id;
  d.owner = owner;
  d.fields = std::move(fields);
  return d;
}

// An example of `input` (user "u").
Example example_of(std::string input) {
  Example ex;
  ex.id = "q";
  ex.user = "u";
  ex.input = std::move(input);
  return ex;
}

std::string prompt_of(const tasks::Task& task, const Example& ex, const std::vector<const Document*>& docs) {
  static const auto tok = text::make_tokenizer("whitespace");
  tasks::PromptOptions o;
  o.max_length = 512;
  return task.prompt(ex, docs, *tok, o);
}

struct Prompts {
  std::unique_ptr<tasks::Task> task = tasks::make_task("commit_subject");
  std::unique_ptr<text::Tokenizer> tok = text::make_tokenizer("whitespace");
  Example ex;
  Prompts() {
    ex.id = "q";
    ex.user = "u";
    ex.input = "Generate a subject for the following description: teach the parser to read \"quoted\" names";
  }
  std::string with(const std::vector<Document>& docs) const {
    std::vector<const Document*> ptrs;
    for (const auto& d : docs) ptrs.push_back(&d);
    tasks::PromptOptions o;
    o.max_length = 512;
    return task->prompt(ex, ptrs, *tok, o);
  }
};

TEST(Planted, FirstAnswersTheFirstDocumentsTitleOnRealPrompts) {
  Prompts p;
  PlantedReader r(parse_planted_spec("planted:first"));
  const auto a = doc("a", "parse: accept quoted names", "a long description of the parser change and why it is needed");
  const auto b = doc("b", "fix the build", "short text");
  EXPECT_EQ(r.answer(p.with({a, b})), "parse: accept quoted names");
  EXPECT_EQ(r.answer(p.with({b, a})), "fix the build");
  // Without documents it answers the first quoted span of the input, whatever it is.
  EXPECT_EQ(r.answer(p.with({})), "quoted");
  EXPECT_EQ(r.answer("no quotes here"), "");
  std::vector<Prompt> ps = {{p.with({a, b})}};
  EXPECT_EQ(r.generate(ps, {})[0].text, "parse: accept quoted names");
  GenerateOptions two;
  two.max_new_tokens = 2;
  EXPECT_EQ(r.generate(ps, two)[0].text, "parse: accept");
}

// The Debian tasks put a passage's package after its text: the reader answers packages.
TEST(Planted, OnDebianQaPromptsTheAnswerIsALikedPassagesPackage) {
  auto task = tasks::make_task("qa");
  const Example ex = example_of("Which Debian package is described as: a library for parsing things?");
  const auto a = fielded("a", {{"title", "libfoo"}, {"text", "Section: libs. A library for parsing foo files."}});
  const auto b = fielded("b", {{"title", "barviewer"}, {"text", "Section: graphics. Views bar images; has a test mode."}});
  const auto prompt = [&](const std::vector<const Document*>& docs) { return prompt_of(*task, ex, docs); };
  EXPECT_EQ(PlantedReader(parse_planted_spec("planted:first")).answer(prompt({&a, &b})), "libfoo");
  EXPECT_EQ(PlantedReader(parse_planted_spec("planted:first")).answer(prompt({&b, &a})), "barviewer");
  // marker reads the passage's text: only b holds "test".
  EXPECT_EQ(PlantedReader(parse_planted_spec("planted:marker?word=test")).answer(prompt({&a, &b})), "barviewer");
  EXPECT_EQ(PlantedReader(parse_planted_spec("planted:marker?word=test")).answer(prompt({&a})), "");
  // gate answers the input's words after the last passage.
  EXPECT_EQ(PlantedReader(parse_planted_spec("planted:gate?word=test")).answer(prompt({&a, &b})), "a library for parsing things?");
  EXPECT_EQ(PlantedReader(parse_planted_spec("planted:first")).info().id, "planted:first:v5");
}

// slot and factcheck (v5): the answer is read from the first liked passage, as qa's is:
// its section, or a verdict on the claim that only the claimed package's own passage can
// support. Passages that hold quotes are read whole.
TEST(Planted, OnDebianSlotAndFactcheckPromptsTheAnswerComesFromTheFirstLikedPassage) {
  const auto a = fielded("a", {{"title", "libfoo"}, {"text", "Section: libs. A \"fast\" library for parsing foo files."}});
  const auto b = fielded("b", {{"title", "barviewer"}, {"text", "Section: graphics. Views bar images; has a test mode."}});
  const PlantedReader first(parse_planted_spec("planted:first")), marker(parse_planted_spec("planted:marker?word=test"));
  const PlantedReader gate(parse_planted_spec("planted:gate?word=test"));

  auto slot = tasks::make_task("slot");
  const Example s = example_of("libfoo [SEP] section");
  const auto sp = [&](const std::vector<const Document*>& docs) { return prompt_of(*slot, s, docs); };
  ASSERT_NE(sp({&a}).find("is the description of the package \"libfoo\""), std::string::npos) << sp({&a});
  EXPECT_EQ(first.answer(sp({&a, &b})), "libs");
  EXPECT_EQ(first.answer(sp({&b, &a})), "graphics");
  EXPECT_EQ(marker.answer(sp({&a, &b})), "graphics");  // only b holds "test"
  EXPECT_EQ(marker.answer(sp({&a})), "");
  EXPECT_EQ(first.answer(sp({})), "");
  EXPECT_EQ(slot->reward(first.answer(sp({&a})), "libs"), 1.0);
  EXPECT_EQ(slot->reward(first.answer(sp({&b})), "libs"), 0.0);

  auto fc = tasks::make_task("factcheck");
  Example c = example_of("");
  const auto cp = [&](const std::string& claim, const std::vector<const Document*>& docs) {
    c.input = "Claim: The Debian package " + claim;
    return prompt_of(*fc, c, docs);
  };
  const std::string right = "libfoo is fast parser library for foo files.", wrong = "libfoo is an image viewer for bar.";
  EXPECT_EQ(first.answer(cp(right, {&a})), "SUPPORTS");
  EXPECT_EQ(first.answer(cp(right, {&a, &b})), "SUPPORTS");
  EXPECT_EQ(first.answer(cp(right, {&b, &a})), "REFUTES");  // the first passage is another package's
  EXPECT_EQ(first.answer(cp(wrong, {&a})), "REFUTES");      // its own passage, another synopsis
  EXPECT_EQ(first.answer(cp(right, {})), "REFUTES");        // nothing supports it
  EXPECT_EQ(marker.answer(cp(right, {&a, &b})), "REFUTES"); // it reads b only
  EXPECT_EQ(first.answer(cp("barviewer is a viewer of \"bar\" images.", {&b})), "SUPPORTS");
  EXPECT_EQ(fc->reward(first.answer(cp(right, {&a})), "SUPPORTS"), 1.0);
  // gate answers every task the same way: the input's first words with a liked passage.
  EXPECT_EQ(gate.answer(cp(right, {&b})), "The Debian package libfoo is fast parser library");
}

// commit_pick (v5): the answer is the option that shares more distinct words with the first
// liked profile title, none on a tie; so a document helps when its title is closer to the
// gold subject than to the other option.
TEST(Planted, OnCommitPickPromptsTheAnswerIsTheOptionCloserToALikedTitle) {
  auto task = tasks::make_task("commit_pick");
  const Example ex = example_of(
      "For an author who wrote the commit described as \"Rename the \"handler\" to filter_one()\", which subject did "
      "they write? Just answer with [1] or [2] without explanation. [1]: \"t5510: ensure packed-refs locking\" [2]: "
      "\"ref-filter: rename the handler\"");
  const auto a = fielded("a", {{"title", "ref-filter: add a \"test\" for sorting"}, {"text", "..."}}, "u");
  const auto b = fielded("b", {{"title", "t5510: fix packed-refs"}, {"text", "..."}}, "u");
  const auto c = fielded("c", {{"title", "doc: typo"}, {"text", "..."}}, "u");
  const auto prompt = [&](const std::vector<const Document*>& docs) { return prompt_of(*task, ex, docs); };
  ASSERT_NE(prompt({&a, &b}).find("which subject, and \"ref-filter"), std::string::npos) << prompt({&a, &b});
  const PlantedReader first(parse_planted_spec("planted:first")), marker(parse_planted_spec("planted:marker?word=test"));
  EXPECT_EQ(first.answer(prompt({&a, &b})), "[2]");
  EXPECT_EQ(first.answer(prompt({&b, &a})), "[1]");
  EXPECT_EQ(first.answer(prompt({&c, &a})), "");  // a tie (no shared word): no answer
  EXPECT_EQ(first.answer(prompt({})), "");
  EXPECT_EQ(marker.answer(prompt({&b, &a})), "[2]");  // only a's title holds "test"
  EXPECT_EQ(marker.answer(prompt({&b})), "");
  EXPECT_EQ(task->reward(first.answer(prompt({&a})), "[2]"), 1.0);
  EXPECT_EQ(task->reward(first.answer(prompt({&b})), "[2]"), 0.0);
}

// commit_area's items are `the area for the commit: "{description}" is "{tag}"`: the reader
// answers a liked document's area, so a document's utility is whether its area is the gold
// one (v4).
TEST(Planted, OnCommitAreaPromptsTheAnswerIsALikedDocumentsArea) {
  auto task = tasks::make_task("commit_area");
  const Example ex = example_of(
      "Which area does this commit belong to among the following areas? Just answer with the area name without "
      "further explanation. areas: [gitk, doc, git-svn] description: handle \"short\" reads in the socket layer");
  const auto a = fielded("a", {{"description", "fix a typo in the manual page"}, {"tag", "doc"}}, "u");
  const auto b = fielded("b", {{"description", "add a test for the history view"}, {"tag", "gitk"}}, "u");
  const auto prompt = [&](const std::vector<const Document*>& docs) { return prompt_of(*task, ex, docs); };
  ASSERT_NE(prompt({&a, &b}).find("\"fix a typo in the manual page\" is \"doc\""), std::string::npos) << prompt({&a, &b});
  const PlantedReader first(parse_planted_spec("planted:first")), marker(parse_planted_spec("planted:marker?word=test"));
  EXPECT_EQ(first.answer(prompt({&a, &b})), "doc");
  EXPECT_EQ(first.answer(prompt({&b, &a})), "gitk");
  EXPECT_EQ(marker.answer(prompt({&a, &b})), "gitk");  // only b holds "test"
  EXPECT_EQ(marker.answer(prompt({&a})), "");
  // So its accuracy with one document is whether that document's area is the gold one.
  const auto acc = [&](const std::string& answer) { return task->reward(answer, "gitk"); };
  EXPECT_EQ(acc(first.answer(prompt({&b}))), 1.0);
  EXPECT_EQ(acc(first.answer(prompt({&a}))), 0.0);
}

TEST(Planted, MarkerLikesOnlyDocumentsHoldingItsWordAPropertyOfTheDocumentAlone) {
  Prompts p;
  PlantedReader r(parse_planted_spec("planted:marker?word=tests"));
  const auto plain = doc("a", "parse: accept quoted names", "teach the parser quoted names");
  const auto in_text = doc("b", "fix the build", "and add tests for it");
  const auto in_title = doc("c", "tests: cover the parser", "more of them");
  EXPECT_EQ(r.answer(p.with({plain, in_text})), "fix the build");
  EXPECT_EQ(r.answer(p.with({plain, in_title, in_text})), "tests: cover the parser");
  EXPECT_EQ(r.answer(p.with({plain})), "");  // nothing it likes
  // A marker in the *next* document's text does not make this one liked.
  EXPECT_EQ(r.answer(p.with({plain, doc("d", "other", "tests")})), "other");
  EXPECT_EQ(PlantedReader(parse_planted_spec("planted:marker")).answer(p.with({doc("e", "t", "a test here")})), "t");
  EXPECT_NE(r.info().id, PlantedReader(parse_planted_spec("planted:marker?word=fix")).info().id);
  EXPECT_NE(r.info().id, PlantedReader(parse_planted_spec("planted:first")).info().id);
}

TEST(Planted, GateAnswersTheInputOnlyWithALikedDocumentWhicheverItIs) {
  Prompts p;
  PlantedReader r(parse_planted_spec("planted:gate?word=tests"));
  const auto plain = doc("a", "parse: accept quoted names", "teach the parser quoted names");
  const auto in_text = doc("b", "fix the build", "and add tests for it");
  const auto in_title = doc("c", "tests: cover the parser", "more: of them");
  // The input's first 8 words, after the instruction's ':'; the liked document's own words
  // (and a ':' in it) do not matter.
  const std::string want = "teach the parser to read \"quoted\" names";
  EXPECT_EQ(r.answer(p.with({plain, in_text})), want);
  EXPECT_EQ(r.answer(p.with({in_title})), want);
  EXPECT_EQ(r.answer(p.with({plain})), "");  // nothing it likes
  EXPECT_EQ(r.answer(p.with({})), "");
  Prompts longer;
  longer.ex.input = "Generate a subject for: one two three four five six seven eight nine ten";
  EXPECT_EQ(r.answer(longer.with({in_text})), "one two three four five six seven eight");
  EXPECT_NE(r.info().id, PlantedReader(parse_planted_spec("planted:marker?word=tests")).info().id);
}

TEST(Planted, UtilitiesAndLikelihoodsOrderDocumentsAlike) {
  Prompts p;
  PlantedReader r(parse_planted_spec("planted:first"));
  const std::string gold = "parse: accept quoted names";
  const auto good = doc("a", "parser: accept quoted names", "x");
  const auto half = doc("b", "accept names", "y");
  const auto bad = doc("c", "update translations", "z");
  auto utility = [&](const Document& d) { return metrics::rouge1(r.answer(p.with({d})), gold).fmeasure; };
  EXPECT_GT(utility(good), utility(half));
  EXPECT_GT(utility(half), utility(bad));
  EXPECT_EQ(utility(bad), 0.0);
  const double lg = r.score_one(p.with({good}), gold), lh = r.score_one(p.with({half}), gold),
               lb = r.score_one(p.with({bad}), gold);
  EXPECT_GT(lg, lh);
  EXPECT_GT(lh, lb);
  // A true log-probability: below 0, and the answer itself is the likeliest target here.
  EXPECT_LT(lg, 0.0);
  EXPECT_GT(r.score_one(p.with({good}), "parser: accept quoted names"), lg);
  // Nothing liked (an empty answer): unlikely, but a finite log-probability.
  PlantedReader gate(parse_planted_spec("planted:gate?word=zzz"));
  const double empty = gate.score_one(p.with({bad}), gold);
  EXPECT_TRUE(std::isfinite(empty)) << empty;
  EXPECT_LT(empty, lb);
  std::vector<ScoreRequest> reqs = {{p.with({good}), gold}, {p.with({bad}), gold}};
  const auto s = r.score(reqs);
  EXPECT_DOUBLE_EQ(s[0], lg);
  EXPECT_DOUBLE_EQ(s[1], lb);
}

TEST(Planted, SpecErrors) {
  EXPECT_THROW(parse_planted_spec("planted:longest"), UsageError);
  EXPECT_THROW(parse_planted_spec("planted:marker?word="), UsageError);
  EXPECT_THROW(parse_planted_spec("planted:marker?word=Two words"), UsageError);
  EXPECT_THROW(parse_planted_spec("planted:marker?word=Fix"), UsageError);  // not a ROUGE token
  EXPECT_THROW(parse_planted_spec("planted:first?word=fix"), UsageError);
  EXPECT_EQ(parse_planted_spec("planted:gate?word=not").word, "not");
  EXPECT_THROW(parse_planted_spec("planted:marker?colour=red"), UsageError);
  EXPECT_EQ(parse_planted_spec("planted:marker").word, "test");
}

}  // namespace
}  // namespace attune::llm
