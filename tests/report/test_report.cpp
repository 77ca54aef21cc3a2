// `attune report`: reading eval and train outputs (errors name the file and field), the
// page's charts (one mark per datum), escaping, determinism, the CLI, and the page as
// headless Chromium renders it (skipped when Chromium is absent).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "../cli/cli_run.h"
#include "attune/core/error.h"
#include "attune/report/charts.h"
#include "attune/report/report.h"

namespace fs = std::filesystem;
using namespace attune::report;

namespace {

// An eval --out file as eval writes it: three rows (one an RSPG selector over the first
// two, one with a name that needs escaping), four examples, oracle bounds on two rows,
// significance and list overlap.
const char* const kEval = R"({
 "task": "commit_subject", "split": "test", "llm": "planted:gate:v3:word=test", "k": 1, "seed": 0, "examples": 4,
 "results": {
  "bm25": {"rouge-1": 0.25, "rouge-L": 0.2},
  "<b>rec</b>&": {"rouge-1": 0.5, "rouge-L": 0.4},
  "sel": {"rouge-1": 0.5, "rouge-L": 0.45}},
 "per_example": {
  "bm25": [{"id": "q1", "output": "", "metrics": {"rouge-1": 1.0, "rouge-L": 0.8}, "retrieved": ["d1"]},
           {"id": "q2", "output": "", "metrics": {"rouge-1": 0.0, "rouge-L": 0.0}, "retrieved": ["d2"]},
           {"id": "q3", "output": "", "metrics": {"rouge-1": 0.0, "rouge-L": 0.0}, "retrieved": ["d3"]},
           {"id": "q4", "output": "", "metrics": {"rouge-1": 0.0, "rouge-L": 0.0}, "retrieved": ["d4"]}],
  "<b>rec</b>&": [{"id": "q1", "output": "", "metrics": {"rouge-1": 0.0, "rouge-L": 0.0}, "retrieved": ["d5"]},
           {"id": "q2", "output": "", "metrics": {"rouge-1": 1.0, "rouge-L": 0.8}, "retrieved": ["d2"]},
           {"id": "q3", "output": "", "metrics": {"rouge-1": 1.0, "rouge-L": 0.8}, "retrieved": ["d6"]},
           {"id": "q4", "output": "", "metrics": {"rouge-1": 0.0, "rouge-L": 0.0}, "retrieved": ["d7"]}],
  "sel": [{"id": "q1", "output": "", "metrics": {"rouge-1": 1.0, "rouge-L": 0.8}, "retrieved": ["d1"], "chosen": "bm25"},
          {"id": "q2", "output": "", "metrics": {"rouge-1": 0.0, "rouge-L": 0.0}, "retrieved": ["d2"], "chosen": "bm25"},
          {"id": "q3", "output": "", "metrics": {"rouge-1": 1.0, "rouge-L": 0.8}, "retrieved": ["d6"], "chosen": "<b>rec</b>&"},
          {"id": "q4", "output": "", "metrics": {"rouge-1": 0.0, "rouge-L": 0.2}, "retrieved": ["d4"], "chosen": "bm25"}]},
 "significance": {
  "<b>rec</b>&": {"bm25": {"rouge-1": {"test": "paired-t", "statistic": 3.1, "p": 0.01, "better": true},
                           "rouge-L": {"test": "paired-t", "statistic": 1.1, "p": 0.3, "better": true}}},
  "bm25": {"<b>rec</b>&": {"rouge-1": {"test": "paired-t", "statistic": -3.1, "p": 0.01, "better": false},
                           "rouge-L": {"test": "paired-t", "statistic": -1.1, "p": null, "better": false}}}},
 "alpha": 0.05, "seconds": 0.5,
 "selection": {"sel": {"pool": ["bm25", "<b>rec</b>&"], "qpp_normalized": true, "methods": {
   "sel": {"success": 0.75, "metrics": {"rouge-1": 0.5, "rouge-L": 0.45}, "p_vs_selector": 1.0,
           "chosen_share": {"bm25": 0.75, "<b>rec</b>&": 0.25}},
   "wig": {"success": 0.5, "metrics": {"rouge-1": 0.25, "rouge-L": 0.2}, "p_vs_selector": 0.5,
           "chosen_share": {"bm25": 1.0, "<b>rec</b>&": 0.0}}}}},
 "oracle": {"bm25": {"depth": 4, "metric": "rouge-1", "best_single": 0.75, "worst_single": 0.0},
            "<b>rec</b>&": {"depth": 4, "metric": "rouge-1", "best_single": 1.0, "worst_single": 0.25}},
 "list_overlap": [
  {"a": "bm25", "b": "<b>rec</b>&", "jaccard": 0.25, "kendall_tau": -1.0, "examples": 4, "tau_examples": 3},
  {"a": "bm25", "b": "sel", "jaccard": 0.5, "kendall_tau": null, "examples": 4, "tau_examples": 0},
  {"a": "<b>rec</b>&", "b": "sel", "jaccard": 0.75, "kendall_tau": 0.5, "examples": 4, "tau_examples": 2}]
})";

