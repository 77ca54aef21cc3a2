// The report's charts: SVG text built by hand (axes with round ticks, bars, boxes,
// histograms, lines) and shaded HTML tables. Coordinates are printed with one decimal, so
// the same data gives the same bytes.
#include "attune/report/charts.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

namespace attune::report {

namespace {

struct Range {
  double lo = 0, hi = 0;
  bool any = false;  // false: no value at all
};
// The smallest and largest value of every group.
Range value_range(const std::vector<Group>& groups) {
  Range r;
  for (const auto& g : groups)
    for (double v : g.values) {
      r.lo = r.any ? std::min(r.lo, v) : v;
      r.hi = r.any ? std::max(r.hi, v) : v;
      r.any = true;
    }
  return r;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}
// A coordinate.
std::string c(double v) { return fmt("%.1f", std::abs(v) < 0.05 ? 0.0 : v); }

// Round ticks covering [lo, hi] (1, 2 or 5 times a power of ten apart) and the decimals
// their labels need.
struct Ticks {
  std::vector<double> at;
  int decimals = 0;
  double lo() const { return at.front(); }
  double hi() const { return at.back(); }
};

Ticks nice_ticks(double lo, double hi, int target = 5) {
  if (!(hi > lo)) {
    const double pad = lo == 0 ? 1 : std::abs(lo) * 0.5;
    lo -= pad;
    hi += pad;
    if (lo < 0 && lo + pad >= 0) lo = std::min(0.0, lo + pad);  // a constant >= 0 starts at 0
  }
  const double raw = (hi - lo) / target;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  Ticks t;
  const double first = std::floor(lo / step + 1e-9) * step, last = std::ceil(hi / step - 1e-9) * step;
  for (int i = 0;; ++i) {
    const double v = first + i * step;
    t.at.push_back(std::abs(v) < step * 1e-9 ? 0.0 : v);
    if (v >= last - step * 1e-9 || i > 100) break;
  }
  t.decimals = std::max(0, static_cast<int>(-std::floor(std::log10(step) + 1e-9)));
  return t;
}

std::string tick_label(double v, int decimals) {
  char f[16];
  std::snprintf(f, sizeof f, "%%.%df", decimals);
  std::string s = fmt(f, v);
  if (s.find_first_not_of("-0.") == std::string::npos && s[0] == '-') s.erase(0, 1);
  return s;
}

// A plot area inside an SVG of width w and height h, and its y scale.
struct Frame {
  double w, h, left, right, top, bottom;
  Ticks y;
  double py(double v) const { return top + (h - top - bottom) * (y.hi() - v) / (y.hi() - y.lo()); }
  double plot_w() const { return w - left - right; }
};

std::string svg_open(double w, double h, std::string_view title) {
  return "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" width=\"" + c(w) + "\" height=\"" + c(h) +
         "\" viewBox=\"0 0 " + c(w) + " " + c(h) + "\" role=\"img\" aria-label=\"" + html_escape(title) + "\">\n" +
         "<text class=\"title\" x=\"" + c(w / 2) + "\" y=\"16\" text-anchor=\"middle\">" + html_escape(title) + "</text>\n";
}

// The y axis with its ticks and grid lines, and its label turned upright along it.
std::string y_axis(const Frame& f, std::string_view label) {
  std::string s;
  for (double t : f.y.at) {
    const double y = f.py(t);
    s += "<line class=\"grid\" x1=\"" + c(f.left) + "\" x2=\"" + c(f.w - f.right) + "\" y1=\"" + c(y) + "\" y2=\"" + c(y) +
         "\"/>\n";
    s += "<text class=\"tick\" x=\"" + c(f.left - 4) + "\" y=\"" + c(y + 3.5) + "\" text-anchor=\"end\">" +
         tick_label(t, f.y.decimals) + "</text>\n";
  }
  s += "<line class=\"axis\" x1=\"" + c(f.left) + "\" x2=\"" + c(f.left) + "\" y1=\"" + c(f.top) + "\" y2=\"" +
       c(f.h - f.bottom) + "\"/>\n";
  if (!label.empty()) {
    const double mid = (f.top + f.h - f.bottom) / 2;
    s += "<text class=\"label\" transform=\"translate(12 " + c(mid) + ") rotate(-90)\" text-anchor=\"middle\">" +
         html_escape(label) + "</text>\n";
  }
  return s;
}

std::string title_el(std::string_view text) { return "<title>" + html_escape(text) + "</title>"; }

// Sorted values' quantile q (linear between order statistics, R's type 7).
double quantile(const std::vector<double>& sorted, double q) {
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const auto i = static_cast<std::size_t>(std::floor(pos));
  const double frac = pos - static_cast<double>(i);
  return i + 1 < sorted.size() ? sorted[i] + frac * (sorted[i + 1] - sorted[i]) : sorted[i];
}

struct Rgb {
  double r, g, b;
};
Rgb mix(Rgb a, Rgb b, double t) { return {a.r + (b.r - a.r) * t, a.g + (b.g - a.g) * t, a.b + (b.b - a.b) * t}; }
std::string hex(Rgb x) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", static_cast<int>(std::lround(x.r)), static_cast<int>(std::lround(x.g)),
                static_cast<int>(std::lround(x.b)));
  return buf;
}

}  // namespace

