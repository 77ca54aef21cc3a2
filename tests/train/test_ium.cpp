// IUM's reranker: agent tokens (reserved [unusedN], [UNK] for an unseen agent), the input
// layout, a reranker that learns agent-dependent feedback and reads it back from its folder
// (also through the ium: retriever spec), and bad input refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>

#include "attune/core/error.h"
#include "attune/core/rng.h"
#include "attune/models/ium.h"
#include "attune/models/ium_net.h"
#include "attune/neural/dense.h"
#include "attune/retrieval/spec.h"
#include "attune/text/subword.h"
#include "attune/train/ium.h"
#include "tiny_bert.h"

namespace attune::train {
namespace {

namespace fs = std::filesystem;

// The tiny vocabulary plus BERT's reserved tokens for two tasks and two models.
void write_ium_encoder(const fs::path& dir) {
  fs::create_directories(dir);
  std::ofstream out(dir / "vocab.txt");
  for (const char* s : {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[unused0]", "[unused1]", "[unused500]", "[unused501]"})
    out << s << "\n";
  for (const auto& w : testing::tiny_words()) out << w << "\n";
  out.close();
  auto c = testing::tiny_config();
  c.vocab_size += 4;
  c.hidden_size = 16;
  c.intermediate_size = 32;
  models::SaveBertOptions so;
  models::save_bert(testing::random_bert(c, false, 3), dir, so);
}

// Task "qa" finds a document useful when it holds "apple", task "slot" when it holds
// "tree"; the same (query, document) pairs for both, so only tid tells them apart. Every
// three consecutive pairs are one candidate list (one query's, per task).
std::vector<IumSample> feedback(std::size_t n, std::uint64_t seed) {
  const auto& w = testing::tiny_words();
  Rng rng(seed);
  std::vector<IumSample> out;
  for (std::size_t i = 0; i < n; ++i) {
    std::string q = w[20 + rng.below(5)] + " " + w[20 + rng.below(5)], d;
    for (int k = 0; k < 5; ++k) d += (k ? " " : "") + w[rng.below(10)];
    const auto pick = rng.below(3);
    if (pick == 0) d += " apple";
    if (pick == 1) d += " tree";
    const std::string list = std::to_string(i / 3);
    out.push_back({"qa", "reference", q, d, pick == 0 ? 1.0 : 0.0, "qa/" + list});
    out.push_back({"slot", "reference", q, d, pick == 1 ? 1.0 : 0.0, "slot/" + list});
  }
  return out;
}

class Ium : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = testing::fresh_dir(std::string("ium_") + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    write_ium_encoder(root_ / "init");
  }
  void TearDown() override { fs::remove_all(root_); }
  IumOptions tiny(const std::string& out) const {
    IumOptions o;
    o.init = root_ / "init";
    o.fit.out = root_ / out;
    o.max_length = 24;
    o.fit.epochs = 20;
    o.fit.batch_size = 16;
    o.fit.micro_batch = 16;
    o.fit.lr = 3e-3;
    o.fit.quiet = true;
    o.fit.seed = 2;
    return o;
  }
  fs::path root_;
};

TEST_F(Ium, AgentTokensAreReservedTokensAndUnseenAgentsReadUnk) {
  const auto tok = text::SubwordTokenizer::load(root_ / "init");
  const auto a = models::AgentTokens::make(*tok, {"qa", "slot"}, {"reference", "planted"});
  EXPECT_EQ(a.task("qa"), *tok->token_to_id("[unused0]"));
  EXPECT_EQ(a.task("slot"), *tok->token_to_id("[unused1]"));
  EXPECT_EQ(a.model("planted"), *tok->token_to_id("[unused501]"));
  EXPECT_EQ(a.task("factcheck"), *tok->unk_id());
  EXPECT_EQ(a.model("gpt"), *tok->unk_id());
  // Three tasks need [unused2], which this vocabulary lacks: refused, naming it.
  try {
    models::AgentTokens::make(*tok, {"qa", "slot", "factcheck"}, {});
    ADD_FAILURE() << "accepted a vocabulary without [unused2]";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[unused2]"), std::string::npos) << e.what();
  }
  // [CLS] tid mid query [SEP] doc [SEP].
  const auto rows = models::encode_ium_inputs(*tok, {a.task("slot")}, {a.model("reference")}, {{"cat", "red tree"}}, 24);
  ASSERT_EQ(rows.size(), 1u);
  const std::vector<std::int64_t> want = {*tok->cls_id(), a.task("slot"), a.model("reference"), *tok->token_to_id("cat"),
                                          *tok->sep_id(), *tok->token_to_id("red"), *tok->token_to_id("tree"), *tok->sep_id()};
  EXPECT_EQ(rows[0], want);
}

TEST_F(Ium, LearnsFeedbackThatDependsOnTheAgentAndTheFolderScoresAsTrained) {
  const auto tr = feedback(96, 1), dv = feedback(32, 2);
  auto to = tiny("ium");
  to.positive_weight = 1;  // 002's plain cross-entropy: on this tiny set it learns in 20 epochs, balanced does not
  const auto res = train_ium(tr, dv, to);
  ASSERT_EQ(res.steps_done, res.total_steps);
  ASSERT_GE(res.best_epoch, 1u);
  const auto& kept = res.epochs[res.best_epoch - 1];
  EXPECT_GT(kept.dev_accuracy, 0.9) << "start " << res.init_dev_accuracy;
  EXPECT_GT(kept.dev_log_likelihood, res.init_dev_log_likelihood);
  // The kept epoch is the one whose top-ranked candidate per list is most often useful.
  EXPECT_GT(kept.dev_top1, res.init_dev_top1);
  for (const auto& e : res.epochs) EXPECT_LE(e.dev_top1, kept.dev_top1);
  EXPECT_EQ(res.positive_weight, 1.0);

  const auto m = models::IumModel::load(root_ / "ium", Device::parse("cpu"));
  EXPECT_EQ(m->tasks(), (std::vector<std::string>{"qa", "slot"}));
  // The same documents, ranked for each agent: the agent's own kind of document first.
  const std::vector<std::string> docs = {"cat sat on the mat", "red dog ran fast apple", "the cat sat a mat tree"};
  const auto qa = m->score("qa", "reference", "kernel network", docs), slot = m->score("slot", "reference", "kernel network", docs);
  EXPECT_GT(qa[1], qa[2]);
  EXPECT_GT(slot[2], slot[1]);
  // Through the retriever spec, for one agent.
  neural::register_retrievers(Device::parse("cpu"));
  const auto r = retrieval::make_retriever(retrieval::parse_retriever_spec("ium:" + (root_ / "ium").string() + "?task=slot&model=reference"), 0);
  std::vector<Document> cands;
  for (std::size_t i = 0; i < docs.size(); ++i) cands.push_back({"d" + std::to_string(i), "", docs[i], {}, {}});  // shared-corpus passages
  const auto ranking = r->rank({"q", "u", "kernel network"}, cands, 3);
  ASSERT_FALSE(ranking.indices.empty());
  EXPECT_EQ(ranking.indices[0], 2u);
  // An agent the folder never saw reads [UNK]: a valid score, not an error.
  const auto unseen = m->score("factcheck", "gpt", "kernel network", docs);
  EXPECT_EQ(unseen.size(), 3u);
  for (float p : unseen) {
    EXPECT_GT(p, 0.0f);
    EXPECT_LT(p, 1.0f);
  }
}

// On the CPU the folder scores without torch operators (BertNative), as the dense: and
// cross: encoders do; ATTUNE_ENCODER_KERNEL=torch takes torch's. The same logits either way,
// over several length-sorted batches of rows of different lengths, for a seen and an unseen agent.
TEST_F(Ium, TheFolderScoresTheSameOnEitherKernel) {
  auto to = tiny("kernels");
  to.fit.epochs = 1;
  train_ium(feedback(48, 1), feedback(12, 2), to);
  const auto& w = testing::tiny_words();
  std::vector<std::string> docs;
  for (std::size_t i = 0; i < 70; ++i) {
    std::string d;
    for (std::size_t k = 0; k <= i % 23; ++k) d += (k ? " " : "") + w[(i * 7 + k * 3) % w.size()];
    docs.push_back(d);
  }
  for (const char* task : {"qa", "factcheck"}) {
    const auto native = models::IumModel::load(root_ / "kernels", Device::parse("cpu"))->logits(task, "reference", "kernel network", docs);
    ::setenv("ATTUNE_ENCODER_KERNEL", "torch", 1);
    const auto torch_ops = models::IumModel::load(root_ / "kernels", Device::parse("cpu"))->logits(task, "reference", "kernel network", docs);
    ::unsetenv("ATTUNE_ENCODER_KERNEL");
    ASSERT_EQ(native.size(), docs.size());
    ASSERT_EQ(torch_ops.size(), docs.size());
    for (std::size_t i = 0; i < docs.size(); ++i) EXPECT_NEAR(native[i], torch_ops[i], 1e-4) << task << " " << i;
    EXPECT_NE(*std::min_element(native.begin(), native.end()), *std::max_element(native.begin(), native.end()));
  }
}

// The default weighs a useful sample by the useless-to-useful ratio of the training samples.
TEST_F(Ium, UsefulSamplesAreWeighedByDefaultToBalanceTheClasses) {
  const auto tr = feedback(30, 4);
  double useful = 0;
  for (const auto& x : tr) useful += x.label;
  auto o = tiny("balanced");
  o.fit.epochs = 1;
  const auto res = train_ium(tr, {}, o);
  EXPECT_DOUBLE_EQ(res.positive_weight, (static_cast<double>(tr.size()) - useful) / useful);
  EXPECT_TRUE(res.agent_positive_weights.empty());

  // balance_per_agent: each agent's own ratio. Make slot's samples useful half as often as
  // they are (every other useful one relabelled useless), so the two agents' ratios differ.
  auto skewed = tr;
  std::size_t seen = 0;
  for (auto& x : skewed)
    if (x.task == "slot" && x.label > 0 && seen++ % 2 == 0) x.label = 0;
  const auto ratio = [&](const std::string& task) {
    double pos = 0, all = 0;
    for (const auto& x : skewed)
      if (x.task == task) pos += x.label, all += 1;
    return (all - pos) / pos;
  };
  auto pa = tiny("per-agent");
  pa.fit.epochs = 1;
  pa.balance_per_agent = true;
  const auto per = train_ium(skewed, {}, pa);
  ASSERT_EQ(per.agent_positive_weights.size(), 2u);
  EXPECT_DOUBLE_EQ(per.agent_positive_weights.at("qa|reference"), ratio("qa"));
  EXPECT_DOUBLE_EQ(per.agent_positive_weights.at("slot|reference"), ratio("slot"));
  EXPECT_GT(ratio("slot"), ratio("qa") + 1);
  const auto meta = models::read_json_file(root_ / "per-agent" / "attune_train.json");
  EXPECT_DOUBLE_EQ(meta.at("options").at("agent_positive_weights").at("slot|reference").get<double>(), ratio("slot"))
      << meta.dump();
  // The losses differ from the pooled run's on the same samples.
  auto pooled = tiny("pooled");
  pooled.fit.epochs = 1;
  EXPECT_NE(train_ium(skewed, {}, pooled).losses.front(), per.losses.front());
}

// --ium-initial-prior learned: the logit plus w z. Feedback that only the first stage's order
// explains (the candidate with the highest z is the useful one, documents random): the
// weight starts positive from the logistic fit, so the untrained reranker already ranks as
// the prior does; the folder records w, rerank(...) fuses with it, and on its own the folder
// refuses to rank.
TEST_F(Ium, TheInitialPriorIsFittedRecordedAndFusedByRerank) {
  const auto& w = testing::tiny_words();
  const auto lists = [&](std::size_t n, std::uint64_t seed) {
    Rng rng(seed);
    std::vector<IumSample> out;
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t top = rng.below(3);
      for (std::size_t j = 0; j < 3; ++j) {
        std::string d;
        for (int k = 0; k < 4; ++k) d += (k ? " " : "") + w[rng.below(12)];
        const double z = j == top ? 1.2 : (j == (top + 1) % 3 ? 0.0 : -1.2);
        out.push_back({"qa", "reference", w[20 + rng.below(5)], d, j == top ? 1.0 : 0.0, std::to_string(i), z});
      }
    }
    return out;
  };
  auto o = tiny("prior");
  o.initial_prior = true;
  o.fit.epochs = 2;
  const auto res = train_ium(lists(40, 1), lists(20, 2), o);
  ASSERT_EQ(res.steps_done, res.total_steps);
  EXPECT_GT(res.prior_weight_start, 1.0);
  EXPECT_GE(res.init_dev_top1, 0.95) << "the untrained reranker should rank as the prior does";
  const auto m = models::IumModel::load(root_ / "prior", Device::parse("cpu"));
  ASSERT_TRUE(m->initial_prior_weight().has_value());
  EXPECT_DOUBLE_EQ(*m->initial_prior_weight(), res.prior_weight);
  // Without the prior the same untrained reranker ranks the lists at chance.
  auto o2 = tiny("plain");
  o2.fit.epochs = 1;
  o2.fit.lr = 0;
  const auto plain = train_ium(lists(40, 1), lists(20, 2), o2);
  EXPECT_LT(plain.init_dev_top1, 0.7);
  EXPECT_FALSE(models::IumModel::load(root_ / "plain", Device::parse("cpu"))->initial_prior_weight().has_value());

  neural::register_retrievers(Device::parse("cpu"));
  const std::string ium = "ium:" + (root_ / "prior").string() + "?task=qa&model=reference";
  const auto fused = retrieval::make_retriever(retrieval::parse_retriever_spec("rerank(bm25,3," + ium + ")"), 0);
  EXPECT_NE(fused->name().find(",fuse=1:"), std::string::npos) << fused->name();
  std::vector<Document> cands = {{"a", "u", "red apple tree", {}, {}}, {"b", "u", "cat sat", {}, {}}, {"c", "u", "apple pie", {}, {}}};
  EXPECT_EQ(fused->rank({"q", "u", "apple"}, cands, 3).size(), 3u);
  // An explicit fuse= is kept.
  const auto own = retrieval::make_retriever(retrieval::parse_retriever_spec("rerank(bm25,3," + ium + ",fuse=2:0.5)"), 0);
  EXPECT_NE(own->name().find(",fuse=2:0.5"), std::string::npos) << own->name();
  // Alone, it refuses and names the spec to use.
  const auto alone = retrieval::make_retriever(retrieval::parse_retriever_spec(ium), 0);
  try {
    alone->rank({"q", "u", "apple"}, cands, 3);
    ADD_FAILURE() << "a folder trained with the prior ranked on its own";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("rerank(bm25,100,"), std::string::npos) << e.what();
  }
}

TEST_F(Ium, BadInputIsRefused) {
  auto s = feedback(4, 1);
  s[0].label = 0.5;
  EXPECT_THROW(train_ium(s, {}, tiny("half")), UsageError);
  auto o = tiny("unk");
  o.unk_fraction = 1.5;
  EXPECT_THROW(train_ium(feedback(4, 1), {}, o), UsageError);
  EXPECT_THROW(train_ium({}, {}, tiny("empty")), Error);
  auto none_useful = feedback(4, 1);
  for (auto& x : none_useful) x.label = 0;
  EXPECT_THROW(train_ium(none_useful, {}, tiny("none")), Error);  // nothing to rank up
  auto w = tiny("weight");
  w.positive_weight = -1;
  EXPECT_THROW(train_ium(feedback(4, 1), {}, w), UsageError);
  EXPECT_THROW(neural::parse_ium_arg("dir"), UsageError);
  EXPECT_THROW(neural::parse_ium_arg("dir?task=qa"), UsageError);
  EXPECT_THROW(neural::parse_ium_arg("dir?task=qa&model=m&k=3"), UsageError);
  const auto ok = neural::parse_ium_arg("some/dir?task=qa&model=local:x");
  EXPECT_EQ(ok.dir, "some/dir");
  EXPECT_EQ(ok.task, "qa");
  EXPECT_EQ(ok.model, "local:x");
}

}  // namespace
}  // namespace attune::train
