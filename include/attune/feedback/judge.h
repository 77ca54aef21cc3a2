#pragma once
// LLM-judged relevance labels (LUF, paper 004 §2 and appendix A.2; METHODS.md §7): for a
// question and the documents a retriever ranked, the language model says of each document
// whether it contains the answer (D+), is relevant without containing it (D^r, with a graded
// score in [0, 1]) or is irrelevant (D-).
//
// The prompt (judge_prompt) numbers the documents of one group and asks for one line each:
//   [1] ANSWER
//   [2] RELEVANT 0.6
//   [3] IRRELEVANT
// The parser (parse_judgements) accepts exactly that: one line per document, in any order,
// each index once, the label in any case, a RELEVANT score a number in [0, 1]; blank lines
// and surrounding spaces are ignored, anything else makes the reply malformed. A malformed
// reply is asked again with a note saying what was wrong (JudgeOptions::retries times);
// after that the group's documents are counted as failures and left unlabelled: a label is
// never guessed.
//
// Multi-level judging (appendix A.2): the ranking is judged in groups of growing size down
// the ranks (1, 1, 2, 4, 8, ... by default), stopping once a group holds a document labelled
// ANSWER or RELEVANT, so the model reads fewer documents for the same first relevant hit. The
// groups of many questions at the same level go to the model in one generate() call.
// Exhaustive judging (one document a prompt, every rank) is the baseline it is measured
// against. Words stand in for tokens in the accounting (whitespace-separated, prompt and
// reply), the same for both.
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "attune/llm/language_model.h"

namespace attune::feedback {

enum class JudgeLabel { Answer, Relevant, Irrelevant };
std::string_view to_string(JudgeLabel l);  // "answer", "relevant", "irrelevant"

struct DocJudgement {
  JudgeLabel label = JudgeLabel::Irrelevant;
  double score = 0;  // Answer 1, Relevant its graded score, Irrelevant 0
};

// The prompt for one group of documents (docs[i] is shown as [i + 1]).
std::string judge_prompt(std::string_view question, std::span<const std::string> docs);
// The note appended when a reply could not be read, naming the fault.
std::string judge_repair_note(std::string_view error);

struct ParsedJudgements {
  std::optional<std::vector<DocJudgement>> judgements;  // in document order; none when malformed
  std::string error;                                    // why it is malformed
};
ParsedJudgements parse_judgements(std::string_view reply, std::size_t n);

struct JudgeOptions {
  // Group sizes down the ranks; past the list, the last one doubles each level (grow) or
  // repeats. {1} without grow judges one document a prompt.
  std::vector<std::size_t> groups = {1, 1, 2, 4, 8};
  bool grow = true;
  bool stop_at_relevant = true;  // false: every document is judged (in the same groups)
  std::size_t retries = 2;       // further asks after a malformed reply
  std::size_t max_docs = 0;      // judge at most this many ranks (0: all)
  llm::GenerateOptions generate{.max_new_tokens = 64};
};
// Exhaustive judging: one document a prompt, every rank.
JudgeOptions exhaustive_judging();

struct JudgeResult {
  // Per ranked document: its label, or none (not judged: the search stopped before it, or
  // its group failed).
  std::vector<std::optional<DocJudgement>> docs;
  std::vector<char> failed;  // per document: its group's replies were all malformed
  std::size_t judged = 0;    // documents labelled
  std::optional<std::size_t> first_relevant;  // rank of the first ANSWER or RELEVANT
};

struct JudgeCounters {
  std::size_t calls = 0;            // prompts sent (retries included)
  std::size_t retries = 0;          // prompts re-sent after a malformed reply
  std::size_t failed_groups = 0;    // groups left unlabelled after every retry
  std::size_t failed_documents = 0;
  std::size_t prompt_words = 0, reply_words = 0;
};

class Judge {
 public:
  Judge(llm::LanguageModel& model, JudgeOptions opts = {});
  // One result per question: questions[i] with its ranked documents docs[i].
  std::vector<JudgeResult> judge(std::span<const std::string> questions,
                                 std::span<const std::vector<std::string>> docs);
  const JudgeCounters& counters() const { return counters_; }

 private:
  llm::LanguageModel& model_;
  JudgeOptions o_;
  JudgeCounters counters_;
};

// A judge with a planted, known rule, for checks (spec planted:judge?word=W[&malformed=M]):
// it reads judge_prompt's prompts like a model would and labels a document ANSWER when it
// holds the word W (a ROUGE token; default "test"), RELEVANT when it shares a ROUGE token of
// four or more letters with the question (score: the share of the question's such tokens it
// holds, to two decimals), else IRRELEVANT. malformed=first answers a prompt without the
// repair note with prose the parser must refuse; malformed=always does so every time.
// answer_at=F (0 < F <= 1) plants a reading judge instead, one lexical overlap can mostly
// but not wholly read off: ANSWER when the document holds at least the share F of the
// question's such tokens (the word rule then applies only when word= is also given).
struct PlantedJudgeOptions {
  std::string word = "test";
  enum class Malformed { Never, First, Always } malformed = Malformed::Never;
  double answer_at = 0;  // 0: off
  bool word_rule = true;
};
// "planted:judge", "planted:judge?word=fix&malformed=first", "planted:judge?answer_at=0.8".
// UsageError naming the bad part.
PlantedJudgeOptions parse_planted_judge_spec(std::string_view spec);

class PlantedJudge final : public llm::LanguageModel {
 public:
  explicit PlantedJudge(PlantedJudgeOptions o = {});
  std::vector<llm::Generation> generate(std::span<const llm::Prompt> prompts, const llm::GenerateOptions& opts) override;
  // Judging is generation; score() is the log-probability of the target being the reply.
  std::vector<double> score(std::span<const llm::ScoreRequest> requests) override;
  llm::ModelInfo info() const override { return {id_}; }
  std::string reply(std::string_view prompt) const;

 private:
  PlantedJudgeOptions o_;
  std::string id_;
};

}  // namespace attune::feedback
