// attune import-git: histories built with libgit2 in a temporary folder (several authors,
// merges, trailers, non-ASCII and Latin-1 messages), their splits and profiles checked
// exactly; the refusals; and the CLI end to end, then `attune eval` on what it wrote.
#include <git2.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "../cli/cli_run.h"
#include "attune/core/error.h"
#include "attune/git/import.h"

namespace fs = std::filesystem;
using namespace attune;

namespace {

struct Tmp {
  fs::path dir;
  Tmp() {
    dir = fs::temp_directory_path() / ("attune-git-" + std::to_string(::getpid()) + "-" +
                                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~Tmp() { fs::remove_all(dir); }
};

void ok(int rc) { ASSERT_EQ(rc, 0) << (git_error_last() ? git_error_last()->message : ""); }

// A repository written commit by commit through libgit2.
class Repo {
 public:
  explicit Repo(const fs::path& path, bool bare = false) {
    git_libgit2_init();
    ok(git_repository_init(&repo_, path.c_str(), bare));
  }
  ~Repo() {
    git_repository_free(repo_);
    git_libgit2_shutdown();
  }
  // A commit on top of `parents` (the previous commit when empty and there is one); it
  // becomes HEAD. Returns its sha.
  std::string commit(const std::string& name, const std::string& email, git_time_t when, const std::string& message,
                     std::vector<std::string> parents = {}, const char* encoding = nullptr, bool update_head = true) {
    if (parents.empty() && !last_.empty()) parents.push_back(last_);
    git_oid blob, tree_id, oid;
    const std::string content = message + std::to_string(when);
    ok(git_blob_create_from_buffer(&blob, repo_, content.data(), content.size()));
    git_treebuilder* tb = nullptr;
    ok(git_treebuilder_new(&tb, repo_, nullptr));
    const std::string file = "src/file" + std::to_string(n_++ % 3) + ".c";
    git_treebuilder* sb = nullptr;
    ok(git_treebuilder_new(&sb, repo_, nullptr));
    ok(git_treebuilder_insert(nullptr, sb, file.substr(4).c_str(), &blob, GIT_FILEMODE_BLOB));
    git_oid sub_id;
    ok(git_treebuilder_write(&sub_id, sb));
    git_treebuilder_free(sb);
    ok(git_treebuilder_insert(nullptr, tb, "src", &sub_id, GIT_FILEMODE_TREE));
    ok(git_treebuilder_write(&tree_id, tb));
    git_treebuilder_free(tb);
    git_tree* tree = nullptr;
    ok(git_tree_lookup(&tree, repo_, &tree_id));
    std::vector<git_commit*> ps;
    for (const auto& p : parents) {
      git_oid po;
      ok(git_oid_fromstr(&po, p.c_str()));
      git_commit* c = nullptr;
      ok(git_commit_lookup(&c, repo_, &po));
      ps.push_back(c);
    }
    git_signature* sig = nullptr;
    ok(git_signature_new(&sig, name.c_str(), email.c_str(), when, 60));
    std::vector<const git_commit*> cps(ps.begin(), ps.end());
    ok(git_commit_create(&oid, repo_, update_head ? "HEAD" : nullptr, sig, sig, encoding, message.c_str(), tree, cps.size(), cps.data()));
    git_signature_free(sig);
    for (auto* c : ps) git_commit_free(c);
    git_tree_free(tree);
    char hex[GIT_OID_HEXSZ + 1];
    const std::string sha = git_oid_tostr(hex, sizeof hex, &oid);
    if (update_head) last_ = sha;
    return sha;
  }

 private:
  git_repository* repo_ = nullptr;
  std::string last_;
  int n_ = 0;
};

std::string words(int n, const std::string& w) {
  std::string s;
  for (int i = 0; i < n; ++i) s += (i ? " " : "") + w + std::to_string(i);
  return s;
}

// The history of the split test: Ana (12 eligible commits), Bo (10), Cy (3: too few),
// Ana's short commits (not eligible), and a merge.
struct Built {
  std::map<std::string, std::vector<std::string>> eligible;  // author -> shas, oldest first
  std::string merge;
};

Built build_history(Repo& r) {
  Built b;
  git_time_t t = 1600000000;
  for (int i = 0; i < 12; ++i) {
    // Bo's and Cy's commits interleave with Ana's.
    std::string area = i % 2 ? "net" : "fs";
    b.eligible["ana"].push_back(r.commit("Ana Ñúñez", "ana@example.org", t += 100,
                                         area + ": change " + std::to_string(i) + " of ana\n\n" + words(25, "a" + std::to_string(i)) +
                                             "\n\nSigned-off-by: Ana Ñúñez <ana@example.org>\nReviewed-by: Bo <bo@example.org>\n"));
    if (i < 10)
      b.eligible["bo"].push_back(r.commit("Bo", "BO@example.org", t += 100,
                                          (i % 3 ? "net" : "doc") + std::string(": bo's change ") + std::to_string(i) + "\n\n" +
                                              words(22, "b" + std::to_string(i)) + "\nChange-Id: I1234\n"));
    if (i < 3) b.eligible["cy"].push_back(r.commit("Cy", "cy@example.org", t += 100, "fix " + std::to_string(i) + "\n\n" + words(30, "c")));
    if (i == 5) r.commit("Ana Ñúñez", "ana@example.org", t += 100, "tiny: too short\n\nonly five words here now");
  }
  // A side branch off Bo's 6th commit (its one commit too short to be eligible), merged:
  // the merge is skipped, however long its message.
  const std::string side =
      r.commit("Bo", "bo@example.org", t += 100, "side: short\n\nnot enough words", {b.eligible["bo"][5]}, nullptr, false);
  b.merge = r.commit("Ana Ñúñez", "ana@example.org", t += 100, "Merge branch 'side'\n\n" + words(30, "m"),
                     {b.eligible["ana"].back(), side});
  return b;
}

// build_history() written into a new repository at `path` (closed again when it returns).
Built build_repo(const fs::path& path) {
  Repo r(path);
  return build_history(r);
}

std::vector<std::string> ids(const data::Dataset& ds) {
  std::vector<std::string> v;
  for (const auto& e : ds.examples) v.push_back(e.id);
  return v;
}

std::set<std::string> id_set(const data::Dataset& ds) {
  const auto v = ids(ds);
  return {v.begin(), v.end()};
}

std::string cs(const std::string& sha) { return "git-cs-" + sha.substr(0, 12); }

}  // namespace

TEST(GitImport, StripsTrailersAndKeepsProse) {
  EXPECT_EQ(git::strip_trailers("Fix the thing.\n\nMore text here.\n\nSigned-off-by: A <a@b>\nReviewed-by: B <b@c>\n"),
            "Fix the thing. More text here.");
  EXPECT_EQ(git::strip_trailers("Body.\nChange-Id: I12\nmore\n"), "Body. more");  // a known key anywhere
  EXPECT_EQ(git::strip_trailers("Body.\n\n(cherry picked from commit abc)\nSigned-off-by: A\n"), "Body.");
  // A closing paragraph of "Word: ..." lines with no known trailer is prose.
  EXPECT_EQ(git::strip_trailers("Body.\n\nNote: this matters.\n"), "Body. Note: this matters.");
  EXPECT_EQ(git::strip_trailers("Body.\n\nFixes: 1234abcd (\"old\")\nLink: https://x\n  continued\n"), "Body.");
  EXPECT_EQ(git::strip_trailers(""), "");
}

TEST(GitImport, ReadsCommitsMergesMailmapFreeAuthorsAndLatin1) {
  Tmp tmp;
  Repo r(tmp.dir / "repo");
  const auto a = r.commit("Zoë", "zoe@example.org", 1700000000, "ui: première\n\nLe café est prêt, déjà.\n\nSigned-off-by: Zoë <zoe@example.org>\n");
  // A Latin-1 message that declares its encoding: converted to UTF-8.
  const auto b = r.commit("Jos\xe9" "", "jose@example.org", 1700000100, "ui: ma\xf1" "ana\n\nse\xf1" "or text\n", {}, "ISO-8859-1");
  const auto h = git::read_git_history(tmp.dir / "repo");
  ASSERT_EQ(h.commits.size(), 2u);
  EXPECT_EQ(h.head, b);
  EXPECT_EQ(h.commits[0].sha, a);
  EXPECT_EQ(h.commits[0].subject, "ui: première");
  EXPECT_EQ(h.commits[0].description, "Le café est prêt, déjà.");
  EXPECT_EQ(h.commits[0].author_name, "Zoë");
  EXPECT_EQ(h.commits[0].time, 1700000000);
  EXPECT_EQ(h.commits[1].subject, "ui: mañana");
  EXPECT_EQ(h.commits[1].description, "señor text");
  EXPECT_EQ(h.commits[1].author_name, "José");
  EXPECT_EQ(h.reencoded, 1u);
  EXPECT_EQ(h.commits[1].parents, 1u);
}

TEST(GitImport, SplitsEachAuthorByTimeWithStrictlyOlderProfiles) {
  Tmp tmp;
  Built b = build_repo(tmp.dir / "repo");
  const auto h = git::read_git_history(tmp.dir / "repo");
  git::TaskOptions o;
  o.min_commits = 10;
  o.max_train = 0;
  o.area_labels = 2;
  const auto t = git::build_commit_tasks(h, o);
  EXPECT_EQ(t.commits, 12u + 10u + 3u + 1u + 2u);
  EXPECT_EQ(t.merges, 1u);
  EXPECT_EQ(t.authors, 3u);  // BO@ and bo@ are one author: emails compare lower-cased
  EXPECT_EQ(t.eligible, 25u);
  EXPECT_EQ(t.kept_authors, 2u);
  const auto& S = t.tasks.at("commit_subject");
  // Ana: 12 -> test 1 (her newest), dev 1, train 10 minus her first (no older commit).
  // Bo: 10 -> test 1, dev 1, train 8 minus his first.
  const auto& A = b.eligible["ana"];
  const auto& B = b.eligible["bo"];
  EXPECT_EQ(id_set(S.at("test")), (std::set<std::string>{cs(A[11]), cs(B[9])}));
  EXPECT_EQ(id_set(S.at("dev")), (std::set<std::string>{cs(A[10]), cs(B[8])}));
  const auto train = id_set(S.at("train"));
  std::set<std::string> want;
  for (int i = 1; i < 10; ++i) want.insert(cs(A[i]));
  for (int i = 1; i < 8; ++i) want.insert(cs(B[i]));
  EXPECT_EQ(train, want);
  // Cy (3 commits) never appears; nor do merges or short commits.
  for (const auto& [split, ds] : S)
    for (const auto& e : ds.examples) {
      EXPECT_EQ(e.input.rfind("Generate a subject line for the following commit description: ", 0), 0u);
      EXPECT_EQ(e.input.find("Signed-off-by"), std::string::npos);
      EXPECT_EQ(e.input.find("Change-Id"), std::string::npos);
      EXPECT_NE(e.output.find("change"), std::string::npos) << e.output;
    }
  // Ana's test query: profile = her 11 older eligible commits, oldest first, texts cut to 30 words.
  for (const auto& e : S.at("test").examples)
    if (e.id == cs(A[11])) {
      ASSERT_EQ(e.profile.size(), 11u);
      for (int i = 0; i < 11; ++i) {
        EXPECT_EQ(e.profile[i].id, A[i].substr(0, 12));
        EXPECT_EQ(*e.profile[i].field("text"), words(25, "a" + std::to_string(i)));
        EXPECT_EQ(e.profile[i].date, "2020-09-13");
      }
      EXPECT_EQ(e.output, "net: change 11 of ana");
    }
  // A cap on the profile keeps the newest.
  o.profile_size = 3;
  const auto t3 = git::build_commit_tasks(h, o);
  for (const auto& e : t3.tasks.at("commit_subject").at("test").examples)
    if (e.id == cs(A[11])) {
      ASSERT_EQ(e.profile.size(), 3u);
      EXPECT_EQ(e.profile[0].id, A[8].substr(0, 12));
    }
  // commit_area: labels are the two most frequent areas (net 12, fs 6 > doc 4); queries only those with a label.
  EXPECT_EQ(t.area_labels, (std::vector<std::string>{"net", "fs"}));
  for (const auto& [split, ds] : t.tasks.at("commit_area"))
    for (const auto& e : ds.examples) {
      EXPECT_TRUE(e.output == "net" || e.output == "fs") << e.output;
      for (const auto& d : e.profile) {
        const auto& tag = *d.field("tag");
        EXPECT_TRUE(tag == "net" || tag == "fs" || tag == "other") << tag;
      }
    }
  // commit_pick: the other subject is another author's, and the gold names the right one.
  std::size_t firsts = 0, n = 0;
  for (const auto& [split, ds] : t.tasks.at("commit_pick"))
    for (const auto& e : ds.examples) {
      ++n;
      const bool ana = e.input.find("of ana") != std::string::npos;
      const bool bo = e.input.find("bo's change") != std::string::npos || e.input.find("fix ") != std::string::npos;
      EXPECT_TRUE(ana && bo) << e.input;
      firsts += e.output == "[1]";
      EXPECT_TRUE(e.output == "[1]" || e.output == "[2]");
    }
  EXPECT_EQ(n, S.at("train").examples.size() + 4u);
  EXPECT_GT(firsts, 0u);
  EXPECT_LT(firsts, n);
  // Deterministic, and the seed changes only the train sample and the answer order.
  const auto again = git::build_commit_tasks(h, o);
  EXPECT_EQ(ids(again.tasks.at("commit_pick").at("dev")), ids(t3.tasks.at("commit_pick").at("dev")));
}

TEST(GitImport, CapsTrainWithASeededSampleAndDevTestWithTheNewest) {
  Tmp tmp;
  Built b = build_repo(tmp.dir / "repo");
  const auto h = git::read_git_history(tmp.dir / "repo");
  git::TaskOptions o;
  o.min_commits = 10;
  o.max_train = 4;
  o.test_fraction = 0.25;  // Ana: 3 test, Bo: 2
  o.max_test = 2;
  const auto t = git::build_commit_tasks(h, o);
  const auto& S = t.tasks.at("commit_subject");
  EXPECT_EQ(S.at("train").examples.size(), 8u);
  const auto& A = b.eligible["ana"];
  const auto& B = b.eligible["bo"];
  EXPECT_EQ(id_set(S.at("test")), (std::set<std::string>{cs(A[10]), cs(A[11]), cs(B[8]), cs(B[9])}));
  o.seed = 1;
  const auto t1 = git::build_commit_tasks(h, o);
  EXPECT_NE(ids(t1.tasks.at("commit_subject").at("train")), ids(S.at("train")));
  EXPECT_EQ(ids(t1.tasks.at("commit_subject").at("test")), ids(S.at("test")));
}

TEST(GitImport, RefusesWhatCannotGiveAnHonestHistory) {
  Tmp tmp;
  EXPECT_THROW(git::read_git_history(tmp.dir / "nowhere"), InputError);
  fs::create_directories(tmp.dir / "plain");
  try {
    git::read_git_history(tmp.dir / "plain");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("not a git repository"), std::string::npos) << e.what();
  }
  { Repo empty(tmp.dir / "empty"); }
  try {
    git::read_git_history(tmp.dir / "empty");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("has no commits"), std::string::npos) << e.what();
  }
  {
    Repo bare(tmp.dir / "bare.git", true);
    bare.commit("A", "a@x", 1, "x: y\n\nz");
  }
  try {
    git::read_git_history(tmp.dir / "bare.git");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("bare"), std::string::npos) << e.what();
  }
  std::string first;
  {
    Repo r(tmp.dir / "shallow");
    first = r.commit("A", "a@x", 1, "x: y\n\nz");
    r.commit("A", "a@x", 2, "x: w\n\nz");
  }
  git::ReadOptions bad;
  bad.revision = "no-such-branch";
  EXPECT_THROW(git::read_git_history(tmp.dir / "shallow", bad), InputError);
  std::ofstream(tmp.dir / "shallow" / ".git" / "shallow") << first << "\n";
  try {
    git::read_git_history(tmp.dir / "shallow");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("shallow"), std::string::npos) << e.what();
  }
  // Too few commits per author: the message says what the best author has.
  fs::remove(tmp.dir / "shallow" / ".git" / "shallow");
  const auto h = git::read_git_history(tmp.dir / "shallow");
  git::TaskOptions o;
  o.min_words = 1;
  try {
    git::build_commit_tasks(h, o);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("the most any author has is 2"), std::string::npos) << e.what();
  }
  o.test_fraction = 0.6;
  o.dev_fraction = 0.5;
  EXPECT_THROW(git::build_commit_tasks(h, o), UsageError);
}