// A ROPG-KD run's attune_train.json: three epochs with two dev values, the start's values.
const char* const kTrain = R"({
 "best_epoch": 2, "data": "git commit_subject train (200 examples), feedback of planted", "dev_examples": 100,
 "device": "auto",
 "epochs": [
  {"dev_oracle": 0.12, "dev_top1": 0.017, "epoch": 1, "loss": 1.07},
  {"dev_oracle": 0.12, "dev_top1": 0.0197, "epoch": 2, "loss": 0.87},
  {"dev_oracle": 0.12, "dev_top1": 0.0186, "epoch": 3, "loss": 0.73}],
 "init_dev_oracle": 0.12, "init_dev_top1": 0.016,
 "initial_prior": {"weight": -0.004, "weight_start": 0.0},
 "method": "ropg-kd", "options": {"batch_size": 16, "lr": 0.001, "rerank": {"initial": "bm25", "top_l": 16},
                                  "train_examples": 85, "note": "<script>alert(1)</script>"},
 "seconds_this_run": 4.03, "seed": 0, "steps": 18, "torch_threads": 2, "total_steps": 18
})";

class Report : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("attune_report_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path write(const std::string& name, const std::string& text) {
    const fs::path p = dir_ / name;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }
  fs::path train_dir(const std::string& name, const std::string& json = kTrain) {
    write(name + "/attune_train.json", json);
    write(name + "/attune_model.json", R"({"complete": true, "kind": "dense"})");
    return dir_ / name;
  }
  std::string page(const std::string& eval = kEval, bool with_train = true) {
    std::vector<EvalRun> e{read_eval(write("eval.json", eval))};
    std::vector<TrainRun> t;
    if (with_train) t = read_train(train_dir("ropg"));
    return render_html(e, t, {});
  }
  // The message of the UsageError `f` throws ("" when it throws none).
  template <class F>
  static std::string usage_error(F&& f) {
    try {
      f();
    } catch (const attune::UsageError& e) {
      return e.what();
    }
    return "";
  }

  fs::path dir_;
};

// Elements whose class list starts with "mark" and holds `kind`.
std::size_t marks(const std::string& html, const std::string& kind) {
  const std::regex re("class=\"mark " + kind + "[\" ]");
  return static_cast<std::size_t>(std::distance(std::sregex_iterator(html.begin(), html.end(), re), std::sregex_iterator()));
}
std::size_t count(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (auto p = s.find(what); p != std::string::npos; p = s.find(what, p + what.size())) ++n;
  return n;
}

}  // namespace