std::string html_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char ch : s) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += ch;
    }
  }
  return out;
}

std::string format_number(double v, int digits) {
  if (!std::isfinite(v)) return "n/a";
  char f[16];
  std::snprintf(f, sizeof f, "%%.%df", digits);
  std::string s = fmt(f, v);
  if (s[0] == '-' && s.find_first_not_of("-0.") == std::string::npos) s.erase(0, 1);
  return s;
}

std::string palette(std::size_t i) {
  // Colour-blind-safe (Okabe-Ito, then Tableau's), distinct enough for ten rows.
  static const char* const kColours[] = {"#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9",
                                         "#d55e00", "#f0e442", "#000000", "#8c564b", "#7f7f7f"};
  return kColours[i % 10];
}

std::string bar_chart(std::string_view title, std::string_view y_label, const std::vector<Bar>& bars) {
  double lo = 0, hi = 0;
  for (const auto& b : bars) {
    for (auto v : {b.value, b.upper, b.lower})
      if (v) lo = std::min(lo, *v), hi = std::max(hi, *v);
    if (b.value && b.error) lo = std::min(lo, *b.value - *b.error), hi = std::max(hi, *b.value + *b.error);
  }
  const double slot = 64;
  Frame f{std::max(300.0, 70 + slot * static_cast<double>(bars.size()) + 20), 250, 70, 20, 40, 40, nice_ticks(lo, hi)};
  std::string s = svg_open(f.w, f.h, title) + y_axis(f, y_label);
  const double base = f.py(std::clamp(0.0, f.y.lo(), f.y.hi()));
  for (std::size_t i = 0; i < bars.size(); ++i) {
    const auto& b = bars[i];
    const double x = f.left + slot * static_cast<double>(i) + 10, bw = 30, cx = x + bw / 2;
    s += "<text class=\"tick\" x=\"" + c(cx) + "\" y=\"" + c(f.h - f.bottom + 16) + "\" text-anchor=\"middle\">" +
         html_escape(b.label) + "</text>\n";
    if (!b.value) {
      s += "<text class=\"na\" x=\"" + c(cx) + "\" y=\"" + c(base - 4) + "\" text-anchor=\"middle\">n/a</text>\n";
      continue;
    }
    const double y = f.py(*b.value);
    s += "<rect class=\"mark bar\" x=\"" + c(x) + "\" y=\"" + c(std::min(y, base)) + "\" width=\"" + c(bw) +
         "\" height=\"" + c(std::abs(base - y)) + "\" fill=\"" + palette(b.colour) + "\">" + title_el(b.tooltip) +
         "</rect>\n";
    double top = std::min(y, base);
    if (b.error) {
      const double y1 = f.py(*b.value + *b.error), y2 = f.py(*b.value - *b.error);
      s += "<path class=\"err\" d=\"M" + c(cx) + " " + c(y1) + "V" + c(y2) + "M" + c(cx - 5) + " " + c(y1) + "H" +
           c(cx + 5) + "M" + c(cx - 5) + " " + c(y2) + "H" + c(cx + 5) + "\"/>\n";
      top = std::min(top, y1);
    }
    if (b.upper) {
      const double yu = f.py(*b.upper);
      s += "<line class=\"bound upper\" x1=\"" + c(x + bw + 2) + "\" x2=\"" + c(x + bw + 14) + "\" y1=\"" + c(yu) +
           "\" y2=\"" + c(yu) + "\">" + title_el("upper bound " + format_number(*b.upper)) + "</line>\n";
      top = std::min(top, yu);
    }
    if (b.lower) {
      const double yl = f.py(*b.lower);
      s += "<line class=\"bound lower\" x1=\"" + c(x + bw + 2) + "\" x2=\"" + c(x + bw + 14) + "\" y1=\"" + c(yl) +
           "\" y2=\"" + c(yl) + "\">" + title_el("lower bound " + format_number(*b.lower)) + "</line>\n";
    }
    if (!b.note.empty())
      s += "<text class=\"note\" x=\"" + c(cx) + "\" y=\"" + c(top - 4) + "\" text-anchor=\"middle\">" +
           html_escape(b.note) + "</text>\n";
  }
  return s + "</svg>\n";
}