TEST(GitImport, CliWritesTheLayoutThatEvalReads) {
  Tmp tmp;
  build_repo(tmp.dir / "repo");
  auto res = attune::testing::run_attune(tmp.dir, "import-git repo --out data --min-commits 10 --area-labels 2 --quiet");
  ASSERT_EQ(res.rc, 0) << res.err;
  EXPECT_NE(res.out.find("commit_subject  train 16, dev 2, test 2"), std::string::npos) << res.out;
  for (const char* f : {"commit_subject/train_questions.json", "commit_subject/test_outputs.json", "commit_area/labels.json",
                        "commit_pick/dev_questions.json", "query_meta.jsonl", "import.json"})
    EXPECT_TRUE(fs::exists(tmp.dir / "data" / f)) << f;
  const auto info = nlohmann::json::parse(attune::testing::slurp(tmp.dir / "data" / "import.json"));
  EXPECT_EQ(info["kept_authors"], 2);
  EXPECT_EQ(info["seed"], 0);
  // Authors are pseudonyms unless asked otherwise; changed files are listed.
  const auto meta = attune::testing::slurp(tmp.dir / "data" / "query_meta.jsonl");
  EXPECT_EQ(meta.find("Ana"), std::string::npos);
  EXPECT_NE(meta.find("\"files\":[\"src/file"), std::string::npos) << meta.substr(0, 300);
  // The same import twice gives the same bytes.
  ASSERT_EQ(attune::testing::run_attune(tmp.dir, "import-git repo --out data2 --min-commits 10 --area-labels 2 --quiet").rc, 0);
  for (const char* f : {"commit_pick/train_questions.json", "commit_area/test_questions.json"})
    EXPECT_EQ(attune::testing::slurp(tmp.dir / "data" / f), attune::testing::slurp(tmp.dir / "data2" / f)) << f;
  // An existing folder is never written over.
  res = attune::testing::run_attune(tmp.dir, "import-git repo --out data --min-commits 10 --quiet");
  EXPECT_EQ(res.rc, 2);
  EXPECT_NE(res.err.find("already exists"), std::string::npos) << res.err;
  res = attune::testing::run_attune(tmp.dir, "import-git nowhere --out data3");
  EXPECT_EQ(res.rc, 1);
  EXPECT_NE(res.err.find("does not exist"), std::string::npos) << res.err;
  EXPECT_FALSE(fs::exists(tmp.dir / "data3"));
  // eval and the other verbs read it unchanged.
  for (const char* task : {"commit_subject", "commit_area", "commit_pick"}) {
    res = attune::testing::run_attune(tmp.dir, std::string("eval --data data --task ") + task +
                                           " --split test --retrievers none,bm25 --llm reference --k 1 --store s.db --quiet");
    EXPECT_EQ(res.rc, 0) << task << ": " << res.err;
    EXPECT_NE(res.out.find("bm25"), std::string::npos) << res.out;
  }
}

