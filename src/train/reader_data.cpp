// Reader fine-tuning examples from commit histories (train/reader.h). Torch-free.
#include <algorithm>
#include <map>

#include "attune/core/error.h"
#include "attune/core/parallel.h"
#include "attune/core/rng.h"
#include "attune/retrieval/retriever.h"
#include "attune/train/reader.h"

namespace attune::train {

std::vector<ReaderExample> commit_reader_examples(const std::vector<Commit>& commits, const tasks::Task& task,
                                                  const text::Tokenizer& tok, const CommitReaderOptions& o) {
  if (task.name() != "commit_subject")
    throw UsageError("reader examples from commit histories are built for commit_subject, not " + task.name());
  if (o.ks.empty() || std::find(o.ks.begin(), o.ks.end(), std::size_t{0}) != o.ks.end())
    throw FieldError<UsageError>("ks", "the documents per prompt must be positive numbers");
  // Each (repository, author)'s commits in date order (then id, for equal dates).
  std::map<std::pair<std::string, std::string>, std::vector<std::size_t>> by_author;
  for (std::size_t i = 0; i < commits.size(); ++i) by_author[{commits[i].repo, commits[i].author}].push_back(i);
  struct Query {
    std::size_t commit;
    std::vector<std::size_t> history;  // earlier commits, oldest first
  };
  std::vector<Query> queries;
  for (auto& [who, idx] : by_author) {
    std::stable_sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) {
      return commits[a].date != commits[b].date ? commits[a].date < commits[b].date : commits[a].id < commits[b].id;
    });
    for (std::size_t j = o.min_history; j < idx.size(); ++j) {
      Query q{idx[j], {}};
      // Strictly earlier dates only: a same-day commit may come after it.
      for (std::size_t h = 0; h < j; ++h)
        if (commits[idx[h]].date < commits[idx[j]].date) q.history.push_back(idx[h]);
      if (q.history.size() < o.min_history) continue;
      if (q.history.size() > o.max_history) q.history.erase(q.history.begin(), q.history.end() - static_cast<std::ptrdiff_t>(o.max_history));
      queries.push_back(std::move(q));
    }
  }
  // File order of the query commits, so --limit takes the same examples every time.
  std::sort(queries.begin(), queries.end(), [](const Query& a, const Query& b) { return a.commit < b.commit; });
  if (o.limit && queries.size() > o.limit) queries.resize(o.limit);

  static const char* kModes[] = {"none", "bm25", "random", "recency"};
  std::vector<ReaderExample> out(queries.size());
  tasks::PromptOptions popts;
  popts.max_length = o.prompt_max_length;
  parallel_for(queries.size(), 0, [&](std::size_t qi) {
    const auto& q = queries[qi];
    const Commit& c = commits[q.commit];
    Example ex;
    ex.id = c.id;
    ex.user = c.repo + "/" + c.author;
    ex.input = "Generate a subject line for the following commit description: " + c.text;
    ex.output = c.subject;
    for (auto h : q.history) {
      Document d;
      d.id = commits[h].id;
      d.owner = ex.user;
      d.fields["title"] = commits[h].subject;
      d.fields["text"] = commits[h].text;
      d.date = commits[h].date;
      d.text = task.document_text(d);
      ex.profile.push_back(std::move(d));
    }
    Rng rng(derive_seed(o.seed, "reader-mix-" + c.id));
    const auto mode = kModes[rng.below(4)];
    const std::size_t k = o.ks[rng.below(o.ks.size())];
    std::vector<const Document*> docs;
    if (std::string(mode) != "none") {
      const auto r = retrieval::make_retriever(mode, derive_seed(o.seed, "reader-retriever"));
      const auto ranking = r->rank(retrieval::Query{ex.id, ex.user, task.query(ex)}, ex.profile, k);
      for (auto i : ranking.indices) docs.push_back(&ex.profile[i]);
    }
    out[qi] = {c.id, task.prompt(ex, docs, tok, popts), "\n" + c.subject,
               std::string(mode) + (std::string(mode) == "none" ? "" : "@" + std::to_string(k))};
  });
  return out;
}

}  // namespace attune::train
