#pragma once
// Readers with planted, known preferences: test doubles whose utility for each document is
// known in advance, so a learner can be checked to recover it (a correct learner must; one
// with learning switched off must not). They read only the prompt, like a real LLM, and
// work through every interface a real reader does (feedback, eval, train; an
// OpenAI-compatible loopback server can serve them).
//
// The answer is the first title the preference accepts: in the commit_subject and
// LaMP-4/5 style prompts (`"{title}" is the title for "{text}" ...`) a title is a quoted
// span followed by ` is the title for "`, and its document is the title with the quoted
// text after it; in the Debian tasks' prompts (`"{text}" is the description of the package
// "{title}"`) the title is the package after its text (since v3, 2026-11-26: on qa the
// answer is a liked passage's package, an exact match when it is the gold one); in the
// LaMP-2-style classification prompts (commit_area: `the area for the commit: "{text}" is
// "{tag}"`) the title is the label after its text (since v4, 2026-11-29: on commit_area the
// answer is a liked document's area, right when it is the gold one; answers on other
// prompts are v3's); in prompts without any of these, any double-quoted span. Since v5
// (2026-11-29), on the Debian slot and factcheck prompts the answer is read from the first
// liked passage too: slot's the passage's `Section: X.` (X), factcheck's "SUPPORTS" when that
// passage is the claimed package's own and holds at least half of the claimed synopsis's
// distinct words (the synopsis itself is never in a passage), else "REFUTES" (also with no
// liked passage); and a Debian passage that holds quotes is read whole, up to the marker.
// On commit_pick's prompts (`..., which subject, and "{t1}", and "{t2}" did they write? ...
// [1]: "{o1}" [2]: "{o2}"`) the answer is the option that shares more distinct words with the
// first liked profile title ("" on a tie or with none), so a document helps when its title is
// closer to the gold subject than to the other option. gate keeps its answer on every
// prompt. So the utility of a document d at k = 1 is metric(gold, title(d)) when d is
// liked, and the no-document answer's otherwise. Preferences (spec `planted:PREFERENCE[?word=W]`):
//   first    every document: the reader copies the first document's title. Lexical
//            overlap with the query reads this preference only as far as titles resemble
//            inputs.
//   marker   only documents whose title or text holds the word W (a ROUGE token; default
//            "test"): the reader ignores the others. A document's worth then depends on a
//            property of the document alone, visible in the text a retriever reads, that
//            overlap with the query cannot read off.
//   gate     the same liking as marker, but what it answers does not depend on which liked
//            document it read: with one in the prompt it answers the input's first
//            kGateWords words (read after the last document and the instruction's last
//            ':'), without one "". So u(d) = g(x) [d holds W]: the utility is the planted
//            preference alone, and a ranking that puts a liked document first reaches the
//            oracle. The learning checks (tests/cli/test_learning.cpp) use it.
// No document accepted: the answer is "" (every metric's worst).
//
#include <string>
#include <string_view>
#include <vector>

#include "attune/llm/language_model.h"

namespace attune::llm {

struct PlantedOptions {
  enum class Preference { First, Marker, Gate };
  static constexpr std::size_t kGateWords = 8;
  Preference preference = Preference::First;
  std::string word = "test";  // Marker, Gate: the word a liked document holds
  double lambda = 0.9;        // weight of the answer in score()
};

// "planted:first", "planted:marker", "planted:marker?word=fix", "planted:gate?word=not". UsageError naming the bad part.
PlantedOptions parse_planted_spec(std::string_view spec);

class PlantedReader final : public LanguageModel {
 public:
  explicit PlantedReader(PlantedOptions opts = {});
  std::vector<Generation> generate(std::span<const Prompt> prompts, const GenerateOptions& opts) override;
  std::vector<double> score(std::span<const ScoreRequest> requests) override;
  ModelInfo info() const override { return {id_}; }
  // The answer for one prompt (generate() is this for every prompt).
  std::string answer(std::string_view prompt) const;
  // log p(target | prompt): the target's words, each from a mixture of the answer's words
  // (weight lambda) and a uniform vocabulary of kVocab, then a stop; the stop comes after
  // each word with probability 1 / (2 + answer words), never 1, so every target has a
  // finite log-probability (v2; v1 gave -inf after an empty answer).
  double score_one(std::string_view prompt, std::string_view target) const;
  // Words in the size of the score() vocabulary: any token outside the answer.
  static constexpr double kVocab = 50000;

 private:
  bool accepts(std::string_view title, std::string_view text) const;
  PlantedOptions o_;
  std::string id_;
};

}  // namespace attune::llm
