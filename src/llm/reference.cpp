#include "attune/llm/reference.h"

#include <cmath>
#include <cstdio>

#include "attune/core/hash.h"
#include "attune/core/strings.h"
#include "attune/llm/generate_check.h"
#include "attune/text/lexical.h"

namespace attune::llm {

std::string GenerateOptions::canonical() const {
  char buf[160];
  std::snprintf(buf, sizeof buf, "max_new_tokens=%zu;beams=%d;temperature=%.17g;top_p=%.17g;seed=%llu",
                max_new_tokens, beams, temperature, top_p,
                static_cast<unsigned long long>(temperature > 0 ? seed : 0));
  // "free", cad = 0 and no_repeat_ngram = 0 add nothing, so caches written before the options existed still hit.
  std::string out = decode == "free" ? std::string(buf) : std::string(buf) + ";decode=" + decode;
  if (cad != 0) {
    char c[48];
    std::snprintf(c, sizeof c, ";cad=%.17g", cad);
    out += c;
  }
  if (no_repeat_ngram != 0) out += ";no_repeat_ngram=" + std::to_string(no_repeat_ngram);
  return out;
}

ReferenceReader::ReferenceReader(const std::vector<std::string>& background, std::vector<std::string> labels,
                                 ReferenceOptions opts)
    : labels_(std::move(labels)), opts_(opts) {
  Hasher h;
  std::size_t outputs = 0;
  for (const auto& text : background) {
    h.add(text);
    for (auto& w : text::rouge_tokens(text)) {
      bg_[w] += 1;
      bg_total_ += 1;
    }
    ++outputs;
  }
  bg_types_ = static_cast<double>(bg_.size());
  const double mean_len = outputs ? bg_total_ / outputs : 1.0;
  end_prob_ = 1.0 / (1.0 + mean_len);
  for (const auto& l : labels_) h.add("label").add(l);
  char buf[64];
  std::snprintf(buf, sizeof buf, "lambda=%.6g;input_words=%zu", opts_.lambda, opts_.input_words);
  id_ = "reference:v1:" + std::string(buf) + ":" + h.hex().substr(0, 16);
}

namespace {

using Counts = std::unordered_map<std::string, double>;

Counts count(const std::vector<std::string>& tokens) {
  Counts c;
  for (const auto& w : tokens) c[w] += 1;
  return c;
}

}  // namespace

double ReferenceReader::types_with(const Counts& prompt) const {
  double types = bg_types_;  // the background types plus the prompt's types outside it
  for (const auto& [word, c] : prompt)
    if (c > 0 && !bg_.count(word)) types += 1;
  return types;
}

double ReferenceReader::log_p(const std::string& w, const Counts& prompt, double prompt_len, double types) const {
  auto it = bg_.find(w);
  const double n = it == bg_.end() ? 0.0 : it->second;
  const double p_bg = (n + 1.0) / (bg_total_ + types + 1.0);
  if (prompt_len <= 0) return std::log(p_bg);
  auto pit = prompt.find(w);
  const double p_prompt = pit == prompt.end() ? 0.0 : pit->second / prompt_len;
  return std::log(opts_.lambda * p_prompt + (1.0 - opts_.lambda) * p_bg);
}

double ReferenceReader::score_one(const std::string& prompt, const std::string& target) const {
  const auto ptoks = text::rouge_tokens(prompt);
  const Counts counts = count(ptoks);
  const double len = static_cast<double>(ptoks.size());
  double total = std::log(end_prob_);
  const double keep = std::log(1.0 - end_prob_);
  const double types = types_with(counts);
  for (auto& w : text::rouge_tokens(target)) total += keep + log_p(w, counts, len, types);
  return total;
}

std::vector<std::string> ReferenceReader::candidates(const std::string& prompt) const {
  std::vector<std::string> out;
  auto add = [&](std::string s) {
    s = strip(s);
    if (!s.empty() && !text::rouge_tokens(s).empty()) out.push_back(std::move(s));
  };
  // Double-quoted spans, paired left to right.
  for (std::size_t pos = prompt.find('"'); pos != std::string::npos;) {
    std::size_t end = prompt.find('"', pos + 1);
    if (end == std::string::npos) break;
    add(prompt.substr(pos + 1, end - pos - 1));
    pos = prompt.find('"', end + 1);
  }
  // Sentences: split after . ! ? followed by whitespace, and at newlines.
  std::size_t start = 0;
  for (std::size_t i = 0; i < prompt.size(); ++i) {
    const char c = prompt[i];
    const bool boundary = c == '\n' || ((c == '.' || c == '!' || c == '?') &&
                                        (i + 1 == prompt.size() || prompt[i + 1] == ' ' || prompt[i + 1] == '\n'));
    if (boundary) {
      add(prompt.substr(start, i + 1 - start));
      start = i + 1;
    }
  }
  if (start < prompt.size()) add(prompt.substr(start));
  // The first words of the input: what follows the prompt's last ": ".
  std::size_t colon = prompt.rfind(": ");
  auto words = split_whitespace(colon == std::string::npos ? prompt : prompt.substr(colon + 2));
  if (words.size() > opts_.input_words) words.resize(opts_.input_words);
  add(join(words, " "));
  return out;
}

std::string ReferenceReader::generate_one(const std::string& prompt, std::size_t max_new_tokens) const {
  if (!labels_.empty()) {
    std::size_t best = 0;
    double best_score = -INFINITY;
    for (std::size_t i = 0; i < labels_.size(); ++i) {
      double s = score_one(prompt, labels_[i]);
      if (s > best_score) {
        best_score = s;
        best = i;
      }
    }
    return labels_[best];
  }
  const auto ptoks = text::rouge_tokens(prompt);
  const Counts counts = count(ptoks);
  const double len = static_cast<double>(ptoks.size());
  std::string best;
  double best_score = -INFINITY;
  for (auto& span : candidates(prompt)) {
    auto toks = text::rouge_tokens(span);
    Counts rest = counts;
    for (auto& w : toks) rest[w] -= 1;  // the rest of the prompt: without this span
    const double rest_len = len - static_cast<double>(toks.size());
    const double types = types_with(rest);
    double sum = 0;
    for (auto& w : toks) sum += log_p(w, rest, rest_len, types);
    const double mean = sum / static_cast<double>(toks.size());
    if (mean > best_score) {
      best_score = mean;
      best = span;
    }
  }
  auto words = split_whitespace(best);
  if (words.size() > max_new_tokens) {
    words.resize(max_new_tokens);
    best = join(words, " ");
  }
  return best;
}

std::vector<Generation> ReferenceReader::generate(std::span<const Prompt> prompts, const GenerateOptions& opts) {
  refuse_constrained_decoding(opts, "the reference reader");
  std::vector<Generation> out;
  out.reserve(prompts.size());
  for (const auto& p : prompts) out.push_back({generate_one(p.text, opts.max_new_tokens)});
  return out;
}

std::vector<double> ReferenceReader::score(std::span<const ScoreRequest> requests) {
  std::vector<double> out;
  out.reserve(requests.size());
  for (const auto& r : requests) out.push_back(score_one(r.prompt, r.target));
  return out;
}

}  // namespace attune::llm
