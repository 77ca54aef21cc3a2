#pragma once
// Small charts written as inline SVG (and heatmaps as HTML tables) by attune itself: no
// script, no network. Every data mark carries class "mark" (and a kind: "bar", "box",
// "bin", "point", "cell"), so a test can count them; axes, labels and error bars do not.
// All text is HTML-escaped here. Output depends only on the arguments (byte-identical
// for the same input).
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace attune::report {

// &, <, >, " and ' as entities: safe in HTML text, attributes and inline SVG.
std::string html_escape(std::string_view s);

// A number as the report prints it: `digits` after the point, "-0.0000" as "0.0000",
// non-finite values as "n/a".
std::string format_number(double v, int digits = 4);

// The i-th colour of the report's palette (a row keeps its colour in every chart).
std::string palette(std::size_t i);

// A vertical bar chart: one bar (mark) per item with a value; an item without one is left
// empty and labelled "n/a".
struct Bar {
  std::string label;                 // under the bar ("(a)")
  std::string tooltip;               // the <title> of the bar (full name and value)
  std::optional<double> value;
  std::optional<double> error;       // half-width of an error bar around value
  std::string note;                  // above the bar (significance letters)
  std::optional<double> upper, lower;  // bounds drawn as ticks beside the bar (oracle best/worst)
  std::size_t colour = 0;
};
std::string bar_chart(std::string_view title, std::string_view y_label, const std::vector<Bar>& bars);

// Box plots side by side: one box (mark) per group with at least one value (whiskers at the
// smallest and largest value, box at the quartiles, line at the median, dot at the mean).
struct Group {
  std::string label;
  std::string tooltip;
  std::vector<double> values;
  std::size_t colour = 0;
};
std::string box_plot(std::string_view title, std::string_view y_label, const std::vector<Group>& groups);

// One small histogram per group over a shared range: `bins` bins (marks) per group, counts
// as shares of the group's values.
std::string histograms(std::string_view title, const std::vector<Group>& groups, std::size_t bins);

// Lines over x: one point (mark) per (x, y); `highlight` circles the point at that x.
struct Line {
  std::string name;
  std::vector<double> x, y;
  std::optional<double> highlight;
  std::size_t colour = 0;
};
std::string line_chart(std::string_view title, std::string_view x_label, std::string_view y_label,
                       const std::vector<Line>& lines);

// A table whose cells (marks) are shaded by value: lo..hi from white to blue, or with
// `diverging` from red through white (mid-range) to blue. A cell without a value is a mark
// shown as `missing`; `is_mark` false leaves a cell out of the count (a matrix diagonal).
struct HeatCell {
  std::optional<double> value;
  std::string text;     // shown in the cell ("" = the value formatted)
  std::string tooltip;  // its title attribute
  bool is_mark = true;
};
struct Heatmap {
  std::string corner;  // top-left header cell
  std::vector<std::string> row_labels, col_labels;
  std::vector<std::vector<HeatCell>> cells;  // [row][col]
  double lo = 0, hi = 1;
  bool diverging = false;
  std::string missing = "&ndash;";  // HTML for a cell without a value
};
std::string heatmap_table(const Heatmap& h);

}  // namespace attune::report
