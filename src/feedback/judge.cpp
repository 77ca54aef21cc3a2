#include "attune/feedback/judge.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "attune/core/error.h"
#include "attune/core/strings.h"
#include "attune/text/lexical.h"

namespace attune::feedback {

std::string_view to_string(JudgeLabel l) {
  switch (l) {
    case JudgeLabel::Answer: return "answer";
    case JudgeLabel::Relevant: return "relevant";
    case JudgeLabel::Irrelevant: return "irrelevant";
  }
  return "?";
}

std::string judge_prompt(std::string_view question, std::span<const std::string> docs) {
  std::string p =
      "Judge how each document helps answer the question.\n"
      "For each document write one line: its number in brackets, then ANSWER if it contains the answer, "
      "RELEVANT and a score from 0 to 1 if it is about the question but does not contain the answer, "
      "or IRRELEVANT.\n"
      "Example:\n[1] ANSWER\n[2] RELEVANT 0.4\n[3] IRRELEVANT\n\n"
      "Question: ";
  p += question;
  p += "\n\n";
  for (std::size_t i = 0; i < docs.size(); ++i) {
    p += "[" + std::to_string(i + 1) + "] ";
    for (char c : docs[i]) p += c == '\n' || c == '\r' ? ' ' : c;  // one line a document
    p += "\n";
  }
  p += "\nJudgements (" + std::to_string(docs.size()) + " line" + (docs.size() == 1 ? "" : "s") + "):\n";
  return p;
}

std::string judge_repair_note(std::string_view error) {
  return "\nYour previous reply could not be read (" + std::string(error) +
         "). Reply with exactly one line per document, as in the example.\n";
}

namespace {

std::string upper(std::string_view s) {
  std::string out(s);
  for (auto& c : out)
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  return out;
}

std::size_t words(std::string_view s) { return split_whitespace_views(s).size(); }

}  // namespace

ParsedJudgements parse_judgements(std::string_view reply, std::size_t n) {
  ParsedJudgements out;
  std::vector<std::optional<DocJudgement>> got(n);
  const auto fail = [&](std::string why) {
    out.error = std::move(why);
    return out;
  };
  std::size_t line_no = 0;
  while (!reply.empty()) {
    const auto nl = reply.find('\n');
    std::string line = strip(reply.substr(0, nl));
    reply = nl == std::string_view::npos ? std::string_view() : reply.substr(nl + 1);
    ++line_no;
    if (line.empty()) continue;
    const std::string where = "line " + std::to_string(line_no) + " \"" + line + "\"";
    if (line[0] != '[') return fail(where + " does not start with [N]");
    const auto close = line.find(']');
    if (close == std::string::npos) return fail(where + " has no closing ]");
    std::size_t index = 0;
    const char* b = line.data() + 1;
    const char* e = line.data() + close;
    const auto [ptr, ec] = std::from_chars(b, e, index);
    if (ec != std::errc() || ptr != e || index < 1 || index > n)
      return fail(where + ": the number must be 1 to " + std::to_string(n));
    if (got[index - 1]) return fail(where + ": document " + std::to_string(index) + " is judged twice");
    const auto parts = split_whitespace(std::string_view(line).substr(close + 1));
    if (parts.empty()) return fail(where + " has no label");
    const std::string label = upper(parts[0]);
    DocJudgement j;
    if (label == "ANSWER" && parts.size() == 1) {
      j = {JudgeLabel::Answer, 1.0};
    } else if (label == "IRRELEVANT" && parts.size() == 1) {
      j = {JudgeLabel::Irrelevant, 0.0};
    } else if (label == "RELEVANT" && parts.size() == 2) {
      double score = 0;
      const auto& t = parts[1];
      const auto [p2, ec2] = std::from_chars(t.data(), t.data() + t.size(), score);
      if (ec2 != std::errc() || p2 != t.data() + t.size() || !std::isfinite(score) || score < 0 || score > 1)
        return fail(where + ": a RELEVANT score must be a number from 0 to 1");
      j = {JudgeLabel::Relevant, score};
    } else {
      return fail(where + ": expected ANSWER, RELEVANT SCORE or IRRELEVANT");
    }
    got[index - 1] = j;
  }
  std::vector<DocJudgement> all;
  for (std::size_t i = 0; i < n; ++i) {
    if (!got[i]) return fail("document " + std::to_string(i + 1) + " is not judged");
    all.push_back(*got[i]);
  }
  out.judgements = std::move(all);
  return out;
}

JudgeOptions exhaustive_judging() {
  JudgeOptions o;
  o.groups = {1};
  o.grow = false;
  o.stop_at_relevant = false;
  return o;
}

Judge::Judge(llm::LanguageModel& model, JudgeOptions opts) : model_(model), o_(std::move(opts)) {
  if (o_.groups.empty()) throw UsageError("judge: the group sizes are empty");
  for (auto g : o_.groups)
    if (g == 0) throw UsageError("judge: a group size is 0");
}

std::vector<JudgeResult> Judge::judge(std::span<const std::string> questions,
                                      std::span<const std::vector<std::string>> docs) {
  if (questions.size() != docs.size())
    throw UsageError("judge: " + std::to_string(questions.size()) + " questions but " + std::to_string(docs.size()) +
                     " document lists");
  const std::size_t nq = questions.size();
  std::vector<JudgeResult> out(nq);
  std::vector<std::size_t> limit(nq), next(nq, 0);  // ranks to judge; the next unjudged rank
  std::vector<char> active(nq, 1);
  for (std::size_t i = 0; i < nq; ++i) {
    limit[i] = o_.max_docs ? std::min(o_.max_docs, docs[i].size()) : docs[i].size();
    out[i].docs.assign(docs[i].size(), std::nullopt);
    out[i].failed.assign(docs[i].size(), 0);
  }
  for (std::size_t level = 0;; ++level) {
    // This level's group size: the configured one, then doubling past the last.
    std::size_t size = o_.groups[std::min(level, o_.groups.size() - 1)];
    if (o_.grow)
      for (std::size_t extra = o_.groups.size(); extra <= level; ++extra) size *= 2;
    struct Ask {
      std::size_t q, from, count;
      std::string base;  // the prompt without a repair note
      std::string note;
    };
    std::vector<Ask> asks;
    for (std::size_t i = 0; i < nq; ++i) {
      if (!active[i] || next[i] >= limit[i]) {
        active[i] = 0;
        continue;
      }
      Ask a{i, next[i], std::min(size, limit[i] - next[i]), "", ""};
      a.base = judge_prompt(questions[i], std::span<const std::string>(docs[i]).subspan(a.from, a.count));
      asks.push_back(std::move(a));
      next[i] += asks.back().count;
    }
    if (asks.empty()) break;
    // Ask, and ask again what came back malformed.
    for (std::size_t attempt = 0; !asks.empty(); ++attempt) {
      std::vector<llm::Prompt> prompts;
      for (const auto& a : asks) prompts.push_back({a.base + a.note});
      const auto replies = model_.generate(prompts, o_.generate);
      if (replies.size() != prompts.size())
        throw Error("judge: the language model answered " + std::to_string(replies.size()) + " of " +
                    std::to_string(prompts.size()) + " prompts");
      counters_.calls += prompts.size();
      if (attempt > 0) counters_.retries += prompts.size();
      std::vector<Ask> again;
      for (std::size_t j = 0; j < asks.size(); ++j) {
        auto& a = asks[j];
        counters_.prompt_words += words(prompts[j].text);
        counters_.reply_words += words(replies[j].text);
        auto parsed = parse_judgements(replies[j].text, a.count);
        auto& r = out[a.q];
        if (parsed.judgements) {
          for (std::size_t d = 0; d < a.count; ++d) {
            const auto& jd = (*parsed.judgements)[d];
            r.docs[a.from + d] = jd;
            ++r.judged;
            if (jd.label != JudgeLabel::Irrelevant && !r.first_relevant) r.first_relevant = a.from + d;
          }
        } else if (attempt < o_.retries) {
          a.note = judge_repair_note(parsed.error);
          again.push_back(std::move(a));
        } else {
          ++counters_.failed_groups;
          counters_.failed_documents += a.count;
          for (std::size_t d = 0; d < a.count; ++d) r.failed[a.from + d] = 1;
        }
      }
      asks = std::move(again);
    }
    if (o_.stop_at_relevant)
      for (std::size_t i = 0; i < nq; ++i)
        if (out[i].first_relevant) active[i] = 0;
  }
  return out;
}

PlantedJudgeOptions parse_planted_judge_spec(std::string_view spec) {
  const std::string where = "language model \"" + std::string(spec) + "\": ";
  std::string_view s = spec;
  if (!starts_with(s, "planted:judge")) throw UsageError(where + "expected planted:judge[?word=W&answer_at=F&malformed=first|always]");
  s.remove_prefix(13);
  PlantedJudgeOptions o;
  bool word_given = false;
  if (s.empty()) return o;
  if (s[0] != '?') throw UsageError(where + "expected ? after planted:judge");
  s.remove_prefix(1);
  while (!s.empty()) {
    const auto amp = s.find('&');
    const auto part = s.substr(0, amp);
    s = amp == std::string_view::npos ? std::string_view() : s.substr(amp + 1);
    const auto eq = part.find('=');
    const auto key = part.substr(0, eq);
    const auto value = eq == std::string_view::npos ? std::string_view() : part.substr(eq + 1);
    if (key == "word") {
      const auto toks = text::rouge_tokens(value);
      if (toks.size() != 1 || toks[0] != value)
        throw UsageError(where + "word=\"" + std::string(value) + "\" must be one lowercase word (a ROUGE token)");
      o.word = std::string(value);
      word_given = true;
    } else if (key == "answer_at") {
      char* end = nullptr;
      const std::string v(value);
      const double f = std::strtod(v.c_str(), &end);
      if (v.empty() || end != v.c_str() + v.size() || !(f > 0 && f <= 1))
        throw UsageError(where + "answer_at=\"" + v + "\" must be a number above 0 and at most 1");
      o.answer_at = f;
    } else if (key == "malformed") {
      if (value == "first") o.malformed = PlantedJudgeOptions::Malformed::First;
      else if (value == "always") o.malformed = PlantedJudgeOptions::Malformed::Always;
      else if (value == "never") o.malformed = PlantedJudgeOptions::Malformed::Never;
      else throw UsageError(where + "malformed=\"" + std::string(value) + "\" (expected first, always or never)");
    } else {
      throw UsageError(where + "unknown setting \"" + std::string(part) + "\" (expected word=W, answer_at=F or malformed=M)");
    }
  }
  o.word_rule = word_given || o.answer_at == 0;
  return o;
}

PlantedJudge::PlantedJudge(PlantedJudgeOptions o) : o_(std::move(o)) {
  id_ = "planted:judge:v1:word=" + (o_.word_rule ? o_.word : std::string("-"));
  if (o_.answer_at > 0) {
    char buf[48];
    std::snprintf(buf, sizeof buf, ":answer_at=%g", o_.answer_at);
    id_ += buf;
  }
  if (o_.malformed == PlantedJudgeOptions::Malformed::First) id_ += ":malformed=first";
  if (o_.malformed == PlantedJudgeOptions::Malformed::Always) id_ += ":malformed=always";
}

std::string PlantedJudge::reply(std::string_view prompt) const {
  const bool repaired = prompt.find("could not be read") != std::string_view::npos;
  if (o_.malformed == PlantedJudgeOptions::Malformed::Always ||
      (o_.malformed == PlantedJudgeOptions::Malformed::First && !repaired))
    return "I think the first document looks useful.";
  // The question, then the documents "[N] text", one a line (the example lines come before
  // the question and are not read).
  const auto at = prompt.find("\nQuestion: ");
  if (at == std::string_view::npos) return "There is no question to judge.";
  std::string_view rest = prompt.substr(at + 1);
  const auto nl = rest.find('\n');
  std::vector<std::string> question_words;
  for (auto& w : text::rouge_tokens(rest.substr(10, nl == std::string_view::npos ? std::string_view::npos : nl - 10)))
    if (w.size() >= 4 && std::find(question_words.begin(), question_words.end(), w) == question_words.end())
      question_words.push_back(std::move(w));
  rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
  std::string out;
  while (!rest.empty()) {
    const auto end = rest.find('\n');
    const auto line = rest.substr(0, end);
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
    const auto close = line.find("] ");
    if (line.empty() || line[0] != '[' || close == std::string_view::npos || close < 2) continue;
    const auto index = line.substr(1, close - 1);
    if (!std::all_of(index.begin(), index.end(), [](char c) { return c >= '0' && c <= '9'; })) continue;
    const auto doc = text::rouge_tokens(line.substr(close + 2));
    std::string label;
    std::size_t shared = 0;
    for (const auto& w : question_words)
      if (std::find(doc.begin(), doc.end(), w) != doc.end()) ++shared;
    const double share = question_words.empty() ? 0.0 : static_cast<double>(shared) / static_cast<double>(question_words.size());
    if ((o_.word_rule && std::find(doc.begin(), doc.end(), o_.word) != doc.end()) ||
        (o_.answer_at > 0 && share >= o_.answer_at - 1e-12)) {
      label = "ANSWER";
    } else if (shared == 0) {
      label = "IRRELEVANT";
    } else {
      char buf[32];
      std::snprintf(buf, sizeof buf, "RELEVANT %.2f", share);
      label = buf;
    }
    out += "[" + std::string(index) + "] " + label + "\n";
  }
  return out;
}

std::vector<llm::Generation> PlantedJudge::generate(std::span<const llm::Prompt> prompts, const llm::GenerateOptions&) {
  std::vector<llm::Generation> out;
  out.reserve(prompts.size());
  for (const auto& p : prompts) out.push_back({reply(p.text)});
  return out;
}

std::vector<double> PlantedJudge::score(std::span<const llm::ScoreRequest> requests) {
  std::vector<double> out;
  for (const auto& r : requests) out.push_back(strip(r.target) == strip(reply(r.prompt)) ? 0.0 : -1e9);
  return out;
}

}  // namespace attune::feedback
