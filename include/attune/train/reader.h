#pragma once
// Reader fine-tuning data (issue 15, stage 2): retrieval-augmented examples whose prompt is
// a task's own phi_p(x, docs) (the prompt `attune eval` builds) and whose target is y.
// Torch-free.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "attune/tasks/task.h"
#include "attune/text/tokenizer.h"

namespace attune::train {

struct ReaderExample {
  std::string id;
  std::string prompt;  // phi_p(x, docs)
  std::string target;  // what the reader should answer: "\n" + y (outputs are stripped when scored)
  std::string mode;    // which documents the prompt holds: none, bm25, random or recency, with k
};

// One commit of a history file (../shared/data/text/commits.jsonl).
struct Commit {
  std::string id, repo, author, date, subject, text;
};

struct CommitReaderOptions {
  std::size_t min_history = 1;           // earlier commits of the author (same repository) a query needs
  std::size_t max_history = 64;          // the profile: at most this many of the latest earlier commits
  std::vector<std::size_t> ks = {1, 2, 4};
  std::size_t prompt_max_length = 384;   // the prompt budget, in the reader's tokenizer
  std::uint64_t seed = 0;
  std::size_t limit = 0;                 // at most this many examples (0 = all), in file order
};

// commit_subject examples from per-author histories, exactly the layout of ../shared/data/git:
// input "Generate a subject line for the following commit description: " + text, output =
// subject, profile = the author's earlier commits in the same repository ({title: subject,
// text, date}). Each example's documents come from a mixture drawn from (seed, commit id):
// none, BM25's top k, k random profile documents or the k most recent, k from `ks`, so
// the reader learns to use a document when it helps and to do without. `task` must be
// commit_subject (UsageError otherwise).
std::vector<ReaderExample> commit_reader_examples(const std::vector<Commit>& commits, const tasks::Task& task,
                                                  const text::Tokenizer& tok, const CommitReaderOptions& o);

}  // namespace attune::train
