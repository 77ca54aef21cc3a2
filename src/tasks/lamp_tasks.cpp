// LaMP-1..7 as LAMP.md states them (the reference code of paper 000, LaMP-Benchmark/LaMP
// at de78cdb, LaMP/prompts/prompts.py). Each row: phi_q, document text, the per-item
// template (which slot is truncated), the final prompt, labels and metrics.
//
// With PromptOptions::reference_quirks (default) the budget arithmetic is the reference
// code's, byte for byte:
//  - `need` is measured on the reference's strings: an empty truncated slot is written
//    `" "` (quote, space, quote) in LaMP-2..6 and `""` in LaMP-7;
//  - LaMP-5 measures `"{title}" is a title " " ` but emits `"{title}" is a title for "..." `;
//  - LaMP-7 holds back the tokens of "are written by user. Following the given patterns"
//    but emits "are written by a person. Following the given patterns";
//  - LaMP-1 holds back no "- 1" and uses a constant need of 2.
// Without quirks every task measures `need` on exactly what it emits with the truncated
// slot empty, holds back 1, and LaMP-7 subtracts the suffix it emits.
#include <string>

#include "attune/core/error.h"
#include "attune/core/strings.h"
#include "spec_task.h"

namespace attune::tasks::detail {
namespace {

const std::vector<std::string> kLamp2Labels = {
    "sci-fi",    "based on a book", "comedy",  "action",           "twist ending",
    "dystopia",  "dark comedy",     "classic", "psychology",       "fantasy",
    "romance",   "thought-provoking", "social commentary", "violence", "true story"};

const std::string kPatterns = "Following the given patterns";

std::string quoted(std::string_view s) { return "\"" + std::string(s) + "\""; }

// LaMP-1 phi_q: the two candidate reference titles (quoted strings 1 and 2; string 0 is
// the user's paper title) joined by one space. Inputs with fewer quoted strings, where
// the reference raises IndexError: whatever quoted strings follow the first, else the
// whole input stripped.
std::string lamp1_query(std::string_view input) {
  const auto q = quoted_strings(input);
  if (q.size() >= 3) return q[1] + " " + q[2];
  if (q.size() == 2) return q[1];
  return strip(input);
}

TaskSpec classification(std::string name, std::vector<std::string> labels) {
  TaskSpec s;
  s.name = std::move(name);
  s.scoring = Scoring::kClassification;
  s.labels = std::move(labels);
  s.metrics = {accuracy_info(), f1_info()};
  return s;
}

TaskSpec generation(std::string name) {
  TaskSpec s;
  s.name = std::move(name);
  s.scoring = Scoring::kGeneration;
  s.metrics = {rouge1_info(), rougeL_info()};
  return s;
}

// A format whose final prompt is `{joined}. {input}`.
PromptFormat joined_first(std::string slot) {
  PromptFormat f;
  f.slot = std::move(slot);
  f.assemble = joined_then_input;
  return f;
}

TaskSpec lamp1() {
  TaskSpec s = classification("lamp1", {"[1]", "[2]"});
  const std::string n = s.name;
  s.query = lamp1_query;
  s.document_text = [n](const Document& d) {
    return required_field(d, "title", n) + " " + required_field(d, "abstract", n);
  };
  // Item `"{title}"`, the title truncated; the items go right after the first "title" of
  // the input: input[:i+5] + ", and " + joined + input[i+5:] (input unchanged if absent).
  PromptFormat f;
  f.slot = "title";
  f.item = [](const Document&, std::string_view title) { return quoted(title); };
  f.assemble = [](std::string_view input, std::string_view joined) {
    return insert_after_word(input, "title", joined).value_or(std::string(input));
  };
  s.format = f;
  // Reference: per_item = (max_len_prompt - 2 * (k - 1)) // k and need = 2.
  PromptFormat ref = f;
  ref.reserve = 0;
  ref.fixed_need = 2;
  s.reference_format = ref;
  return s;
}

TaskSpec lamp2() {
  TaskSpec s = classification("lamp2", kLamp2Labels);
  const std::string n = s.name;
  s.query = [](std::string_view in) { return text_after(in, "description:"); };
  s.document_text = [n](const Document& d) { return required_field(d, "description", n); };
  // Item `the tag for the movie: "{description}" is "{tag}" `, the description truncated.
  PromptFormat f = joined_first("description");
  f.item = [n](const Document& d, std::string_view desc) {
    return "the tag for the movie: " + quoted(desc) + " is " +
           quoted(required_field(d, "tag", n)) + " ";
  };
  s.format = f;
  PromptFormat ref = f;
  ref.need_text = [f](const Document& d) { return f.item(d, " "); };
  s.reference_format = ref;
  return s;
}

TaskSpec lamp3() {
  TaskSpec s;
  s.name = "lamp3";
  s.scoring = Scoring::kOrdinal;
  s.labels = {"1", "2", "3", "4", "5"};
  s.metrics = {mae_info(), rmse_info()};
  const std::string n = s.name;
  s.query = [](std::string_view in) { return text_after(in, "review:"); };
  s.document_text = [n](const Document& d) { return required_field(d, "text", n); };
  // Item `{score} is the score for "{text}" `, the text truncated.
  PromptFormat f = joined_first("text");
  f.item = [n](const Document& d, std::string_view text) {
    return required_field(d, "score", n) + " is the score for " + quoted(text) + " ";
  };
  s.format = f;
  PromptFormat ref = f;
  ref.need_text = [f](const Document& d) { return f.item(d, " "); };
  s.reference_format = ref;
  return s;
}

// LaMP-4 (news headlines) and LaMP-6 (email subjects) share the template; they differ in
// phi_q and the document text.
TaskSpec lamp4_or_6(int number) {
  TaskSpec s = generation(number == 4 ? "lamp4" : "lamp6");
  const std::string n = s.name;
  if (number == 4) {
    s.query = [](std::string_view in) { return text_after(in, "article:"); };
    s.document_text = [n](const Document& d) {
      return required_field(d, "title", n) + " " + required_field(d, "text", n);
    };
  } else {
    s.query = [](std::string_view in) { return text_after(in, ":"); };
    s.document_text = [n](const Document& d) { return required_field(d, "text", n); };
  }
  // Item `"{title}" is the title for "{text}" `, the text truncated.
  PromptFormat f = joined_first("text");
  f.item = [n](const Document& d, std::string_view text) {
    return quoted(required_field(d, "title", n)) + " is the title for " + quoted(text) + " ";
  };
  s.format = f;
  PromptFormat ref = f;
  ref.need_text = [f](const Document& d) { return f.item(d, " "); };
  s.reference_format = ref;
  return s;
}

TaskSpec lamp5() {
  TaskSpec s = generation("lamp5");
  const std::string n = s.name;
  s.query = [](std::string_view in) { return text_after(in, "paper:"); };
  s.document_text = [n](const Document& d) {
    return required_field(d, "title", n) + " " + required_field(d, "abstract", n);
  };
  // Item `"{title}" is a title for "{abstract}" `, the abstract truncated; final
  // `{joined}. Following the given patterns {input}`.
  PromptFormat f;
  f.slot = "abstract";
  f.item = [n](const Document& d, std::string_view abstract) {
    return quoted(required_field(d, "title", n)) + " is a title for " + quoted(abstract) + " ";
  };
  f.budget_suffix = kPatterns;
  f.assemble = [](std::string_view input, std::string_view joined) {
    return std::string(joined) + ". " + kPatterns + " " + std::string(input);
  };
  s.format = f;
  // Reference quirk: need measured without the "for".
  PromptFormat ref = f;
  ref.need_text = [n](const Document& d) {
    return quoted(required_field(d, "title", n)) + " is a title \" \" ";
  };
  s.reference_format = ref;
  return s;
}

TaskSpec lamp7() {
  TaskSpec s = generation("lamp7");
  const std::string n = s.name;
  s.query = [](std::string_view in) { return text_after(in, ":"); };
  s.document_text = [n](const Document& d) { return required_field(d, "text", n); };
  // Item `"{text}" `, the text truncated; final
  // `{joined} are written by a person. Following the given patterns {input}`.
  PromptFormat f;
  f.slot = "text";
  f.item = [](const Document&, std::string_view text) { return quoted(text) + " "; };
  f.budget_suffix = "are written by a person. " + kPatterns;
  f.assemble = [](std::string_view input, std::string_view joined) {
    return std::string(joined) + " are written by a person. " + kPatterns + " " +
           std::string(input);
  };
  s.format = f;
  // Reference quirk: the held-back suffix says "user", the emitted one "a person".
  PromptFormat ref = f;
  ref.budget_suffix = "are written by user. " + kPatterns;
  s.reference_format = ref;
  return s;
}

}  // namespace

TaskSpec lamp_spec(int number) {
  switch (number) {
    case 1: return lamp1();
    case 2: return lamp2();
    case 3: return lamp3();
    case 4: return lamp4_or_6(4);
    case 5: return lamp5();
    case 6: return lamp4_or_6(6);
    case 7: return lamp7();
    default: throw UsageError("no LaMP task " + std::to_string(number) + " (1..7)");
  }
}

}  // namespace attune::tasks::detail
