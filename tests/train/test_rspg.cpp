// RSPG: the selector learns to pick the retriever whose prompt helps; the saved selector
// scores as the trained one did; resume equals an uninterrupted run; bad input is refused.
#include <gtest/gtest.h>

#include "attune/core/error.h"
#include "attune/core/rng.h"
#include "attune/models/config.h"
#include "attune/models/weights.h"
#include "attune/neural/selector.h"
#include "attune/retrieval/retriever.h"
#include "attune/train/rspg.h"
#include "tiny_bert.h"

namespace attune::train {
namespace {

namespace fs = std::filesystem;

// Pool of 3. Each prompt mixes random words; the prompt that helps (utility 1, others 0 or
// 0.5) is the one containing "apple" — which pool member that is varies per input, so only
// reading the prompt can tell.
std::vector<RspgExample> synthetic(std::size_t n, std::uint64_t seed, bool post) {
  const auto& w = testing::tiny_words();
  Rng rng(seed);
  std::vector<RspgExample> out;
  for (std::size_t i = 0; i < n; ++i) {
    RspgExample e;
    e.id = "x" + std::to_string(i);
    e.query = w[20 + rng.below(5)];
    const std::size_t good = rng.below(3);
    for (std::size_t r = 0; r < 3; ++r) {
      std::string p;
      for (int t = 0; t < 6; ++t) p += (t ? " " : "") + w[rng.below(10)];
      if (r == good) p += " apple";
      e.prompts.push_back(p);
      if (post) e.outputs.push_back(w[12 + rng.below(5)]);
      e.utility.push_back(r == good ? 1.0 : (rng.below(2) ? 0.5 : 0.0));
    }
    out.push_back(e);
  }
  return out;
}

RspgOptions tiny(const fs::path& root, const std::string& out, RspgVariant v) {
  RspgOptions o;
  o.variant = v;
  o.init = root / "init";
  o.fit.out = root / out;
  o.pool = {"none", "recency", "bm25"};
  o.fit.epochs = 10;
  o.fit.batch_size = 8;
  o.fit.micro_batch = 4;
  o.fit.lr = 3e-3;
  o.max_length = 24;
  o.temperature = 0.2;
  o.fit.quiet = true;
  o.fit.seed = 7;
  return o;
}

class Rspg : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = testing::fresh_dir(std::string("rspg_") + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    testing::write_tiny_encoder(root_ / "init", models::Pooling::Mean, false, 13);
  }
  void TearDown() override { fs::remove_all(root_); }
  fs::path root_;
};

TEST_F(Rspg, PreLearnsToPickTheHelpfulPromptAndTheSavedSelectorAgrees) {
  const auto train = synthetic(64, 1, false), dev = synthetic(32, 2, false);
  auto o = tiny(root_, "pre", RspgVariant::Pre);
  const auto res = train_rspg(train, dev, o);
  ASSERT_EQ(res.epochs.size(), 10u);
  ASSERT_GT(res.best_epoch, 0u) << "no epoch beat the start on dev";
  const auto& best = res.epochs[res.best_epoch - 1];
  EXPECT_GT(best.dev_success, res.init_dev_success + 0.2) << res.init_dev_success << " -> " << best.dev_success;
  EXPECT_GT(best.dev_utility, res.init_dev_utility);
  for (const char* f : {"config.json", "model.safetensors", "selector_head.safetensors", "selector.json", "attune_model.json"})
    EXPECT_TRUE(fs::exists(o.fit.out / f)) << f;
  // Inference from the folder reproduces the kept epoch's dev success.
  auto sel = neural::Selector::load(o.fit.out, "cpu");
  EXPECT_EQ(sel->pool(), o.pool);
  EXPECT_EQ(parse_rspg_variant(sel->variant()), RspgVariant::Pre);
  double success = 0;
  for (const auto& e : dev) {
    auto s = sel->score(e.query, e.prompts, {});
    const auto pick = static_cast<std::size_t>(std::max_element(s.begin(), s.end()) - s.begin());
    success += e.utility[pick] >= *std::max_element(e.utility.begin(), e.utility.end()) - 1e-9;
  }
  EXPECT_NEAR(success / static_cast<double>(dev.size()), best.dev_success, 1e-9);
}

// The pool prior: member 2 is the best on average (0.5 where the apple is elsewhere, the
// others 0; biases about 3.3 against 1.7 at T = 0.2, far beyond the head's small initial
// scores), so the untrained selector (lr 0) picks it for every input and its dev utility is
// the best single member's; trained, it still learns to follow the apple, and the saved
// folder (selector.json "pool_bias") picks as the kept epoch did.
TEST_F(Rspg, ThePoolPriorStartsAtTheBestMemberOnAverageThenLearnsPerInput) {
  auto skewed = [](std::vector<RspgExample> ex) {
    for (auto& e : ex)
      for (std::size_t r = 0; r < 3; ++r)
        if (e.utility[r] < 1) e.utility[r] = r == 2 ? 0.5 : 0.0;
    return ex;
  };
  const auto train = skewed(synthetic(64, 1, false)), dev = skewed(synthetic(32, 2, false));
  std::vector<double> member(3, 0.0);
  for (const auto& e : dev)
    for (std::size_t r = 0; r < 3; ++r) member[r] += e.utility[r] / static_cast<double>(dev.size());
  ASSERT_GT(member[2], std::max(member[0], member[1]));
  auto off = tiny(root_, "prior_off", RspgVariant::Pre);
  off.pool_prior = true;
  off.fit.lr = 0;
  off.fit.epochs = 1;
  const auto start = train_rspg(train, dev, off);
  EXPECT_NEAR(start.init_dev_utility, member[2], 1e-9) << "the untrained selector is not the best member on average";
  EXPECT_EQ(start.best_epoch, 0u);

  auto o = tiny(root_, "prior", RspgVariant::Pre);
  o.pool_prior = true;
  const auto res = train_rspg(train, dev, o);
  ASSERT_GT(res.best_epoch, 0u) << "no epoch beat the prior's start on dev";
  const auto& best = res.epochs[res.best_epoch - 1];
  EXPECT_GT(best.dev_utility, res.init_dev_utility + 0.1) << res.init_dev_utility << " -> " << best.dev_utility;
  auto sel = neural::Selector::load(o.fit.out, "cpu");
  ASSERT_EQ(sel->pool_bias().size(), 3u);
  double utility = 0;
  for (const auto& e : dev) {
    const auto sc = sel->score(e.query, e.prompts, {});
    utility += e.utility[static_cast<std::size_t>(std::max_element(sc.begin(), sc.end()) - sc.begin())];
  }
  EXPECT_NEAR(utility / static_cast<double>(dev.size()), best.dev_utility, 1e-9);

  // Bad input: prompts that are not one per pool member, and a selector.json whose pool_bias
  // does not match its pool, are refused with a message rather than scored without the bias.
  try {
    sel->score(dev[0].query, std::vector<std::string>(dev[0].prompts.begin(), dev[0].prompts.begin() + 2), {});
    ADD_FAILURE() << "scored 2 prompts for a pool of 3";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("2 prompts for a pool of 3"), std::string::npos) << e.what();
  }
  auto cfg = models::read_json_file(o.fit.out / "selector.json");
  cfg["pool_bias"] = std::vector<double>{0.1, 0.2};
  models::write_json_file(o.fit.out / "selector.json", cfg);
  try {
    neural::Selector::load(o.fit.out, "cpu");
    ADD_FAILURE() << "loaded a pool_bias of 2 values for a pool of 3";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("pool_bias has 2 values for a pool of 3"), std::string::npos) << e.what();
  }
}