std::string box_plot(std::string_view title, std::string_view y_label, const std::vector<Group>& groups) {
  auto [lo, hi, any] = value_range(groups);
  const double slot = 64;
  Frame f{std::max(300.0, 70 + slot * static_cast<double>(groups.size()) + 20), 250, 70, 20, 40, 40, nice_ticks(lo, hi)};
  std::string s = svg_open(f.w, f.h, title) + y_axis(f, y_label);
  for (std::size_t i = 0; i < groups.size(); ++i) {
    const auto& g = groups[i];
    const double x = f.left + slot * static_cast<double>(i) + 12, bw = 34, cx = x + bw / 2;
    s += "<text class=\"tick\" x=\"" + c(cx) + "\" y=\"" + c(f.h - f.bottom + 16) + "\" text-anchor=\"middle\">" +
         html_escape(g.label) + "</text>\n";
    if (g.values.empty()) {
      s += "<text class=\"na\" x=\"" + c(cx) + "\" y=\"" + c(f.py(f.y.lo()) - 4) + "\" text-anchor=\"middle\">n/a</text>\n";
      continue;
    }
    auto v = g.values;
    std::sort(v.begin(), v.end());
    const double q1 = quantile(v, 0.25), med = quantile(v, 0.5), q3 = quantile(v, 0.75);
    const double mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
    const std::string tip = g.tooltip + ": n " + std::to_string(v.size()) + ", min " + format_number(v.front()) +
                            ", q1 " + format_number(q1) + ", median " + format_number(med) + ", q3 " +
                            format_number(q3) + ", max " + format_number(v.back()) + ", mean " + format_number(mean);
    s += "<path class=\"whisker\" d=\"M" + c(cx) + " " + c(f.py(v.back())) + "V" + c(f.py(q3)) + "M" + c(cx) + " " +
         c(f.py(q1)) + "V" + c(f.py(v.front())) + "M" + c(cx - 8) + " " + c(f.py(v.back())) + "H" + c(cx + 8) + "M" +
         c(cx - 8) + " " + c(f.py(v.front())) + "H" + c(cx + 8) + "\"/>\n";
    s += "<rect class=\"mark box\" x=\"" + c(x) + "\" y=\"" + c(f.py(q3)) + "\" width=\"" + c(bw) + "\" height=\"" +
         c(std::max(1.0, f.py(q1) - f.py(q3))) + "\" fill=\"" + palette(g.colour) + "\" fill-opacity=\"0.35\" stroke=\"" +
         palette(g.colour) + "\">" + title_el(tip) + "</rect>\n";
    s += "<line class=\"median\" x1=\"" + c(x) + "\" x2=\"" + c(x + bw) + "\" y1=\"" + c(f.py(med)) + "\" y2=\"" +
         c(f.py(med)) + "\"/>\n";
    s += "<circle class=\"mean\" cx=\"" + c(cx) + "\" cy=\"" + c(f.py(mean)) + "\" r=\"2.5\"/>\n";
  }
  return s + "</svg>\n";
}

