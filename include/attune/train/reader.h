#pragma once
// Reader fine-tuning data (issue 15, stage 2): retrieval-augmented examples whose prompt is
// a task's own phi_p(x, docs) (the prompt `attune eval` builds) and whose target is y.
// Torch-free.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "attune/core/types.h"
#include "attune/tasks/commits.h"
#include "attune/tasks/task.h"
#include "attune/text/tokenizer.h"

namespace attune::train {

struct ReaderExample {
  std::string id;
  std::string task;    // the task whose prompt this is (commit_subject, commit_area, qa)
  std::string prompt;  // phi_p(x, docs)
  std::string target;  // what the reader should answer: the answer prefix ("\n" by default) + y
  // Which documents the prompt holds: none, or bm25, bm25-shuffled (BM25's top k in a random
  // order), random, recency (commits) or bm25+gold (qa: BM25's top k with the claim's own
  // passage put in at a random place), with "@k".
  std::string mode;
  // The target's head: its first head_chars characters, which LmOptions::head_weight weighs in
  // the loss (commit_subject: the prefix through the area's ':', "\nrefs:"; 0 = none, as for
  // answers without an area and the other tasks).
  std::size_t head_chars = 0;
};

using tasks::Commit;  // one commit of a history file (tasks/commits.h)

struct ReaderDataOptions {
  std::size_t min_history = 1;           // earlier commits of the author (same repository) a query needs
  std::size_t max_history = 64;          // the profile: at most this many of the latest earlier commits
  std::size_t profile_words = 30;        // profile texts cut to their first words, as in ../shared/data/git (0 = whole)
  std::size_t pick_words = 40;           // commit_pick: the quoted description cut to its first words, as there
  std::vector<std::size_t> ks = {1, 2, 3, 4, 5};
  // The document modes to draw from, each equally likely (empty = the task's defaults: all
  // six for the commit tasks, bm25 and bm25+gold for qa): none, bm25, bm25-shuffled, random,
  // and recency and bm25+best (commits: BM25's top k with the earlier commit whose answer is
  // closest to this one's put in) or bm25+gold (qa). A task keeps the modes it has; one left
  // with none of them is a UsageError.
  std::vector<std::string> modes;
  std::size_t prompt_max_length = 256;   // the prompt budget, in the reader's tokenizer (eval's default)
  // What each target starts with before the answer (models::kReaderAnswerPrefix, a newline, by
  // default); LmOptions::answer_prefix records it in the reader's folder.
  std::string answer_prefix = "\n";
  std::uint64_t seed = 0;
  // At most this many examples (0 = all): a seeded sample, kept in file order.
  std::size_t limit = 0;
};

using tasks::commit_subject_area;  // "<area>: ..." -> area (tasks/commits.h)

// The document modes `task` (commit_subject, commit_area, commit_pick or qa) draws its examples from, in
// the task's order: those of `wanted` it has (all of a commit task's, bm25 and bm25+gold of
// qa's, when `wanted` is empty). UsageError naming reader_modes when it has none of them,
// and for another task.
std::vector<std::string> reader_modes(std::string_view task, const std::vector<std::string>& wanted);
// Every document mode of any reader task (the commit tasks' six, then qa's bm25+gold): what --reader-modes accepts.
std::vector<std::string> reader_mode_names();

// Examples from per-author histories, exactly the layout of ../shared/data/git: a commit
// with an older commit by its author in its repository is a query whose profile is those
// earlier commits (the latest max_history, texts cut to profile_words).
//  - commit_subject: input "Generate a subject line for the following commit description: "
//    + text, output = subject, profile items {title: subject, text, date}.
//  - commit_area: each repository's labels are the 15 most frequent subject areas
//    (commit_subject_area; ties by name) in a seeded order; queries are the commits with
//    one of them, input "Which area does this commit belong to among the following areas?
//    Just answer with the area name without further explanation. areas: [a, b, ...]
//    description: " + text, output = the area, profile items {description: text, tag: area
//    or "other", date}.
//  - commit_pick: queries are the commits with a contrast (the commit of another author of the
//    same repository nearest in date, with another subject, as ../shared/data/git draws it),
//    input 'For an author who wrote the commit described as "<text, first pick_words words>",
//    which subject did they write? ... [1]: "..." [2]: "..."' with the two subjects in a
//    seeded order, output "[1]" or "[2]", profile items as commit_subject's.
// Each example's documents come from a mixture drawn from (seed, task, commit id): none,
// BM25's top k (as ranked or shuffled), k random profile documents or the k most recent, k
// from `ks`, so the reader learns to use a document when it helps and to do without.
// UsageError for another task.
std::vector<ReaderExample> commit_reader_examples(const std::vector<Commit>& commits, const tasks::Task& task,
                                                  const text::Tokenizer& tok, const ReaderDataOptions& o);

// Debian qa examples that are not qa queries: every SUPPORTS claim "Claim: The Debian
// package <name> is <synopsis>." of `claims` (factcheck lines) becomes "Which Debian package
// is described as: <synopsis>?" -> <name>, its documents from `corpus` drawn from the modes
// none, BM25's top k over the corpus as ranked or shuffled, BM25's top k with the claim's own
// passage put in at a random place (bm25+gold), k random passages; by default (no
// `o.modes`) only bm25 and bm25+gold, the modes whose prompts can hold the answer.
// `task` must be qa (UsageError otherwise); claims of another form are skipped.
std::vector<ReaderExample> claim_qa_reader_examples(const std::vector<Example>& claims, const std::vector<Document>& corpus,
                                                    const tasks::Task& task, const text::Tokenizer& tok,
                                                    const ReaderDataOptions& o);

}  // namespace attune::train
