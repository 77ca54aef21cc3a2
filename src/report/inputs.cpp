// Reading eval JSON files and training folders into the report's typed records. Every
// field the report shows is checked here, once; messages name the file and the field.
#include "attune/report/inputs.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "attune/core/error.h"
#include "attune/core/file.h"

namespace attune::report {

namespace fs = std::filesystem;

namespace {

// ordered_json keeps the rows and metrics in the order eval wrote them (the table's).
using json = nlohmann::ordered_json;

// A JSON document and the file it came from, with field-path checks whose errors name both.
class Doc {
 public:
  explicit Doc(std::string file) : file_(std::move(file)) {}

  [[noreturn]] void fail(const std::string& field, const std::string& what) const {
    throw UsageError(file_ + (field.empty() ? "" : ": field \"" + field + "\"") + ": " + what);
  }

  json load() const {
    std::error_code ec;
    if (!fs::exists(file_, ec)) fail("", "no such file");
    if (fs::is_directory(file_, ec)) fail("", "is a folder, not a file");
    std::string text;
    try {
      text = read_file(file_);
    } catch (const Error& e) {
      throw UsageError(e.what());
    }
    try {
      return json::parse(text);
    } catch (const json::exception& e) {
      fail("", std::string("not valid JSON (") + e.what() + ")");
    }
  }

  const json& object(const json& v, const std::string& field) const {
    if (!v.is_object()) fail(field, "must be a JSON object, not " + kind(v));
    return v;
  }
  const json& array(const json& v, const std::string& field) const {
    if (!v.is_array()) fail(field, "must be a JSON array, not " + kind(v));
    return v;
  }
  // The member `key` of the object `v` (at `path`), which must be there.
  const json& at(const json& v, const std::string& key, const std::string& path) const {
    const std::string field = join(path, key);
    if (!v.contains(key)) fail(field, "missing");
    return v.at(key);
  }
  const json* find(const json& v, const std::string& key) const {
    auto it = v.find(key);
    return it == v.end() ? nullptr : &*it;
  }
  double number(const json& v, const std::string& field) const {
    if (!v.is_number()) fail(field, "must be a number, not " + kind(v));
    const double d = v.get<double>();
    if (!std::isfinite(d)) fail(field, "must be finite");
    return d;
  }
  std::optional<double> number_or_null(const json& v, const std::string& field) const {
    if (v.is_null()) return std::nullopt;
    return number(v, field);
  }
  std::uint64_t count(const json& v, const std::string& field) const {
    if (!v.is_number_unsigned()) fail(field, "must be a whole number >= 0, not " + kind(v));
    return v.get<std::uint64_t>();
  }
  std::string string(const json& v, const std::string& field) const {
    if (!v.is_string()) fail(field, "must be a string, not " + kind(v));
    return v.get<std::string>();
  }
  bool boolean(const json& v, const std::string& field) const {
    if (!v.is_boolean()) fail(field, "must be true or false, not " + kind(v));
    return v.get<bool>();
  }
  const std::string& file() const { return file_; }

  static std::string join(const std::string& path, const std::string& key) { return path.empty() ? key : path + "." + key; }
  static std::string index(const std::string& path, std::size_t i) { return path + "[" + std::to_string(i) + "]"; }

