#pragma once
// User feedback (paper 004 §2.3, METHODS.md §7): what a user asserts in a conversation,
// summarised by a language model, then judged against the shared corpus's evidence and the
// model's own knowledge ("knowledge-guided discrimination"), and filed as correct-shared
// (into the tenant's shared corpus), correct-personal (into that user's personal store) or
// rejected. The prompts are the paper's A.1.4, A.1.6 and A.1.5, with the answer format
// spelled out so a reply can be parsed.
//
// Fail-safe by construction: only a reply that parses as exactly "correct, shared" files
// anything into the shared corpus. A malformed reply is asked again with a note naming the
// fault; after the retries the feedback is `failed` and filed nowhere, never guessed.
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "attune/llm/language_model.h"

namespace attune::feedback {

enum class Filing { Shared, Personal, Rejected, NoInformation, Failed };
std::string to_string(Filing f);  // "shared", "personal", "rejected", "no_information", "failed"

struct Evidence {
  std::string id, text;
};

// Prompt A.1.4: did the user give information, and what. A reply "NONE" means none.
std::string summary_prompt(std::string_view conversation);
// Prompt A.1.6: the model's own paragraph on the summary's topic, without retrieval.
std::string knowledge_prompt(std::string_view summary);
// Prompt A.1.5: the evidence, the model's paragraph and the summary; the reply must end
// with a line "correct, shared", "correct, personal" or "incorrect".
std::string discrimination_prompt(const std::vector<Evidence>& evidence, std::string_view knowledge,
                                  std::string_view summary);
// The summary of a reply to summary_prompt: "" when the reply says NONE (or is empty).
std::string parse_summary(std::string_view reply);
// The verdict of a reply's last non-empty line (case, quotes, a final period and spaces
// around the comma ignored); Failed when it is none of the three.
Filing parse_discrimination(std::string_view reply);

struct UserFeedbackOptions {
  std::size_t evidence_k = 3;       // shared-corpus documents the discrimination reads
  std::size_t retries = 2;          // more asks after a malformed discrimination
  std::size_t max_new_tokens = 256;
};

struct UserFeedbackDecision {
  Filing filing = Filing::Failed;
  std::string summary;                 // what is filed (empty for no_information)
  std::string knowledge;               // the model's own paragraph
  std::vector<std::string> evidence;   // ids of the shared documents it was judged against
  std::string reply;                   // the last discrimination reply
  std::size_t model_calls = 0;
};

// Runs the three steps for one conversation. `search` gives the shared corpus's top
// documents for a text (never a user's personal documents: the verdict decides whether the
// feedback may become shared, so it is judged against what all users share).
UserFeedbackDecision curate_user_feedback(llm::LanguageModel& model, std::string_view conversation,
                                          const std::function<std::vector<Evidence>(const std::string&, std::size_t)>& search,
                                          const UserFeedbackOptions& options = {});

// A curator with a planted, known rule, for checks (spec planted:curator[?malformed=first|always]):
//  - summary: the conversation's user lines ("user: ..."), joined; NONE when they hold
//    fewer than 3 words;
//  - knowledge: a fixed sentence (it knows nothing);
//  - discrimination: "correct, personal" when the feedback speaks of the user ("i", "my",
//    "me", "prefer" as words); else "correct, shared" when one evidence document's title
//    (its first word) is the feedback's first word (its subject) and that document holds
//    every other word of 4 or more letters of the feedback; else "incorrect".
// malformed=first answers a discrimination prompt without the repair note with prose;
// malformed=always does so every time.
class PlantedCurator final : public llm::LanguageModel {
 public:
  enum class Malformed { Never, First, Always };
  explicit PlantedCurator(Malformed m = Malformed::Never);
  std::vector<llm::Generation> generate(std::span<const llm::Prompt> prompts, const llm::GenerateOptions& opts) override;
  std::vector<double> score(std::span<const llm::ScoreRequest> requests) override;
  llm::ModelInfo info() const override { return {id_}; }
  std::string reply(std::string_view prompt) const;

 private:
  Malformed malformed_;
  std::string id_;
};
// "planted:curator", "planted:curator?malformed=first". UsageError naming the bad part.
PlantedCurator::Malformed parse_planted_curator_spec(std::string_view spec);

}  // namespace attune::feedback
