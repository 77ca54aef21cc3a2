// User feedback: summary, knowledge, discrimination and filing (feedback/user_feedback.h).
#include "attune/feedback/user_feedback.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "attune/core/error.h"
#include "attune/core/strings.h"

namespace attune::feedback {
namespace {

constexpr std::string_view kSummaryHead =
    "The following is a conversation between a user and an LLM. Did the user provide any meaningful information? If "
    "so, please summarize the information given by the user in one or two sentences. If not, answer NONE.";
constexpr std::string_view kKnowledgeHead =
    "The following is a piece of material that may be correct or incorrect. Please generate a paragraph on the same "
    "topic based on your knowledge. Material: ";
constexpr std::string_view kDiscriminateHead =
    "The following are the documents from the shared database, the LLM's answer, and the feedback provided by the user "
    "in the conversation with the LLM. Please use the first two as references to determine whether the information "
    "provided by the user is correct. There are two databases, one shared by all users and the other exclusive to the "
    "user. Please decide which database this information should be added to. At the end, give your answer on a line "
    "of its own as exactly one of: correct, shared / correct, personal / incorrect";
constexpr std::string_view kRepair =
    "\n\nYour previous reply did not end with one of the three answers. Reply with one line: correct, shared / "
    "correct, personal / incorrect.";

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

// Lower-case words of letters and digits.
std::vector<std::string> word_list(std::string_view s) {
  std::vector<std::string> out;
  std::string cur;
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) || c >= 0x80 || c == '-' || c == '+' || c == '.') {
      cur += static_cast<char>(std::tolower(c));
    } else if (!cur.empty()) {
      out.push_back(cur);
      cur.clear();
    }
  }
  if (!cur.empty()) out.push_back(cur);
  for (auto& w : out)
    while (!w.empty() && (w.back() == '.' || w.back() == '-')) w.pop_back();
  out.erase(std::remove(out.begin(), out.end(), std::string()), out.end());
  return out;
}

// The text between `from` and `to` in a prompt ("" when absent).
std::string section(std::string_view prompt, std::string_view from, std::string_view to) {
  const auto a = prompt.find(from);
  if (a == std::string_view::npos) return "";
  const auto b = to.empty() ? std::string_view::npos : prompt.find(to, a + from.size());
  return std::string(prompt.substr(a + from.size(), b == std::string_view::npos ? std::string_view::npos : b - a - from.size()));
}

std::vector<std::string> split_lines(std::string_view s) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= s.size()) {
    auto nl = s.find('\n', start);
    if (nl == std::string_view::npos) nl = s.size();
    out.emplace_back(s.substr(start, nl - start));
    start = nl + 1;
  }
  return out;
}

}  // namespace

std::string to_string(Filing f) {
  switch (f) {
    case Filing::Shared: return "shared";
    case Filing::Personal: return "personal";
    case Filing::Rejected: return "rejected";
    case Filing::NoInformation: return "no_information";
    case Filing::Failed: return "failed";
  }
  return "failed";
}

std::string summary_prompt(std::string_view conversation) {
  return std::string(kSummaryHead) + "\n\nConversation:\n" + std::string(conversation) + "\n\nSummary:";
}

std::string knowledge_prompt(std::string_view summary) {
  return std::string(kKnowledgeHead) + std::string(summary) + "\n\nParagraph:";
}

std::string discrimination_prompt(const std::vector<Evidence>& evidence, std::string_view knowledge,
                                  std::string_view summary) {
  std::string p = std::string(kDiscriminateHead) + "\n\nDocument:\n";
  if (evidence.empty()) p += "(none)\n";
  for (std::size_t i = 0; i < evidence.size(); ++i) p += "[" + std::to_string(i + 1) + "] " + evidence[i].text + "\n";
  p += "LLM answer:\n" + std::string(knowledge) + "\nUser feedback:\n" + std::string(summary) + "\n\nAnswer:";
  return p;
}

std::string parse_summary(std::string_view reply) {
  const auto s = strip(reply);
  auto w = lower(s);
  while (!w.empty() && (w.back() == '.' || w.back() == '!')) w.pop_back();
  if (w.empty() || w == "none" || w == "no" || w == "none given") return "";
  return s;
}

Filing parse_discrimination(std::string_view reply) {
  std::string last;
  for (const auto& line : split_lines(reply))
    if (!strip(line).empty()) last = strip(line);
  std::string v;
  for (char c : lower(last))
    if (c != '"' && c != '\'' && c != '*' && c != '`') v += c;
  while (!v.empty() && (v.back() == '.' || v.back() == ' ')) v.pop_back();
  std::string compact;  // spaces around the comma ignored
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (v[i] == ' ' && ((i + 1 < v.size() && v[i + 1] == ',') || (i > 0 && v[i - 1] == ','))) continue;
    compact += v[i];
  }
  if (compact == "correct,shared") return Filing::Shared;
  if (compact == "correct,personal") return Filing::Personal;
  if (compact == "incorrect") return Filing::Rejected;
  return Filing::Failed;
}

