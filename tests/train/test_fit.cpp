// The one training loop (train::fit) on a toy learner whose every number can be checked:
// least squares w·x ≈ y over fixed items. Gradient accumulation, the schedule, dev
// selection, checkpoints and resume, divergence and option errors.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <iterator>
#include <unistd.h>

#include "attune/core/error.h"
#include "checkpoint.h"
#include "fit.h"

namespace attune::train {
namespace {

namespace fs = std::filesystem;

class ToyLearner final : public Learner {
 public:
  ToyLearner(const FitOptions& o, std::vector<double> dev_values = {}) : o_(o), dev_values_(std::move(dev_values)) {
    for (int i = 0; i < 10; ++i) {
      x_.push_back(torch::tensor({1.0, 0.1 * i, std::sin(i)}, torch::kFloat64));
      y_.push_back(0.8 + 0.06 * i - 0.5 * std::sin(i));  // w = (0.8, 0.6, -0.5) fits exactly
    }
    w_ = torch::zeros({3}, torch::kFloat64).requires_grad_(true);
    opt_ = std::make_unique<torch::optim::Adam>(std::vector<torch::Tensor>{w_}, torch::optim::AdamOptions(o.lr));
  }
  std::string name() const override { return "toy"; }
  std::size_t size() const override { return x_.size(); }
  std::vector<std::size_t> order(std::size_t epoch) const override { return epoch_order(o_.seed, "toy-", epoch, size()); }
  std::vector<torch::Tensor> parameters() override { return {w_}; }
  torch::optim::Optimizer& optimizer() override { return *opt_; }
  void train_mode(bool) override {}
  torch::Tensor loss(const MicroBatch& mb) override {
    lrs.push_back(opt_->param_groups()[0].options().get_lr());
    steps.push_back(mb.step);
    auto l = torch::zeros({}, torch::kFloat64);
    for (auto i : mb.items) l = l + (w_.dot(x_[i]) - y_[i]).pow(2);
    return (l / static_cast<double>(mb.items.size())) * poison;
  }
  std::optional<DevValue> dev() override {
    if (dev_values_.empty()) return std::nullopt;
    const double v = dev_values_[std::min(dev_calls_++, dev_values_.size() - 1)];
    return DevValue{v, {{"dev_v", v}}, " v " + std::to_string(v)};
  }
  bool keeps_best_epoch() const override { return !dev_values_.empty(); }
  void save_kept(const FitState& st) override { kept.push_back(st.best_epoch); }
  nlohmann::json signature() const override { return {{"lr", o_.lr}, {"seed", o_.seed}}; }
  void save(const fs::path& dir, const FitState&) override {
    std::ofstream(dir / "w.json") << nlohmann::json(weights()).dump();
  }
  void load(const fs::path& dir) override {
    std::ifstream in(dir / "w.json");
    const auto w = nlohmann::json::parse(in).get<std::vector<double>>();
    w_.copy_(torch::tensor(w, torch::kFloat64));
  }
  void finish(const FitState&, double) override { finished = true; }
  // The mean loss over every item (no gradient).
  double full_loss() const {
    torch::NoGradGuard g;
    double sum = 0;
    for (std::size_t i = 0; i < x_.size(); ++i) sum += (w_.dot(x_[i]) - y_[i]).pow(2).item<double>();
    return sum / static_cast<double>(x_.size());
  }
  std::vector<double> weights() const {
    auto c = w_.detach().contiguous();
    return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
  }

  std::vector<double> lrs;
  std::vector<std::size_t> steps, kept;
  double poison = 1.0;
  bool finished = false;