std::string histograms(std::string_view title, const std::vector<Group>& groups, std::size_t bins) {
  bins = std::max<std::size_t>(1, bins);
  auto [lo, hi, any] = value_range(groups);
  if (!(hi > lo)) hi = lo + 1;
  // Shares per group and bin; the panels share one y scale.
  std::vector<std::vector<double>> share(groups.size(), std::vector<double>(bins, 0.0));
  double top_share = 0;
  for (std::size_t i = 0; i < groups.size(); ++i) {
    for (double v : groups[i].values) {
      auto b = static_cast<std::size_t>(std::floor((v - lo) / (hi - lo) * static_cast<double>(bins)));
      share[i][std::min(b, bins - 1)] += 1;
    }
    for (auto& x : share[i]) {
      if (!groups[i].values.empty()) x /= static_cast<double>(groups[i].values.size());
      top_share = std::max(top_share, x);
    }
  }
  const std::size_t per_row = 4;
  const double pw = 200, ph = 130;
  const std::size_t nrows = std::max<std::size_t>(1, (groups.size() + per_row - 1) / per_row);
  const double w = 20 + pw * static_cast<double>(std::min(per_row, std::max<std::size_t>(1, groups.size())));
  const double h = 28 + ph * static_cast<double>(nrows);
  std::string s = svg_open(w, h, title);
  const Ticks yt = nice_ticks(0, top_share > 0 ? top_share : 1, 2);
  for (std::size_t i = 0; i < groups.size(); ++i) {
    const auto& g = groups[i];
    const double ox = 10 + pw * static_cast<double>(i % per_row), oy = 28 + ph * static_cast<double>(i / per_row);
    Frame f{pw, ph, 42, 14, 18, 30, yt};
    auto X = [&](double x) { return ox + x; };
    auto Y = [&](double y) { return oy + y; };
    s += "<text class=\"tick\" x=\"" + c(X(f.left + f.plot_w() / 2)) + "\" y=\"" + c(Y(12)) +
         "\" text-anchor=\"middle\">" + html_escape(g.label) + "</text>\n";
    for (double t : yt.at)
      s += "<text class=\"tick\" x=\"" + c(X(f.left - 4)) + "\" y=\"" + c(Y(f.py(t) + 3.5)) + "\" text-anchor=\"end\">" +
           tick_label(t, yt.decimals) + "</text>\n";
    s += "<path class=\"axis\" d=\"M" + c(X(f.left)) + " " + c(Y(f.top)) + "V" + c(Y(f.py(0))) + "H" +
         c(X(f.w - f.right)) + "\"/>\n";
    s += "<text class=\"tick\" x=\"" + c(X(f.left)) + "\" y=\"" + c(Y(f.h - f.bottom + 13)) + "\" text-anchor=\"start\">" +
         format_number(lo, 2) + "</text>\n";
    s += "<text class=\"tick\" x=\"" + c(X(f.w - f.right)) + "\" y=\"" + c(Y(f.h - f.bottom + 13)) +
         "\" text-anchor=\"end\">" + format_number(hi, 2) + "</text>\n";
    if (g.values.empty()) {
      s += "<text class=\"na\" x=\"" + c(X(f.left + f.plot_w() / 2)) + "\" y=\"" + c(Y(f.py(0) - 6)) +
           "\" text-anchor=\"middle\">no values</text>\n";
      continue;
    }
    const double bw = f.plot_w() / static_cast<double>(bins);
    for (std::size_t b = 0; b < bins; ++b) {
      const double x = f.left + bw * static_cast<double>(b), y = f.py(share[i][b]);
      const double from = lo + (hi - lo) * static_cast<double>(b) / static_cast<double>(bins);
      const double to = lo + (hi - lo) * static_cast<double>(b + 1) / static_cast<double>(bins);
      s += "<rect class=\"mark bin\" x=\"" + c(X(x)) + "\" y=\"" + c(Y(y)) + "\" width=\"" + c(bw - 1) + "\" height=\"" +
           c(f.py(0) - y) + "\" fill=\"" + palette(g.colour) + "\">" +
           title_el(g.tooltip + ": [" + format_number(from) + (b + 1 == bins ? ", " : ", ") + format_number(to) +
                    (b + 1 == bins ? "]" : ")") + " " + format_number(100 * share[i][b], 1) + "% of " +
                    std::to_string(g.values.size())) +
           "</rect>\n";
    }
  }
  return s + "</svg>\n";
}

