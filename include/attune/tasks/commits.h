#pragma once
// The commit tasks' shared pieces (docs/tasks.md): one commit of a history, a subject's
// area, and the inputs of commit_subject, commit_area and commit_pick exactly as
// ../shared/data/git writes them. Used by `attune import-git` (git/import.h) and by the
// reader's fine-tuning examples (train/reader.h).
#include <cstddef>
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

}  // namespace attune::tasks
