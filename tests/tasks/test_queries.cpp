// phi_q and the retrieval document text of every task, on literal inputs.
#include <gtest/gtest.h>

#include <string>

#include "attune/core/error.h"
#include "attune/tasks/task.h"

namespace attune::tasks {
namespace {

std::string query(std::string_view task, const std::string& input) {
  Example ex;
  ex.input = input;
  return make_task(task)->query(ex);
}

Document doc(Fields fields) {
  Document d;
  d.id = "d";
  d.fields = std::move(fields);
  return d;
}

TEST(Query, Lamp1JoinsTheTwoCandidateTitles) {
  EXPECT_EQ(query("lamp1",
                  "For an author who has written the paper with the title \"Deep Nets\", which "
                  "reference is related? Just answer with [1] or [2] without explanation. "
                  "[1]: \"Shallow trees\" [2]: \"Wide nets\""),
            "Shallow trees Wide nets");
}

TEST(Query, Lamp1WithFewerQuotedStrings) {
  EXPECT_EQ(query("lamp1", "title \"P\" and \"only one\""), "only one");
  EXPECT_EQ(query("lamp1", "  no quotes  "), "no quotes");
}

TEST(Query, TextAfterTheMarkerStripped) {
  EXPECT_EQ(query("lamp2", "Which tag? tags: [a, b] description:  A boy finds a dragon.  "),
            "A boy finds a dragon.");
  EXPECT_EQ(query("lamp3", "What is the score of the following review on a scale of 1 to 5? "
                           "review: Great place! review: again"),
            "Great place! review: again");
  EXPECT_EQ(query("lamp4", "Generate a headline for the following article: Stocks rose."),
            "Stocks rose.");
  EXPECT_EQ(query("lamp5", "Generate a title for the following abstract of a paper: We study X."),
            "We study X.");
  EXPECT_EQ(query("lamp6", "Generate a subject for the following email: Hi all: meeting at 5"),
            "Hi all: meeting at 5");
  EXPECT_EQ(query("lamp7", "Paraphrase the following tweet without any explanation before or "
                           "after it: I love: coffee"),
            "I love: coffee");
}

TEST(Query, MissingMarkerGivesTheWholeInputStripped) {
  EXPECT_EQ(query("lamp4", " no marker here "), "no marker here");
}

TEST(Query, CommitTasks) {
  EXPECT_EQ(query("commit_subject",
                  "Generate a subject line for the following commit description: Teach x to y."),
            "Teach x to y.");
  EXPECT_EQ(query("commit_area",
                  "Which area does this commit belong to among the following areas? areas: "
                  "[gitk, refs] description: Fix refs: do it."),
            "Fix refs: do it.");
}

TEST(Query, CommitPickTakesTheWholeQuotedDescription) {
  // The description itself holds quotes; it ends at `", which subject`.
  EXPECT_EQ(query("commit_pick",
                  "For an author who wrote the commit described as \"Rename 'f()'. The "
                  "\"*_one()\" naming is common.\", which subject did they write? Just answer "
                  "with [1] or [2] without explanation. [1]: \"a: b\" [2]: \"c: d\""),
            "Rename 'f()'. The \"*_one()\" naming is common.");
  // Another phrasing: the first quoted string.
  EXPECT_EQ(query("commit_pick", "Who wrote \"this\"? [1]: \"a\" [2]: \"b\""), "this");
}

TEST(Query, DebianTasks) {
  EXPECT_EQ(query("qa", "Which Debian package is described as: 389 Directory Server suite - "
                        "libraries?"),
            "389 Directory Server suite - libraries");
  EXPECT_EQ(query("qa", "Which Debian package is described as: what? "), "what");
  EXPECT_EQ(query("factcheck", "Claim: The Debian package nano is a small text editor."),
            "The Debian package nano is a small text editor.");
  EXPECT_EQ(query("slot", "389-ds-base-dev [SEP] section"), "389-ds-base-dev");
  EXPECT_EQ(query("slot", " no-separator "), "no-separator");
}

TEST(DocumentText, PerTask) {
  const Document ta = doc({{"title", "T"}, {"abstract", "A"}});
  const Document tt = doc({{"title", "T"}, {"text", "X"}});
  EXPECT_EQ(make_task("lamp1")->document_text(ta), "T A");
  EXPECT_EQ(make_task("lamp2")->document_text(doc({{"description", "D"}, {"tag", "comedy"}})), "D");
  EXPECT_EQ(make_task("lamp3")->document_text(doc({{"text", "X"}, {"score", "5"}})), "X");
  EXPECT_EQ(make_task("lamp4")->document_text(tt), "T X");
  EXPECT_EQ(make_task("lamp5")->document_text(ta), "T A");
  EXPECT_EQ(make_task("lamp6")->document_text(tt), "X");
  EXPECT_EQ(make_task("lamp7")->document_text(doc({{"text", "X"}})), "X");
  EXPECT_EQ(make_task("commit_subject")->document_text(tt), "T X");
  EXPECT_EQ(make_task("commit_area")->document_text(doc({{"description", "D"}, {"tag", "refs"}})), "D");
  EXPECT_EQ(make_task("commit_pick")->document_text(tt), "T X");
  for (const char* t : {"qa", "factcheck", "slot"}) EXPECT_EQ(make_task(t)->document_text(tt), "T X");
}

TEST(DocumentText, MissingFieldThrows) {
  EXPECT_THROW(make_task("lamp4")->document_text(doc({{"text", "X"}})), Error);
}

}  // namespace
}  // namespace attune::tasks
