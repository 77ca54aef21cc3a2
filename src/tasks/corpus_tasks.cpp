// The Debian knowledge tasks of shared/data/debian (README "debian/"): retrieval searches
// the shared passage corpus ({"id", "title": package, "text": "Section: .... ..."}), and
// every task shows passages with one template. No reference code, so no quirks.
#include <string>

#include "attune/core/error.h"
#include "attune/core/strings.h"
#include "spec_task.h"

namespace attune::tasks::detail {
namespace {

// qa: "Which Debian package is described as: <synopsis>?" -> the synopsis.
std::string qa_query(std::string_view input) {
  std::string q = text_after(input, "described as:");
  if (!q.empty() && q.back() == '?') q = strip(std::string_view(q).substr(0, q.size() - 1));
  return q;
}

// slot: "<package> [SEP] section" -> the package.
std::string slot_query(std::string_view input) {
  const auto i = input.find(" [SEP]");
  return strip(i == std::string_view::npos ? input : input.substr(0, i));
}

TaskSpec corpus_task(std::string name) {
  TaskSpec s;
  s.name = std::move(name);
  s.uses_corpus = true;
  const std::string n = s.name;
  s.document_text = [n](const Document& d) {
    return required_field(d, "title", n) + " " + required_field(d, "text", n);
  };
  // Item `"{text}" is the description of the package "{title}" `, the text truncated;
  // final `{joined}. {input}`.
  s.format.slot = "text";
  s.format.item = [n](const Document& d, std::string_view text) {
    return "\"" + std::string(text) + "\" is the description of the package \"" +
           required_field(d, "title", n) + "\" ";
  };
  s.format.assemble = joined_then_input;
  return s;
}

}  // namespace

TaskSpec corpus_spec(std::string_view name) {
  TaskSpec s = corpus_task(std::string(name));
  if (name == "qa") {
    s.query = qa_query;
    s.scoring = Scoring::kExactMatch;
    s.metrics = {exact_match_info()};
  } else if (name == "factcheck") {
    s.query = [](std::string_view in) { return text_after(in, "Claim:"); };
    s.scoring = Scoring::kClassification;
    s.labels = {"SUPPORTS", "REFUTES"};
    s.metrics = {accuracy_info()};
  } else if (name == "slot") {
    s.query = slot_query;
    s.scoring = Scoring::kClassification;  // labels: the caller's sections, or none
    s.metrics = {accuracy_info()};
  } else {
    throw UsageError("unknown corpus task \"" + std::string(name) + "\"");
  }
  return s;
}

}  // namespace attune::tasks::detail
