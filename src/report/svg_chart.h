// Charts as inline SVG text, drawn here so a report needs no script and no
// network: line charts over time (several runs overlaid, a legend, event
// markers) and grouped bar charts (predicted vs measured per stage).
//
// Axes get "nice" ticks (1, 2, 2.5, 5 × 10^k) labelled with the unit given.
// Every series is a <g class="series" data-run=".." data-series=".."> so a
// test (or a script) can find each run's lines in the page.
//
// Thread-safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace hydrozoa::report {

// How tick labels read.
enum class AxisFormat {
  kNumber,   // 1,200  0.25
  kPercent,  // values in [0, 1] shown as 0% .. 100%
  kUsd,      // $0.0012
  kSeconds,  // 45 ms, 1.2 s
};

struct ChartSeries {
  std::string run;     // data-run, and the legend's text
  std::string series;  // data-series: "loss", "test_accuracy", ...
  std::string color;   // CSS colour
  std::vector<double> x, y;
  bool dashed = false;
  bool dots = false;   // a dot at every point (few points: evaluations)
  bool steps = false;  // hold each value until the next x (counts: workers)
};

struct ChartMarker {
  double x = 0;
  std::string color;
  std::string label;    // drawn at the top
  std::string tooltip;  // shown on hover
};

struct LineChart {
  std::string id;  // the <svg>'s id
  std::string title, x_label, y_label;
  AxisFormat y_format = AxisFormat::kNumber;
  bool y_from_zero = true;
  std::optional<double> y_max;  // e.g. 1 for accuracy
  std::optional<double> x_max;  // at least this far: one time axis for several charts
  std::vector<ChartSeries> series;
  std::vector<ChartMarker> markers;
  int width = 720, height = 300;
};

std::string renderLineChart(const LineChart& chart);

struct BarChart {
  std::string id, title, y_label;
  AxisFormat y_format = AxisFormat::kSeconds;
  std::vector<std::string> groups;       // x categories: "stage 0"
  std::vector<std::string> bar_names;    // legend: "predicted", "measured"
  std::vector<std::string> bar_colors;
  std::vector<std::string> bar_series;   // data-series of each bar kind
  std::string run;                       // data-run of every bar
  // values[group][bar]; nullopt draws nothing (and "n/a" on hover).
  std::vector<std::vector<std::optional<double>>> values;
  int width = 720, height = 280;
};

std::string renderBarChart(const BarChart& chart);

// A Gantt chart: a row per worker, a bar per unit of work coloured by its
// group (a model), its loading time lighter before it (SHARP's timeline,
// docs/select.md).
struct GanttBar {
  int row = 0, group = 0;
  double load = 0, start = 0, end = 0;  // seconds
  std::string label;                    // shown on hover
};

struct GanttChart {
  std::string id, title;
  std::vector<std::string> rows, groups;  // names, for the axis and the legend
  std::vector<GanttBar> bars;
  int width = 900;
};

std::string renderGantt(const GanttChart& chart);

// Escapes &, <, >, " and ' for HTML text and attributes.
std::string escapeHtml(const std::string& text);

// A value as the axis format reads it ("45.0 ms", "91.0%", "$0.0012").
std::string formatValue(double value, AxisFormat format);

// Up to `max` points of (x, y), averaging runs of neighbours: a long run's
// per-step series stays readable and the page small.
void thinSeries(std::vector<double>& x, std::vector<double>& y, size_t max);

}  // namespace hydrozoa::report