UserFeedbackDecision curate_user_feedback(llm::LanguageModel& model, std::string_view conversation,
                                          const std::function<std::vector<Evidence>(const std::string&, std::size_t)>& search,
                                          const UserFeedbackOptions& o) {
  UserFeedbackDecision d;
  llm::GenerateOptions g;
  g.max_new_tokens = o.max_new_tokens;
  const auto ask = [&](const std::string& prompt) {
    const llm::Prompt p{prompt};
    ++d.model_calls;
    auto out = model.generate(std::span<const llm::Prompt>(&p, 1), g);
    if (out.size() != 1) throw Error("user feedback: the model answered " + std::to_string(out.size()) + " replies to one prompt");
    return out.front().text;
  };
  d.summary = parse_summary(ask(summary_prompt(conversation)));
  if (d.summary.empty()) {
    d.filing = Filing::NoInformation;
    return d;
  }
  d.knowledge = strip(ask(knowledge_prompt(d.summary)));
  const auto evidence = search(d.summary, o.evidence_k);
  for (const auto& e : evidence) d.evidence.push_back(e.id);
  const auto prompt = discrimination_prompt(evidence, d.knowledge, d.summary);
  for (std::size_t attempt = 0; attempt <= o.retries; ++attempt) {
    d.reply = ask(attempt ? prompt + std::string(kRepair) : prompt);
    d.filing = parse_discrimination(d.reply);
    if (d.filing != Filing::Failed) return d;
  }
  return d;  // failed: filed nowhere
}

PlantedCurator::PlantedCurator(Malformed m) : malformed_(m) {
  id_ = std::string("planted:curator:v1") + (m == Malformed::First ? ":malformed=first" : m == Malformed::Always ? ":malformed=always" : "");
}

std::string PlantedCurator::reply(std::string_view prompt) const {
  if (starts_with(prompt, kSummaryHead)) {
    std::string said;
    for (const auto& line : split_lines(section(prompt, "\n\nConversation:\n", "\n\nSummary:"))) {
      const auto l = strip(line);
      if (starts_with(lower(l), "user:")) said += (said.empty() ? "" : " ") + strip(std::string_view(l).substr(5));
    }
    return split_whitespace_views(said).size() < 3 ? "NONE" : said;
  }
  if (starts_with(prompt, kKnowledgeHead)) return "I know nothing more on this topic.";
  if (!starts_with(prompt, kDiscriminateHead)) return "I cannot help with that.";
  const bool repaired = prompt.find(kRepair) != std::string_view::npos;
  if (malformed_ == Malformed::Always || (malformed_ == Malformed::First && !repaired))
    return "The feedback seems plausible, but I would need more context to be sure.";
  const auto feedback = word_list(section(prompt, "\nUser feedback:\n", "\n\nAnswer:"));
  for (const auto& w : feedback)
    if (w == "i" || w == "my" || w == "me" || w == "prefer") return "The user states a preference of their own.\ncorrect, personal";
  const std::set<std::string> fb(feedback.begin(), feedback.end());
  for (const auto& line : split_lines(section(prompt, "\n\nDocument:\n", "\nLLM answer:\n"))) {
    const auto close = line.find("] ");
    if (line.empty() || line[0] != '[' || close == std::string::npos) continue;
    const auto doc = word_list(std::string_view(line).substr(close + 2));
    // The document's title is what the feedback is about: its first word (a title merely
    // named inside the claim is not its subject).
    if (doc.empty() || feedback.empty() || feedback.front() != doc.front()) continue;
    const std::set<std::string> held(doc.begin(), doc.end());
    std::size_t n = 0, in = 0;
    for (const auto& w : fb)
      if (w != doc.front() && w.size() >= 4) ++n, in += held.count(w);
    if (n > 0 && in == n) return "Document agrees with the user.\ncorrect, shared";
  }
  return "No document supports it.\nincorrect";
}

std::vector<llm::Generation> PlantedCurator::generate(std::span<const llm::Prompt> prompts, const llm::GenerateOptions&) {
  std::vector<llm::Generation> out;
  out.reserve(prompts.size());
  for (const auto& p : prompts) out.push_back({reply(p.text)});
  return out;
}

std::vector<double> PlantedCurator::score(std::span<const llm::ScoreRequest> requests) {
  std::vector<double> out;
  for (const auto& r : requests) out.push_back(strip(r.target) == strip(reply(r.prompt)) ? 0.0 : -100.0);
  return out;
}

PlantedCurator::Malformed parse_planted_curator_spec(std::string_view spec) {
  if (!starts_with(spec, "planted:curator")) throw UsageError("not a planted curator spec: " + std::string(spec));
  auto rest = spec.substr(std::string_view("planted:curator").size());
  if (rest.empty()) return PlantedCurator::Malformed::Never;
  if (rest == "?malformed=first") return PlantedCurator::Malformed::First;
  if (rest == "?malformed=always") return PlantedCurator::Malformed::Always;
  if (rest == "?malformed=never") return PlantedCurator::Malformed::Never;
  throw UsageError("planted:curator: unknown option \"" + std::string(rest) + "\" (only ?malformed=first|always|never)");
}

}  // namespace attune::feedback
