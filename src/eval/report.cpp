// The eval report as text: the table (one row per retriever, then per selector, and per
// selector its selection table) and CLI.md's JSON.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "attune/eval/evaluate.h"

namespace attune::eval {
namespace {

// Columns padded to their widest cell, two spaces apart.
std::string layout(const std::vector<std::vector<std::string>>& table) {
  std::vector<std::size_t> width;
  for (const auto& row : table)
    for (std::size_t c = 0; c < row.size(); ++c) {
      if (width.size() <= c) width.push_back(0);
      width[c] = std::max(width[c], row[c].size());
    }
  std::string out;
  for (const auto& row : table) {
    for (std::size_t c = 0; c < row.size(); ++c) {
      out += row[c];
      if (c + 1 < row.size()) out += std::string(width[c] - row[c].size() + 2, ' ');
    }
    out += "\n";
  }
  return out;
}

std::string fixed4(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4f", v);
  return buf;
}

// Paper 000 Tables 4-5 for one selector: success rate and end-to-end metrics of the
// selector, the QPP predictors and the oracles, and how often each member was chosen.
std::string format_selection(const EvalReport& r, const SelectionReport& sr) {
  std::string out = "\nselection by " + sr.selector + " over " + std::to_string(sr.pool.size()) + " retrievers\n";
  std::vector<std::vector<std::string>> t;
  std::vector<std::string> header = {"method", "success ^"};
  for (const auto& m : r.metrics) header.push_back(m.name + (m.higher_is_better ? " ^" : " v"));
  t.push_back(header);
  bool beats_all = true;
  for (std::size_t i = 1; i < sr.methods.size(); ++i) {
    const auto& m = sr.methods[i];
    if (m.name.rfind("oracle", 0) == 0) continue;
    if (!(sr.methods.front().success > m.success && m.p_vs_selector < r.alpha)) beats_all = false;
  }
  for (std::size_t i = 0; i < sr.methods.size(); ++i) {
    const auto& m = sr.methods[i];
    std::vector<std::string> row = {i == 0 ? "selector" : m.name, fixed4(m.success) + (i == 0 && beats_all ? " *" : "")};
    for (const auto& mi : r.metrics) {
      auto it = m.metrics.find(mi.name);
      row.push_back(it == m.metrics.end() ? "-" : fixed4(it->second));
    }
    t.push_back(row);
  }
  out += layout(t);
  char foot[200];
  std::snprintf(foot, sizeof foot,
                "success: the choice is among the pool's best for the input (by %s); * the selector beats every "
                "QPP method at p < %.2g (McNemar)\n",
                r.metrics.front().name.c_str(), r.alpha);
  out += foot;
  out += sr.qpp_normalized ? "QPP methods: each retriever's predictor values z-scored over the examples, then the largest\n"
                           : "QPP methods: the raw predictor values compared across retrievers (--qpp-raw)\n";
  out += "selector's choices:";
  const auto& ch = sr.methods.front().chosen;
  for (std::size_t p = 0; p < sr.pool.size(); ++p) {
    const auto c = static_cast<std::size_t>(std::count(ch.begin(), ch.end(), p));
    char buf[64];
    std::snprintf(buf, sizeof buf, " %.1f%%", ch.empty() ? 0.0 : 100.0 * static_cast<double>(c) / ch.size());
    out += (p ? ", " : " ") + sr.pool[p] + buf;
  }
  return out + "\n";
}


}  // namespace

std::string format_table(const EvalReport& r) {
  auto letter = [](std::size_t i) { return std::string(1, static_cast<char>('a' + i % 26)); };
  std::vector<std::string> header = {"", "retriever"};
  for (const auto& m : r.metrics) header.push_back(m.name + (m.higher_is_better ? " ^" : " v"));
  const OracleBounds* ob = nullptr;  // the bounds' columns, when the rows have them
  for (const auto& res : r.results)
    if (res.oracle) ob = &*res.oracle;
  if (ob) {
    header.push_back("best1@" + std::to_string(ob->depth));
    header.push_back("worst1@" + std::to_string(ob->depth));
  }
  const OrderBounds* orb = nullptr;  // the best-ordering oracle's columns
  for (const auto& res : r.results)
    if (res.orders) orb = &*res.orders;
  if (orb) {
    header.push_back("best-order@" + std::to_string(orb->k));
    header.push_back("worst-order@" + std::to_string(orb->k));
  }
  std::vector<std::vector<std::string>> rows;
  for (std::size_t i = 0; i < r.results.size(); ++i) {
    std::vector<std::string> row = {"(" + letter(i) + ")", r.results[i].spec};
    for (const auto& m : r.metrics) {
      char buf[32];
      auto it = r.results[i].metrics.find(m.name);
      std::snprintf(buf, sizeof buf, "%.4f", it == r.results[i].metrics.end() ? NAN : it->second);
      std::string cell = buf, marks;
      for (std::size_t j = 0; j < r.results.size(); ++j)
        for (const auto& c : r.comparisons)
          if (c.a == r.results[i].spec && c.b == r.results[j].spec && c.metric == m.name && c.a_better &&
              c.p_value < r.alpha)
            marks += letter(j);
      if (!marks.empty()) cell += " " + marks;
      row.push_back(cell);
    }
    if (ob) {
      const auto& o = r.results[i].oracle;
      row.push_back(o ? fixed4(o->best) : "-");
      row.push_back(o ? fixed4(o->worst) : "-");
    }
    if (orb) {
      const auto& o = r.results[i].orders;
      row.push_back(o ? fixed4(o->best) : "-");
      row.push_back(o ? fixed4(o->worst) : "-");
    }
    rows.push_back(row);
  }
  std::vector<std::size_t> width(header.size(), 0);
  for (std::size_t c = 0; c < header.size(); ++c) {
    width[c] = header[c].size();
    for (auto& row : rows) width[c] = std::max(width[c], row[c].size());
  }
  std::string out;
  char title[512];
  std::snprintf(title, sizeof title, "task %s, split %s, %zu examples, k=%zu, llm %s, seed %llu\n", r.task.c_str(),
                r.split.c_str(), r.examples, r.k, r.llm.c_str(), static_cast<unsigned long long>(r.seed));
  out += title;
  // Constrained decoding changes every answer, so the table says so (free decoding, the
  // default, adds nothing to the canonical form).
  if (const auto at = r.generate.find(";decode="); at != std::string::npos)
    out.insert(out.size() - 1, ", decode " + r.generate.substr(at + 8));
  auto line = [&](const std::vector<std::string>& cells) {
    for (std::size_t c = 0; c < cells.size(); ++c) {
      out += cells[c];
      if (c + 1 < cells.size()) out += std::string(width[c] - cells[c].size() + 2, ' ');
    }
    out += "\n";
  };
  line(header);
  std::size_t total = 0;
  for (auto w : width) total += w + 2;
  out += std::string(total - 2, '-') + "\n";
  for (auto& row : rows) line(row);
  char foot[200];
  std::snprintf(foot, sizeof foot,
                "^ higher is better, v lower is better; letters after a value: rows it beats at p < %.2g "
                "(paired t-test / McNemar)\n",
                r.alpha);
  out += foot;
  if (ob)
    out += "best1@" + std::to_string(ob->depth) + " / worst1@" + std::to_string(ob->depth) + ": " + ob->metric +
           " of the best / worst single document among the row's top " + std::to_string(ob->depth) +
           ", alone in the prompt (the headroom of a ranking of what it retrieved)\n";
  if (orb)
    out += "best-order@" + std::to_string(orb->k) + " / worst-order@" + std::to_string(orb->k) + ": " + orb->metric +
           " of the best / worst order of the row's top " + std::to_string(orb->k) +
           " documents in the prompt (the headroom of reordering what it retrieved)\n";
  if (!r.overlaps.empty()) {
    out += "lists alike (per example, then the mean): Jaccard of the top-k sets / Kendall tau-b of the rankings\n";
    const auto letter_of = [&](const std::string& spec) {
      for (std::size_t i = 0; i < r.results.size(); ++i)
        if (r.results[i].spec == spec) return std::string(1, static_cast<char>('a' + i % 26));
      return std::string("?");
    };
    for (const auto& o : r.overlaps) {
      char l[160];
      std::snprintf(l, sizeof l, "  (%s) ~ (%s)  %.4f / %s\n", letter_of(o.a).c_str(), letter_of(o.b).c_str(), o.jaccard,
                    o.tau_examples ? fixed4(o.kendall_tau).c_str() : "-");
      out += l;
    }
  }
  for (const auto& sr : r.selections) out += format_selection(r, sr);
  return out;
}

std::string to_json(const EvalReport& r) {
  using json = nlohmann::ordered_json;  // rows and selection methods in the table's order
  json results = json::object(), per = json::object(), sig = json::object();
  for (const auto& res : r.results) {
    json m = json::object();
    for (const auto& [k, v] : res.metrics) m[k] = v;
    results[res.spec] = m;
    json list = json::array();
    for (const auto& e : res.examples) {
      json em = json::object();
      for (const auto& [k, v] : e.metrics) em[k] = v;
      json item = {{"id", e.id}, {"output", e.output}, {"metrics", em}, {"retrieved", e.retrieved}};
      if (!e.chosen.empty()) item["chosen"] = e.chosen;
      list.push_back(std::move(item));
    }
    per[res.spec] = list;
  }
  for (const auto& c : r.comparisons) {
    sig[c.a][c.b][c.metric] = {{"test", c.test}, {"statistic", c.statistic}, {"p", c.p_value},
                                {"better", c.a_better}};
  }
  json selection = json::object();
  for (const auto& sr : r.selections) {
    json methods = json::object();
    for (const auto& m : sr.methods) {
      json mm = json::object(), share = json::object();
      for (const auto& [k, v] : m.metrics) mm[k] = v;
      for (std::size_t p = 0; p < sr.pool.size(); ++p)
        share[sr.pool[p]] = m.chosen.empty() ? 0.0
                                             : static_cast<double>(std::count(m.chosen.begin(), m.chosen.end(), p)) /
                                                   static_cast<double>(m.chosen.size());
      methods[m.name] = {{"success", m.success}, {"metrics", mm}, {"p_vs_selector", m.p_vs_selector}, {"chosen_share", share}};
    }
    selection[sr.selector] = {{"pool", sr.pool}, {"methods", methods}, {"qpp_normalized", sr.qpp_normalized}};
  }
  json out = {{"task", r.task},       {"split", r.split}, {"llm", r.llm},       {"generate", r.generate}, {"k", r.k},
              {"seed", r.seed},       {"examples", r.examples}, {"results", results},
              {"per_example", per},   {"significance", sig},    {"alpha", r.alpha},
              {"seconds", r.seconds}};
  if (!r.selections.empty()) out["selection"] = selection;
  json oracle = json::object();
  for (const auto& res : r.results)
    if (res.oracle)
      oracle[res.spec] = {{"depth", res.oracle->depth}, {"metric", res.oracle->metric}, {"best_single", res.oracle->best},
                          {"worst_single", res.oracle->worst}};
  if (!oracle.empty()) out["oracle"] = oracle;
  json orders = json::object();
  for (const auto& res : r.results)
    if (res.orders)
      orders[res.spec] = {{"k", res.orders->k}, {"metric", res.orders->metric}, {"best_order", res.orders->best},
                          {"worst_order", res.orders->worst}, {"prompts", res.orders->prompts}};
  if (!orders.empty()) out["oracle_orders"] = orders;
  if (!r.overlaps.empty()) {
    json ov = json::array();
    for (const auto& o : r.overlaps)
      ov.push_back({{"a", o.a}, {"b", o.b}, {"jaccard", o.jaccard}, {"kendall_tau", o.tau_examples ? json(o.kendall_tau) : json()},
                    {"examples", o.examples}, {"tau_examples", o.tau_examples}});
    out["list_overlap"] = ov;
  }
  return out.dump(1);
}

std::string format_macro_table(const MacroReport& m) {
  auto letter = [](std::size_t i) { return std::string(1, static_cast<char>('a' + i % 26)); };
  std::vector<std::vector<std::string>> t;
  std::vector<std::string> header = {"", "retriever"};
  for (std::size_t a = 0; a < m.agents.size(); ++a) header.push_back(m.agents[a] + " (" + m.metrics[a] + ")");
  header.push_back(std::string("macro ") + (m.higher_is_better ? "^" : "v"));
  t.push_back(header);
  for (std::size_t i = 0; i < m.rows.size(); ++i) {
    std::vector<std::string> row = {"(" + letter(i) + ")", m.rows[i].row};
    for (double v : m.rows[i].per_agent) row.push_back(fixed4(v));
    std::string cell = fixed4(m.rows[i].macro), marks;
    for (std::size_t j = 0; j < m.rows.size(); ++j)
      for (const auto& c : m.comparisons)
        if (c.a == m.rows[i].row && c.b == m.rows[j].row && c.a_better && c.p_value < m.alpha) marks += letter(j);
    if (!marks.empty()) cell += " " + marks;
    row.push_back(cell);
    t.push_back(row);
  }
  char title[256];
  std::snprintf(title, sizeof title, "macro average over %zu agents (%zu examples pooled)\n", m.agents.size(), m.examples);
  std::string out = title + layout(t);
  char foot[256];
  std::snprintf(foot, sizeof foot, "letters after the macro average: rows it beats at p < %g on the pooled examples (%s)\n",
                m.alpha, m.test == "mcnemar" ? "McNemar" : "paired t-test");
  return out + foot;
}

std::string macro_to_json(const MacroReport& m, const std::vector<AgentReport>& agents) {
  using json = nlohmann::ordered_json;
  json list = json::array();
  for (const auto& a : agents) list.push_back({{"agent", a.agent}, {"report", json::parse(to_json(a.report))}});
  json rows = json::object(), sig = json::object();
  for (const auto& r : m.rows) {
    json per = json::object();
    for (std::size_t a = 0; a < m.agents.size(); ++a) per[m.agents[a]] = r.per_agent[a];
    rows[r.row] = {{"agents", per}, {"macro", r.macro}};
  }
  for (const auto& c : m.comparisons)
    sig[c.a][c.b] = {{"test", c.test}, {"statistic", c.statistic}, {"p", c.p_value}, {"better", c.a_better}};
  json macro = {{"agents", m.agents}, {"metrics", m.metrics}, {"higher_is_better", m.higher_is_better},
                {"examples", m.examples}, {"rows", rows}, {"significance", sig}, {"alpha", m.alpha}};
  return json({{"agents", list}, {"macro", macro}}).dump(1);
}

}  // namespace attune::eval