namespace {

// What every import must hold, checked against the history it was read from: queries are
// commits of kept authors; profiles are the same author's strictly older commits, oldest
// first; each author's train queries are no newer than their dev ones, and those no newer
// than their test ones.
void expect_invariants(const git::History& h, const git::CommitTasks& t, const git::TaskOptions& o) {
  std::map<std::string, const git::HistoryCommit*> by12;
  for (const auto& c : h.commits) by12[c.sha.substr(0, 12)] = &c;
  std::map<std::string, std::map<std::string, std::pair<std::int64_t, std::int64_t>>> span;  // author -> split -> [min, max]
  for (const auto& [task, splits] : t.tasks)
    for (const auto& [split, ds] : splits)
      for (const auto& e : ds.examples) {
        const auto* q = by12.at(e.id.substr(e.id.size() - 12));
        const auto who = git::author_pseudonym(*q);
        EXPECT_LE(q->parents, 1u);
        if (task == "commit_subject") {
          EXPECT_EQ(e.output, q->subject);
        }
        ASSERT_FALSE(e.profile.empty()) << e.id;
        EXPECT_LE(e.profile.size(), o.profile_size);
        std::int64_t last = INT64_MIN;
        for (const auto& d : e.profile) {
          const auto* p = by12.at(d.id);
          EXPECT_LT(p->time, q->time) << e.id << " has " << d.id << ", not older";
          EXPECT_EQ(git::author_pseudonym(*p), who) << e.id << " has another author's " << d.id;
          EXPECT_GE(p->time, last) << e.id << ": profile not oldest first";
          last = p->time;
        }
        auto& s = span[who][split];
        if (s.first == 0 && s.second == 0) s = {q->time, q->time};
        s.first = std::min(s.first, q->time);
        s.second = std::max(s.second, q->time);
      }
  for (const auto& [who, s] : span) {
    if (s.count("train") && s.count("dev")) {
      EXPECT_LE(s.at("train").second, s.at("dev").first) << who;
    }
    if (s.count("dev") && s.count("test")) {
      EXPECT_LE(s.at("dev").second, s.at("test").first) << who;
    }
  }
}

}  // namespace