std::string line_chart(std::string_view title, std::string_view x_label, std::string_view y_label,
                       const std::vector<Line>& lines) {
  double xlo = 0, xhi = 0, ylo = 0, yhi = 0;
  bool any = false;
  for (const auto& l : lines)
    for (std::size_t i = 0; i < l.x.size(); ++i) {
      xlo = any ? std::min(xlo, l.x[i]) : l.x[i];
      xhi = any ? std::max(xhi, l.x[i]) : l.x[i];
      ylo = any ? std::min(ylo, l.y[i]) : l.y[i];
      yhi = any ? std::max(yhi, l.y[i]) : l.y[i];
      any = true;
    }
  const bool legend = lines.size() > 1;
  Frame f{420, legend ? 250.0 + 16 * static_cast<double>(lines.size()) : 240.0, 70, 20, 30, 42, nice_ticks(ylo, yhi, 4)};
  if (legend) f.bottom += 16 * static_cast<double>(lines.size());
  if (!(xhi > xlo)) xlo -= 0.5, xhi += 0.5;
  auto px = [&](double x) { return f.left + 10 + (f.plot_w() - 20) * (x - xlo) / (xhi - xlo); };
  std::string s = svg_open(f.w, f.h, title) + y_axis(f, y_label);
  const double base = f.h - f.bottom;
  s += "<line class=\"axis\" x1=\"" + c(f.left) + "\" x2=\"" + c(f.w - f.right) + "\" y1=\"" + c(base) + "\" y2=\"" +
       c(base) + "\"/>\n";
  // x ticks: every whole number when there are few, else round ticks.
  std::vector<double> xt;
  int xdec = 0;
  bool whole = true;
  for (const auto& l : lines)
    for (double x : l.x) whole = whole && x == std::floor(x);
  if (whole && xhi - xlo <= 20) {
    for (double x = std::ceil(xlo); x <= xhi; x += 1) xt.push_back(x);
  } else {
    const auto t = nice_ticks(xlo, xhi, 5);
    for (double x : t.at)
      if (x >= xlo - 1e-9 && x <= xhi + 1e-9) xt.push_back(x);
    xdec = t.decimals;
  }
  for (double x : xt)
    s += "<text class=\"tick\" x=\"" + c(px(x)) + "\" y=\"" + c(base + 14) + "\" text-anchor=\"middle\">" +
         tick_label(x, xdec) + "</text>\n";
  if (!x_label.empty())
    s += "<text class=\"label\" x=\"" + c(f.left + f.plot_w() / 2) + "\" y=\"" + c(base + 30) +
         "\" text-anchor=\"middle\">" + html_escape(x_label) + "</text>\n";
  for (std::size_t li = 0; li < lines.size(); ++li) {
    const auto& l = lines[li];
    const std::string colour = palette(l.colour);
    std::string d;
    for (std::size_t i = 0; i < l.x.size(); ++i) d += (i ? "L" : "M") + c(px(l.x[i])) + " " + c(f.py(l.y[i]));
    if (l.x.size() > 1) s += "<path class=\"line\" d=\"" + d + "\" stroke=\"" + colour + "\"/>\n";
    for (std::size_t i = 0; i < l.x.size(); ++i) {
      if (l.highlight && *l.highlight == l.x[i])
        s += "<circle class=\"kept\" cx=\"" + c(px(l.x[i])) + "\" cy=\"" + c(f.py(l.y[i])) + "\" r=\"7\" stroke=\"" +
             colour + "\"/>\n";
      s += "<circle class=\"mark point\" cx=\"" + c(px(l.x[i])) + "\" cy=\"" + c(f.py(l.y[i])) + "\" r=\"3.5\" fill=\"" +
           colour + "\">" + title_el(l.name + " at " + tick_label(l.x[i], xdec) + ": " + format_number(l.y[i], 6)) +
           "</circle>\n";
    }
    if (legend) {
      const double ly = base + 44 + 16 * static_cast<double>(li);
      s += "<rect x=\"" + c(f.left) + "\" y=\"" + c(ly - 9) + "\" width=\"10\" height=\"10\" fill=\"" + colour + "\"/>" +
           "<text class=\"tick\" x=\"" + c(f.left + 16) + "\" y=\"" + c(ly) + "\">" + html_escape(l.name) + "</text>\n";
    }
  }
  return s + "</svg>\n";
}

std::string heatmap_table(const Heatmap& h) {
  const Rgb white{255, 255, 255}, blue{33, 102, 172}, red{178, 24, 43};
  std::string s = "<table class=\"heat\">\n<tr><th>" + html_escape(h.corner) + "</th>";
  for (const auto& col : h.col_labels) s += "<th>" + html_escape(col) + "</th>";
  s += "</tr>\n";
  for (std::size_t r = 0; r < h.cells.size(); ++r) {
    s += "<tr><th>" + html_escape(r < h.row_labels.size() ? h.row_labels[r] : "") + "</th>";
    for (const auto& cell : h.cells[r]) {
      std::string style, cls = cell.is_mark ? "mark cell" : "cell";
      if (cell.value) {
        const double span = h.hi > h.lo ? h.hi - h.lo : 1;
        const double t = std::clamp((*cell.value - h.lo) / span, 0.0, 1.0);
        Rgb bg;
        double strength;
        if (h.diverging) {
          bg = t < 0.5 ? mix(red, white, t * 2) : mix(white, blue, (t - 0.5) * 2);
          strength = std::abs(t - 0.5) * 2;
        } else {
          bg = mix(white, blue, t);
          strength = t;
        }
        style = " style=\"background:" + hex(bg) + (strength > 0.6 ? ";color:#fff" : "") + "\"";
      } else {
        cls += " na";
      }
      s += "<td class=\"" + cls + "\"" + style + (cell.tooltip.empty() ? "" : " title=\"" + html_escape(cell.tooltip) + "\"") +
           ">" + (cell.value || !cell.text.empty() ? html_escape(cell.text.empty() ? format_number(*cell.value) : cell.text) : h.missing) +
           "</td>";
    }
    s += "</tr>\n";
  }
  return s + "</table>\n";
}

}  // namespace attune::report
