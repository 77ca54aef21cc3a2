// The three commit tasks from a read history (git/import.h).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_map>

#include "attune/core/error.h"
#include "attune/core/file.h"
#include "attune/core/rng.h"
#include "attune/core/sha256.h"
#include "attune/core/strings.h"
#include "attune/git/import.h"
#include "attune/tasks/commits.h"

namespace attune::git {
namespace {

namespace fs = std::filesystem;

std::string utc_date(std::int64_t t) {
  std::time_t tt = static_cast<std::time_t>(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[40];  // room for any int, so the compiler sees no truncation
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02d", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday);
  return buf;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

void check(const TaskOptions& o) {
  const auto frac = [](double f, const char* name) {
    if (!(f >= 0.0 && f < 1.0)) throw FieldError<UsageError>(name, "must be in [0, 1)");
  };
  frac(o.test_fraction, "test_fraction");
  frac(o.dev_fraction, "dev_fraction");
  if (o.test_fraction + o.dev_fraction >= 1.0)
    throw FieldError<UsageError>("dev_fraction", "test and dev fractions together must leave commits for train");
  if (o.min_commits < 3) throw FieldError<UsageError>("min_commits", "must be at least 3 (train, dev and test each need one)");
  if (o.profile_size == 0) throw FieldError<UsageError>("profile_size", "must be positive");
  if (o.id_prefix.empty() || o.id_prefix.find_first_of(" \t\n\"") != std::string::npos)
    throw FieldError<UsageError>("id_prefix", "must be a non-empty word");
}

// A share of n, at least 1 when the share is positive.
std::size_t share(std::size_t n, double f) {
  if (f <= 0.0) return 0;
  return std::max<std::size_t>(1, static_cast<std::size_t>(std::floor(static_cast<double>(n) * f)));
}

}  // namespace

std::string author_pseudonym(const HistoryCommit& c) {
  const std::string key = c.author_email.empty() ? "name:" + c.author_name : lower(c.author_email);
  return sha256_hex("attune-author:" + key).substr(0, 11);
}

CommitTasks build_commit_tasks(const History& history, const TaskOptions& o) {
  check(o);
  CommitTasks out;
  out.commits = history.commits.size();
  const auto& C = history.commits;
  // Eligible commits (not merges, a subject, a description of min_words), oldest first.
  std::vector<std::size_t> eligible;
  std::vector<std::string> key(C.size());
  std::unordered_map<std::string, std::vector<std::size_t>> by_author;
  std::set<std::string> authors;
  for (std::size_t i = 0; i < C.size(); ++i) {
    if (C[i].parents > 1) {
      ++out.merges;
      continue;
    }
    key[i] = author_pseudonym(C[i]);
    authors.insert(key[i]);
    if (C[i].subject.empty() || split_whitespace_views(C[i].description).size() < o.min_words) continue;
    eligible.push_back(i);
    by_author[key[i]].push_back(i);
  }
  out.eligible = eligible.size();
  out.authors = authors.size();
  // Kept authors, in pseudonym order (deterministic, and independent of names).
  std::vector<std::string> kept;
  std::size_t best = 0;
  for (const auto& [a, idx] : by_author) {
    best = std::max(best, idx.size());
    if (idx.size() >= o.min_commits) kept.push_back(a);
  }
  std::sort(kept.begin(), kept.end());
  out.kept_authors = kept.size();
  if (kept.empty())
    throw InputError(history.repository, "", "", "no author has " + std::to_string(o.min_commits) + " eligible commits (non-merge, with at least " +
                     std::to_string(o.min_words) + " words of description); the most any author has is " +
                     std::to_string(best) + " (of " + std::to_string(C.size()) + " commits): lower --min-commits or --min-words");

  // commit_area's labels: the most frequent areas of the kept authors' eligible commits.
  std::map<std::string, std::size_t> area_count;
  for (const auto& a : kept)
    for (auto i : by_author[a])
      if (auto area = tasks::commit_subject_area(C[i].subject); !area.empty()) ++area_count[area];
  {
    std::vector<std::pair<std::size_t, std::string>> v;
    for (const auto& [a, n] : area_count) v.push_back({n, a});
    std::stable_sort(v.begin(), v.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
    if (v.size() > o.area_labels) v.resize(o.area_labels);
    if (v.size() >= 2)
      for (auto& [n, a] : v) out.area_labels.push_back(a);
    else
      out.notes = "commit_area was not built: the kept authors' subjects name " + std::to_string(v.size()) +
                      " area(s) (\"area: ...\"), and a label list needs at least 2";
  }
  const std::set<std::string> label_set(out.area_labels.begin(), out.area_labels.end());
  const auto area_of = [&](std::size_t i) {
    auto a = tasks::commit_subject_area(C[i].subject);
    return label_set.count(a) ? a : std::string();
  };

  // commit_pick's contrast: the eligible commit of another author nearest in time.
  const auto contrast = [&](std::size_t q) -> const HistoryCommit* {
    const auto pos = static_cast<std::size_t>(std::lower_bound(eligible.begin(), eligible.end(), q) - eligible.begin());
    const auto found = tasks::nearest_in_time(
        eligible, pos, [&](std::size_t j) { return C[j].time; },
        [&](std::size_t j) { return key[j] != key[q] && C[j].subject != C[q].subject; });
    return found ? &C[*found] : nullptr;
  };
  const bool pick = std::any_of(eligible.begin(), eligible.end(), [&](std::size_t i) { return key[i] != key[eligible[0]]; });

  const std::vector<std::string> splits = {"train", "dev", "test"};
  std::vector<std::string> names = {"commit_subject"};
  if (!out.area_labels.empty()) names.push_back("commit_area");
  if (pick) names.push_back("commit_pick");
  for (const auto& t : names)
    for (const auto& s : splits) {
      auto& ds = out.tasks[t][s];
      ds.task = t;
      ds.split = s;
      ds.has_outputs = true;
    }
  if (!pick) out.notes += std::string(out.notes.empty() ? "" : "; ") + "commit_pick was not built: every eligible commit has one author";

  const auto display = [&](std::size_t i) { return o.anonymize ? key[i] : C[i].author_name; };
  for (const auto& a : kept) {
    const auto& idx = by_author[a];
    const std::size_t n = idx.size();
    const std::size_t n_test = share(n, o.test_fraction), n_dev = share(n, o.dev_fraction);
    const std::size_t n_train = n - n_test - n_dev;
    // Positions in idx by split; dev and test capped to their newest, train to a seeded sample.
    std::map<std::string, std::vector<std::size_t>> pos;
    for (std::size_t j = 0; j < n; ++j) pos[j < n_train ? "train" : j < n_train + n_dev ? "dev" : "test"].push_back(j);
    // A query needs an older commit for its profile.
    for (auto& [s, v] : pos)
      v.erase(std::remove_if(v.begin(), v.end(), [&](std::size_t j) { return C[idx[0]].time >= C[idx[j]].time; }), v.end());
    const auto newest = [](std::vector<std::size_t>& v, std::size_t cap) {
      if (cap && v.size() > cap) v.erase(v.begin(), v.end() - static_cast<std::ptrdiff_t>(cap));
    };
    newest(pos["dev"], o.max_dev);
    newest(pos["test"], o.max_test);
    if (o.max_train && pos["train"].size() > o.max_train) {
      auto& v = pos["train"];
      Rng rng(derive_seed(o.seed, "import-git-train-" + a));
      for (std::size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[rng.below(i)]);
      v.resize(o.max_train);
      std::sort(v.begin(), v.end());
    }
    for (const auto& s : splits)
      for (auto j : pos[s]) {
        const std::size_t q = idx[j];
        const HistoryCommit& c = C[q];
        // The profile: the author's newest eligible commits strictly older than the query.
        std::vector<std::size_t> prof;
        for (std::size_t h = 0; h < j; ++h)
          if (C[idx[h]].time < c.time) prof.push_back(idx[h]);
        if (prof.size() > o.profile_size) prof.erase(prof.begin(), prof.end() - static_cast<std::ptrdiff_t>(o.profile_size));
        const std::string sha12 = c.sha.substr(0, 12);
        const auto add = [&](const std::string& task, Example ex) {
          ex.user = ex.id;
          for (auto h : prof) {
            Document d;
            d.id = C[h].sha.substr(0, 12);
            d.owner = ex.user;
            d.date = utc_date(C[h].time);
            if (task == "commit_area") {
              const auto ar = area_of(h);
              d.fields["description"] = tasks::first_words(C[h].description, o.profile_words);
              d.fields["tag"] = ar.empty() ? "other" : ar;
            } else {
              d.fields["title"] = C[h].subject;
              d.fields["text"] = tasks::first_words(C[h].description, o.profile_words);
            }
            ex.profile.push_back(std::move(d));
          }
          out.meta.push_back({ex.id, task, s, c.sha, display(q), utc_date(c.time), c.time, prof.size()});
          out.tasks[task][s].examples.push_back(std::move(ex));
        };
        Example cs;
        cs.id = o.id_prefix + "-cs-" + sha12;
        cs.input = tasks::commit_subject_input(c.description);
        cs.output = c.subject;
        add("commit_subject", std::move(cs));
        if (!out.area_labels.empty()) {
          if (auto ar = area_of(q); !ar.empty()) {
            Example ca;
            ca.id = o.id_prefix + "-ca-" + sha12;
            ca.input = tasks::commit_area_input(out.area_labels, c.description);
            ca.output = ar;
            add("commit_area", std::move(ca));
          }
        }
        if (pick) {
          if (const HistoryCommit* other = contrast(q)) {
            Example cp;
            cp.id = o.id_prefix + "-cp-" + sha12;
            Rng rng(derive_seed(o.seed, "import-git-pick-" + c.sha));
            auto pq = tasks::commit_pick_question(tasks::first_words(c.description, o.pick_words), c.subject,
                                                  other->subject, rng.below(2) == 0);
            cp.input = std::move(pq.input);
            cp.output = std::move(pq.output);
            add("commit_pick", std::move(cp));
          }
        }
      }
  }
  return out;
}

void write_commit_tasks(const CommitTasks& t, const History& history, const TaskOptions& o, const fs::path& dir,
                        std::size_t max_files) {
  std::error_code ec;
  if (fs::exists(dir, ec) && !(fs::is_directory(dir, ec) && fs::is_empty(dir, ec)))
    throw UsageError("import-git: " + dir.string() + " already exists and is not an empty folder; give a new --out");
  // Everything goes to a sibling folder first and is renamed into place at the end: a
  // killed import leaves no half-written dataset behind.
  const fs::path parent = fs::absolute(dir).lexically_normal().parent_path();
  fs::create_directories(parent);
  const fs::path tmp = parent / (dir.filename().string() + ".import-tmp");
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp);
  nlohmann::ordered_json counts = nlohmann::ordered_json::object();
  for (const auto& [task, splits] : t.tasks) {
    fs::create_directories(tmp / task);
    for (const auto& [split, ds] : splits) {
      data::write_lamp(ds, tmp / task / (split + "_questions.json"), tmp / task / (split + "_outputs.json"));
      counts[task][split] = ds.examples.size();
    }
  }
  if (!t.area_labels.empty()) write_file_atomic(tmp / "commit_area" / "labels.json", nlohmann::json(t.area_labels).dump() + "\n");
  // Changed files, read once per query commit.
  std::vector<std::string> shas;
  for (const auto& m : t.meta) shas.push_back(m.sha);
  std::sort(shas.begin(), shas.end());
  shas.erase(std::unique(shas.begin(), shas.end()), shas.end());
  const auto files = changed_files(history.repository, shas, max_files);
  std::string meta;
  for (const auto& m : t.meta) {
    const auto f = files[std::lower_bound(shas.begin(), shas.end(), m.sha) - shas.begin()];
    nlohmann::ordered_json j = {{"id", m.id},     {"task", m.task},       {"split", m.split},
                                {"sha", m.sha},   {"author", m.author},   {"date", m.date},
                                {"time", m.time}, {"profile_size", m.profile_size}, {"files", f}};
    meta += j.dump() + "\n";
  }
  write_file_atomic(tmp / "query_meta.jsonl", meta);
  nlohmann::ordered_json info = {
      {"repository", history.repository},
      {"head", history.head},
      {"options",
       {{"min_commits", o.min_commits},
        {"min_words", o.min_words},
        {"test_fraction", o.test_fraction},
        {"dev_fraction", o.dev_fraction},
        {"max_train", o.max_train},
        {"max_dev", o.max_dev},
        {"max_test", o.max_test},
        {"profile_size", o.profile_size},
        {"profile_words", o.profile_words},
        {"pick_words", o.pick_words},
        {"area_labels", o.area_labels},
        {"anonymize", o.anonymize},
        {"id_prefix", o.id_prefix}}},
      {"seed", o.seed},
      {"commits", t.commits},
      {"merges", t.merges},
      {"reencoded_messages", history.reencoded},
      {"authors", t.authors},
      {"eligible_commits", t.eligible},
      {"kept_authors", t.kept_authors},
      {"area_labels", t.area_labels},
      {"queries", counts}};
  if (!t.notes.empty()) info["notes"] = t.notes;
  write_file_atomic(tmp / "import.json", info.dump(2) + "\n");
  if (fs::exists(dir, ec)) fs::remove(dir, ec);  // the empty folder the caller made
  fs::rename(tmp, dir);
}

}  // namespace attune::git
