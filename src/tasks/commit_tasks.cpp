// The personal commit-message tasks of shared/data/git (README "git/"), built like the
// LaMP task each one imitates. They have no reference code, so they have no quirks: the
// budget always measures `need` on what is emitted with the truncated slot empty.
#include <string>

#include "attune/core/error.h"
#include "attune/core/strings.h"
#include "attune/tasks/commits.h"
#include "spec_task.h"

namespace attune::tasks::detail {
namespace {

// shared/data/git/commit_area/labels.json, the default when the caller gives none.
const std::vector<std::string> kAreaLabels = {
    "l10n", "git-gui", "gitweb",     "Documentation", "doc",  "gitk",   "git-svn", "completion",
    "Makefile", "refs", "diff", "i18n", "config", "git-p4", "tests"};

// commit_pick inputs read
//   For an author who wrote the commit described as "<description>", which subject did
//   they write? Just answer with [1] or [2] without explanation. [1]: "..." [2]: "..."
// and a quarter of the descriptions contain '"' themselves, so the description ends at
// the '"' of the first `", which subject` after the opening quote.
constexpr std::string_view kPickClose = "\", which subject";

struct Span { std::size_t begin, end; };  // byte range of the quoted description

std::optional<Span> pick_description(std::string_view input) {
  const auto open = input.find('"');
  if (open == std::string_view::npos) return std::nullopt;
  const auto close = input.find(kPickClose, open + 1);
  if (close == std::string_view::npos) return std::nullopt;
  return Span{open + 1, close};
}

std::string pick_query(std::string_view input) {
  if (auto span = pick_description(input))
    return strip(input.substr(span->begin, span->end - span->begin));
  // Another phrasing: the first quoted string (LaMP's extract_strings_between_quotes).
  const auto q = quoted_strings(input);
  return q.empty() ? strip(input) : strip(q[0]);
}

// Like LaMP-1's insertion after "title": input[:i+7] + ", and " + joined + input[i+7:]
// for the first "subject" after the description (so a "subject" inside the description
// is never the anchor), which gives
//   ..., which subject, and "<s1>", and "<s2>" did they write? ...
// With no such word, `{joined}. {input}` (never silently drop the profile).
std::string pick_assemble(std::string_view input, std::string_view joined) {
  const auto span = pick_description(input);
  const std::size_t from = span ? span->end : 0;
  if (auto out = insert_after_word(input, "subject", joined, from)) return *out;
  return joined_then_input(input, joined);
}

std::string quote(std::string_view s) { return "\"" + std::string(s) + "\""; }

TaskSpec commit_subject() {
  TaskSpec s;
  s.name = "commit_subject";
  s.scoring = Scoring::kGeneration;
  s.metrics = {rouge1_info(), rougeL_info()};
  const std::string n = s.name;
  s.query = [](std::string_view in) { return text_after(in, "description:"); };
  s.document_text = [n](const Document& d) {
    return required_field(d, "title", n) + " " + required_field(d, "text", n);
  };
  // Like LaMP-4: item `"{title}" is the title for "{text}" `, the text truncated; final
  // `{joined}. {input}`.
  s.format.slot = "text";
  s.format.item = [n](const Document& d, std::string_view text) {
    return quote(required_field(d, "title", n)) + " is the title for " + quote(text) + " ";
  };
  s.format.assemble = joined_then_input;
  return s;
}

TaskSpec commit_area() {
  TaskSpec s;
  s.name = "commit_area";
  s.scoring = Scoring::kClassification;
  s.labels = kAreaLabels;
  s.metrics = {accuracy_info(), f1_info()};
  const std::string n = s.name;
  s.query = [](std::string_view in) { return text_after(in, "description:"); };
  s.document_text = [n](const Document& d) { return required_field(d, "description", n); };
  // Like LaMP-2: item `the area for the commit: "{description}" is "{tag}" `, the
  // description truncated; final `{joined}. {input}`.
  s.format.slot = "description";
  s.format.item = [n](const Document& d, std::string_view desc) {
    return "the area for the commit: " + quote(desc) + " is " +
           quote(required_field(d, "tag", n)) + " ";
  };
  s.format.assemble = joined_then_input;
  return s;
}

TaskSpec commit_pick() {
  TaskSpec s;
  s.name = "commit_pick";
  s.scoring = Scoring::kClassification;
  s.labels = {"[1]", "[2]"};
  s.metrics = {accuracy_info()};
  const std::string n = s.name;
  s.query = pick_query;
  s.document_text = [n](const Document& d) {
    return required_field(d, "title", n) + " " + required_field(d, "text", n);
  };
  // Like LaMP-1: item `"{title}"`, the title truncated; inserted after "subject".
  s.format.slot = "title";
  s.format.item = [](const Document&, std::string_view title) { return quote(title); };
  s.format.assemble = pick_assemble;
  return s;
}

}  // namespace

TaskSpec commit_spec(std::string_view name) {
  if (name == "commit_subject") return commit_subject();
  if (name == "commit_area") return commit_area();
  if (name == "commit_pick") return commit_pick();
  throw UsageError("unknown commit task \"" + std::string(name) + "\"");
}

}  // namespace attune::tasks::detail

namespace attune::tasks {

std::string commit_subject_area(std::string_view subject) {
  const auto colon = subject.find(':');
  if (colon == std::string_view::npos || colon == 0 || colon > 40) return "";
  const auto area = subject.substr(0, colon);
  for (char c : area)
    if (static_cast<unsigned char>(c) <= ' ') return "";
  return std::string(area);
}

std::string first_words(std::string_view s, std::size_t n) {
  if (n == 0) return std::string(s);
  const auto w = split_whitespace_views(s);
  std::string out;
  for (std::size_t i = 0; i < w.size() && i < n; ++i) {
    if (i) out += ' ';
    out.append(w[i]);
  }
  return out;
}

std::string commit_subject_input(std::string_view description) {
  return "Generate a subject line for the following commit description: " + std::string(description);
}

std::string commit_area_input(const std::vector<std::string>& labels, std::string_view description) {
  return "Which area does this commit belong to among the following areas? Just answer with the area name without "
         "further explanation. areas: [" + join(labels, ", ") + "] description: " + std::string(description);
}

std::string commit_pick_input(std::string_view description, std::string_view first, std::string_view second) {
  return "For an author who wrote the commit described as \"" + std::string(description) +
         "\", which subject did they write? Just answer with [1] or [2] without explanation. [1]: \"" +
         std::string(first) + "\" [2]: \"" + std::string(second) + "\"";
}

PickQuestion commit_pick_question(std::string_view description, std::string_view gold, std::string_view other,
                                  bool gold_first) {
  return gold_first ? PickQuestion{commit_pick_input(description, gold, other), "[1]"}
                    : PickQuestion{commit_pick_input(description, other, gold), "[2]"};
}

}  // namespace attune::tasks
