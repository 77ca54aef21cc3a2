#include <gtest/gtest.h>

#include <filesystem>

#include "attune/core/error.h"
#include "attune/llm/cached.h"
#include "attune/llm/reference.h"
#include "attune/store/store.h"

namespace fs = std::filesystem;
using namespace attune;

namespace {

// Counts what reaches the wrapped model.
class Counting final : public llm::LanguageModel {
 public:
  explicit Counting(llm::LanguageModel& m) : m_(m) {}
  std::vector<llm::Generation> generate(std::span<const llm::Prompt> p, const llm::GenerateOptions& o) override {
    generated += p.size();
    return m_.generate(p, o);
  }
  std::vector<double> score(std::span<const llm::ScoreRequest> r) override {
    scored += r.size();
    return m_.score(r);
  }
  llm::ModelInfo info() const override { return m_.info(); }
  std::size_t generated = 0, scored = 0;

 private:
  llm::LanguageModel& m_;
};

fs::path temp_store(const char* name) {
  auto p = fs::temp_directory_path() / (std::string("attune_test_") + name + std::to_string(::getpid()) + ".db");
  fs::remove(p);
  return p;
}

}  // namespace

TEST(CachedModel, SecondRunAsksTheModelNothingAndScoresRoundTripExactly) {
  const auto path = temp_store("cached");
  llm::ReferenceReader ref({"fix parser cache", "add pager"}, {});
  std::vector<llm::Prompt> prompts = {{"\"fix parser\" one"}, {"\"add pager\" two"}};
  std::vector<llm::ScoreRequest> reqs = {{"fix parser", "fix parser cache"}, {"x", "add pager zzz"}};
  std::vector<llm::Generation> first_gen;
  std::vector<double> first_score;
  {
    auto store = store::open_sqlite(path);
    Counting counting(ref);
    llm::CachedModel cached(counting, *store);
    first_gen = cached.generate(prompts, {});
    first_score = cached.score(reqs);
    EXPECT_EQ(counting.generated, 2u);
    EXPECT_EQ(counting.scored, 2u);
    EXPECT_EQ(cached.misses(), 4u);
  }
  auto store = store::open_sqlite(path);  // a new process would see the same
  Counting counting(ref);
  llm::CachedModel cached(counting, *store);
  auto gen = cached.generate(prompts, {});
  auto sc = cached.score(reqs);
  EXPECT_EQ(counting.generated, 0u);
  EXPECT_EQ(counting.scored, 0u);
  EXPECT_EQ(cached.hits(), 4u);
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(gen[i].text, first_gen[i].text);
    EXPECT_EQ(sc[i], first_score[i]);  // bit-identical through the text cache
  }
  // Different options are a different key.
  llm::GenerateOptions beams;
  beams.beams = 4;
  cached.generate(prompts, beams);
  EXPECT_EQ(counting.generated, 2u);
  // Copy decoding is another key too (free decoding's key is the one caches had before the
  // option existed), and a model that cannot copy refuses through the cache.
  llm::GenerateOptions copy;
  copy.decode = "copy";
  EXPECT_EQ(llm::GenerateOptions{}.canonical().find("decode"), std::string::npos);
  EXPECT_NE(copy.canonical(), llm::GenerateOptions{}.canonical());
  EXPECT_NE(copy.canonical().find(";decode=copy"), std::string::npos);
  EXPECT_THROW(cached.generate(prompts, copy), UsageError);
  EXPECT_EQ(cached.generate(prompts, {})[0].text, first_gen[0].text);
  fs::remove(path);
}

