// User feedback's prompts, parsers and curation steps (feedback/user_feedback.h).
#include <gtest/gtest.h>

#include "attune/core/error.h"
#include "attune/feedback/user_feedback.h"

using namespace attune;
using namespace attune::feedback;

TEST(UserFeedback, VerdictsParseExactlyAndAnythingElseFails) {
  EXPECT_EQ(parse_discrimination("The documents agree.\ncorrect, shared"), Filing::Shared);
  EXPECT_EQ(parse_discrimination("reasoning...\n\n\"Correct , Personal\".\n"), Filing::Personal);
  EXPECT_EQ(parse_discrimination("incorrect"), Filing::Rejected);
  EXPECT_EQ(parse_discrimination("**correct,shared**"), Filing::Shared);
  // Not the last line, hedged, or another word: never guessed.
  EXPECT_EQ(parse_discrimination("correct, shared\nbut I am not sure"), Filing::Failed);
  EXPECT_EQ(parse_discrimination("probably correct, shared"), Filing::Failed);
  EXPECT_EQ(parse_discrimination("correct"), Filing::Failed);
  EXPECT_EQ(parse_discrimination(""), Filing::Failed);
  EXPECT_EQ(parse_summary("  NONE. "), "");
  EXPECT_EQ(parse_summary("The user likes vim."), "The user likes vim.");
  EXPECT_EQ(to_string(Filing::NoInformation), "no_information");
}

TEST(UserFeedback, PromptsCarryTheirPartsAndThePlantedCuratorFollowsItsRule) {
  const std::vector<Evidence> ev = {{"d1", "netprobe: measures network latency between hosts"}};
  const auto p = discrimination_prompt(ev, "I know nothing.", "netprobe measures network latency between hosts");
  EXPECT_NE(p.find("[1] netprobe: measures"), std::string::npos);
  EXPECT_NE(p.find("correct, shared / correct, personal / incorrect"), std::string::npos);
  PlantedCurator c;
  EXPECT_EQ(parse_discrimination(c.reply(p)), Filing::Shared);
  EXPECT_EQ(parse_discrimination(c.reply(discrimination_prompt(ev, "", "netprobe renders street maps offline"))),
            Filing::Rejected);
  // One content word the document lacks is enough to reject: the simulation's incorrect claims
  // are another package's description, and boilerplate ("this package is a graphical ...")
  // can share most of its words with the subject's own (an 80% rule let one through).
  EXPECT_EQ(parse_discrimination(c.reply(discrimination_prompt(ev, "", "netprobe measures network latency between tractors"))),
            Filing::Rejected);
  EXPECT_EQ(parse_discrimination(c.reply(discrimination_prompt(ev, "", "netprobe measures latency between hosts."))),
            Filing::Shared);
  EXPECT_EQ(parse_discrimination(c.reply(discrimination_prompt(ev, "", "I prefer netprobe"))), Filing::Personal);
  EXPECT_EQ(parse_discrimination(c.reply(discrimination_prompt({}, "", "netprobe measures network latency"))), Filing::Rejected);
  EXPECT_EQ(parse_summary(c.reply(summary_prompt("assistant: hi\nuser: netprobe measures latency well"))),
            "netprobe measures latency well");
  EXPECT_EQ(parse_summary(c.reply(summary_prompt("user: thanks"))), "");
  EXPECT_EQ(parse_planted_curator_spec("planted:curator?malformed=first"), PlantedCurator::Malformed::First);
  EXPECT_THROW(parse_planted_curator_spec("planted:curator?x=1"), UsageError);
}

TEST(UserFeedback, CurationSearchesTheSharedCorpusAndRetriesAMalformedVerdict) {
  std::vector<std::string> searched;
  const auto search = [&](const std::string& text, std::size_t k) {
    searched.push_back(text);
    EXPECT_EQ(k, 3u);
    return std::vector<Evidence>{{"d1", "netprobe: measures network latency between hosts"}};
  };
  PlantedCurator ok;
  auto d = curate_user_feedback(ok, "user: netprobe measures network latency between hosts", search);
  EXPECT_EQ(d.filing, Filing::Shared);
  EXPECT_EQ(d.evidence, (std::vector<std::string>{"d1"}));
  EXPECT_EQ(d.model_calls, 3u);
  EXPECT_EQ(searched, (std::vector<std::string>{"netprobe measures network latency between hosts"}));
  PlantedCurator once(PlantedCurator::Malformed::First), never(PlantedCurator::Malformed::Always);
  EXPECT_EQ(curate_user_feedback(once, "user: netprobe measures network latency between hosts", search).filing, Filing::Shared);
  UserFeedbackOptions o;
  o.retries = 1;
  d = curate_user_feedback(never, "user: netprobe measures network latency between hosts", search, o);
  EXPECT_EQ(d.filing, Filing::Failed);
  EXPECT_EQ(d.model_calls, 4u);  // summary, knowledge, two malformed verdicts
  d = curate_user_feedback(ok, "user: ok", search);
  EXPECT_EQ(d.filing, Filing::NoInformation);
  EXPECT_EQ(d.model_calls, 1u);
}
