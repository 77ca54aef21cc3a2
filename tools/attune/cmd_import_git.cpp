// attune import-git REPO --out DIR: the three commit tasks from any local git repository
// (git/import.h; docs/tasks.md "From your own repository").
#include <chrono>
#include <cstdio>

#include "attune/core/error.h"
#include "attune/git/import.h"
#include "common.h"

namespace attune::cli {

void add_import_git(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand(
      "import-git",
      "build commit_subject, commit_area and commit_pick (the layout of ../shared/data/git) from a local git repository: "
      "per-author time splits, profiles of each author's older commits, trailers removed, merges skipped, authors "
      "anonymised");
  struct Opts {
    std::string repo, out, revision = "HEAD";
    git::TaskOptions t;
    bool names = false, quiet = false;
    std::size_t max_files = 50;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("repo", o->repo, "the repository: its work tree (a folder with .git)")->required();
  cmd->add_option("--out", o->out, "the dataset folder to write (new or empty); then eval/train take --data DIR")->required();
  cmd->add_option("--rev", o->revision, "the revision whose history is read")->capture_default_str();
  cmd->add_option("--min-commits", o->t.min_commits, "eligible commits an author needs to be kept")->capture_default_str();
  cmd->add_option("--min-words", o->t.min_words, "description words (trailers removed) a commit needs to be eligible")
      ->capture_default_str();
  cmd->add_option("--test-fraction", o->t.test_fraction, "each author's newest share of eligible commits: test")
      ->capture_default_str();
  cmd->add_option("--dev-fraction", o->t.dev_fraction, "the share before those: dev")->capture_default_str();
  cmd->add_option("--max-train", o->t.max_train, "train queries per author, a seeded sample (0 = all)")->capture_default_str();
  cmd->add_option("--max-dev", o->t.max_dev, "dev queries per author, the newest (0 = all)")->capture_default_str();
  cmd->add_option("--max-test", o->t.max_test, "test queries per author, the newest (0 = all)")->capture_default_str();
  cmd->add_option("--profile-size", o->t.profile_size, "a query's profile: the author's newest strictly older commits")
      ->capture_default_str();
  cmd->add_option("--profile-words", o->t.profile_words, "profile descriptions cut to their first words (0 = whole)")
      ->capture_default_str();
  cmd->add_option("--pick-words", o->t.pick_words, "commit_pick's quoted description cut to its first words (0 = whole)")
      ->capture_default_str();
  cmd->add_option("--area-labels", o->t.area_labels, "commit_area's labels: the repository's most frequent subject areas")
      ->capture_default_str();
  cmd->add_option("--id-prefix", o->t.id_prefix, "query ids: PREFIX-cs-SHA12, PREFIX-ca-..., PREFIX-cp-...")
      ->capture_default_str();
  cmd->add_option("--max-files", o->max_files, "changed files listed per query in query_meta.jsonl")->capture_default_str();
  cmd->add_flag("--author-names", o->names, "write authors' names in query_meta.jsonl instead of pseudonyms");
  cmd->add_option("--seed", o->t.seed, "seed of the train sample and of commit_pick's answer order")->capture_default_str();
  cmd->add_flag("--quiet", o->quiet, "no progress on stderr");
  cmd->callback([o, &rc] {
    o->t.anonymize = !o->names;
    const auto t0 = std::chrono::steady_clock::now();
    git::ReadOptions ro;
    ro.revision = o->revision;
    if (!o->quiet)
      ro.progress = [](std::size_t n) { std::fprintf(stderr, "import-git: %zu commits read\n", n); };
    const auto history = git::read_git_history(o->repo, ro);
    const auto tasks = git::build_commit_tasks(history, o->t);
    git::write_commit_tasks(tasks, history, o->t, o->out, o->max_files);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("import-git %s at %.12s: %zu commits (%zu merges skipped), %zu of %zu authors kept, %zu eligible commits\n",
                history.repository.c_str(), history.head.c_str(), tasks.commits, tasks.merges, tasks.kept_authors,
                tasks.authors, tasks.eligible);
    for (const auto& [task, splits] : tasks.tasks)
      std::printf("  %-15s train %zu, dev %zu, test %zu\n", task.c_str(), splits.at("train").examples.size(),
                  splits.at("dev").examples.size(), splits.at("test").examples.size());
    if (!tasks.area_labels.empty()) {
      std::string l;
      for (const auto& a : tasks.area_labels) l += (l.empty() ? "" : ", ") + a;
      std::printf("  commit_area labels: %s\n", l.c_str());
    }
    if (!tasks.notes.empty()) std::printf("  note: %s\n", tasks.notes.c_str());
    std::printf("wrote %s in %.1f s (seed %llu)\n", o->out.c_str(), s, static_cast<unsigned long long>(o->t.seed));
    rc = 0;
  });
}

}  // namespace attune::cli