TEST(ReportCharts, EscapesEveryHtmlSpecialCharacter) {
  EXPECT_EQ(html_escape("<a href=\"x\">&'</a>"), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;&lt;/a&gt;");
  EXPECT_EQ(html_escape("plain text"), "plain text");
  EXPECT_EQ(format_number(-0.00001), "0.0000");
  EXPECT_EQ(format_number(0.123456), "0.1235");
  EXPECT_EQ(format_number(NAN), "n/a");
}

TEST(ReportCharts, OneMarkPerDatum) {
  const std::string bars = bar_chart("t", "y", {{"(a)", "a", 0.5, 0.1, "b", 0.9, 0.1, 0}, {"(b)", "b", std::nullopt, {}, "", {}, {}, 1},
                                                {"(c)", "c", -0.2, {}, "", {}, {}, 2}});
  EXPECT_EQ(marks(bars, "bar"), 2u) << "a bar without a value draws none";
  EXPECT_EQ(count(bars, "class=\"err\""), 1u);
  EXPECT_EQ(count(bars, "class=\"bound "), 2u);
  const std::string boxes = box_plot("t", "y", {{"a", "a", {1, 2, 3}, 0}, {"b", "b", {}, 1}, {"c", "c", {5}, 2}});
  EXPECT_EQ(marks(boxes, "box"), 2u);
  const std::string hist = histograms("t", {{"a", "a", {0, 0.5, 1}, 0}, {"b", "b", {0.2}, 1}}, 7);
  EXPECT_EQ(marks(hist, "bin"), 14u);
  const std::string lines = line_chart("t", "x", "y", {{"l1", {0, 1, 2}, {1, 2, 3}, 1.0, 0}, {"l2", {1, 2}, {3, 4}, {}, 1}});
  EXPECT_EQ(marks(lines, "point"), 5u);
  EXPECT_EQ(count(lines, "class=\"kept\""), 1u);
  Heatmap h;
  h.row_labels = {"r<1>"};
  h.col_labels = {"c1", "c2", "c3"};
  h.cells = {{{0.5, "", "tip", true}, {std::nullopt, "", "", true}, {std::nullopt, "", "", false}}};
  const std::string heat = heatmap_table(h);
  EXPECT_EQ(marks(heat, "cell"), 2u);
  EXPECT_NE(heat.find("r&lt;1&gt;"), std::string::npos);
}

TEST_F(Report, ChartsHaveOneMarkPerValueOfTheInputs) {
  const std::string html = page();
  // Results: 3 rows x 2 metrics; distributions: a box per row and metric, 10 bins per row.
  EXPECT_EQ(marks(html, "bar"), 6u);
  EXPECT_EQ(marks(html, "box"), 6u);
  EXPECT_EQ(marks(html, "bin"), 30u);
  // RSPG confusion: 2 chosen x (2 best + "several tied"); overlap: Jaccard and tau per pair.
  EXPECT_EQ(marks(html, "cell"), 6u + 6u);
  // Learning curves: 3 losses, then dev_oracle and dev_top1 each at epochs 0..3.
  EXPECT_EQ(marks(html, "point"), 3u + 4u + 4u);
  // Error bars where a row's value is the mean of its per-example values: here all six.
  EXPECT_EQ(count(html, "class=\"err\""), 6u);
  // Oracle ticks: rows bm25 and <rec>, on rouge-1 only.
  EXPECT_EQ(count(html, "class=\"bound "), 4u);
}

TEST_F(Report, SignificanceLettersFollowTheTestsAndAlpha) {
  const auto e = read_eval(write("eval.json", kEval));
  EXPECT_EQ(e.beats(1, 0), "a");  // <rec> beats bm25 on rouge-1 at p 0.01
  EXPECT_EQ(e.beats(1, 1), "");   // p 0.3
  EXPECT_EQ(e.beats(0, 0), "");   // bm25 is the worse one
  EXPECT_EQ(e.beats(0, 1), "");   // p null: never a mark
  EXPECT_NE(page().find("0.5000<span class=\"sig\">a</span>"), std::string::npos);
}

TEST_F(Report, SelectionConfusionCountsChosenAgainstBest) {
  const std::string html = page();
  // q1: chose bm25, best bm25; q2: chose bm25, best <rec>; q3: chose <rec>, best <rec>;
  // q4: chose bm25, both 0 (tied: counts on the diagonal).
  EXPECT_NE(html.find("title=\"chose bm25, best bm25: 2 examples (50.0%)\""), std::string::npos);
  EXPECT_NE(html.find("title=\"chose bm25, best &lt;b&gt;rec&lt;/b&gt;&amp;: 1 examples (25.0%)\""), std::string::npos);
  EXPECT_NE(html.find("Diagonal: 3 of 4 examples (success 0.7500); eval&#39;s success: 0.7500; 1 examples had every member tied"),
            std::string::npos);
}

TEST_F(Report, EveryTextIsEscapedAndNothingIsFetched) {
  const std::string html = page();
  EXPECT_EQ(html.find("<b>rec"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos) << "a recorded option reached the page unescaped";
  EXPECT_NE(html.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
  EXPECT_NE(html.find("&lt;b&gt;rec&lt;/b&gt;&amp;"), std::string::npos);
  // Self-contained: the only URL is SVG's namespace.
  const std::regex url("(https?:)?//[a-z]");
  for (auto it = std::sregex_iterator(html.begin(), html.end(), url); it != std::sregex_iterator(); ++it)
    EXPECT_EQ(html.substr(it->position(), 26), "http://www.w3.org/2000/svg");
  EXPECT_EQ(html.find(" src="), std::string::npos);
}

TEST_F(Report, SameInputsGiveTheSameBytes) {
  const std::string a = page(), b = page();
  EXPECT_EQ(a, b);
}

TEST_F(Report, SectionsWithoutDataSaySoInOneLine) {
  std::string plain = kEval;
  // The same file without selection, oracle and overlap.
  const auto cut = [&](const std::string& key) {
    const auto from = plain.find(",\n \"" + key + "\"");
    ASSERT_NE(from, std::string::npos) << key;
    auto to = plain.find(",\n \"", from + 3);
    if (to == std::string::npos) to = plain.rfind("\n}");
    plain.erase(from, to - from);
  };
  cut("selection");
  cut("oracle");
  cut("list_overlap");
  const std::string html = page(plain, false);
  EXPECT_NE(html.find("No retriever selector among the rows of this file"), std::string::npos);
  EXPECT_NE(html.find("Not in this file (eval --list-overlap adds it)."), std::string::npos);
  EXPECT_NE(html.find("No training output given"), std::string::npos);
  EXPECT_EQ(marks(html, "cell"), 0u);
  EXPECT_EQ(count(html, "best1@"), 0u);
  // A training folder without the per-query feedback statistics says what is missing.
  const std::string with_train = page(plain, true);
  EXPECT_NE(with_train.find("The per-query utility spread is not recorded in"), std::string::npos);
  EXPECT_NE(with_train.find("85 training queries learned from"), std::string::npos);
}

TEST_F(Report, FeedbackSpreadIsAHistogramWhenRecorded) {
  std::string j = kTrain;
  j.insert(j.rfind('}'), R"(, "feedback": {"kind": "doc", "spread": [0, 0.5, 1, 0]})");
  const auto runs = read_train(train_dir("fb", j));
  ASSERT_EQ(runs.size(), 1u);
  ASSERT_TRUE(runs[0].feedback);
  const std::string html = render_html({}, runs, {});
  EXPECT_EQ(marks(html, "bin"), 20u);
  EXPECT_NE(html.find("4 queries; 2 with every candidate of equal utility"), std::string::npos);
  EXPECT_NE(html.find("No eval output given"), std::string::npos);
}

TEST_F(Report, AFolderOfRunsShowsEachInNumericOrder) {
  for (const std::string it : {"iter-10", "iter-2", "iter-1"}) train_dir("ium/" + it);
  write("ium/notes/readme.txt", "not a run");
  const auto runs = read_train(dir_ / "ium");
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(fs::path(runs[0].dir).filename(), "iter-1");
  EXPECT_EQ(fs::path(runs[1].dir).filename(), "iter-2");
  EXPECT_EQ(fs::path(runs[2].dir).filename(), "iter-10");
  EXPECT_EQ(runs[0].complete, true);
  EXPECT_EQ(runs[0].best_epoch, 2u);
  ASSERT_EQ(runs[0].initial_dev.size(), 2u);
  EXPECT_EQ(runs[0].initial_dev[1].first, "dev_top1");
}

TEST_F(Report, BadInputsAreUsageErrorsNamingTheFileAndField) {
  const auto eval_error = [&](const std::string& text) {
    const auto p = write("bad.json", text);
    return usage_error([&] { read_eval(p); });
  };
  const std::string missing = usage_error([&] { read_eval(dir_ / "nope.json"); });
  EXPECT_NE(missing.find("nope.json: no such file"), std::string::npos) << missing;
  EXPECT_NE(eval_error("{\"task\": ").find("bad.json: not valid JSON"), std::string::npos);
  EXPECT_NE(eval_error("[1, 2]").find("bad.json: must be a JSON object"), std::string::npos);
  std::string e = kEval;
  e.replace(e.find("\"results\""), 9, "\"resultz\"");
  EXPECT_NE(eval_error(e).find("bad.json: field \"results\": missing"), std::string::npos) << eval_error(e);
  e = kEval;
  e.replace(e.find("\"rouge-1\": 0.25"), 15, "\"rouge-1\": \"0.25\"");
  EXPECT_NE(eval_error(e).find("field \"results.bm25.rouge-1\": must be a number, not a string"), std::string::npos)
      << eval_error(e);
  e = kEval;
  e.replace(e.find("\"a\": \"bm25\""), 11, "\"a\": \"bm26\"");
  EXPECT_NE(eval_error(e).find("field \"list_overlap[0].a\": names \"bm26\", which is not a row"), std::string::npos)
      << eval_error(e);
  e = kEval;
  e.replace(e.find("\"jaccard\": 0.25"), 15, "\"jaccard\": 1.25");
  EXPECT_NE(eval_error(e).find("field \"list_overlap[0].jaccard\": must be in [0, 1]"), std::string::npos);
  e = kEval;
  e.replace(e.find("\"examples\": 4,"), 14, "\"examples\": 5,");
  EXPECT_NE(eval_error(e).find("field \"per_example.bm25\": has 4 examples, but \"examples\" says 5"), std::string::npos)
      << eval_error(e);
  e = kEval;
  e.replace(e.find("\"chosen\": \"<b>rec</b>&\""), 23, "\"chosen\": 3");
  EXPECT_NE(eval_error(e).find("field \"per_example.sel[2].chosen\": must be a string"), std::string::npos) << eval_error(e);

  // Training folders.
  const std::string no_dir = usage_error([&] { read_train(dir_ / "none"); });
  EXPECT_NE(no_dir.find("none: no such folder"), std::string::npos) << no_dir;
  fs::create_directories(dir_ / "empty");
  EXPECT_NE(usage_error([&] { read_train(dir_ / "empty"); }).find("no attune_train.json in it"), std::string::npos);
  std::string t = kTrain;
  t.replace(t.find("\"loss\": 0.87"), 12, "\"loss\": null");
  train_dir("badloss", t);
  const std::string bad_loss = usage_error([&] { read_train(dir_ / "badloss"); });
  EXPECT_NE(bad_loss.find("attune_train.json: field \"epochs[1].loss\": must be a number, not null"), std::string::npos)
      << bad_loss;
  t = kTrain;
  t.replace(t.find("\"best_epoch\": 2"), 15, "\"best_epoch\": 9");
  train_dir("badbest", t);
  EXPECT_NE(usage_error([&] { read_train(dir_ / "badbest"); }).find("field \"best_epoch\": is 9, past the 3 epochs"),
            std::string::npos);
}

// The verb itself, through the built `attune` binary (skipped before it is built).
TEST_F(Report, CliWritesThePageAndRefusesBadInputsWithExitCode2) {
  const fs::path bin = fs::path(ATTUNE_BINARY_DIR) / "tools/attune/attune";
  if (!fs::exists(bin)) GTEST_SKIP() << "build the attune binary first (ninja -C build attune)";
  write("eval.json", kEval);
  train_dir("ropg");
  auto r = attune::testing::run_attune(dir_, "report --eval eval.json --train ropg --out r.html --title 'A <b>title</b>'");
  ASSERT_EQ(r.rc, 0) << r.err;
  const std::string html = attune::testing::slurp(dir_ / "r.html");
  EXPECT_NE(html.find("<title>A &lt;b&gt;title&lt;/b&gt;</title>"), std::string::npos);
  EXPECT_EQ(marks(html, "bar"), 6u);
  for (const auto& e : fs::directory_iterator(dir_))
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << "a temporary file was left: " << e.path();
  r = attune::testing::run_attune(dir_, "report --eval eval.json --train ropg --out r2.html --title 'A <b>title</b>'");
  EXPECT_EQ(html, attune::testing::slurp(dir_ / "r2.html")) << "two runs on the same inputs differ";

  r = attune::testing::run_attune(dir_, "report --eval missing.json --out x.html");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("missing.json: no such file"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "x.html"));
  r = attune::testing::run_attune(dir_, "report --out x.html");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("nothing to report"), std::string::npos) << r.err;
  r = attune::testing::run_attune(dir_, "report --eval eval.json");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("--out"), std::string::npos) << r.err;
  r = attune::testing::run_attune(dir_, "report --eval eval.json --out eval.json");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("would be written over"), std::string::npos) << r.err;
  r = attune::testing::run_attune(dir_, "report --train eval.json --out x.html");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("eval.json: not a folder"), std::string::npos) << r.err;
}