TEST(GitImport, HoldsItsInvariantsOnSyntheticAndOnThisProjectsOwnHistory) {
  Tmp tmp;
  build_repo(tmp.dir / "repo");
  git::TaskOptions o;
  o.min_commits = 10;
  const auto h = git::read_git_history(tmp.dir / "repo");
  expect_invariants(h, git::build_commit_tasks(h, o), o);

  const fs::path self = ATTUNE_SOURCE_DIR;
  if (!fs::exists(self / ".git")) GTEST_SKIP() << self << " is not a git checkout: its own history cannot be read";
  if (fs::exists(self / ".git" / "shallow"))
    GTEST_SKIP() << self << " is a shallow clone (import-git refuses those): its own history is not all there";
  const auto mine = git::read_git_history(self);
  ASSERT_GT(mine.commits.size(), 10u);
  // This project's messages are mostly one long subject line: no description length asked.
  o.min_words = 0;
  o.max_train = 0;
  git::CommitTasks t;
  try {
    t = git::build_commit_tasks(mine, o);
  } catch (const InputError& e) {
    GTEST_SKIP() << "this checkout's history has no author with 10 commits: " << e.what();
  }
  EXPECT_GT(t.tasks.at("commit_subject").at("train").examples.size(), 0u);
  expect_invariants(mine, t, o);
  // Read twice, the same bytes.
  const auto again = git::build_commit_tasks(git::read_git_history(self), o);
  EXPECT_EQ(ids(again.tasks.at("commit_subject").at("test")), ids(t.tasks.at("commit_subject").at("test")));
}
