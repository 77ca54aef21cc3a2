#include "attune/llm/planted.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "attune/core/error.h"
#include "attune/core/strings.h"
#include "attune/llm/generate_check.h"
#include "attune/text/lexical.h"

namespace attune::llm {
namespace {

// slot's input: "<package> [SEP] section" (after the prompt's ". ").
bool is_debian_slot(std::string_view input) { return strip(input).ends_with(" [SEP] section"); }

// factcheck's input: "Claim: The Debian package <package> is <synopsis>."
struct Claim {
  std::string package, synopsis;
};
std::optional<Claim> debian_claim(std::string_view input) {
  static constexpr std::string_view kClaim = "Claim: The Debian package ";
  const auto at = input.rfind(kClaim);
  if (at == std::string_view::npos) return std::nullopt;
  const std::string rest = strip(input.substr(at + kClaim.size()));
  const auto is = rest.find(" is ");
  if (is == std::string::npos || is == 0) return std::nullopt;
  std::string synopsis = rest.substr(is + 4);
  if (!synopsis.empty() && synopsis.back() == '.') synopsis.pop_back();
  return Claim{rest.substr(0, is), synopsis};
}

// A passage's "Section: <section>. ..." -> the section ("" without one).
std::string section_of(std::string_view body) {
  static constexpr std::string_view kSection = "Section: ";
  const std::string b = strip(body);
  if (!starts_with(b, kSection)) return {};
  const std::string_view rest = std::string_view(b).substr(kSection.size());
  return strip(rest.substr(0, rest.find('.')));
}

// The passage supports the claim when it is the claimed package's own passage and holds at
// least half of the synopsis's distinct words (the synopsis itself is never in a passage).
bool supports(const Claim& c, std::string_view title, std::string_view body) {
  if (strip(title) != c.package) return false;
  const auto want = text::rouge_tokens(c.synopsis);
  const auto have_tokens = text::rouge_tokens(body);
  const std::unordered_set<std::string> have(have_tokens.begin(), have_tokens.end());
  std::unordered_set<std::string> distinct, found;
  for (const auto& w : want)
    if (distinct.insert(w).second && have.count(w)) found.insert(w);
  return !distinct.empty() && 2 * found.size() >= distinct.size();
}

// commit_pick's prompt: `..., which subject, and "{t1}", and "{t2}" did they write? Just
// answer with [1] or [2] without explanation. [1]: "{o1}" [2]: "{o2}"`. The profile's titles
// and the two options, or nothing when the prompt is not of that form.
struct Pick {
  std::vector<std::string_view> titles;
  std::string_view option1, option2;
};
std::optional<Pick> commit_pick(std::string_view prompt) {
  static constexpr std::string_view kDocs = "\", which subject, and \"", kEnd = "\" did they write?";
  static constexpr std::string_view kOpt1 = "[1]: \"", kOpt2 = "\" [2]: \"";
  const std::size_t o2 = prompt.rfind(kOpt2);
  if (o2 == std::string_view::npos) return std::nullopt;
  const std::size_t o1 = prompt.rfind(kOpt1, o2);
  const std::size_t last = prompt.rfind('"');
  if (o1 == std::string_view::npos || last < o2 + kOpt2.size()) return std::nullopt;
  Pick p;
  p.option1 = prompt.substr(o1 + kOpt1.size(), o2 - o1 - kOpt1.size());
  p.option2 = prompt.substr(o2 + kOpt2.size(), last - o2 - kOpt2.size());
  if (const std::size_t at = prompt.find(kDocs); at != std::string_view::npos && at < o1) {
    const std::size_t from = at + kDocs.size(), end = prompt.find(kEnd, from);
    if (end != std::string_view::npos && end < o1) {
      static constexpr std::string_view kSep = "\", and \"";
      std::string_view rest = prompt.substr(from, end - from);
      for (std::size_t cut; (cut = rest.find(kSep)) != std::string_view::npos; rest.remove_prefix(cut + kSep.size()))
        p.titles.push_back(rest.substr(0, cut));
      p.titles.push_back(rest);
    }
  }
  return p;
}

// The option that shares more distinct words with the title, "" on a tie.
std::string closer_option(std::string_view title, const Pick& p) {
  const auto words = [](std::string_view s) {
    const auto t = text::rouge_tokens(s);
    return std::unordered_set<std::string>(t.begin(), t.end());
  };
  const auto t = words(title), a = words(p.option1), b = words(p.option2);
  std::size_t na = 0, nb = 0;
  for (const auto& w : t) {
    na += a.count(w);
    nb += b.count(w);
  }
  return na > nb ? "[1]" : nb > na ? "[2]" : "";
}

}  // namespace

PlantedOptions parse_planted_spec(std::string_view spec) {
  const std::string where = "language model \"" + std::string(spec) + "\": ";
  std::string_view s = spec;
  if (starts_with(s, "planted:")) s.remove_prefix(8);
  const auto q = s.find('?');
  const std::string_view pref = s.substr(0, q);
  PlantedOptions o;
  if (pref == "first") o.preference = PlantedOptions::Preference::First;
  else if (pref == "marker") o.preference = PlantedOptions::Preference::Marker;
  else if (pref == "gate") o.preference = PlantedOptions::Preference::Gate;
  else throw UsageError(where + "unknown preference \"" + std::string(pref) + "\" (expected planted:first, planted:marker or planted:gate)");
  if (q == std::string_view::npos) return o;
  std::string_view rest = s.substr(q + 1);
  if (!starts_with(rest, "word="))
    throw UsageError(where + "unknown setting \"" + std::string(rest) + "\" (expected word=W)");
  rest.remove_prefix(5);
  const auto toks = text::rouge_tokens(rest);
  if (toks.size() != 1 || toks[0] != rest)
    throw UsageError(where + "word=\"" + std::string(rest) + "\" must be one lowercase word (a ROUGE token)");
  if (o.preference == PlantedOptions::Preference::First) throw UsageError(where + "word applies to planted:marker and planted:gate only");
  o.word = std::string(rest);
  return o;
}

PlantedReader::PlantedReader(PlantedOptions o) : o_(o) {
  switch (o_.preference) {
    case PlantedOptions::Preference::First: id_ = "planted:first:v5"; break;
    case PlantedOptions::Preference::Marker: id_ = "planted:marker:v5:word=" + o_.word; break;
    case PlantedOptions::Preference::Gate: id_ = "planted:gate:v5:word=" + o_.word; break;
  }
}

bool PlantedReader::accepts(std::string_view title, std::string_view text) const {
  if (o_.preference == PlantedOptions::Preference::First) return true;
  for (auto part : {title, text})
    for (const auto& w : text::rouge_tokens(part))
      if (w == o_.word) return true;
  return false;
}

std::string PlantedReader::answer(std::string_view prompt) const {
  // v5: commit_pick's answer is the option closer to the first liked title.
  if (o_.preference != PlantedOptions::Preference::Gate)
    if (const auto pick = commit_pick(prompt)) {
      for (const auto t : pick->titles)
        if (!strip(t).empty() && accepts(t, {})) return closer_option(t, *pick);
      return {};
    }
  // The Debian form is read by its marker (since v5, below); otherwise the quoted spans, in
  // order, and what follows each one's closing quote.
  static constexpr std::string_view kDescMark = "\" is the description of the package \"";
  const bool debian = prompt.find(kDescMark) != std::string_view::npos;
  static constexpr std::string_view kTitleFor = " is the title for \"";
  static constexpr std::string_view kIs = " is \"";
  struct Span {
    std::string_view text;
    bool title_for, is;  // followed by kTitleFor / kIs
  };
  std::vector<Span> spans;
  for (std::size_t open = debian ? std::string_view::npos : prompt.find('"'); open != std::string_view::npos;) {
    const std::size_t close = prompt.find('"', open + 1);
    if (close == std::string_view::npos) break;
    const auto after = prompt.substr(close + 1);
    spans.push_back({prompt.substr(open + 1, close - open - 1), starts_with(after, kTitleFor), starts_with(after, kIs)});
    open = prompt.find('"', close + 1);  // the next span starts after this one closes
  }
  // The documents, in prompt order: LaMP-style `"{title}" is the title for "{text}"`, the
  // Debian tasks' `"{text}" is the description of the package "{title}"`, the LaMP-2-style
  // classification items `...: "{text}" is "{label}"` (commit_area: the label is the title),
  // else (a prompt without any of them) every span a title of its own. `end`: just past the document's last
  // quote (0 for the last form, where the input is read from the whole prompt).
  struct Doc {
    std::string_view title, body;
    std::size_t end = 0;
  };
  const auto end_of = [&](std::string_view sp) { return static_cast<std::size_t>(sp.data() - prompt.data()) + sp.size() + 1; };
  std::vector<Doc> docs;
  // The Debian form by its marker, so a passage that holds quotes (8% of the corpus) keeps its
  // whole text: from the item's opening quote to the marker.
  if (debian) {
    for (std::size_t pos = 0;;) {
      const std::size_t mark = prompt.find(kDescMark, pos);
      if (mark == std::string_view::npos) break;
      const std::size_t open = prompt.find('"', pos), title = mark + kDescMark.size();
      const std::size_t close = prompt.find('"', title);
      if (close == std::string_view::npos) break;
      docs.push_back({prompt.substr(title, close - title), prompt.substr(open + 1, mark - open - 1), close + 1});
      pos = close + 1;
    }
  }
  for (std::size_t i = 0; i < spans.size(); ++i) {
    const bool next = i + 1 < spans.size();
    if (spans[i].title_for) docs.push_back({spans[i].text, next ? spans[i + 1].text : std::string_view(), end_of(next ? spans[i + 1].text : spans[i].text)});
    else if (spans[i].is && next) {
      docs.push_back({spans[i + 1].text, spans[i].text, end_of(spans[i + 1].text)});
      ++i;  // the label is not a document of its own
    }
  }
  const bool from_spans = docs.empty();
  if (from_spans)
    for (const auto& sp : spans) docs.push_back({sp.text, {}, 0});
  const Doc* liked_doc = nullptr;  // the first document the preference accepts
  for (const auto& d : docs)
    if (!strip(d.title).empty() && accepts(d.title, d.body)) {
      liked_doc = &d;
      break;
    }
  // v5: the Debian slot and factcheck inputs (read after the last passage) are answered
  // from the first liked passage, as qa is; gate keeps its own answer.
  if (o_.preference != PlantedOptions::Preference::Gate) {
    std::size_t after = 0;
    for (const auto& d : docs) after = std::max(after, d.end);
    const std::string_view input = prompt.substr(std::min(after, prompt.size()));
    const Doc* passage = from_spans ? nullptr : liked_doc;
    if (is_debian_slot(input)) return passage ? section_of(passage->body) : std::string();
    if (const auto c = debian_claim(input)) return passage && supports(*c, passage->title, passage->body) ? "SUPPORTS" : "REFUTES";
  }
  const std::string liked = liked_doc ? strip(liked_doc->title) : std::string();
  if (o_.preference != PlantedOptions::Preference::Gate || liked.empty()) return liked;
  // Gate: the input's first words, read after the last document and after the
  // instruction's last ':'.
  std::size_t from = 0;
  for (const auto& d : docs) from = std::max(from, d.end);
  std::string_view input = prompt.substr(std::min(from, prompt.size()));
  if (const auto colon = input.rfind(':'); colon != std::string_view::npos) input.remove_prefix(colon + 1);
  auto words = split_whitespace(input);
  if (words.size() > PlantedOptions::kGateWords) words.resize(PlantedOptions::kGateWords);
  return join(words, " ");
}

double PlantedReader::score_one(std::string_view prompt, std::string_view target) const {
  const auto ans = text::rouge_tokens(answer(prompt));
  std::unordered_map<std::string, double> c;
  for (const auto& w : ans) c[w] += 1;
  const double n = static_cast<double>(ans.size());
  // Stops after each word with probability 1 / (2 + n): never 1, so a target after an
  // empty answer is unlikely but possible (a finite log-probability, as Pearl's labels need).
  const double end = 1.0 / (2.0 + n);
  double total = std::log(end);
  for (const auto& w : text::rouge_tokens(target)) {
    auto it = c.find(w);
    const double p_ans = it == c.end() || n == 0 ? 0.0 : it->second / n;
    total += std::log(1.0 - end) + std::log(o_.lambda * p_ans + (1.0 - o_.lambda) / kVocab);
  }
  return total;
}

std::vector<Generation> PlantedReader::generate(std::span<const Prompt> prompts, const GenerateOptions& g) {
  refuse_constrained_decoding(g, "a planted reader");
  std::vector<Generation> out;
  out.reserve(prompts.size());
  for (const auto& p : prompts) {
    auto words = split_whitespace(answer(p.text));
    if (words.size() > g.max_new_tokens) words.resize(g.max_new_tokens);
    out.push_back({join(words, " ")});
  }
  return out;
}

std::vector<double> PlantedReader::score(std::span<const ScoreRequest> requests) {
  std::vector<double> out;
  out.reserve(requests.size());
  for (const auto& r : requests) out.push_back(score_one(r.prompt, r.target));
  return out;
}

}  // namespace attune::llm