 private:
  static std::string kind(const json& v) {
    if (v.is_null()) return "null";
    if (v.is_boolean()) return "a boolean";
    if (v.is_number()) return "the number " + v.dump();
    if (v.is_string()) return "a string";
    if (v.is_array()) return "an array";
    return "an object";
  }
  std::string file_;
};

bool lower_is_better(const std::string& metric) { return metric == "mae" || metric == "rmse"; }

std::size_t row_index(const Doc& d, const EvalRun& run, const std::string& spec, const std::string& field) {
  for (std::size_t i = 0; i < run.rows.size(); ++i)
    if (run.rows[i].spec == spec) return i;
  d.fail(field, "names \"" + spec + "\", which is not a row of \"results\"");
}

std::size_t metric_index(const Doc& d, const EvalRun& run, const std::string& name, const std::string& field) {
  for (std::size_t i = 0; i < run.metrics.size(); ++i)
    if (run.metrics[i].name == name) return i;
  d.fail(field, "names the metric \"" + name + "\", which is not a metric of \"results\"");
}

// A row's (or a selection method's) metric values: every metric of the table, numbers or null.
std::vector<std::optional<double>> metric_values(const Doc& d, const EvalRun& run, const json& obj, const std::string& path) {
  d.object(obj, path);
  std::vector<std::optional<double>> out;
  for (const auto& m : run.metrics) out.push_back(d.number_or_null(d.at(obj, m.name, path), Doc::join(path, m.name)));
  for (const auto& [key, v] : obj.items()) metric_index(d, run, key, Doc::join(path, key));
  return out;
}

OracleBound oracle_bound(const Doc& d, const EvalRun& run, const json& v, const std::string& path, const char* depth,
                         const char* best, const char* worst) {
  d.object(v, path);
  OracleBound b;
  b.depth = d.count(d.at(v, depth, path), Doc::join(path, depth));
  b.metric = d.string(d.at(v, "metric", path), Doc::join(path, "metric"));
  metric_index(d, run, b.metric, Doc::join(path, "metric"));
  b.best = d.number(d.at(v, best, path), Doc::join(path, best));
  b.worst = d.number(d.at(v, worst, path), Doc::join(path, worst));
  return b;
}

void read_per_example(const Doc& d, EvalRun& run, const json& per) {
  d.object(per, "per_example");
  for (const auto& [spec, list] : per.items()) row_index(d, run, spec, "per_example." + spec);
  for (auto& row : run.rows) {
    const std::string path = "per_example." + row.spec;
    const auto& list = d.array(d.at(per, row.spec, "per_example"), path);
    row.per_example.assign(run.metrics.size(), {});
    for (std::size_t e = 0; e < list.size(); ++e) {
      const std::string ep = Doc::index(path, e);
      const auto& item = d.object(list[e], ep);
      row.example_ids.push_back(d.string(d.at(item, "id", ep), Doc::join(ep, "id")));
      const auto& ms = d.object(d.at(item, "metrics", ep), Doc::join(ep, "metrics"));
      for (std::size_t m = 0; m < run.metrics.size(); ++m) {
        const auto* v = d.find(ms, run.metrics[m].name);
        row.per_example[m].push_back(v ? d.number_or_null(*v, Doc::join(Doc::join(ep, "metrics"), run.metrics[m].name))
                                       : std::nullopt);
      }
      if (const auto* c = d.find(item, "chosen")) row.chosen.push_back(d.string(*c, Doc::join(ep, "chosen")));
      else if (!row.chosen.empty()) d.fail(Doc::join(ep, "chosen"), "missing (earlier examples of this row have it)");
    }
    if (!row.chosen.empty() && row.chosen.size() != list.size())
      d.fail(Doc::index(path, 0) + ".chosen", "only some examples of this row have it");
    if (run.examples && list.size() != *run.examples)
      d.fail(path, "has " + std::to_string(list.size()) + " examples, but \"examples\" says " + std::to_string(*run.examples));
  }
  run.has_per_example = true;
}

void read_significance(const Doc& d, EvalRun& run, const json& sig) {
  d.object(sig, "significance");
  for (const auto& [a, against] : sig.items()) {
    const std::string pa = "significance." + a;
    const std::size_t ia = row_index(d, run, a, pa);
    d.object(against, pa);
    for (const auto& [b, per_metric] : against.items()) {
      const std::string pb = pa + "." + b;
      const std::size_t ib = row_index(d, run, b, pb);
      d.object(per_metric, pb);
      for (const auto& [m, c] : per_metric.items()) {
        const std::string pm = pb + "." + m;
        d.object(c, pm);
        Comparison cmp;
        cmp.a = ia;
        cmp.b = ib;
        cmp.metric = metric_index(d, run, m, pm);
        cmp.test = d.string(d.at(c, "test", pm), pm + ".test");
        // A p-value eval could not compute (null) never marks a row as beating another.
        cmp.p = d.number_or_null(d.at(c, "p", pm), pm + ".p").value_or(NAN);
        cmp.better = d.boolean(d.at(c, "better", pm), pm + ".better");
        run.comparisons.push_back(std::move(cmp));
      }
    }
  }
}

void read_selection(const Doc& d, EvalRun& run, const json& sel) {
  d.object(sel, "selection");
  for (const auto& [name, s] : sel.items()) {
    const std::string ps = "selection." + name;
    Selection out;
    out.selector = run.rows[row_index(d, run, name, ps)].spec;
    d.object(s, ps);
    const auto& pool = d.array(d.at(s, "pool", ps), ps + ".pool");
    for (std::size_t i = 0; i < pool.size(); ++i) out.pool.push_back(d.string(pool[i], Doc::index(ps + ".pool", i)));
    if (out.pool.empty()) d.fail(ps + ".pool", "is empty");
    if (const auto* q = d.find(s, "qpp_normalized")) out.qpp_normalized = d.boolean(*q, ps + ".qpp_normalized");
    const auto& methods = d.object(d.at(s, "methods", ps), ps + ".methods");
    for (const auto& [mname, m] : methods.items()) {
      const std::string pm = ps + ".methods." + mname;
      d.object(m, pm);
      SelectionMethod sm;
      sm.name = mname;
      sm.success = d.number(d.at(m, "success", pm), pm + ".success");
      sm.values = metric_values(d, run, d.at(m, "metrics", pm), pm + ".metrics");
      if (const auto* p = d.find(m, "p_vs_selector")) sm.p_vs_selector = d.number_or_null(*p, pm + ".p_vs_selector");
      const auto& share = d.object(d.at(m, "chosen_share", pm), pm + ".chosen_share");
      for (const auto& member : out.pool)
        sm.chosen_share.push_back(d.number(d.at(share, member, pm + ".chosen_share"), pm + ".chosen_share." + member));
      out.methods.push_back(std::move(sm));
    }
    if (out.methods.empty()) d.fail(ps + ".methods", "is empty");
    run.selections.push_back(std::move(out));
  }
}

void read_overlap(const Doc& d, EvalRun& run, const json& ov) {
  d.array(ov, "list_overlap");
  for (std::size_t i = 0; i < ov.size(); ++i) {
    const std::string p = Doc::index("list_overlap", i);
    const auto& o = d.object(ov[i], p);
    Overlap x;
    x.a = row_index(d, run, d.string(d.at(o, "a", p), p + ".a"), p + ".a");
    x.b = row_index(d, run, d.string(d.at(o, "b", p), p + ".b"), p + ".b");
    x.jaccard = d.number(d.at(o, "jaccard", p), p + ".jaccard");
    if (x.jaccard < 0 || x.jaccard > 1) d.fail(p + ".jaccard", "must be in [0, 1]");
    x.kendall_tau = d.number_or_null(d.at(o, "kendall_tau", p), p + ".kendall_tau");
    if (x.kendall_tau && (*x.kendall_tau < -1 || *x.kendall_tau > 1)) d.fail(p + ".kendall_tau", "must be in [-1, 1]");
    x.examples = d.count(d.at(o, "examples", p), p + ".examples");
    x.tau_examples = d.count(d.at(o, "tau_examples", p), p + ".tau_examples");
    run.overlaps.push_back(x);
  }
  run.has_overlap = true;
}

// Flattens `v` into dotted keys and JSON text values.
void flatten(const json& v, const std::string& prefix, std::vector<std::pair<std::string, std::string>>& out) {
  if (v.is_object() && !v.empty()) {
    for (const auto& [k, x] : v.items()) flatten(x, prefix.empty() ? k : prefix + "." + k, out);
    return;
  }
  out.emplace_back(prefix, v.is_string() ? v.get<std::string>() : v.dump());
}

TrainRun read_train_run(const fs::path& folder, const std::string& shown) {
  const Doc d((folder / "attune_train.json").string());
  const json root = d.load();
  d.object(root, "");
  TrainRun t;
  t.dir = shown;
  if (const auto* m = d.find(root, "method")) t.method = d.string(*m, "method");
  else if (const auto* o = d.find(root, "objective")) t.method = d.string(*o, "objective");
  if (const auto* v = d.find(root, "data")) t.data = d.string(*v, "data");
  if (const auto* v = d.find(root, "device")) t.device = d.string(*v, "device");
  if (const auto* v = d.find(root, "seed")) t.seed = d.count(*v, "seed");
  if (const auto* v = d.find(root, "steps")) t.steps = d.count(*v, "steps");
  if (const auto* v = d.find(root, "total_steps")) t.total_steps = d.count(*v, "total_steps");
  if (const auto* v = d.find(root, "best_epoch")) t.best_epoch = d.count(*v, "best_epoch");
  if (const auto* v = d.find(root, "dev_examples")) t.dev_examples = d.count(*v, "dev_examples");
  if (const auto* v = d.find(root, "seconds_this_run")) t.seconds = d.number(*v, "seconds_this_run");
  if (const auto* ep = d.find(root, "epochs")) {
    d.array(*ep, "epochs");
    for (std::size_t i = 0; i < ep->size(); ++i) {
      const std::string p = Doc::index("epochs", i);
      const auto& e = d.object((*ep)[i], p);
      Epoch x;
      x.epoch = d.count(d.at(e, "epoch", p), p + ".epoch");
      x.loss = d.number(d.at(e, "loss", p), p + ".loss");
      if (!t.epochs.empty() && x.epoch <= t.epochs.back().epoch) d.fail(p + ".epoch", "epochs must be in increasing order");
      for (const auto& [k, v] : e.items()) {
        if (k == "epoch" || k == "loss" || v.is_null()) continue;
        x.dev.emplace_back(k, d.number(v, p + "." + k));
      }
      t.epochs.push_back(std::move(x));
    }
  }
  if (t.best_epoch && *t.best_epoch > t.epochs.size())
    d.fail("best_epoch", "is " + std::to_string(*t.best_epoch) + ", past the " + std::to_string(t.epochs.size()) +
                             " epochs recorded");
  if (const auto* o = d.find(root, "options")) flatten(d.object(*o, "options"), "", t.options);
  if (const auto* f = d.find(root, "feedback")) {
    d.object(*f, "feedback");
    FeedbackStats fs;
    fs.kind = d.string(d.at(*f, "kind", "feedback"), "feedback.kind");
    const auto& spread = d.array(d.at(*f, "spread", "feedback"), "feedback.spread");
    for (std::size_t i = 0; i < spread.size(); ++i) {
      const double s = d.number(spread[i], Doc::index("feedback.spread", i));
      if (s < 0) d.fail(Doc::index("feedback.spread", i), "a spread (largest minus smallest utility) cannot be negative");
      fs.spread.push_back(s);
    }
    t.feedback = std::move(fs);
  }
  static const char* const kShown[] = {"method", "data", "device", "seed", "steps", "total_steps", "best_epoch",
                                       "dev_examples", "seconds_this_run", "epochs", "options", "feedback"};
  for (const auto& [k, v] : root.items()) {
    if (std::find(std::begin(kShown), std::end(kShown), k) != std::end(kShown)) continue;
    if (k.rfind("init_", 0) == 0 && v.is_number()) {
      t.initial_dev.emplace_back(k.substr(5), d.number(v, k));
      continue;
    }
    if (k == "objective" && v.is_string() && t.method == v.get<std::string>()) continue;
    flatten(v, k, t.other);
  }
  const fs::path model = folder / "attune_model.json";
  if (fs::exists(model)) {
    const Doc m(model.string());
    const json j = m.load();
    m.object(j, "");
    if (const auto* c = m.find(j, "complete")) t.complete = m.boolean(*c, "complete");
  }
  const fs::path selector = folder / "selector.json";
  if (fs::exists(selector)) {
    const Doc s(selector.string());
    const json j = s.load();
    s.object(j, "");
    const auto& pool = s.array(s.at(j, "pool", ""), "pool");
    for (std::size_t i = 0; i < pool.size(); ++i) t.pool.push_back(s.string(pool[i], Doc::index("pool", i)));
    if (const auto* v = s.find(j, "variant")) t.selector_variant = s.string(*v, "variant");
  }
  return t;
}

// Names with their digit runs compared as numbers: "iter-2" < "iter-10".
bool natural_less(const std::string& a, const std::string& b) {
  std::size_t i = 0, j = 0;
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  while (i < a.size() && j < b.size()) {
    if (digit(a[i]) && digit(b[j])) {
      std::size_t i2 = i, j2 = j;
      while (i2 < a.size() && digit(a[i2])) ++i2;
      while (j2 < b.size() && digit(b[j2])) ++j2;
      std::string x = a.substr(i, i2 - i), y = b.substr(j, j2 - j);
      x.erase(0, std::min(x.find_first_not_of('0'), x.size()));
      y.erase(0, std::min(y.find_first_not_of('0'), y.size()));
      if (x.size() != y.size()) return x.size() < y.size();
      if (x != y) return x < y;
      i = i2;
      j = j2;
    } else {
      if (a[i] != b[j]) return a[i] < b[j];
      ++i;
      ++j;
    }
  }
  if ((a.size() - i) != (b.size() - j)) return a.size() - i < b.size() - j;
  return a < b;
}

}  // namespace

std::string EvalRun::beats(std::size_t r, std::size_t m) const {
  std::string out;
  for (std::size_t j = 0; j < rows.size(); ++j)
    for (const auto& c : comparisons)
      if (c.a == r && c.b == j && c.metric == m && c.better && c.p < alpha) {
        out += static_cast<char>('a' + j % 26);
        break;
      }
  return out;
}

EvalRun read_eval(const fs::path& file) {
  const Doc d(file.string());
  const json root = d.load();
  d.object(root, "");
  EvalRun run;
  run.file = file.string();
  run.task = d.string(d.at(root, "task", ""), "task");
  run.split = d.string(d.at(root, "split", ""), "split");
  run.llm = d.string(d.at(root, "llm", ""), "llm");
  run.k = d.count(d.at(root, "k", ""), "k");
  run.seed = d.count(d.at(root, "seed", ""), "seed");
  if (const auto* v = d.find(root, "examples")) run.examples = d.count(*v, "examples");
  if (const auto* v = d.find(root, "alpha")) {
    run.alpha = d.number(*v, "alpha");
    if (!(run.alpha > 0 && run.alpha < 1)) d.fail("alpha", "must be in (0, 1)");
  }
  const auto& results = d.object(d.at(root, "results", ""), "results");
  if (results.empty()) d.fail("results", "has no row");
  // The metrics: the first row's, in its order (eval writes them sorted by name, which puts
  // each task's primary metric first; an oracle entry's "metric" names it when present).
  for (const auto& [m, v] : d.object(results.begin().value(), "results." + results.begin().key()).items())
    run.metrics.push_back({m, !lower_is_better(m)});
  if (run.metrics.empty()) d.fail("results." + results.begin().key(), "has no metric");
  if (const auto* o = d.find(root, "oracle"); o && o->is_object() && !o->empty() && o->begin()->is_object()) {
    const auto* pm = d.find(*o->begin(), "metric");
    if (pm && pm->is_string()) {
      auto it = std::find_if(run.metrics.begin(), run.metrics.end(), [&](const Metric& m) { return m.name == pm->get<std::string>(); });
      if (it != run.metrics.end()) std::rotate(run.metrics.begin(), it, it + 1);
    }
  }
  for (const auto& [spec, v] : results.items()) {
    EvalRow row;
    row.spec = spec;
    run.rows.push_back(std::move(row));
  }
  for (auto& row : run.rows) row.values = metric_values(d, run, results.at(row.spec), "results." + row.spec);
  if (const auto* per = d.find(root, "per_example")) read_per_example(d, run, *per);
  if (const auto* sig = d.find(root, "significance")) read_significance(d, run, *sig);
  if (const auto* o = d.find(root, "oracle")) {
    d.object(*o, "oracle");
    for (const auto& [spec, v] : o->items())
      run.rows[row_index(d, run, spec, "oracle." + spec)].oracle =
          oracle_bound(d, run, v, "oracle." + spec, "depth", "best_single", "worst_single");
  }
  if (const auto* o = d.find(root, "oracle_orders")) {
    d.object(*o, "oracle_orders");
    for (const auto& [spec, v] : o->items())
      run.rows[row_index(d, run, spec, "oracle_orders." + spec)].orders =
          oracle_bound(d, run, v, "oracle_orders." + spec, "k", "best_order", "worst_order");
  }
  if (const auto* s = d.find(root, "selection")) read_selection(d, run, *s);
  if (const auto* o = d.find(root, "list_overlap")) read_overlap(d, run, *o);
  return run;
}

std::vector<TrainRun> read_train(const fs::path& dir) {
  const std::string shown = dir.string();
  std::error_code ec;
  if (!fs::exists(dir, ec)) throw UsageError(shown + ": no such folder (--train takes an `attune train` output folder)");
  if (!fs::is_directory(dir, ec))
    throw UsageError(shown + ": not a folder (--train takes an `attune train` output folder; eval files go to --eval)");
  if (fs::exists(dir / "attune_train.json")) return {read_train_run(dir, shown)};
  std::vector<fs::path> subs;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_directory() && fs::exists(e.path() / "attune_train.json")) subs.push_back(e.path());
  if (ec) throw UsageError(shown + ": cannot list the folder: " + ec.message());
  if (subs.empty())
    throw UsageError(shown + ": no attune_train.json in it or in a folder inside it (not an `attune train` output folder)");
  std::sort(subs.begin(), subs.end(),
            [](const fs::path& a, const fs::path& b) { return natural_less(a.filename().string(), b.filename().string()); });
  std::vector<TrainRun> out;
  for (const auto& s : subs) out.push_back(read_train_run(s, (fs::path(shown) / s.filename()).string()));
  return out;
}

}  // namespace attune::report