// The page as a browser renders it: no console errors, and the marks counted in the DOM
// after layout are the data's counts.
TEST_F(Report, HeadlessChromiumRendersEveryMarkWithoutConsoleErrors) {
  const fs::path chromium = "/usr/bin/chromium";
  if (!fs::exists(chromium))
    GTEST_SKIP() << "headless Chromium is absent: `apt-get install chromium` (Debian) enables this check";
  const fs::path html = write("report.html", page());
  const std::string cmd = "timeout 120 " + chromium.string() +
                          " --headless=new --no-sandbox --disable-gpu --enable-logging=stderr --v=0 "
                          "--user-data-dir='" + (dir_ / "profile").string() + "' --dump-dom 'file://" + html.string() +
                          "' >'" + (dir_ / "dom.html").string() + "' 2>'" + (dir_ / "chromium.err").string() + "'";
  const int status = std::system(cmd.c_str());
  const std::string dom = attune::testing::slurp(dir_ / "dom.html"), err = attune::testing::slurp(dir_ / "chromium.err");
  ASSERT_EQ(status, 0) << "chromium failed: " << err;
  ASSERT_NE(dom.find("</html>"), std::string::npos) << "no DOM came back: " << err;
  EXPECT_EQ(marks(dom, "bar"), 6u);
  EXPECT_EQ(marks(dom, "box"), 6u);
  EXPECT_EQ(marks(dom, "bin"), 30u);
  EXPECT_EQ(marks(dom, "cell"), 12u);
  EXPECT_EQ(marks(dom, "point"), 11u);
  EXPECT_EQ(count(dom, "<svg"), count(attune::testing::slurp(html), "<svg")) << "an SVG did not parse";
  std::istringstream lines(err);
  for (std::string line; std::getline(lines, line);)
    EXPECT_TRUE(line.find(":CONSOLE") == std::string::npos && line.find("Uncaught") == std::string::npos)
        << "console error: " << line;
}