// A selector trained on documents (attune serve's rspg learner: texts "documents") is a
// retriever spec of its own: each pool member ranks the candidates, the selector reads each
// member's first document and serves the ranking of the one it picks. Here it learnt that a
// list whose first document holds "apple" helps; recency and bm25 put different documents
// first, and it must serve whichever list starts with the apple, both ways round. A selector
// trained on the task's prompts (the default) is refused as a retriever, naming eval.
TEST_F(Rspg, ADocumentsTrainedSelectorServesAsARetrieverAndAPromptsTrainedOneIsRefused) {
  const auto& w = testing::tiny_words();
  // Two candidates a query: "new" (newest: recency's first) and "old" (it holds the query's
  // word: bm25's first); "apple" in one of them. The examples are built as the server's
  // learner builds them: each member's ranking, its first document's text, its utility.
  const auto recency = retrieval::make_retriever("recency", 1), bm25 = retrieval::make_retriever("bm25", 1);
  const auto candidates = [&](Rng& rng, retrieval::Query& q, bool apple_in_new) {
    q.id = "q";
    q.text = w[20 + rng.below(5)];
    std::vector<Document> docs(2);
    docs[0].id = "new";
    docs[0].date = "2026-01-01";
    docs[1].id = "old";
    docs[1].date = "2020-01-01";
    for (auto& d : docs)
      for (int t = 0; t < 3; ++t) d.text += (t ? " " : "") + w[rng.below(10)];
    docs[1].text += " " + q.text;
    docs[apple_in_new ? 0 : 1].text += " apple";
    return docs;
  };
  const auto examples = [&](std::size_t n, std::uint64_t seed) {
    Rng rng(seed);
    std::vector<RspgExample> out;
    for (std::size_t i = 0; i < n; ++i) {
      retrieval::Query q;
      const bool apple_in_new = rng.below(2);
      const auto docs = candidates(rng, q, apple_in_new);
      RspgExample e;
      e.id = "d" + std::to_string(i);
      e.query = q.text;
      for (const auto* member : {recency.get(), bm25.get()}) {
        const auto r = member->rank(q, docs, 1);
        e.prompts.push_back(neural::selector_documents_text(docs, r, 1));
        e.utility.push_back(docs[r.indices[0]].text.find("apple") != std::string::npos ? 1.0 : 0.0);
      }
      out.push_back(e);
    }
    return out;
  };
  auto o = tiny(root_, "docs", RspgVariant::Pre);
  o.pool = {"recency", "bm25"};
  o.texts = "documents";
  o.k = 1;
  const auto res = train_rspg(examples(64, 5), examples(32, 6), o);
  ASSERT_GT(res.best_epoch, 0u);
  ASSERT_GT(res.epochs[res.best_epoch - 1].dev_success, 0.9);
  neural::register_selector_retriever("cpu");
  const auto selector = retrieval::make_retriever(o.fit.out.string(), 1);
  Rng rng(9);
  std::size_t right = 0, n = 0;
  for (int i = 0; i < 20; ++i)
    for (const bool apple_in_new : {false, true}) {
      retrieval::Query q;
      const auto docs = candidates(rng, q, apple_in_new);
      const auto r = selector->rank(q, docs, 2);
      ASSERT_EQ(r.size(), 2u);
      right += r.ids[0] == (apple_in_new ? "new" : "old");
      ++n;
    }
  EXPECT_GE(right, n * 9 / 10) << right << " of " << n << " served lists start with the apple";
  auto p = tiny(root_, "prompts", RspgVariant::Pre);
  p.fit.epochs = 1;
  train_rspg(synthetic(8, 1, false), synthetic(4, 2, false), p);
  try {
    retrieval::make_retriever(p.fit.out.string(), 1);
    ADD_FAILURE() << "a prompts-trained selector was made a retriever";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("attune eval"), std::string::npos) << e.what();
  }
}

