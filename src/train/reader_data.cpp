// Reader fine-tuning examples from commit histories and Debian claims (train/reader.h).
// Torch-free.
#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>

#include "attune/models/local_lm.h"
#include "attune/core/error.h"
#include "attune/core/parallel.h"
#include "attune/core/rng.h"
#include "attune/core/strings.h"
#include "attune/index/corpus_index.h"
#include "attune/metrics/metrics.h"
#include "attune/retrieval/retriever.h"
#include "attune/train/reader.h"

namespace attune::train {
namespace {

void check_ks(const ReaderDataOptions& o) {
  if (o.ks.empty() || std::find(o.ks.begin(), o.ks.end(), std::size_t{0}) != o.ks.end())
    throw FieldError<UsageError>("ks", "the documents per prompt must be positive numbers");
}

// Keeps a seeded sample of `limit` items (all when limit is 0 or >= the size), in their order.
template <class T>
void keep_sample(std::vector<T>& items, std::size_t limit, std::uint64_t seed, std::string_view what) {
  Rng rng(derive_seed(seed, "reader-sample-" + std::string(what)));
  attune::keep_sample(items, limit, rng);
}

struct Mix {
  std::string mode;  // none, bm25, bm25-shuffled, bm25+gold, bm25+best, random, recency
  std::size_t k = 0;
  std::string label() const { return mode == "none" ? mode : mode + "@" + std::to_string(k); }
};

Mix draw_mix(Rng& rng, const std::vector<std::string>& modes, const std::vector<std::size_t>& ks) {
  Mix m;
  m.mode = modes[rng.below(modes.size())];
  m.k = m.mode == "none" ? 0 : ks[rng.below(ks.size())];
  return m;
}

constexpr std::size_t kAreaLabels = 15;  // as ../shared/data/git/commit_area

// A "YYYY-MM-DD" date as days since 1970-01-01 (the proleptic Gregorian calendar), so that two
// dates subtract to the days between them; none for a date of another form.
std::optional<std::int64_t> day_number(const std::string& d) {
  const auto digits = [&](std::size_t at, std::size_t n, std::int64_t& v) {
    v = 0;
    for (std::size_t i = at; i < at + n; ++i) {
      if (i >= d.size() || d[i] < '0' || d[i] > '9') return false;
      v = v * 10 + (d[i] - '0');
    }
    return true;
  };
  std::int64_t y = 0, m = 0, dd = 0;
  if (d.size() != 10 || d[4] != '-' || d[7] != '-' || !digits(0, 4, y) || !digits(5, 2, m) || !digits(8, 2, dd) || m < 1 ||
      m > 12 || dd < 1 || dd > 31)
    return std::nullopt;
  y -= m <= 2;  // days from civil: the year starts in March
  const std::int64_t era = y / 400, yoe = y - era * 400;
  const std::int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + dd - 1;
  return era * 146097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719468;
}

}  // namespace

namespace {
// The commit tasks' modes, all six by default (bm25+best since 2026-12-02: docs/RESULTS.md); bm25+best last, so that
// --reader-modes none,bm25,bm25-shuffled,random,recency draws as the default did before it.
const std::vector<std::string> kCommit = {"none", "bm25", "bm25-shuffled", "random", "recency", "bm25+best"};
const std::vector<std::string> kQa = {"none", "bm25", "bm25-shuffled", "bm25+gold", "random"};
}  // namespace

std::vector<std::string> reader_mode_names() {
  std::vector<std::string> all = kCommit;
  for (const auto& m : kQa)
    if (std::find(all.begin(), all.end(), m) == all.end()) all.push_back(m);
  return all;
}

std::vector<std::string> reader_modes(std::string_view task, const std::vector<std::string>& wanted) {
  const auto& kCommitDefault = kCommit;
  static const std::vector<std::string> kQaDefault = {"bm25", "bm25+gold"};
  const bool qa = task == "qa";
  if (!qa && task != "commit_subject" && task != "commit_area" && task != "commit_pick")
    throw UsageError("reader examples: \"" + std::string(task) +
                     "\" is not a reader task (commit_subject, commit_area, commit_pick, qa)");
  const auto& all = qa ? kQa : kCommit;
  if (wanted.empty()) return qa ? kQaDefault : kCommitDefault;
  std::vector<std::string> kept;
  for (const auto& m : all)
    if (std::find(wanted.begin(), wanted.end(), m) != wanted.end()) kept.push_back(m);
  if (kept.empty())
    throw FieldError<UsageError>("reader_modes", "none of " + join(wanted, ",") + " is a document mode of " + std::string(task) +
                                              " (it has " + join(all, ",") + ")");
  return kept;
}

std::vector<ReaderExample> commit_reader_examples(const std::vector<Commit>& commits, const tasks::Task& task,
                                                  const text::Tokenizer& tok, const ReaderDataOptions& o) {
  const bool area_task = task.name() == "commit_area", pick_task = task.name() == "commit_pick";
  if (task.name() != "commit_subject" && !area_task && !pick_task)
    throw UsageError("reader examples from commit histories are built for commit_subject, commit_area and commit_pick, not " +
                     task.name());
  check_ks(o);
  // commit_pick: each repository's commits in (date, id) order, for the contrast subject.
  std::map<std::string, std::vector<std::size_t>> by_repo;
  const auto before = [&](std::size_t a, std::size_t b) {
    return commits[a].date != commits[b].date ? commits[a].date < commits[b].date : commits[a].id < commits[b].id;
  };
  std::vector<std::int64_t> day(pick_task ? commits.size() : 0);
  if (pick_task) {
    // The contrast is the nearest in date: a date that is not a day would place it anywhere.
    for (std::size_t i = 0; i < commits.size(); ++i) {
      const auto n = day_number(commits[i].date);
      if (!n)
        throw UsageError("commit " + commits[i].id + ": date \"" + commits[i].date +
                         "\" is not YYYY-MM-DD (commit_pick's contrast is the other author's commit nearest in date)");
      day[i] = *n;
    }
    for (std::size_t i = 0; i < commits.size(); ++i) by_repo[commits[i].repo].push_back(i);
    for (auto& [repo, v] : by_repo) std::stable_sort(v.begin(), v.end(), before);
  }
  // The contrast of commit q, as ../shared/data/git (and `attune import-git`) draw it: the
  // commit of another author of the same repository nearest in date (ties: the older one),
  // with another subject; none when there is no such commit.
  const auto contrast = [&](std::size_t q) -> const Commit* {
    const auto& v = by_repo.at(commits[q].repo);
    const auto at = static_cast<std::size_t>(std::lower_bound(v.begin(), v.end(), q, before) - v.begin());
    const auto found = tasks::nearest_in_time(
        v, at, [&](std::size_t j) { return day[j]; },
        [&](std::size_t j) { return commits[j].author != commits[q].author && commits[j].subject != commits[q].subject; });
    return found ? &commits[*found] : nullptr;
  };
  // commit_area: each repository's 15 most frequent areas, in a seeded order.
  std::map<std::string, std::vector<std::string>> repo_labels;
  std::map<std::string, std::set<std::string>> repo_label_set;
  if (area_task) {
    std::map<std::string, std::map<std::string, std::size_t>> counts;
    for (const auto& c : commits)
      if (auto a = commit_subject_area(c.subject); !a.empty()) ++counts[c.repo][a];
    for (auto& [repo, m] : counts) {
      std::vector<std::pair<std::size_t, std::string>> v;
      for (auto& [a, n] : m) v.push_back({n, a});
      std::stable_sort(v.begin(), v.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
      if (v.size() > kAreaLabels) v.resize(kAreaLabels);
      if (v.size() < 2) continue;  // no choice to make
      auto& labels = repo_labels[repo];
      for (auto& [n, a] : v) labels.push_back(a);
      Rng rng(derive_seed(o.seed, "reader-area-labels-" + repo));
      seeded_shuffle(labels, rng);
      repo_label_set[repo] = {labels.begin(), labels.end()};
    }
  }
  const auto area_of = [&](const Commit& c) -> std::string {
    auto a = commit_subject_area(c.subject);
    const auto it = repo_label_set.find(c.repo);
    return it != repo_label_set.end() && it->second.count(a) ? a : "";
  };
  // Each (repository, author)'s commits in date order (then id, for equal dates).
  std::map<std::pair<std::string, std::string>, std::vector<std::size_t>> by_author;
  for (std::size_t i = 0; i < commits.size(); ++i) by_author[{commits[i].repo, commits[i].author}].push_back(i);
  struct Query {
    std::size_t commit;
    std::vector<std::size_t> history;  // earlier commits, oldest first
    const Commit* contrast = nullptr;  // commit_pick: the other author's commit
  };
  std::vector<Query> queries;
  for (auto& [who, idx] : by_author) {
    std::stable_sort(idx.begin(), idx.end(), before);
    for (std::size_t j = o.min_history; j < idx.size(); ++j) {
      if (area_task && area_of(commits[idx[j]]).empty()) continue;
      Query q{idx[j], {}, pick_task ? contrast(idx[j]) : nullptr};
      if (pick_task && !q.contrast) continue;
      // Strictly earlier dates only: a same-day commit may come after it.
      for (std::size_t h = 0; h < j; ++h)
        if (commits[idx[h]].date < commits[idx[j]].date) q.history.push_back(idx[h]);
      if (q.history.size() < o.min_history) continue;
      if (q.history.size() > o.max_history) q.history.erase(q.history.begin(), q.history.end() - static_cast<std::ptrdiff_t>(o.max_history));
      queries.push_back(std::move(q));
    }
  }
  // File order of the query commits; a seeded sample when limited.
  std::sort(queries.begin(), queries.end(), [](const Query& a, const Query& b) { return a.commit < b.commit; });
  keep_sample(queries, o.limit, o.seed, task.name());

  const auto modes = reader_modes(task.name(), o.modes);
  std::vector<ReaderExample> out(queries.size());
  tasks::PromptOptions popts;
  popts.max_length = o.prompt_max_length;
  parallel_for(queries.size(), 0, [&](std::size_t qi) {
    const auto& q = queries[qi];
    const Commit& c = commits[q.commit];
    Example ex;
    ex.id = (area_task ? "area-" : pick_task ? "pick-" : "") + c.id;
    ex.user = c.repo + "/" + c.author;
    if (area_task) {
      ex.input = tasks::commit_area_input(repo_labels.at(c.repo), c.text);
      ex.output = area_of(c);
    } else if (pick_task) {
      Rng side(derive_seed(o.seed, "reader-pick-" + c.id));
      auto pq = tasks::commit_pick_question(tasks::first_words(c.text, o.pick_words), c.subject, q.contrast->subject,
                                            side.below(2) == 0);
      ex.input = std::move(pq.input);
      ex.output = std::move(pq.output);
    } else {
      ex.input = tasks::commit_subject_input(c.text);
      ex.output = c.subject;
    }
    for (auto h : q.history) {
      Document d;
      d.id = commits[h].id;
      d.owner = ex.user;
      if (area_task) {
        d.fields["description"] = tasks::first_words(commits[h].text, o.profile_words);
        const auto a = area_of(commits[h]);
        d.fields["tag"] = a.empty() ? "other" : a;
      } else {
        d.fields["title"] = commits[h].subject;
        d.fields["text"] = tasks::first_words(commits[h].text, o.profile_words);
      }
      d.date = commits[h].date;
      d.text = task.document_text(d);
      ex.profile.push_back(std::move(d));
    }
    Rng rng(derive_seed(o.seed, "reader-mix-" + ex.id));
    const auto mix = draw_mix(rng, modes, o.ks);
    std::vector<const Document*> docs;
    if (mix.mode != "none") {
      const bool best = mix.mode == "bm25+best";
      const std::string kind = mix.mode == "bm25-shuffled" || best ? "bm25" : mix.mode;
      const auto r = retrieval::make_retriever(kind, derive_seed(o.seed, "reader-retriever"));
      // bm25+best ranks the whole profile to find its most useful document.
      const auto ranking = r->rank(retrieval::Query{ex.id, ex.user, task.query(ex)}, ex.profile, best ? ex.profile.size() : mix.k);
      for (auto i : ranking.indices) {
        if (docs.size() == mix.k) break;
        docs.push_back(&ex.profile[i]);
      }
      if (mix.mode == "bm25-shuffled") seeded_shuffle(docs, rng);
      if (best) {
        // BM25's top k with the profile's most useful document for this answer put in at a
        // random place when BM25 missed it (replacing its k-th), as qa's bm25+gold. The most
        // useful: for commit_area an earlier commit of the same area; otherwise the one whose
        // subject has the highest ROUGE-1 F with this commit's subject (commit_pick: with its
        // gold subject). The higher BM25 rank wins a tie; none when none scores above 0. So a
        // share of the examples shows a document worth copying from, and the reader learns to
        // use one when it helps.
        double top = 0;
        const Document* pick = nullptr;
        const auto want_area = area_task ? area_of(c) : std::string();
        for (auto i : ranking.indices) {
          const Commit& h = commits[q.history[i]];
          const double v = area_task ? (area_of(h) == want_area ? 1.0 : 0.0) : metrics::rouge1(h.subject, c.subject).fmeasure;
          if (v > top) top = v, pick = &ex.profile[i];
        }
        if (pick && std::find(docs.begin(), docs.end(), pick) == docs.end()) {
          if (docs.size() == mix.k && !docs.empty()) docs.pop_back();
          docs.insert(docs.begin() + static_cast<std::ptrdiff_t>(rng.below(docs.size() + 1)), pick);
        }
      }
    }
    out[qi] = {ex.id, task.name(), task.prompt(ex, docs, tok, popts), o.answer_prefix + ex.output, mix.label()};
    // commit_subject's head: the prefix through its area's ':' (none without an area).
    if (!area_task && !pick_task)
      if (const auto a = commit_subject_area(ex.output); !a.empty())
        out[qi].head_chars = o.answer_prefix.size() + a.size() + 1;
  });
  return out;
}

std::vector<ReaderExample> claim_qa_reader_examples(const std::vector<Example>& claims, const std::vector<Document>& corpus,
                                                    const tasks::Task& task, const text::Tokenizer& tok,
                                                    const ReaderDataOptions& o) {
  if (task.name() != "qa") throw UsageError("reader examples from claims are built for qa, not " + task.name());
  check_ks(o);
  if (corpus.empty()) throw FieldError<UsageError>("corpus", "qa reader examples need the passages to retrieve from");
  // "Claim: The Debian package <name> is <synopsis>." with output SUPPORTS.
  struct Qa {
    std::string id, name, synopsis;
  };
  std::vector<Qa> qas;
  for (const auto& c : claims) {
    if (strip(c.output) != "SUPPORTS") continue;
    static constexpr std::string_view kHead = "Claim: The Debian package ";
    const std::string_view in = c.input;
    if (in.substr(0, kHead.size()) != kHead) continue;
    const auto rest = in.substr(kHead.size());
    const auto is = rest.find(" is ");
    if (is == std::string_view::npos || is == 0) continue;
    std::string name(rest.substr(0, is));
    std::string syn = strip(rest.substr(is + 4));
    if (!syn.empty() && syn.back() == '.') syn.pop_back();
    syn = strip(syn);
    if (syn.empty()) continue;
    qas.push_back({"qa-from-" + c.id, std::move(name), std::move(syn)});
  }
  keep_sample(qas, o.limit, o.seed, task.name());
  std::vector<std::string> texts(corpus.size());
  for (std::size_t i = 0; i < corpus.size(); ++i) texts[i] = task.document_text(corpus[i]);
  const auto index = index::CorpusIndex::build(texts);
  // bm25+gold: BM25's top k with the claim's own passage put in at a random place when BM25
  // missed it (replacing its k-th), so that a share of the examples can only be answered by
  // reading a passage (the others: none, BM25's top k as ranked or shuffled, k random).
  // By default only modes that can hold the answer: a package name cannot be answered
  // without its passage, so none and random would only teach guessing names, and copying a
  // name out of the prompt is what the reader must learn (docs/RESULTS.md: 5,000 examples
  // of bm25 and bm25+gold after the mixed stage took dev exact match from 0.004 to 0.125).
  const auto modes = reader_modes(task.name(), o.modes);
  std::unordered_map<std::string, std::size_t> by_title;
  for (std::size_t i = 0; i < corpus.size(); ++i) {
    const auto t = corpus[i].fields.find("title");
    if (t != corpus[i].fields.end()) by_title.emplace(t->second, i);
  }
  std::vector<ReaderExample> out(qas.size());
  tasks::PromptOptions popts;
  popts.max_length = o.prompt_max_length;
  parallel_for(qas.size(), 0, [&](std::size_t qi) {
    const auto& q = qas[qi];
    Example ex;
    ex.id = q.id;
    ex.user = q.id;
    ex.input = "Which Debian package is described as: " + q.synopsis + "?";
    ex.output = q.name;
    Rng rng(derive_seed(o.seed, "reader-mix-" + ex.id));
    const auto mix = draw_mix(rng, modes, o.ks);
    std::vector<const Document*> docs;
    if (mix.mode == "random") {
      std::set<std::size_t> seen;
      while (docs.size() < std::min(mix.k, corpus.size())) {
        const auto i = rng.below(corpus.size());
        if (seen.insert(i).second) docs.push_back(&corpus[i]);
      }
    } else if (mix.mode != "none") {
      for (const auto& h : index.search(task.query(ex), mix.k)) docs.push_back(&corpus[h.doc]);
      if (mix.mode == "bm25+gold") {
        const auto g = by_title.find(q.name);
        if (g != by_title.end() && std::find(docs.begin(), docs.end(), &corpus[g->second]) == docs.end()) {
          if (docs.size() == mix.k && !docs.empty()) docs.pop_back();
          docs.insert(docs.begin() + static_cast<std::ptrdiff_t>(rng.below(docs.size() + 1)), &corpus[g->second]);
        }
      }
      if (mix.mode == "bm25-shuffled") seeded_shuffle(docs, rng);
    }
    out[qi] = {ex.id, task.name(), task.prompt(ex, docs, tok, popts), o.answer_prefix + ex.output, mix.label()};
  });
  return out;
}

}  // namespace attune::train
