// Prompts for real commit_subject dev questions (shared/data/git) fit the LAMP.md budget
// under the whitespace tokenizer. Skips when ../shared is absent.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attune/tasks/task.h"
#include "attune/text/tokenizer.h"

namespace attune::tasks {
namespace {

std::vector<Example> first_examples(const std::filesystem::path& file, std::size_t n) {
  std::ifstream in(file);
  const auto j = nlohmann::json::parse(in);
  std::vector<Example> out;
  for (const auto& q : j) {
    if (out.size() == n) break;
    Example ex;
    ex.id = q.at("id").get<std::string>();
    ex.user = ex.id;
    ex.input = q.at("input").get<std::string>();
    for (const auto& p : q.at("profile")) {
      Document d;
      d.id = p.at("id").get<std::string>();
      d.owner = ex.user;
      for (const auto& [key, value] : p.items())
        if (key != "id" && value.is_string()) d.fields[key] = value.get<std::string>();
      ex.profile.push_back(std::move(d));
    }
    out.push_back(std::move(ex));
  }
  return out;
}

TEST(RealData, CommitSubjectPromptsFitTheBudget) {
  const std::filesystem::path file =
      std::filesystem::path(ATTUNE_SHARED_DIR) / "data/git/commit_subject/dev_questions.json";
  if (!std::filesystem::exists(file)) GTEST_SKIP() << "no " << file;
  const auto examples = first_examples(file, 20);
  ASSERT_EQ(examples.size(), 20u);

  auto task = make_task("commit_subject");
  text::WhitespaceTokenizer tok;
  for (const std::size_t max_length : {256u, 512u}) {
    for (const std::size_t k : {1u, 4u}) {
      for (const auto& ex : examples) {
        std::vector<const Document*> docs;
        // The newest k profile items stand in for a retriever's top k.
        for (std::size_t i = 0; i < k && i < ex.profile.size(); ++i)
          docs.push_back(&ex.profile[ex.profile.size() - 1 - i]);
        PromptOptions opts;
        opts.max_length = max_length;
        const std::string prompt = task->prompt(ex, docs, tok, opts);
        const auto c = static_cast<long long>(tok.count(ex.input));
        const auto L = static_cast<long long>(max_length);
        // The profile part gets max_length - min(count(input), int(0.6 * max_length))
        // tokens; only an input longer than that cap makes the prompt exceed max_length.
        const long long cap = static_cast<long long>(0.6 * static_cast<double>(max_length));
        const long long bound = L + std::max(0LL, c - cap);
        EXPECT_LE(static_cast<long long>(tok.count(prompt)), bound)
            << ex.id << " k=" << k << " L=" << max_length;
        if (c <= cap) {
          EXPECT_LE(static_cast<long long>(tok.count(prompt)), L) << ex.id;
        }
        // Every document made it in, and the input closes the prompt.
        EXPECT_NE(prompt, ex.input) << ex.id;
        ASSERT_GE(prompt.size(), ex.input.size());
        EXPECT_EQ(prompt.substr(prompt.size() - ex.input.size()), ex.input) << ex.id;
        for (const Document* d : docs)
          EXPECT_NE(prompt.find("\"" + *d->field("title") + "\" is the title for \""),
                    std::string::npos) << ex.id << " " << d->id;
      }
    }
  }
}

}  // namespace
}  // namespace attune::tasks
