#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <sys/wait.h>
#include <unistd.h>

#include "attune/core/error.h"
#include "attune/feedback/collect.h"
#include "attune/llm/reference.h"
#include "attune/store/store.h"

namespace fs = std::filesystem;
using namespace attune;

namespace {

// Three users, five profile commits each, in the commit_subject schema.
data::Dataset tiny_dataset() {
  data::Dataset ds;
  ds.task = "commit_subject";
  ds.split = "dev";
  ds.has_outputs = true;
  ds.content_hash = "tiny";
  const char* topics[] = {"parser cache", "pager color", "merge base", "reflog expiry", "pack bitmap"};
  for (int u = 0; u < 3; ++u) {
    Example ex;
    ex.id = "q" + std::to_string(u);
    ex.user = ex.id;
    ex.input = std::string("Generate a subject line for the following commit description: the ") + topics[u] +
               " broke when the " + topics[(u + 1) % 5] + " was empty";
    ex.output = std::string("fix ") + topics[u];
    for (int p = 0; p < 5; ++p) {
      Document d;
      d.id = "d" + std::to_string(u) + std::to_string(p);
      d.owner = ex.user;
      d.fields = {{"title", std::string("fix ") + topics[p]}, {"text", std::string("the ") + topics[p] + " was wrong"}};
      d.date = "2020-01-0" + std::to_string(p + 1);
      ex.profile.push_back(d);
    }
    ds.examples.push_back(ex);
  }
  return ds;
}

fs::path temp_store(const std::string& name) {
  auto p = fs::temp_directory_path() / ("attune_fb_" + name + std::to_string(::getpid()) + ".db");
  fs::remove(p);
  fs::remove(p.string() + "-wal");
  fs::remove(p.string() + "-shm");
  return p;
}

// Counts generations; optionally dies (SIGKILL, like a crash or `kill -9`) on call `die_on`.
class Probe final : public llm::LanguageModel {
 public:
  Probe(llm::LanguageModel& m, int die_on = -1) : m_(m), die_on_(die_on) {}
  std::vector<llm::Generation> generate(std::span<const llm::Prompt> p, const llm::GenerateOptions& o) override {
    if (calls++ == die_on_) ::raise(SIGKILL);
    generated += p.size();
    return m_.generate(p, o);
  }
  std::vector<double> score(std::span<const llm::ScoreRequest> r) override {
    scored += r.size();
    return m_.score(r);
  }
  llm::ModelInfo info() const override { return m_.info(); }
  int calls = 0;
  std::size_t generated = 0, scored = 0;

 private:
  llm::LanguageModel& m_;
  int die_on_;
};

struct Fixture {
  data::Dataset ds = tiny_dataset();
  std::unique_ptr<tasks::Task> task = tasks::make_task("commit_subject");
  retrieval::ProfileCandidates source{*task};
  llm::ReferenceReader reader{{"fix parser cache", "fix pager color", "add merge base"}, {}};
  text::WhitespaceTokenizer tok;
};

feedback::CollectOptions opts(feedback::Kind kind) {
  feedback::CollectOptions o;
  o.kind = kind;
  o.run.progress = false;
  o.run.threads = 1;
  o.run.batch = 2;
  return o;
}

}  // namespace

TEST(Feedback, DocUtilityIsCachedSoARepeatAsksNothing) {
  Fixture f;
  const auto path = temp_store("doc");
  auto store = store::open_sqlite(path);
  Probe probe(f.reader);
  auto s1 = feedback::collect(f.ds, *f.task, f.source, probe, *store, f.tok, opts(feedback::Kind::Doc));
  EXPECT_EQ(s1.examples, 3u);
  EXPECT_EQ(s1.records, 15u);  // 3 queries x min(16, 5 profile documents)
  EXPECT_EQ(s1.model_calls, 15u);
  EXPECT_EQ(probe.generated, 15u);
  auto records = store->feedback_get(feedback::dataset_key(f.ds), "doc", f.reader.info().id);
  ASSERT_EQ(records.size(), 15u);
  for (const auto& r : records) {
    EXPECT_GE(r.value, 0.0);
    EXPECT_LE(r.value, 1.0);
  }
  auto s2 = feedback::collect(f.ds, *f.task, f.source, probe, *store, f.tok, opts(feedback::Kind::Doc));
  EXPECT_EQ(s2.model_calls, 0u);
  EXPECT_EQ(s2.cache_hits, 15u);
  EXPECT_EQ(probe.generated, 15u);
  EXPECT_EQ(s2.mean_value, s1.mean_value);
}

