// The report page: sections composed from the typed inputs and the chart functions. No
// script, no external resource; everything shown comes from the inputs, and a section
// whose data they do not hold says so in one line.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <numeric>

#include "attune/report/charts.h"
#include "attune/report/report.h"

namespace attune::report {

namespace {

const char* const kStyle = R"css(
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;color:#1b1f24;margin:0;background:#fff}
main{max-width:1180px;margin:0 auto;padding:16px 24px 48px}
h1{font-size:24px;margin:8px 0 4px}h2{font-size:19px;margin:32px 0 6px;border-bottom:2px solid #d0d7de;padding-bottom:4px}
h3{font-size:15px;margin:20px 0 6px}
p{margin:6px 0}.meta,.note{color:#57606a;font-size:12.5px}.none{color:#57606a;font-style:italic}
nav{font-size:13px;margin:8px 0}nav a{margin-right:12px}
table{border-collapse:collapse;margin:6px 0;font-size:13px}
th,td{border:1px solid #d0d7de;padding:3px 8px;text-align:right;vertical-align:top}
th{background:#f6f8fa;font-weight:600}td.name,th.name{text-align:left;font-family:ui-monospace,"DejaVu Sans Mono",monospace;font-size:12px;word-break:break-all;max-width:420px}
td.num{font-variant-numeric:tabular-nums}.sig{color:#0a5;font-weight:600;margin-left:3px}
table.heat td{min-width:44px;text-align:center;font-variant-numeric:tabular-nums}table.heat td.na{color:#8c959f;background:#fafbfc}
.charts{display:flex;flex-wrap:wrap;gap:8px 16px;align-items:flex-start}
.swatch{display:inline-block;width:10px;height:10px;margin-right:5px;vertical-align:baseline}
svg.chart{font-size:11px;background:#fff}svg .title{font-size:12.5px;font-weight:600;fill:#1b1f24}
svg .tick{fill:#57606a}svg .label{fill:#1b1f24}svg .na{fill:#8c959f;font-style:italic}
svg .grid{stroke:#eaeef2}svg .axis{stroke:#57606a;fill:none}svg .err{stroke:#1b1f24;stroke-width:1.3;fill:none}
svg .bound{stroke:#1b1f24;stroke-width:2}svg .bound.lower{stroke-dasharray:3 2}svg .note{fill:#0a5;font-weight:600}
svg .whisker{stroke:#57606a;fill:none}svg .median{stroke:#1b1f24;stroke-width:2}svg .mean{fill:#1b1f24}
svg .line{fill:none;stroke-width:2}svg .kept{fill:none;stroke-width:2}
details{margin:8px 0}summary{cursor:pointer;color:#0969da}
)css";

std::string esc(std::string_view s) { return html_escape(s); }
std::string num(double v, int d = 4) { return format_number(v, d); }
std::string letter(std::size_t i) { return std::string(1, static_cast<char>('a' + i % 26)); }
std::string none(std::string_view text) { return "<p class=\"none\">" + esc(text) + "</p>\n"; }
std::string note(std::string_view text) { return "<p class=\"note\">" + esc(text) + "</p>\n"; }
// At most `n` characters (UTF-8 sequences kept whole), an ellipsis marking a cut.
std::string shorten(const std::string& s, std::size_t n) {
  if (s.size() <= n) return s;
  std::size_t cut = n - 1;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  return s.substr(0, cut) + "\xE2\x80\xA6";
}
std::string arrow(const Metric& m) { return m.higher_is_better ? " \xE2\x86\x91" : " \xE2\x86\x93"; }  // up / down arrow

// The per-example values of one row and metric that are numbers.
std::vector<double> present(const std::vector<std::optional<double>>& v) {
  std::vector<double> out;
  for (const auto& x : v)
    if (x) out.push_back(*x);
  return out;
}

double mean(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size()); }

// 1.96 standard errors of the mean of the row's per-example values, when the row's value
// is that mean (ROUGE, accuracy, EM, MAE; not macro-F1 or RMSE) and every example has one.
std::optional<double> error_bar(const EvalRow& row, std::size_t m) {
  if (row.per_example.size() <= m || !row.values[m]) return std::nullopt;
  const auto v = present(row.per_example[m]);
  if (v.size() < 2 || v.size() != row.per_example[m].size()) return std::nullopt;
  const double mu = mean(v);
  if (std::abs(mu - *row.values[m]) > 1e-9 * std::max(1.0, std::abs(mu))) return std::nullopt;
  double ss = 0;
  for (double x : v) ss += (x - mu) * (x - mu);
  const double sd = std::sqrt(ss / static_cast<double>(v.size() - 1));
  return 1.96 * sd / std::sqrt(static_cast<double>(v.size()));
}

std::string results_table(const EvalRun& e) {
  bool oracle = false, orders = false;
  std::size_t depth = 0, ok = 0;
  for (const auto& r : e.rows) {
    if (r.oracle) oracle = true, depth = r.oracle->depth;
    if (r.orders) orders = true, ok = r.orders->depth;
  }
  std::string s = "<table class=\"results\">\n<tr><th></th><th class=\"name\">retriever</th>";
  for (const auto& m : e.metrics) s += "<th>" + esc(m.name + arrow(m)) + "</th>";
  if (oracle) s += "<th>best1@" + std::to_string(depth) + "</th><th>worst1@" + std::to_string(depth) + "</th>";
  if (orders) s += "<th>best-order@" + std::to_string(ok) + "</th><th>worst-order@" + std::to_string(ok) + "</th>";
  s += "</tr>\n";
  for (std::size_t i = 0; i < e.rows.size(); ++i) {
    const auto& r = e.rows[i];
    s += "<tr><td><span class=\"swatch\" style=\"background:" + palette(i) + "\"></span>(" + letter(i) +
         ")</td><td class=\"name\">" + esc(r.spec) + "</td>";
    for (std::size_t m = 0; m < e.metrics.size(); ++m) {
      const std::string beats = e.beats(i, m);
      s += "<td class=\"num\">" + (r.values[m] ? num(*r.values[m]) : "n/a") +
           (beats.empty() ? "" : "<span class=\"sig\">" + esc(beats) + "</span>") + "</td>";
    }
    auto bound = [&](const std::optional<OracleBound>& b) {
      return b ? "<td class=\"num\">" + num(b->best) + "</td><td class=\"num\">" + num(b->worst) + "</td>"
               : std::string("<td>&ndash;</td><td>&ndash;</td>");
    };
    if (oracle) s += bound(r.oracle);
    if (orders) s += bound(r.orders);
    s += "</tr>\n";
  }
  s += "</table>\n";
  char alpha[32];
  std::snprintf(alpha, sizeof alpha, "%.2g", e.alpha);
  std::string foot = "\xE2\x86\x91 higher is better, \xE2\x86\x93 lower is better; letters after a value: the rows it beats at p < " +
                     std::string(alpha) + " (paired t-test for ROUGE/MAE/RMSE, McNemar for accuracy/F1/EM/R@5).";
  if (e.comparisons.empty()) foot += " The file has no significance tests.";
  s += note(foot);
  for (const auto& r : e.rows)
    if (r.oracle) {
      s += note("best1@" + std::to_string(r.oracle->depth) + " / worst1@" + std::to_string(r.oracle->depth) + ": " +
                r.oracle->metric + " of the best / worst single document among the row's top " +
                std::to_string(r.oracle->depth) + ", alone in the prompt (the headroom of a ranking of what it retrieved).");
      break;
    }
  for (const auto& r : e.rows)
    if (r.orders) {
      s += note("best-order@" + std::to_string(r.orders->depth) + " / worst-order@" + std::to_string(r.orders->depth) +
                ": " + r.orders->metric + " of the best / worst order of the row's top " + std::to_string(r.orders->depth) +
                " documents in the prompt.");
      break;
    }
  return s;
}

std::string results_charts(const EvalRun& e) {
  std::string s = "<div class=\"charts\">\n";
  std::vector<std::string> no_err;
  bool any_bound = false;
  for (std::size_t m = 0; m < e.metrics.size(); ++m) {
    std::vector<Bar> bars;
    bool any_err = false;
    for (std::size_t i = 0; i < e.rows.size(); ++i) {
      const auto& r = e.rows[i];
      Bar b;
      b.label = "(" + letter(i) + ")";
      b.value = e.rows[i].values[m];
      b.tooltip = r.spec + ": " + e.metrics[m].name + " " + (b.value ? num(*b.value) : "n/a");
      b.error = error_bar(r, m);
      any_err = any_err || b.error;
      if (b.error) b.tooltip += " \xC2\xB1 " + num(*b.error);
      b.note = e.beats(i, m);
      const auto& bound = r.oracle ? r.oracle : r.orders;
      if (bound && bound->metric == e.metrics[m].name) {
        b.upper = bound->best;
        b.lower = bound->worst;
        any_bound = true;
      }
      b.colour = i;
      bars.push_back(std::move(b));
    }
    if (!any_err) no_err.push_back(e.metrics[m].name);
    s += bar_chart(e.metrics[m].name + arrow(e.metrics[m]), e.metrics[m].name, bars);
  }
  s += "</div>\n";
  std::string cap = "Bars: each row's value; whiskers: \xC2\xB1" "1.96 standard errors of the mean over the examples";
  if (!e.has_per_example) cap += " (none here: the file has no per_example entry)";
  else if (!no_err.empty()) {
    cap += " (none for ";
    for (std::size_t i = 0; i < no_err.size(); ++i) cap += (i ? ", " : "") + no_err[i];
    cap += ": not a mean of per-example values)";
  }
  cap += "; letters: the rows it beats";
  if (any_bound) cap += "; ticks beside a bar: its oracle bounds (solid: best, dashed: worst)";
  return s + note(cap + ".");
}

std::string distributions(const EvalRun& e) {
  std::string s = "<h3>Per-example distributions</h3>\n";
  if (!e.has_per_example) return s + none("The file has no per_example entry: no distributions to show.");
  s += "<div class=\"charts\">\n";
  std::string missing;
  for (std::size_t m = 0; m < e.metrics.size(); ++m) {
    std::vector<Group> groups;
    for (std::size_t i = 0; i < e.rows.size(); ++i) {
      const auto& r = e.rows[i];
      Group g{"(" + letter(i) + ")", r.spec + " " + e.metrics[m].name, present(r.per_example[m]), i};
      const std::size_t lacking = r.per_example[m].size() - g.values.size();
      if (lacking)
        missing += " (" + letter(i) + ") " + e.metrics[m].name + ": " + std::to_string(lacking) + " of " +
                   std::to_string(r.per_example[m].size()) + ";";
      groups.push_back(std::move(g));
    }
    s += box_plot(e.metrics[m].name + " per example", e.metrics[m].name, groups);
  }
  s += "</div>\n";
  s += note("Boxes: quartiles; line: median; dot: mean; whiskers: smallest and largest value.");
  std::vector<Group> groups;
  for (std::size_t i = 0; i < e.rows.size(); ++i)
    groups.push_back({"(" + letter(i) + ") " + shorten(e.rows[i].spec, 24), e.rows[i].spec + " " + e.metrics[0].name,
                      present(e.rows[i].per_example[0]), i});
  s += histograms(e.metrics[0].name + " per example: share of the examples in 10 bins", groups, 10);
  if (!missing.empty()) s += note("Examples without a value (null or absent in the file):" + missing.substr(0, missing.size() - 1) + ".");
  return s;
}

// Per example, the member the selector chose against the pool's best by the primary metric
// (ties: the chosen member counts as best when it is among the tied, as eval's success does).
std::string confusion(const EvalRun& e, const Selection& sel) {
  const auto& metric = e.metrics.front();
  std::size_t si = 0;
  while (si < e.rows.size() && e.rows[si].spec != sel.selector) ++si;
  const auto& srow = e.rows[si];
  if (srow.chosen.empty())
    return none("No confusion matrix: the selector's per-example entries do not name the chosen member (\"chosen\").");
  std::vector<const EvalRow*> members;
  for (const auto& p : sel.pool) {
    const EvalRow* found = nullptr;
    for (const auto& r : e.rows)
      if (r.spec == p) found = &r;
    if (!found || found->per_example.empty())
      return none("No confusion matrix: the pool member \"" + p + "\" has no per-example values in this file.");
    if (found->example_ids != srow.example_ids)
      return none("No confusion matrix: the pool member \"" + p + "\" lists other examples than the selector.");
    members.push_back(found);
  }
  const std::size_t n = srow.chosen.size(), P = sel.pool.size();
  std::vector<std::vector<std::size_t>> count(P, std::vector<std::size_t>(P + 1, 0));
  std::size_t all_tied = 0, skipped = 0;
  for (std::size_t x = 0; x < n; ++x) {
    const auto c = static_cast<std::size_t>(std::find(sel.pool.begin(), sel.pool.end(), srow.chosen[x]) - sel.pool.begin());
    if (c == P)
      return none("No confusion matrix: example " + std::to_string(x) + " chose \"" + srow.chosen[x] +
                  "\", which is not in the pool.");
    std::vector<double> v(P);
    bool ok = true;
    for (std::size_t p = 0; p < P; ++p) {
      const auto& val = members[p]->per_example[0][x];
      ok = ok && val.has_value();
      v[p] = val.value_or(0);
    }
    if (!ok) {
      ++skipped;
      continue;
    }
    const double best = metric.higher_is_better ? *std::max_element(v.begin(), v.end()) : *std::min_element(v.begin(), v.end());
    std::vector<std::size_t> tied;
    for (std::size_t p = 0; p < P; ++p)
      if (v[p] == best) tied.push_back(p);
    if (tied.size() == P) ++all_tied;
    if (v[c] == best) ++count[c][c];
    else if (tied.size() == 1) ++count[c][tied[0]];
    else ++count[c][P];
  }
  const std::size_t used = n - skipped;
  std::size_t diag = 0, top = 0;
  for (std::size_t p = 0; p < P; ++p) {
    diag += count[p][p];
    for (auto k : count[p]) top = std::max(top, k);
  }
  Heatmap h;
  h.corner = "chosen \\ best";
  for (const auto& p : sel.pool) {
    h.row_labels.push_back(p);
    h.col_labels.push_back(p);
  }
  h.col_labels.push_back("several tied (not chosen)");
  h.hi = std::max<double>(1, static_cast<double>(top));
  for (std::size_t r = 0; r < P; ++r) {
    std::vector<HeatCell> row;
    for (std::size_t col = 0; col <= P; ++col) {
      const double share = used ? 100.0 * static_cast<double>(count[r][col]) / static_cast<double>(used) : 0;
      row.push_back({static_cast<double>(count[r][col]), std::to_string(count[r][col]),
                     "chose " + sel.pool[r] + ", best " + (col < P ? sel.pool[col] : std::string("several others")) + ": " +
                         std::to_string(count[r][col]) + " examples (" + num(share, 1) + "%)",
                     true});
    }
    h.cells.push_back(std::move(row));
  }
  std::string s = heatmap_table(h);
  std::string cap = "Rows: the member the selector chose; columns: the pool's best member for the example by " +
                    metric.name + " (an example where the chosen member ties for best counts on the diagonal, as eval's success does). Diagonal: " +
                    std::to_string(diag) + " of " + std::to_string(used) + " examples (success " +
                    num(used ? static_cast<double>(diag) / static_cast<double>(used) : 0) + ")";
  for (const auto& m : sel.methods)
    if (m.name == sel.selector) cap += "; eval's success: " + num(m.success);
  cap += "; " + std::to_string(all_tied) + " examples had every member tied";
  if (skipped) cap += "; " + std::to_string(skipped) + " examples left out (a member without a value)";
  return s + note(cap + ".");
}

std::string selection_section(const EvalRun& e) {
  std::string s = "<h3>Retriever selection (RSPG)</h3>\n";
  if (e.selections.empty())
    return s + none("No retriever selector among the rows of this file (an RSPG folder in eval --retrievers adds one).");
  for (const auto& sel : e.selections) {
    s += "<p>Selection by <code>" + esc(sel.selector) + "</code> over " + std::to_string(sel.pool.size()) + " retrievers" +
         (sel.qpp_normalized ? " (QPP values z-scored per retriever)" : " (raw QPP values)") + ".</p>\n";
    s += "<table>\n<tr><th class=\"name\">method</th><th>success \xE2\x86\x91</th>";
    for (const auto& m : e.metrics) s += "<th>" + esc(m.name + arrow(m)) + "</th>";
    s += "<th>p vs selector</th>";
    for (const auto& p : sel.pool) s += "<th>chose " + esc(p) + "</th>";
    s += "</tr>\n";
    for (const auto& m : sel.methods) {
      s += "<tr><td class=\"name\">" + esc(m.name) + "</td><td class=\"num\">" + num(m.success) + "</td>";
      for (const auto& v : m.values) s += "<td class=\"num\">" + (v ? num(*v) : "n/a") + "</td>";
      s += "<td class=\"num\">" + (m.p_vs_selector ? num(*m.p_vs_selector) : "&ndash;") + "</td>";
      for (double share : m.chosen_share) s += "<td class=\"num\">" + num(100 * share, 1) + "%</td>";
      s += "</tr>\n";
    }
    s += "</table>\n";
    s += note("Success: the choice is among the pool's best for the input (by " + e.metrics.front().name +
              "); p vs selector: McNemar on per-input success.");
    s += "<h3>Selection confusion: " + esc(sel.selector) + "</h3>\n" + confusion(e, sel);
  }
  return s;
}

std::string overlap_section(const EvalRun& e) {
  std::string s = "<h3>List overlap across rows (agents' lists, IUM)</h3>\n";
  if (!e.has_overlap) return s + none("Not in this file (eval --list-overlap adds it).");
  if (e.overlaps.empty()) return s + none("The file has an empty list_overlap: fewer than two rows to compare.");
  std::vector<std::size_t> idx;
  for (const auto& o : e.overlaps)
    for (auto r : {o.a, o.b})
      if (std::find(idx.begin(), idx.end(), r) == idx.end()) idx.push_back(r);
  std::sort(idx.begin(), idx.end());
  Heatmap h;
  h.corner = "";
  h.lo = -1;
  h.hi = 1;
  h.diverging = true;
  std::map<std::pair<std::size_t, std::size_t>, const Overlap*> at;
  for (const auto& o : e.overlaps) at[{std::min(o.a, o.b), std::max(o.a, o.b)}] = &o;
  for (auto r : idx) {
    h.row_labels.push_back("(" + letter(r) + ") " + e.rows[r].spec);
    h.col_labels.push_back("(" + letter(r) + ")");
  }
  for (auto r : idx) {
    std::vector<HeatCell> row;
    for (auto c : idx) {
      if (r == c) {
        row.push_back({std::nullopt, "", "", false});
        continue;
      }
      auto it = at.find({std::min(r, c), std::max(r, c)});
      if (it == at.end()) {
        row.push_back({std::nullopt, "", "not compared", false});
        continue;
      }
      const Overlap& o = *it->second;
      const std::string pair = "(" + letter(std::min(r, c)) + ") ~ (" + letter(std::max(r, c)) + ")";
      if (r < c)
        row.push_back({o.jaccard, "", pair + ": Jaccard " + num(o.jaccard) + " over " + std::to_string(o.examples) + " examples", true});
      else
        row.push_back({o.kendall_tau, "",
                       pair + ": Kendall tau-b " + (o.kendall_tau ? num(*o.kendall_tau) : std::string("n/a")) + " over " +
                           std::to_string(o.tau_examples) + " examples with two untied documents",
                       true});
    }
    h.cells.push_back(std::move(row));
  }
  s += heatmap_table(h);
  s += note("Above the diagonal: the mean Jaccard of the two rows' top-k sets; below: the mean Kendall tau-b of their "
            "rankings over the union of the two lists (\xE2\x80\x93: no example had two untied documents). Blue: alike; "
            "white: unrelated (Jaccard 0, tau 0); red: opposite orders (tau -1).");
  return s;
}

std::string eval_section(const EvalRun& e, std::size_t n) {
  std::string s = "<section id=\"eval-" + std::to_string(n + 1) + "\">\n<h2>Evaluation: " + esc(e.task) + ", " +
                  esc(e.split) + " split</h2>\n";
  std::string meta = "file " + e.file + "; llm " + e.llm + "; k " + std::to_string(e.k) + "; seed " + std::to_string(e.seed);
  std::size_t examples = e.examples.value_or(0);
  if (!e.examples && e.has_per_example) examples = e.rows.front().example_ids.size();
  if (e.examples || e.has_per_example) meta += "; " + std::to_string(examples) + " examples per row";
  s += "<p class=\"meta\">" + esc(meta) + "</p>\n<h3>Results</h3>\n" + results_table(e) + results_charts(e) +
       distributions(e) + selection_section(e) + overlap_section(e);
  return s + "</section>\n";
}

std::string facts(const TrainRun& t) {
  std::vector<std::pair<std::string, std::string>> f;
  if (!t.data.empty()) f.emplace_back("data", t.data);
  if (t.seed) f.emplace_back("seed", std::to_string(*t.seed));
  if (t.steps)
    f.emplace_back("steps", std::to_string(*t.steps) + (t.total_steps ? " of " + std::to_string(*t.total_steps) : ""));
  if (t.best_epoch)
    f.emplace_back("kept epoch", *t.best_epoch ? std::to_string(*t.best_epoch) + " of " + std::to_string(t.epochs.size())
                                               : std::string("0 (the start: no epoch beat it on dev)"));
  if (t.dev_examples) f.emplace_back("dev examples", std::to_string(*t.dev_examples));
  if (!t.device.empty()) f.emplace_back("device", t.device);
  if (t.seconds) f.emplace_back("seconds (this run)", num(*t.seconds, 1));
  if (t.complete) f.emplace_back("complete", *t.complete ? "yes" : "no (killed or stopped)");
  if (!t.pool.empty()) {
    std::string pool;
    for (std::size_t i = 0; i < t.pool.size(); ++i) pool += (i ? ", " : "") + t.pool[i];
    f.emplace_back(t.selector_variant.empty() ? "selector pool" : t.selector_variant + " pool", pool);
  }
  std::string s = "<table class=\"facts\">\n";
  for (const auto& [k, v] : f) s += "<tr><th>" + esc(k) + "</th><td class=\"name\">" + esc(v) + "</td></tr>\n";
  return s + "</table>\n";
}

std::string curves(const TrainRun& t) {
  std::string s = "<h3>Learning curves</h3>\n";
  if (t.epochs.empty())
    return s + none("This run records no per-epoch values (attune_train.json has no \"epochs\"; pretrain-encoder and "
                    "train-lm record their last loss only).");
  const std::optional<double> kept = t.best_epoch ? std::optional<double>(static_cast<double>(*t.best_epoch)) : std::nullopt;
  s += "<div class=\"charts\">\n";
  Line loss{"training loss", {}, {}, kept, 0};
  for (const auto& e : t.epochs) {
    loss.x.push_back(static_cast<double>(e.epoch));
    loss.y.push_back(e.loss);
  }
  s += line_chart("training loss (mean over the epoch's steps)", "epoch", "loss", {loss});
  std::vector<std::string> keys;
  for (const auto& e : t.epochs)
    for (const auto& [k, v] : e.dev)
      if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
  for (std::size_t ki = 0; ki < keys.size(); ++ki) {
    Line l{keys[ki], {}, {}, kept, ki + 1};
    for (const auto& [k, v] : t.initial_dev)
      if (k == keys[ki]) {
        l.x.push_back(0);
        l.y.push_back(v);
      }
    for (const auto& e : t.epochs)
      for (const auto& [k, v] : e.dev)
        if (k == keys[ki]) {
          l.x.push_back(static_cast<double>(e.epoch));
          l.y.push_back(v);
        }
    s += line_chart(keys[ki] + " per epoch", "epoch (0: the start)", keys[ki], {l});
  }
  s += "</div>\n";
  std::string cap = "One point per epoch (epoch 0: the starting model, where the run recorded it); a ring marks the kept epoch.";
  if (keys.empty()) cap += " This run records no dev values per epoch.";
  return s + note(cap);
}

std::string feedback(const TrainRun& t) {
  std::string s = "<h3>Feedback statistics</h3>\n";
  if (t.feedback) {
    const auto& f = *t.feedback;
    if (f.spread.empty()) return s + none("The run records feedback of kind " + f.kind + " for no query.");
    auto v = f.spread;
    std::sort(v.begin(), v.end());
    const auto flat = static_cast<std::size_t>(std::count(v.begin(), v.end(), 0.0));
    const double median = v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
    s += histograms("utility spread per training query (" + f.kind + " feedback): share of the queries in 20 bins",
                    {{"spread", "spread of " + f.kind + " utilities", f.spread, 0}}, 20);
    s += note(std::to_string(v.size()) + " queries; " + std::to_string(flat) +
              " with every candidate of equal utility (spread 0); median spread " + num(median) + ", mean " + num(mean(v)) +
              ", largest " + num(v.back()) + ". Spread: the largest minus the smallest utility among a query's candidates.");
    return s;
  }
  std::string recorded;
  for (const auto& [k, v] : t.options)
    if (k == "train_examples") recorded += "; " + v + " training queries learned from (options.train_examples)";
  for (const auto& [k, v] : t.initial_dev)
    if (k.find("oracle") != std::string::npos)
      recorded += "; dev " + k + " " + num(v) + " (the best candidate's utility, averaged over the dev queries)";
  s += none("The per-query utility spread is not recorded in " + t.dir + "/attune_train.json (it has no \"feedback\" entry).");
  if (!t.data.empty() || !recorded.empty())
    s += note("Recorded: " + (t.data.empty() ? std::string("") : "data " + t.data) + recorded + ".");
  return s;
}

std::string recorded_values(const TrainRun& t) {
  if (t.options.empty() && t.other.empty()) return "";
  std::string s = "<details><summary>Options and other recorded values (" + std::to_string(t.options.size() + t.other.size()) +
                  ")</summary>\n<table>\n";
  for (const auto& [k, v] : t.options) s += "<tr><th class=\"name\">options." + esc(k) + "</th><td class=\"name\">" + esc(v) + "</td></tr>\n";
  for (const auto& [k, v] : t.other) s += "<tr><th class=\"name\">" + esc(k) + "</th><td class=\"name\">" + esc(v) + "</td></tr>\n";
  return s + "</table>\n</details>\n";
}

std::string train_section(const TrainRun& t, std::size_t n) {
  return "<section id=\"train-" + std::to_string(n + 1) + "\">\n<h2>Training: " + esc(t.method.empty() ? "run" : t.method) +
         " <span class=\"meta\">" + esc(t.dir) + "</span></h2>\n" + facts(t) + curves(t) + feedback(t) +
         recorded_values(t) + "</section>\n";
}

}  // namespace

std::string render_html(const std::vector<EvalRun>& evals, const std::vector<TrainRun>& trains, const ReportOptions& o) {
  std::string s = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                  "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
                  "<link rel=\"icon\" href=\"data:,\">\n<title>" +
                  esc(o.title) + "</title>\n<style>" + kStyle + "</style>\n</head>\n<body>\n<main>\n<h1>" + esc(o.title) +
                  "</h1>\n";
  std::string inputs;
  for (const auto& e : evals) inputs += (inputs.empty() ? "" : ", ") + e.file;
  std::string dirs;
  for (const auto& t : trains) dirs += (dirs.empty() ? "" : ", ") + t.dir;
  s += "<p class=\"meta\">Made by attune report from " +
       esc((inputs.empty() ? std::string("no eval file") : "eval " + inputs) +
           (dirs.empty() ? std::string(" and no training folder") : "; training " + dirs)) +
       ".</p>\n<nav>";
  for (std::size_t i = 0; i < evals.size(); ++i)
    s += "<a href=\"#eval-" + std::to_string(i + 1) + "\">" +
         esc(evals[i].task + " " + evals[i].split + " (" + std::filesystem::path(evals[i].file).filename().string() + ")") + "</a>";
  for (std::size_t i = 0; i < trains.size(); ++i)
    s += "<a href=\"#train-" + std::to_string(i + 1) + "\">" + esc((trains[i].method.empty() ? "run" : trains[i].method) + " " + trains[i].dir) + "</a>";
  s += "</nav>\n";
  for (std::size_t i = 0; i < evals.size(); ++i) s += eval_section(evals[i], i);
  if (evals.empty()) s += "<section>\n<h2>Evaluation</h2>\n" + none("No eval output given (attune report --eval F.json, from attune eval --out F.json).") + "</section>\n";
  for (std::size_t i = 0; i < trains.size(); ++i) s += train_section(trains[i], i);
  if (trains.empty())
    s += "<section>\n<h2>Training</h2>\n" + none("No training output given (attune report --train DIR, an attune train --out folder).") +
         "</section>\n";
  return s + "</main>\n</body>\n</html>\n";
}

}  // namespace attune::report
