#pragma once
// `attune import-git`: the three commit tasks (commit_subject, commit_area, commit_pick;
// docs/tasks.md) from any local git repository, in the layout of ../shared/data/git.
//
// Two steps, so that the second is testable without a repository:
//   1. read_git_history(): every commit reachable from a revision, read with libgit2
//      (never by parsing `git log` text), merges marked, the mailmap applied, the message
//      split into subject and description with trailers removed;
//   2. build_commit_tasks(): per-author time splits, profiles and the three tasks.
// Deterministic: the same history and options give byte-identical files.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "attune/data/dataset.h"

namespace attune::git {

// One commit as read from the repository.
struct HistoryCommit {
  std::string sha;           // 40 hex digits
  std::string author_name;   // after the mailmap
  std::string author_email;  // after the mailmap
  std::int64_t time = 0;     // author time, seconds since the epoch (UTC)
  std::string subject;       // git's summary: the first paragraph, lines joined by spaces
  std::string description;   // the rest of the message, trailers removed, whitespace collapsed
  std::size_t parents = 0;   // > 1: a merge
};

struct ReadOptions {
  std::string revision = "HEAD";  // where the walk starts (any revspec git accepts)
  // Called every `progress_every` commits read, and once at the end, with the count.
  std::function<void(std::size_t)> progress;
  std::size_t progress_every = 10000;
};

struct History {
  std::string repository;  // the work tree's (or .git's) absolute path
  std::string head;        // the revision's commit sha
  std::vector<HistoryCommit> commits;  // oldest first: (time, sha)
  std::size_t reencoded = 0;  // messages that were not UTF-8 and were converted
};

// Reads the history reachable from options.revision. InputError, naming the path, for a
// path that is not a git repository, a bare repository, a shallow clone (its history is
// cut short, and profiles would be too), a repository without commits, or an unknown
// revision.
History read_git_history(const std::filesystem::path& repo, const ReadOptions& options = {});

// The files a commit changed against its first parent (every file for a root commit), at
// most `limit`, sorted. InputError for an unknown sha.
std::vector<std::vector<std::string>> changed_files(const std::filesystem::path& repo,
                                                    const std::vector<std::string>& shas, std::size_t limit);

// The description of a message body: trailer paragraphs at its end (every line "Key: value"
// or "(cherry picked from commit ...)"), and lines with a well-known trailer key anywhere
// (Signed-off-by, Reviewed-by, Acked-by, Change-Id, ...), removed; whitespace collapsed.
std::string strip_trailers(std::string_view body);

struct TaskOptions {
  std::size_t min_commits = 40;      // eligible commits an author needs to be kept
  std::size_t min_words = 20;        // description words a commit needs to be eligible
  double test_fraction = 0.1;        // an author's newest share of eligible commits: test
  double dev_fraction = 0.1;         // the share before those: dev
  std::size_t max_train = 20;        // train queries per author (a seeded sample; 0 = all)
  std::size_t max_dev = 0;           // dev queries per author (the newest; 0 = all)
  std::size_t max_test = 0;          // test queries per author (the newest; 0 = all)
  std::size_t profile_size = 64;     // a query's profile: the author's newest strictly older commits
  std::size_t profile_words = 30;    // profile descriptions cut to their first words
  std::size_t pick_words = 40;       // commit_pick's quoted description cut to its first words
  std::size_t area_labels = 15;      // commit_area's labels: the repository's most frequent areas
  bool anonymize = true;             // authors as stable pseudonyms, not names
  std::string id_prefix = "git";     // query ids: PREFIX-cs-SHA12, PREFIX-ca-..., PREFIX-cp-...
  std::uint64_t seed = 0;
};

struct QueryMeta {
  std::string id, task, split, sha, author, date;
  std::int64_t time = 0;
  std::size_t profile_size = 0;
};

struct CommitTasks {
  // task -> split -> dataset (golds included).
  std::map<std::string, std::map<std::string, data::Dataset>> tasks;
  std::vector<std::string> area_labels;  // empty: commit_area was not built (see notes)
  std::string notes;                     // which task was not built, and why
  std::vector<QueryMeta> meta;           // every query of every task
  std::size_t commits = 0, merges = 0, eligible = 0, authors = 0, kept_authors = 0;
};

// The three tasks from a history. InputError when no author has options.min_commits
// eligible commits (the message gives the best author's count), UsageError for options out
// of range.
CommitTasks build_commit_tasks(const History& history, const TaskOptions& options);

// An author's pseudonym: 11 hex digits of SHA-256 over their lower-cased email (the name
// when there is none). Stable across runs and repositories; it hides names from readers of
// the dataset, not from someone who holds the repository.
std::string author_pseudonym(const HistoryCommit& c);

// Writes DIR/<task>/{split}_questions.json and _outputs.json, DIR/commit_area/labels.json,
// DIR/query_meta.jsonl (with each query's changed files) and DIR/import.json (provenance:
// repository, revision, options, seed, counts). Refuses a DIR that already holds files.
void write_commit_tasks(const CommitTasks& tasks, const History& history, const TaskOptions& options,
                        const std::filesystem::path& dir, std::size_t max_files = 50);

}  // namespace attune::git