 private:
  const FitOptions& o_;
  std::vector<double> dev_values_;
  std::size_t dev_calls_ = 0;
  std::vector<torch::Tensor> x_;
  std::vector<double> y_;
  torch::Tensor w_;
  std::unique_ptr<torch::optim::Adam> opt_;
};

class Fit : public ::testing::Test {
 protected:
  fs::path root_ = fs::temp_directory_path() / ("attune_fit_" + std::to_string(::getpid()));
  void SetUp() override { fs::remove_all(root_); }
  void TearDown() override { fs::remove_all(root_); }
  FitOptions options(const std::string& out) const {
    FitOptions o;
    o.out = root_ / out;
    o.epochs = 3;
    o.batch_size = 4;  // 10 items: steps of 4, 4, 2
    o.micro_batch = 4;
    o.lr = 0.2;
    o.warmup = 0.2;
    o.clip = 0;
    o.quiet = true;
    o.seed = 11;
    o.checkpoint_every = 2;
    return o;
  }
};

TEST_F(Fit, MicroBatchesAccumulateToTheWholeBatchsGradient) {
  auto whole = options("whole"), micro = options("micro");
  micro.micro_batch = 1;
  ToyLearner a(whole), b(micro);
  const double before = a.full_loss();
  const auto ra = fit(a, whole), rb = fit(b, micro);
  EXPECT_EQ(ra.state.total_steps, 9u);
  EXPECT_EQ(rb.steps_done, 9u);
  EXPECT_EQ(b.steps.size(), 30u);  // every item its own forward
  for (std::size_t i = 0; i < 3; ++i) EXPECT_NEAR(a.weights()[i], b.weights()[i], 1e-12) << i;
  for (std::size_t s = 0; s < 9; ++s) EXPECT_NEAR(ra.losses[s], rb.losses[s], 1e-12) << s;
  EXPECT_LT(a.full_loss(), 0.5 * before);  // it learns
  EXPECT_TRUE(a.finished);
}

TEST_F(Fit, TheLearningRateWarmsUpLinearlyThenDecaysToZero) {
  auto o = options("lr");
  ToyLearner l(o);
  fit(l, o);
  // 9 steps, warmup ceil(0.2 * 9) = 2: 0.1, 0.2, then 0.2 * (9 - s) / 7.
  const std::vector<double> want = {0.1, 0.2, 0.2, 0.2 * 6 / 7, 0.2 * 5 / 7, 0.2 * 4 / 7,
                                    0.2 * 3 / 7, 0.2 * 2 / 7, 0.2 * 1 / 7};
  ASSERT_EQ(l.lrs.size(), want.size());
  for (std::size_t s = 0; s < want.size(); ++s) EXPECT_NEAR(l.lrs[s], want[s], 1e-15) << s;
  o.out = root_ / "exact";
  o.warmup_steps = 4;  // an exact count instead of the fraction
  ToyLearner e(o);
  fit(e, o);
  EXPECT_NEAR(e.lrs[3], 0.2, 1e-15);
  EXPECT_NEAR(e.lrs[4], 0.2 * 5 / 5, 1e-15);
  EXPECT_NEAR(e.lrs[5], 0.2 * 4 / 5, 1e-15);
}

TEST_F(Fit, TheKeptEpochIsTheBestOnDevAndTiesKeepTheEarlier) {
  auto o = options("dev");
  o.epochs = 4;
  ToyLearner l(o, {0.0, 0.1, 0.5, 0.3, 0.5});  // initial model, then epochs 1..4
  const auto r = fit(l, o);
  EXPECT_EQ(r.state.best_epoch, 2u);
  EXPECT_EQ(l.kept, (std::vector<std::size_t>{0, 1, 2}));  // the start (epoch 0) is saved first
  ASSERT_TRUE(r.initial_dev);
  EXPECT_EQ(r.initial_dev->value, 0.0);
  ASSERT_EQ(r.state.epochs.size(), 4u);
  EXPECT_EQ(r.state.epochs_json()[2]["dev_v"].get<double>(), 0.3);
}

TEST_F(Fit, AResumedRunEndsWithTheWeightsOfAnUninterruptedOne) {
  auto o = options("full");
  ToyLearner full(o);
  fit(full, o);
  for (std::size_t stop : {1u, 4u, 5u}) {  // mid-epoch without a checkpoint after it, at one, after an epoch end
    auto p = options("part" + std::to_string(stop));
    p.stop_after = stop;
    ToyLearner first(p);
    const auto r1 = fit(first, p);
    EXPECT_FALSE(first.finished);
    p.stop_after = 0;
    p.resume = true;
    ToyLearner second(p);
    const auto r2 = fit(second, p);
    EXPECT_TRUE(second.finished);
    EXPECT_EQ(r2.steps_done, 9u);
    // The checkpoint before the stop: every checkpoint_every steps and at epoch ends (3, 6).
    EXPECT_EQ(second.steps.front(), stop == 1 ? 1u : stop) << stop;
    EXPECT_EQ(second.weights(), full.weights()) << stop;
    EXPECT_EQ(r2.state.epochs.size(), 3u);
  }
}

TEST_F(Fit, OutputFolderRulesAndOptionErrorsNameTheField) {
  auto o = options("again");
  ToyLearner a(o);
  fit(a, o);
  ToyLearner b(o);
  EXPECT_THROW(fit(b, o), UsageError);  // holds a run: resume it or choose another
  auto none = options("nothing");
  none.resume = true;
  ToyLearner c(none);
  EXPECT_THROW(fit(c, none), UsageError);  // no checkpoint to resume
  // A run killed before its first checkpoint leaves its files and none: neither a fresh run
  // nor --resume can use the folder, and both say so rather than send the user to the other.
  auto killed = options("killed");
  fs::create_directories(killed.out);
  std::ofstream(killed.out / "attune_train.json") << "{}";
  std::ofstream(killed.out / "attune_model.json") << R"({"kind": "dense", "complete": false})";
  for (bool resume : {false, true}) {
    killed.resume = resume;
    ToyLearner k(killed);
    try {
      fit(k, killed);
      ADD_FAILURE() << "resume " << resume;
    } catch (const UsageError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("nothing to resume"), std::string::npos) << m;
      EXPECT_NE(m.find("remove the folder"), std::string::npos) << m;
      EXPECT_EQ(m.find("resume it (--resume)"), std::string::npos) << m;
    }
  }
  auto other = options("again");
  other.resume = true;
  other.lr = 0.01;  // a resumed run must keep its options
  ToyLearner d(other);
  try {
    fit(d, other);
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("\"lr\""), std::string::npos) << e.what();
  }
  auto bad = options("bad");
  for (auto set : std::vector<std::function<void(FitOptions&)>>{
           [](FitOptions& x) { x.lr = -1; }, [](FitOptions& x) { x.epochs = 0; },
           [](FitOptions& x) { x.micro_batch = 0; }, [](FitOptions& x) { x.warmup = 1; },
           [](FitOptions& x) { x.clip = std::nan(""); }}) {
    auto x = bad;
    set(x);
    try {
      x.validate();
      FAIL();
    } catch (const UsageError& e) {
      EXPECT_EQ(std::string(e.what()).rfind("fit.", 0), 0u) << e.what();
      EXPECT_EQ(std::string(e.what()).find("--"), std::string::npos) << e.what();  // no CLI flag names
    }
  }
}