// The cache and the log are separate roles: they may live in two stores.
TEST(Feedback, CacheAndLogMayBeTwoStores) {
  Fixture f;
  auto cache = store::open_sqlite(temp_store("cache"));
  auto log = store::open_sqlite(temp_store("log"));
  Probe probe(f.reader);
  auto s = feedback::collect(f.ds, *f.task, f.source, probe, *cache, *log, f.tok, opts(feedback::Kind::Doc));
  EXPECT_EQ(s.model_calls, 15u);
  const auto key = feedback::dataset_key(f.ds), model = f.reader.info().id;
  EXPECT_EQ(cache->cache_size(), 15u);
  EXPECT_TRUE(cache->feedback_get(key, "doc", model).empty());
  EXPECT_EQ(log->cache_size(), 0u);
  EXPECT_EQ(log->feedback_get(key, "doc", model).size(), 15u);
}

TEST(Feedback, AKilledRunResumesWhereItStopped) {
  Fixture f;
  const auto path = temp_store("kill");
  // The child collects with batches of 2 and is killed in its 4th model call: three
  // batches (6 records) were committed before it died.
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    auto store = store::open_sqlite(path);
    Probe dying(f.reader, 3);
    feedback::collect(f.ds, *f.task, f.source, dying, *store, f.tok, opts(feedback::Kind::Doc));
    ::_exit(0);  // not reached
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status));
  ASSERT_EQ(WTERMSIG(status), SIGKILL);

  auto store = store::open_sqlite(path);
  Probe probe(f.reader);
  auto s = feedback::collect(f.ds, *f.task, f.source, probe, *store, f.tok, opts(feedback::Kind::Doc));
  EXPECT_EQ(s.cache_hits, 6u);
  EXPECT_EQ(s.model_calls, 9u);
  EXPECT_EQ(probe.generated, 9u);

  // And the result is the same as an uninterrupted run's.
  const auto clean_path = temp_store("clean");
  auto clean = store::open_sqlite(clean_path);
  Probe fresh(f.reader);
  feedback::collect(f.ds, *f.task, f.source, fresh, *clean, f.tok, opts(feedback::Kind::Doc));
  auto a = store->feedback_get(feedback::dataset_key(f.ds), "doc", f.reader.info().id);
  auto b = clean->feedback_get(feedback::dataset_key(f.ds), "doc", f.reader.info().id);
  ASSERT_EQ(a.size(), b.size());
  auto key = [](const store::FeedbackRecord& r) { return r.example + "/" + r.item; };
  std::sort(a.begin(), a.end(), [&](auto& x, auto& y) { return key(x) < key(y); });
  std::sort(b.begin(), b.end(), [&](auto& x, auto& y) { return key(x) < key(y); });
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(key(a[i]), key(b[i]));
    EXPECT_EQ(a[i].value, b[i].value);
    EXPECT_EQ(a[i].output, b[i].output);
  }
}

TEST(Feedback, RetrieverAndLikelihoodKinds) {
  Fixture f;
  auto store = store::open_sqlite(temp_store("kinds"));
  Probe probe(f.reader);
  auto o = opts(feedback::Kind::Retriever);
  o.retrievers = {"none", "recency", "bm25"};
  auto s = feedback::collect(f.ds, *f.task, f.source, probe, *store, f.tok, o);
  EXPECT_EQ(s.records, 9u);  // 3 queries x 3 retrievers
  auto lk = feedback::collect(f.ds, *f.task, f.source, probe, *store, f.tok, opts(feedback::Kind::Likelihood));
  EXPECT_EQ(lk.records, 18u);  // 3 queries x (no document + 5 documents)
  EXPECT_EQ(probe.scored, 18u);
  auto recs = store->feedback_get(feedback::dataset_key(f.ds), "likelihood", f.reader.info().id);
  ASSERT_EQ(recs.size(), 18u);
  for (const auto& r : recs) EXPECT_LT(r.value, 0.0);  // log-probabilities
  // Each likelihood equals the reader's own score of the gold given that prompt.
  EXPECT_THROW(feedback::parse_kind("docs"), UsageError);
}

// A reader whose answer depends on how it decodes: free decoding answers a fixed subject,
// copy decoding the prompt's last word (a span of the prompt), so the two give different rewards.
class TwoWayReader final : public llm::LanguageModel {
 public:
  std::vector<llm::Generation> generate(std::span<const llm::Prompt> ps, const llm::GenerateOptions& o) override {
    std::vector<llm::Generation> out;
    for (const auto& p : ps) {
      llm::Generation g;
      if (o.decode == "copy") {
        const auto at = p.text.find_last_of(' ');
        g.text = at == std::string::npos ? p.text : p.text.substr(at + 1);
      } else {
        g.text = "fix parser cache";
      }
      out.push_back(g);
    }
    return out;
  }
  std::vector<double> score(std::span<const llm::ScoreRequest> r) override { return std::vector<double>(r.size(), -1.0); }
  llm::ModelInfo info() const override { return {"two-way"}; }
};