TEST_F(Rspg, PostReadsPromptAndOutputAndResumesToTheSameWeights) {
  const auto train = synthetic(24, 3, true), dev = synthetic(8, 4, true);
  auto full = tiny(root_, "full", RspgVariant::Post);
  full.fit.epochs = 3;
  full.fit.checkpoint_every = 2;
  train_rspg(train, dev, full);
  auto part = full;
  part.fit.out = root_ / "part";
  part.fit.stop_after = 4;
  EXPECT_EQ(train_rspg(train, dev, part).steps_done, 4u);
  part.fit.stop_after = 0;
  part.fit.resume = true;
  EXPECT_EQ(train_rspg(train, dev, part).steps_done, 9u);
  // Also killed before the first epoch ended, when no epoch is kept yet.
  auto early = full;
  early.fit.out = root_ / "early";
  early.fit.stop_after = 2;
  EXPECT_EQ(train_rspg(train, dev, early).steps_done, 2u);
  early.fit.stop_after = 0;
  early.fit.resume = true;
  EXPECT_EQ(train_rspg(train, dev, early).steps_done, 9u);
  for (const auto& out : {part.fit.out, early.fit.out})
    for (const char* file : {"model.safetensors", "selector_head.safetensors"}) {
      const auto a = models::WeightSet::open_file(full.fit.out / file), b = models::WeightSet::open_file(out / file);
      for (const auto& n : a.names())
        EXPECT_TRUE(torch::equal(models::to_tensor(a.get(n)), models::to_tensor(b.get(n)))) << out << " " << n;
    }
  auto sel = neural::Selector::load(full.fit.out, "cpu");
  EXPECT_EQ(parse_rspg_variant(sel->variant()), RspgVariant::Post);
  EXPECT_THROW(sel->score(dev[0].query, dev[0].prompts, {}), Error);  // Post needs the outputs
  EXPECT_EQ(sel->score(dev[0].query, dev[0].prompts, dev[0].outputs).size(), 3u);
}

