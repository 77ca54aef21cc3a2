// attune sample: writes the synthetic sample dataset the demo runs on (data/sample).
//
// LaMP-schema commit_subject data for a few dozen invented users. Each user works on three
// components, each with its own topics, and writes subjects in a personal style
// ("<component>: <verb> <topic> <topic>"); a query's gold subject follows that style, while
// its description names the topics but never the component. So the documents that help
// the reader are the user's own earlier commits on the same topics (they carry the right
// component): personalization matters, and retrieval decides how much.
#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "attune/core/error.h"
#include "attune/core/rng.h"
#include "common.h"

namespace fs = std::filesystem;

namespace attune::cli {

namespace {

const std::vector<std::string> kComponents = {"refs", "diff", "merge", "pack", "fetch", "rebase",
                                              "config", "index", "log", "submodule", "worktree", "gc"};
const std::vector<std::string> kVerbs = {"fix", "add", "remove", "teach", "refactor", "document", "avoid", "simplify"};
const std::vector<std::string> kTopics = {
    "parser",  "cache",   "buffer", "hook",    "branch",  "tag",      "remote",  "reflog",  "stash",  "blame",
    "grep",    "status",  "header", "path",    "symlink", "lockfile", "packet",  "delta",   "bitmap", "graph",
    "prefix",  "pattern", "option", "cursor",  "stream",  "object",   "tree",    "blob",    "commit", "trailer",
    "hunk",    "offset",  "alias",  "locale",  "timeout", "signal",   "pager",   "color",   "quote",  "escape",
    "memory",  "leak",    "race",   "overflow", "encoding", "newline", "checksum", "journal", "queue",  "map"};
const std::vector<std::string> kFillers = {
    "the input is empty", "two processes run at once", "the repository is shallow", "the user passes no arguments",
    "the file is larger than expected", "a previous run was interrupted", "the locale is not UTF-8",
    "the remote is slow to answer", "the configuration is missing", "the path contains spaces"};

std::string pick(Rng& rng, const std::vector<std::string>& v) { return v[rng.below(v.size())]; }

// The most users `attune sample` writes. Each user's 6 queries carry their whole earlier
// history as profile (159 documents), and the dataset is built in memory before it is
// written: about 47 KB of JSON and 170 KB of memory per user (docs/cli.md).
constexpr std::size_t kMaxSampleUsers = 2000;

}  // namespace

void write_sample(const fs::path& out, std::uint64_t seed, std::size_t users) {
  Rng rng(seed);
  data::Dataset train, dev;
  train.task = dev.task = "commit_subject";
  train.split = "train";
  dev.split = "dev";
  train.has_outputs = dev.has_outputs = true;
  for (std::size_t u = 0; u < users; ++u) {
    // Three components, each with three topics of its own.
    std::vector<std::string> components;
    std::vector<std::vector<std::string>> topics(3);
    std::vector<std::string> used;
    for (std::size_t c = 0; c < 3; ++c) {
      components.push_back(kComponents[(u + 4 * c) % kComponents.size()]);
      while (topics[c].size() < 3) {
        auto t = pick(rng, kTopics);
        if (std::find(used.begin(), used.end(), t) == used.end()) {
          used.push_back(t);
          topics[c].push_back(t);
        }
      }
    }
    std::vector<std::string> verbs = {pick(rng, kVerbs), pick(rng, kVerbs)};
    // The user's history: 30 commits, one every few days.
    struct Commit { std::string subject, description, date; };
    std::vector<Commit> history;
    int day = static_cast<int>(rng.below(200));
    for (int n = 0; n < 30; ++n) {
      day += 1 + static_cast<int>(rng.below(9));
      char date[32];
      std::snprintf(date, sizeof date, "20%02d-%02d-%02d", 18 + day / 336, 1 + (day % 336) / 28, 1 + day % 28);
      const std::size_t c = rng.below(3);
      const std::string a = topics[c][rng.below(3)];
      std::string b = topics[c][rng.below(3)];
      if (b == a) b = pick(rng, kTopics);
      const std::string verb = verbs[rng.below(verbs.size())];
      Commit cm;
      cm.subject = components[c] + ": " + verb + " " + a + " " + b;
      cm.description = "The " + a + " code did not handle the " + b + " correctly when " + pick(rng, kFillers) +
                       ". Change it so that the " + a + " keeps the " + b + " intact, and add a test for the case when " +
                       pick(rng, kFillers) + ".";
      cm.date = date;
      history.push_back(cm);
    }
    // The last 2 commits are dev queries, the 4 before them train queries; a query's profile
    // is every older commit of the same user (LaMP: profile strictly older than the query).
    for (std::size_t q = 24; q < 30; ++q) {
      Example ex;
      ex.id = "sample-u" + std::to_string(u) + "-q" + std::to_string(q);
      ex.user = ex.id;
      ex.input = "Generate a subject line for the following commit description: " + history[q].description;
      ex.output = history[q].subject;
      for (std::size_t p = 0; p < q; ++p) {
        Document d;
        d.id = "u" + std::to_string(u) + "-c" + std::to_string(p);
        d.owner = ex.user;
        d.fields = {{"title", history[p].subject}, {"text", history[p].description}};
        d.date = history[p].date;
        ex.profile.push_back(d);
      }
      (q >= 28 ? dev : train).examples.push_back(std::move(ex));
    }
  }
  fs::create_directories(out / "commit_subject");
  data::write_lamp(train, out / "commit_subject/train_questions.json", out / "commit_subject/train_outputs.json");
  data::write_lamp(dev, out / "commit_subject/dev_questions.json", out / "commit_subject/dev_outputs.json");
}

void add_sample(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand("sample", "write the synthetic sample dataset (LaMP schema) the demo uses");
  auto out = std::make_shared<std::string>("data/sample");
  auto seed = std::make_shared<std::uint64_t>(7);
  auto users = std::make_shared<std::size_t>(36);
  cmd->add_option("--out", *out, "output directory")->capture_default_str();
  cmd->add_option("--seed", *seed, "seed")->capture_default_str();
  cmd->add_option("--users", *users, "number of users (1 to " + std::to_string(kMaxSampleUsers) + ")")->capture_default_str();
  cmd->callback([=, &rc] {
    if (*users < 1 || *users > kMaxSampleUsers)
      throw UsageError("--users " + std::to_string(*users) + ": must be between 1 and " + std::to_string(kMaxSampleUsers) +
                       " (each user writes about 47 KB and holds about 170 KB of memory while the data is built)");
    write_sample(*out, *seed, *users);
    std::printf("wrote %zu users of commit_subject sample data (seed %llu) to %s\n", *users,
                static_cast<unsigned long long>(*seed), out->c_str());
    rc = 0;
  });
}

}  // namespace attune::cli
