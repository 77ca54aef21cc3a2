#pragma once
// The commit tasks' shared pieces (docs/tasks.md): one commit of a history, a subject's
// area, and the inputs of commit_subject, commit_area and commit_pick exactly as
// ../shared/data/git writes them. Used by `attune import-git` (git/import.h) and by the
// reader's fine-tuning examples (train/reader.h).
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace attune::tasks {

// One commit of a history file (../shared/data/text/commits.jsonl).
struct Commit {
  std::string id, repo, author, date, subject, text;
};

// The area of a commit subject, "<area>: ...": the text before the first ':' when it is 1
// to 40 characters without spaces; "" otherwise.
std::string commit_subject_area(std::string_view subject);

// The first n words of s joined by single spaces (profile texts and commit_pick's quoted
// description are cut so, as in ../shared/data/git); s itself when n is 0.
std::string first_words(std::string_view s, std::size_t n);

// "Generate a subject line for the following commit description: " + description.
std::string commit_subject_input(std::string_view description);
// "Which area does this commit belong to among the following areas? ... areas: [a, b]
// description: " + description.
std::string commit_area_input(const std::vector<std::string>& labels, std::string_view description);
// 'For an author who wrote the commit described as "<description>", which subject did they
// write? Just answer with [1] or [2] without explanation. [1]: "<first>" [2]: "<second>"'.
std::string commit_pick_input(std::string_view description, std::string_view first, std::string_view second);

// A commit_pick question: its input (the gold subject as [1] when gold_first, else as [2])
// and its answer, "[1]" or "[2]".
struct PickQuestion {
  std::string input, output;
};
PickQuestion commit_pick_question(std::string_view description, std::string_view gold, std::string_view other,
                                  bool gold_first);

// commit_pick's contrast search: `order` holds commits sorted by time, `at` is the query's
// position in it, time(i) a commit's time (any unit that subtracts) and ok(i) whether i may
// be the contrast. The ok commit nearest in time, searching outwards from `at` (ties: the
// older one); none when no commit is ok. ../shared/data/git, `attune import-git` and the
// reader's commit_pick examples all draw their contrast so.
template <class Time, class Ok>
std::optional<std::size_t> nearest_in_time(const std::vector<std::size_t>& order, std::size_t at, Time time, Ok ok) {
  constexpr auto kFar = std::numeric_limits<std::int64_t>::max();
  const auto t = static_cast<std::int64_t>(time(order[at]));
  std::ptrdiff_t lo = static_cast<std::ptrdiff_t>(at) - 1, hi = static_cast<std::ptrdiff_t>(at) + 1;
  const auto n = static_cast<std::ptrdiff_t>(order.size());
  while (lo >= 0 || hi < n) {
    const std::int64_t dl = lo >= 0 ? t - static_cast<std::int64_t>(time(order[lo])) : kFar;
    const std::int64_t dh = hi < n ? static_cast<std::int64_t>(time(order[hi])) - t : kFar;
    if (dl <= dh) {
      if (ok(order[lo])) return order[lo];
      --lo;
    } else {
      if (ok(order[hi])) return order[hi];
      ++hi;
    }
  }
  return std::nullopt;
}

}  // namespace attune::tasks