TEST_F(Fit, NoEpochWorseThanTheStartOnDevIsKept) {
  auto o = options("start");
  o.epochs = 3;
  ToyLearner l(o, {0.4, 0.1, 0.4, 0.3});  // the start, then epochs 1..3: none beats 0.4
  const auto r = fit(l, o);
  EXPECT_EQ(r.state.best_epoch, 0u);
  EXPECT_EQ(l.kept, (std::vector<std::size_t>{0}));
  // The papers' rule: the best trained epoch, however it compares with the start.
  auto paper = options("paper");
  paper.epochs = 3;
  paper.keep_start = false;
  ToyLearner p(paper, {0.4, 0.1, 0.4, 0.3});
  const auto rp = fit(p, paper);
  EXPECT_EQ(rp.state.best_epoch, 2u);
  EXPECT_EQ(p.kept, (std::vector<std::size_t>{1, 2}));
}

TEST_F(Fit, LearningSwitchedOffLeavesTheWeightsAndKeepsTheStart) {
  auto o = options("off");
  o.lr = 0;  // the control run of a learning check
  ToyLearner l(o, {0.2, 0.2, 0.2, 0.2});
  const auto before = l.weights();
  const auto r = fit(l, o);
  EXPECT_EQ(l.weights(), before);
  EXPECT_EQ(r.state.best_epoch, 0u);  // no epoch beat the start: the start is kept
  EXPECT_EQ(l.kept, (std::vector<std::size_t>{0}));
}

TEST_F(Fit, TrainingNeverWritesOverForeignFilesOrItsInputsAndLocksItsFolder) {
  auto message = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("(no usage error)");
  };
  // A non-empty folder that is not a run of ours: refused, its files untouched.
  auto o = options("foreign");
  fs::create_directories(o.out);
  std::ofstream(o.out / "config.json") << "{\"mine\": true}";
  ToyLearner a(o);
  auto e = message([&] { fit(a, o); });
  EXPECT_NE(e.find("is not empty (it holds config.json)"), std::string::npos) << e;
  std::ifstream in(o.out / "config.json");
  std::string kept((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(kept, "{\"mine\": true}");
  // An empty existing folder is fine.
  auto empty = options("empty");
  fs::create_directories(empty.out);
  ToyLearner b(empty);
  EXPECT_NO_THROW(fit(b, empty));
  // out = the folder the run starts from, or a folder inside it.
  auto same = options("init");
  same.inputs = {root_ / "init"};
  e = message([&] { same.validate(); });
  EXPECT_NE(e.find("is the model folder the run starts from"), std::string::npos) << e;
  same.out = root_ / "init" / "." / "sub";
  e = message([&] { same.validate(); });
  EXPECT_NE(e.find("is inside the model folder the run starts from"), std::string::npos) << e;
  same.out = root_ / "init2";
  EXPECT_NO_THROW(same.validate());
  // A second run on a folder another run holds is refused, naming the holder.
  auto locked = options("locked");
  {
    const OutputLock held(locked.out);
    ToyLearner c(locked);
    e = message([&] { fit(c, locked); });
    EXPECT_NE(e.find("is being written by another attune run (pid " + std::to_string(::getpid()) + ")"), std::string::npos) << e;
  }
  ToyLearner d(locked);  // released: the folder (holding only the lock file) can be used
  EXPECT_NO_THROW(fit(d, locked));
}

TEST_F(Fit, TheModelMarkerSaysCompleteOnlyOnceTheRunFinished) {
  auto o = options("marked");
  o.stop_after = 2;  // as if killed after two steps
  ToyLearner a(o);
  fit(a, o);
  write_model_marker(o.out, "dense", "toy");  // what a learner's save_kept writes
  auto marker = [&] {
    std::ifstream in(o.out / "attune_model.json");
    return nlohmann::json::parse(in);
  };
  EXPECT_EQ(marker()["complete"], false);
  o.resume = true;
  o.stop_after = 0;
  ToyLearner b(o);
  fit(b, o);
  EXPECT_EQ(marker()["complete"], true);
  EXPECT_EQ(marker()["kind"], "dense");
}

TEST_F(Fit, ANonFiniteLossIsAnErrorNamingTheStep) {
  auto o = options("nan");
  ToyLearner l(o);
  l.poison = std::nan("");
  try {
    fit(l, o);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("diverged at step 1"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace attune::train