// Feedback of copy decoding is other feedback than free decoding's: both are kept, each under
// its own model key, and a second decoding does not replace the first's records.
TEST(Feedback, CopyAndFreeDecodingAreFiledApart) {
  Fixture f;
  auto store = store::open_sqlite(temp_store("decode"));
  TwoWayReader reader;
  const auto key = feedback::dataset_key(f.ds);
  auto free_opts = opts(feedback::Kind::Doc), copy_opts = opts(feedback::Kind::Doc);
  copy_opts.generate.decode = "copy";
  EXPECT_EQ(feedback::feedback_model("two-way", feedback::Kind::Doc, free_opts.generate), "two-way");
  EXPECT_EQ(feedback::feedback_model("two-way", feedback::Kind::Doc, copy_opts.generate), "two-way;decode=copy");
  EXPECT_EQ(feedback::feedback_model("two-way", feedback::Kind::Retriever, copy_opts.generate), "two-way;decode=copy");
  EXPECT_EQ(feedback::feedback_model("two-way", feedback::Kind::Likelihood, copy_opts.generate), "two-way");

  feedback::collect(f.ds, *f.task, f.source, reader, *store, f.tok, free_opts);
  const auto freely = store->feedback_get(key, "doc", "two-way");
  ASSERT_EQ(freely.size(), 15u);
  feedback::collect(f.ds, *f.task, f.source, reader, *store, f.tok, copy_opts);
  const auto copied = store->feedback_get(key, "doc", "two-way;decode=copy");
  ASSERT_EQ(copied.size(), 15u);
  const auto again = store->feedback_get(key, "doc", "two-way");  // still free decoding's
  ASSERT_EQ(again.size(), 15u);
  for (std::size_t i = 0; i < 15; ++i) {
    EXPECT_EQ(again[i].output, "fix parser cache");
    EXPECT_EQ(again[i].value, freely[i].value);
    EXPECT_NE(copied[i].output, "fix parser cache");
    EXPECT_NE(copied[i].output, "");
  }

  // Likelihood feedback generates nothing: a decoding for it is refused, naming the field.
  auto lk = opts(feedback::Kind::Likelihood);
  lk.generate.decode = "copy";
  try {
    feedback::collect(f.ds, *f.task, f.source, reader, *store, f.tok, lk);
    FAIL() << "likelihood feedback took --decode copy";
  } catch (const UsageError& e) {
    EXPECT_EQ(dynamic_cast<const NamesField&>(e).field(), "decode");
  }
}

TEST(Feedback, RefusesDataWithoutGolds) {
  Fixture f;
  f.ds.has_outputs = false;
  auto store = store::open_sqlite(temp_store("nogold"));
  EXPECT_THROW(feedback::collect(f.ds, *f.task, f.source, f.reader, *store, f.tok, opts(feedback::Kind::Doc)), Error);
}

namespace attune::feedback {
namespace {

TEST(CollectOptionsValidate, RefusesNoCandidatesAndAnEmptyPoolNamingTheField) {
  CollectOptions doc;
  EXPECT_NO_THROW(doc.validate());
  doc.top_l = 0;
  try {
    doc.validate();
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_EQ(dynamic_cast<const NamesField&>(e).field(), "top_l");
  }
  CollectOptions pool;
  pool.kind = Kind::Retriever;
  pool.top_l = 0;  // not used by the retriever kind
  EXPECT_NO_THROW(pool.validate());
  pool.retrievers.clear();
  try {
    pool.validate();
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_EQ(dynamic_cast<const NamesField&>(e).field(), "retrievers");
  }
  // A pool that lists a retriever twice would collect its feedback twice under one name.
  pool.retrievers = {"none", "bm25", "none"};
  try {
    pool.validate();
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_EQ(dynamic_cast<const NamesField&>(e).field(), "retrievers");
    EXPECT_NE(std::string(e.what()).find("\"none\" twice"), std::string::npos) << e.what();
  }
  CollectOptions doc_pool;  // the doc kind reads no pool: its repeats do not matter
  doc_pool.retrievers = {"none", "none"};
  EXPECT_NO_THROW(doc_pool.validate());
  doc_pool.generate.beams = 0;
  try {
    doc_pool.validate();
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_EQ(dynamic_cast<const NamesField&>(e).field(), "beams");
  }
}

}  // namespace
}  // namespace attune::feedback