// Which pool member helps depends on the input x alone, and each prompt is long filler
// (each member's from its own words, as retrievers bring their own documents) ending with
// x, as LaMP prompts end with the input: cut to 8 tokens, a selector reading the prompt
// alone never sees x, one reading x first always does.
std::vector<RspgExample> x_decides(std::size_t n, std::uint64_t seed) {
  const auto& w = testing::tiny_words();
  Rng rng(seed);
  std::vector<RspgExample> out;
  for (std::size_t i = 0; i < n; ++i) {
    RspgExample e;
    e.id = "x" + std::to_string(i);
    const std::size_t which = rng.below(2);
    e.query = w[20 + which];  // "debian" -> member 0 helps, "package" -> member 1
    for (std::size_t r = 0; r < 3; ++r) {
      std::string p;
      for (int t = 0; t < 12; ++t) p += (t ? " " : "") + w[5 * r + rng.below(5)];
      e.prompts.push_back(p + " " + e.query);
      e.utility.push_back(r == which ? 1.0 : 0.0);
    }
    out.push_back(e);
  }
  return out;
}

TEST_F(Rspg, AQueryFirstSelectorSeesTheInputThatAPromptOnlyOneLosesToTheCut) {
  const auto train = x_decides(192, 5), dev = x_decides(32, 6);
  auto first = tiny(root_, "first", RspgVariant::Pre);
  first.max_length = 8;
  first.temperature = 1;
  first.fit.epochs = 16;
  first.fit.batch_size = 16;
  first.fit.lr = 1e-2;
  const auto a = train_rspg(train, dev, first);
  ASSERT_GT(a.best_epoch, 0u);
  EXPECT_GE(a.epochs[a.best_epoch - 1].dev_success, 0.9) << "a query-first selector did not learn what x decides";
  EXPECT_EQ(models::read_json_file(first.fit.out / "selector.json").at("input"), "query-first");
  EXPECT_EQ(neural::Selector::load(first.fit.out, "cpu")->input(), models::SelectorInput::QueryFirst);
  auto prompt = first;
  prompt.fit.out = root_ / "prompt";
  prompt.input = models::SelectorInput::Prompt;
  const auto b = train_rspg(train, dev, prompt);
  double best = b.init_dev_success;
  for (const auto& e : b.epochs) best = std::max(best, e.dev_success);
  EXPECT_LE(best, 0.75) << "a prompt-only selector learned what only x (cut off) decides";
  EXPECT_EQ(neural::Selector::load(prompt.fit.out, "cpu")->input(), models::SelectorInput::Prompt);
  // A folder from before selector.json recorded "input" reads the prompt alone.
  auto cfg = models::read_json_file(prompt.fit.out / "selector.json");
  cfg.erase("input");
  models::write_json_file(prompt.fit.out / "selector.json", cfg);
  EXPECT_EQ(neural::Selector::load(prompt.fit.out, "cpu")->input(), models::SelectorInput::Prompt);
  cfg["input"] = "sideways";
  models::write_json_file(prompt.fit.out / "selector.json", cfg);
  EXPECT_THROW(neural::Selector::load(prompt.fit.out, "cpu"), Error);
  auto no_x = train;
  no_x[3].query.clear();
  auto c = first;
  c.fit.out = root_ / "no_x";
  EXPECT_THROW(train_rspg(no_x, dev, c), Error);  // a query-first selector needs x
}

TEST_F(Rspg, BadInputIsRefused) {
  auto o = tiny(root_, "bad", RspgVariant::Post);
  EXPECT_THROW(train_rspg(synthetic(4, 1, false), {}, o), Error);  // Post without outputs
  o = tiny(root_, "bad1", RspgVariant::Pre);
  o.pool = {"bm25"};
  EXPECT_THROW(train_rspg(synthetic(4, 1, false), {}, o), UsageError);
  o = tiny(root_, "bad2", RspgVariant::Pre);
  auto short_pool = synthetic(4, 1, false);
  short_pool[1].utility.pop_back();
  EXPECT_THROW(train_rspg(short_pool, {}, o), Error);
  EXPECT_THROW(parse_rspg_variant("rspg"), UsageError);
  EXPECT_THROW(neural::Selector::load(root_ / "init", "cpu"), Error);  // not a selector folder
}

}  // namespace
}  // namespace attune::train
