#pragma once
// Private to the tasks layer: the LaMP prompt budget (LAMP.md "Prompt construction")
// shared by every task, and the string helpers the query and prompt functions use.
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "attune/core/types.h"
#include "attune/tasks/task.h"
#include "attune/text/tokenizer.h"

namespace attune::tasks::detail {

// How one task turns retrieved documents into a prompt. Exactly one field of each
// document (`slot`) is truncated to fit the per-item budget; every other slot of the
// template is filled in full.
struct PromptFormat {
  // The document field truncated to the per-item budget ("title", "text", ...).
  std::string slot;
  // The per-item text with the slot filled by `slot_text` (already truncated).
  std::function<std::string(const Document& doc, std::string_view slot_text)> item;
  // The string `need` is measured on. Unset: item(doc, ""), i.e. what is emitted with
  // the truncated slot empty.
  std::function<std::string(const Document& doc)> need_text;
  // A constant `need` instead of a measured one (the LaMP-1 reference code uses 2).
  std::optional<long long> fixed_need;
  // Tokens held back before splitting the budget (the "- 1" of LAMP.md; LaMP-1's
  // reference code holds back none).
  long long reserve = 1;
  // Text whose token count is also held back (LaMP-5/7's "Following the given
  // patterns" suffix); empty: nothing.
  std::string budget_suffix;
  // The final prompt from the input and the items joined with ", and ".
  std::function<std::string(std::string_view input, std::string_view joined)> assemble;
};

// LAMP.md's algorithm: factor = 0.6; max_len_prompt = max_length - min(count(input),
// int(factor * max_length)); per_item = (max_len_prompt - reserve - 2 * (k - 1)
// - count(suffix)) // k (floor division); for each document in order: limit = per_item +
// saved - need, the slot truncated to `limit` tokens, saved += per_item - count(text) -
// need. A limit that is not positive (or below tok.special_tokens()) fails the attempt:
// factor -= 0.1 (in double, as Python does) and retry; factor below 0, or no documents:
// the input alone.
// `task` names the task in the error thrown when a document lacks the slot field.
std::string build_prompt(std::string_view task, std::string_view input,
                         const std::vector<const Document*>& docs, const text::Tokenizer& tok,
                         std::size_t max_length, const PromptFormat& format);

// Python floor division (rounds towards negative infinity); b > 0.
long long floor_div(long long a, long long b);

// The LaMP reference's extract_strings_between_quotes: the pieces between successive
// pairs of '"' characters (an unterminated last piece is dropped).
std::vector<std::string> quoted_strings(std::string_view s);

// The LaMP reference's add_string_after_title generalised: `input` with ", and " + `what`
// inserted right after the first occurrence of `word` at or after byte `from`;
// std::nullopt when there is none.
std::optional<std::string> insert_after_word(std::string_view input, std::string_view word,
                                             std::string_view what, std::size_t from = 0);

// A required document field; attune::Error naming the task, document and field when the
// document lacks it.
const std::string& required_field(const Document& doc, const std::string& name,
                                  std::string_view task);

// `{joined}. {input}` — the final prompt of most tasks.
std::string joined_then_input(std::string_view input, std::string_view joined);

}  // namespace attune::tasks::detail
