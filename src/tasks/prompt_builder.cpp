#include "prompt_builder.h"

#include <algorithm>

#include "attune/core/error.h"
#include "attune/core/strings.h"

namespace attune::tasks::detail {

long long floor_div(long long a, long long b) {
  long long q = a / b;
  if ((a % b != 0) && (a < 0)) --q;  // C++ truncates towards zero; Python floors
  return q;
}

namespace {

long long count(const text::Tokenizer& tok, std::string_view s) {
  return static_cast<long long>(tok.count(s));
}

// One attempt at a given max_len_prompt; std::nullopt when an item's budget runs out
// (the reference code's exception, which makes the caller lower `factor`).
std::optional<std::string> try_build(std::string_view task, std::string_view input,
                                     const std::vector<const Document*>& docs,
                                     const text::Tokenizer& tok, long long max_len_prompt,
                                     const PromptFormat& f) {
  const auto k = static_cast<long long>(docs.size());
  long long budget = max_len_prompt - f.reserve - 2 * (k - 1);
  if (!f.budget_suffix.empty()) budget -= count(tok, f.budget_suffix);
  const long long per_item = floor_div(budget, k);
  const auto specials = static_cast<long long>(tok.special_tokens());

  long long saved = 0;
  std::vector<std::string> items;
  items.reserve(docs.size());
  for (const Document* doc : docs) {
    if (doc == nullptr) throw UsageError("task " + std::string(task) + ": null document");
    const long long need = f.fixed_need ? *f.fixed_need
                                        : count(tok, f.need_text ? f.need_text(*doc)
                                                                 : f.item(*doc, ""));
    const long long limit = per_item + saved - need;
    // HF raises on a negative max_length; we also refuse 0 and limits that cannot even
    // hold the special tokens, so a truncated text never exceeds its limit.
    if (limit <= 0 || limit < specials) return std::nullopt;
    const std::string& full = required_field(*doc, f.slot, task);
    std::string text = tok.truncate(full, static_cast<std::size_t>(limit));
    saved += per_item - count(tok, text) - need;
    items.push_back(f.item(*doc, text));
  }
  return f.assemble(input, join(items, ", and "));
}

}  // namespace

std::string build_prompt(std::string_view task, std::string_view input,
                         const std::vector<const Document*>& docs, const text::Tokenizer& tok,
                         std::size_t max_length, const PromptFormat& format) {
  // k = 0: the reference divides by zero, retries every factor and returns the input.
  if (docs.empty()) return std::string(input);
  const auto input_tokens = count(tok, input);
  const auto L = static_cast<long long>(max_length);
  double factor = 0.6;
  while (true) {
    // int() truncates towards zero; factor stays >= 0 inside the loop.
    const auto cap = static_cast<long long>(factor * static_cast<double>(max_length));
    const long long max_len_prompt = L - std::min(input_tokens, cap);
    if (auto prompt = try_build(task, input, docs, tok, max_len_prompt, format)) return *prompt;
    // Python: 0.6 -> 0.5 -> 0.4 -> 0.30000000000000004 -> ... -> 2.8e-17 -> -0.0999...
    // (seven attempts in all); the same doubles here.
    factor -= 0.1;
    if (factor < 0) return std::string(input);
  }
}

std::vector<std::string> quoted_strings(std::string_view s) {
  std::vector<std::string> out;
  bool inside = false;
  std::string current;
  for (char c : s) {
    if (c == '"') {
      if (inside) {
        out.push_back(current);
        current.clear();
      }
      inside = !inside;
    } else if (inside) {
      current += c;
    }
  }
  return out;
}

std::optional<std::string> insert_after_word(std::string_view input, std::string_view word,
                                             std::string_view what, std::size_t from) {
  const auto i = input.find(word, from);
  if (i == std::string_view::npos) return std::nullopt;
  const auto at = i + word.size();
  std::string out(input.substr(0, at));
  out += ", and ";
  out += what;
  out += input.substr(at);
  return out;
}

const std::string& required_field(const Document& doc, const std::string& name,
                                  std::string_view task) {
  if (const std::string* v = doc.field(name)) return *v;
  throw Error("task " + std::string(task) + ": document \"" + doc.id + "\" has no field \"" +
              name + "\"");
}

std::string joined_then_input(std::string_view input, std::string_view joined) {
  std::string out(joined);
  out += ". ";
  out += input;
  return out;
}

}  // namespace attune::tasks::detail