TEST(CachedModel, ARepeatedScoreRequestInOneCallCostsOneModelCall) {
  const auto path = temp_store("cached_repeat");
  llm::ReferenceReader ref({"fix parser cache", "add pager"}, {});
  auto store = store::open_sqlite(path);
  Counting counting(ref);
  llm::CachedModel cached(counting, *store);
  const std::vector<llm::ScoreRequest> reqs = {{"a", "fix parser"}, {"b", "add pager"}, {"a", "fix parser"}, {"a", "add pager"},
                                               {"b", "add pager"}};
  const auto s = cached.score(reqs);
  EXPECT_EQ(counting.scored, 3u);  // (a, fix parser), (b, add pager), (a, add pager)
  EXPECT_EQ(cached.misses(), 3u);
  EXPECT_EQ(cached.hits(), 2u);
  ASSERT_EQ(s.size(), 5u);
  EXPECT_EQ(s[0], s[2]);
  EXPECT_EQ(s[1], s[4]);
  // Each is what the model gives alone.
  for (std::size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(s[i], ref.score(std::span(&reqs[i], 1))[0]) << i;
  fs::remove(path);
}

namespace {
// Answers with what it was given, so that a cache hit can be told from a fresh answer.
class Echo final : public llm::LanguageModel {
 public:
  std::vector<llm::Generation> generate(std::span<const llm::Prompt> p, const llm::GenerateOptions& o) override {
    std::vector<llm::Generation> out;
    for (const auto& x : p) out.push_back({x.text + "|" + (o.cad > 0 ? x.without_documents : std::string())});
    calls += p.size();
    return out;
  }
  std::vector<double> score(std::span<const llm::ScoreRequest> r) override { return std::vector<double>(r.size(), 0.0); }
  llm::ModelInfo info() const override { return {"echo"}; }
  std::size_t calls = 0;
};
}  // namespace

// Context-aware decoding's answer depends on the prompt without documents too: two prompts
// alike but for that form are two keys; a form equal to the prompt (no documents) is the
// plain prompt's key with cad; cad is part of the options.
TEST(CachedModel, ContextAwareDecodingKeysTheFormWithoutDocuments) {
  const auto path = temp_store("cached_cad");
  auto store = store::open_sqlite(path);
  Echo echo;
  llm::CachedModel cached(echo, *store);
  llm::GenerateOptions cad;
  cad.cad = 0.5;
  EXPECT_NE(cad.canonical().find(";cad=0.5"), std::string::npos) << cad.canonical();
  EXPECT_EQ(llm::GenerateOptions{}.canonical().find("cad"), std::string::npos);
  const std::vector<llm::Prompt> a = {{"docs + x", "x"}}, b = {{"docs + x", "y"}}, same = {{"x", "x"}}, bare = {{"x", ""}};
  EXPECT_EQ(cached.generate(a, cad)[0].text, "docs + x|x");
  EXPECT_EQ(cached.generate(b, cad)[0].text, "docs + x|y");  // not a's cached answer
  EXPECT_EQ(echo.calls, 2u);
  EXPECT_EQ(cached.generate(a, cad)[0].text, "docs + x|x");
  EXPECT_EQ(echo.calls, 2u);  // a hit
  cached.generate(same, cad);
  EXPECT_EQ(cached.generate(bare, cad)[0].text, "x|x");  // same key as `same`: no documents either way
  EXPECT_EQ(echo.calls, 3u);
  EXPECT_EQ(cached.generate(a, {})[0].text, "docs + x|");  // cad 0: another key
  EXPECT_EQ(echo.calls, 4u);
  // A model that cannot decode with cad refuses through the cache.
  llm::ReferenceReader ref({"fix parser cache"}, {});
  llm::CachedModel cached_ref(ref, *store);
  EXPECT_THROW(cached_ref.generate(a, cad), UsageError);
  fs::remove(path);
}

// --no-repeat-ngram changes answers, so it is part of the key; 0 keeps the keys made before it.
TEST(CachedModel, NoRepeatNgramIsPartOfTheKey) {
  const auto path = temp_store("cached_nr");
  auto store = store::open_sqlite(path);
  Echo echo;
  llm::CachedModel cached(echo, *store);
  llm::GenerateOptions nr;
  nr.no_repeat_ngram = 3;
  EXPECT_NE(nr.canonical().find(";no_repeat_ngram=3"), std::string::npos) << nr.canonical();
  EXPECT_EQ(llm::GenerateOptions{}.canonical().find("no_repeat"), std::string::npos);
  const std::vector<llm::Prompt> a = {{"x", ""}};
  cached.generate(a, {});
  cached.generate(a, nr);
  EXPECT_EQ(echo.calls, 2u);  // not the plain answer's key
  cached.generate(a, nr);
  EXPECT_EQ(echo.calls, 2u);
  llm::ReferenceReader ref({"fix parser cache"}, {});
  llm::CachedModel cached_ref(ref, *store);
  EXPECT_THROW(cached_ref.generate(a, nr), UsageError);
  fs::remove(path);
}
