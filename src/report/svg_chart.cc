#include "report/svg_chart.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/units.h"

namespace hydrozoa::report {
namespace {

constexpr int kLeft = 78, kRight = 24, kBottom = 48, kTitle = 22, kLegendRow = 18;
constexpr const char* kAxisColor = "#555";
constexpr const char* kGridColor = "#e4e4e4";

struct Axis {
  double lo = 0, hi = 1, step = 1;
  std::vector<double> ticks;
};

// Ticks at 1, 2, 2.5 or 5 × 10^k covering [lo, hi], about `target` of them.
Axis niceAxis(double lo, double hi, int target) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) lo = 0, hi = 1;
  if (hi <= lo) {
    const double pad = lo == 0 ? 1 : std::fabs(lo) * 0.1;
    lo -= pad;
    hi += pad;
  }
  const double raw = (hi - lo) / target;
  const double mag = std::pow(10, std::floor(std::log10(raw)));
  const double f = raw / mag;
  Axis a;
  a.step = (f <= 1 ? 1 : f <= 2 ? 2 : f <= 2.5 ? 2.5 : f <= 5 ? 5 : 10) * mag;
  a.lo = std::floor(lo / a.step + 1e-9) * a.step;
  a.hi = std::ceil(hi / a.step - 1e-9) * a.step;
  for (double v = a.lo; v <= a.hi + a.step * 1e-6; v += a.step) a.ticks.push_back(std::fabs(v) < a.step * 1e-9 ? 0 : v);
  return a;
}

// Decimals that show ticks `step` apart distinctly.
int decimalsFor(double step) {
  int d = 0;
  while (d < 8 && std::fabs(step * std::pow(10, d) - std::round(step * std::pow(10, d))) > 1e-6) ++d;
  return d;
}

std::string number(double v, int decimals) {
  if (decimals == 0 && std::fabs(v) >= 1000) return formatCount(v);
  return fmt::format("{:.{}f}", v, decimals);
}

std::string tickText(double v, const Axis& axis, AxisFormat format) {
  switch (format) {
    case AxisFormat::kPercent:
      return number(100 * v, decimalsFor(100 * axis.step)) + "%";
    case AxisFormat::kUsd:
      return "$" + number(v, decimalsFor(axis.step));
    case AxisFormat::kSeconds:
      if (std::max(std::fabs(axis.lo), std::fabs(axis.hi)) < 1) {
        return number(1e3 * v, decimalsFor(1e3 * axis.step)) + " ms";
      }
      return number(v, decimalsFor(axis.step)) + " s";
    case AxisFormat::kNumber:
      break;
  }
  return number(v, decimalsFor(axis.step));
}

std::string coord(double v) { return fmt::format("{:.1f}", v); }

// Legend entries laid out in rows under the title; returns the SVG and the
// rows used.
struct LegendItem {
  std::string text, color;
  bool dashed = false;
};

std::string renderLegend(const std::vector<LegendItem>& items, int width, int* rows) {
  std::string out;
  double x = kLeft;
  int row = 0;
  for (const auto& item : items) {
    const double w = 26 + 7.0 * static_cast<double>(item.text.size());
    if (x > kLeft && x + w > width - kRight) {
      x = kLeft;
      ++row;
    }
    const double y = kTitle + 12 + row * kLegendRow;
    out += fmt::format(
        "<g class=\"legend-item\"><line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"3\"{}/>"
        "<text x=\"{}\" y=\"{}\" font-size=\"12\">{}</text></g>",
        coord(x), coord(y - 4), coord(x + 18), coord(y - 4), item.color,
        item.dashed ? " stroke-dasharray=\"5 3\"" : "", coord(x + 23), coord(y), escapeHtml(item.text));
    x += w + 12;
  }
  *rows = items.empty() ? 0 : row + 1;
  return out;
}

std::string frame(int width, int height, const std::string& id, const std::string& title) {
  return fmt::format(
      "<svg id=\"{}\" class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {} {}\" width=\"{}\" "
      "height=\"{}\" role=\"img\" aria-label=\"{}\" font-family=\"sans-serif\">"
      "<rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>"
      "<text x=\"{}\" y=\"16\" font-size=\"14\" font-weight=\"bold\">{}</text>",
      escapeHtml(id), width, height, width, height, escapeHtml(title), kLeft, escapeHtml(title));
}

// Grid, ticks and axis titles for a plot area [x0, x1] × [y0, y1] (pixels).
std::string renderYAxis(const Axis& a, AxisFormat format, double x0, double x1, double y0, double y1,
                        const std::string& label) {
  std::string out;
  for (double v : a.ticks) {
    const double py = y1 - (v - a.lo) / (a.hi - a.lo) * (y1 - y0);
    out += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\"/>", coord(x0), coord(py), coord(x1),
                       coord(py), kGridColor);
    out += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"end\" fill=\"{}\">{}</text>",
                       coord(x0 - 6), coord(py + 4), kAxisColor, escapeHtml(tickText(v, a, format)));
  }
  out += fmt::format(
      "<text transform=\"translate(14 {}) rotate(-90)\" font-size=\"12\" text-anchor=\"middle\" fill=\"{}\">{}</text>",
      coord((y0 + y1) / 2), kAxisColor, escapeHtml(label));
  out += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\"/>", coord(x0), coord(y0), coord(x0),
                     coord(y1), kAxisColor);
  return out;
}

}  // namespace

std::string escapeHtml(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string formatValue(double value, AxisFormat format) {
  switch (format) {
    case AxisFormat::kPercent: return fmt::format("{:.2f}%", 100 * value);
    case AxisFormat::kUsd: return formatUsd(value);
    case AxisFormat::kSeconds: return formatSeconds(value);
    case AxisFormat::kNumber: break;
  }
  return std::fabs(value) >= 1000 ? formatCount(value) : fmt::format("{:.4g}", value);
}

void thinSeries(std::vector<double>& x, std::vector<double>& y, size_t max) {
  if (max == 0 || x.size() <= max) return;
  const size_t n = x.size();
  std::vector<double> tx, ty;
  for (size_t b = 0; b < max; ++b) {
    const size_t first = b * n / max, last = (b + 1) * n / max;
    double sx = 0, sy = 0;
    for (size_t i = first; i < last; ++i) sx += x[i], sy += y[i];
    const double k = static_cast<double>(last - first);
    tx.push_back(sx / k);
    ty.push_back(sy / k);
  }
  x.swap(tx);
  y.swap(ty);
}

std::string renderLineChart(const LineChart& c) {
  double xmin = 0, xmax = -std::numeric_limits<double>::infinity();
  double ymin = std::numeric_limits<double>::infinity(), ymax = -ymin;
  size_t points = 0;
  for (const auto& s : c.series) {
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i])) continue;
      xmin = std::min(xmin, s.x[i]);
      xmax = std::max(xmax, s.x[i]);
      ymin = std::min(ymin, s.y[i]);
      ymax = std::max(ymax, s.y[i]);
      ++points;
    }
  }
  for (const auto& m : c.markers) xmax = std::max(xmax, m.x);
  if (c.x_max) xmax = std::max(xmax, *c.x_max);

  std::vector<LegendItem> legend;
  for (const auto& s : c.series) {
    const bool dup = std::any_of(legend.begin(), legend.end(), [&](const LegendItem& l) { return l.text == s.run; });
    if (!dup) legend.push_back({s.run, s.color, s.dashed});
  }
  int rows = 0;
  const std::string legendSvg = renderLegend(legend, c.width, &rows);
  const double x0 = kLeft, x1 = c.width - kRight;
  const double y0 = kTitle + rows * kLegendRow + 14, y1 = c.height - kBottom;

  std::string out = frame(c.width, c.height, c.id, c.title) + legendSvg;
  if (points == 0) {
    out += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"{}\"/>", coord(x0),
                       coord(y0), coord(x1 - x0), coord(y1 - y0), kGridColor);
    out += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"13\" text-anchor=\"middle\" fill=\"#888\">no data in "
                       "these runs yet</text></svg>",
                       coord((x0 + x1) / 2), coord((y0 + y1) / 2));
    return out;
  }
  if (c.y_from_zero) ymin = std::min(ymin, 0.0);
  if (c.y_max) ymax = std::max(ymax, *c.y_max);
  const Axis ax = niceAxis(xmin, std::max(xmax, xmin + 1e-9), 8);
  const Axis ay = niceAxis(ymin, ymax, 5);
  auto px = [&](double v) { return x0 + (v - ax.lo) / (ax.hi - ax.lo) * (x1 - x0); };
  auto py = [&](double v) { return y1 - (v - ay.lo) / (ay.hi - ay.lo) * (y1 - y0); };

  out += renderYAxis(ay, c.y_format, x0, x1, y0, y1, c.y_label);
  for (double v : ax.ticks) {
    out += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\"/>", coord(px(v)), coord(y1),
                       coord(px(v)), coord(y1 + 4), kAxisColor);
    out += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"middle\" fill=\"{}\">{}</text>",
                       coord(px(v)), coord(y1 + 17), kAxisColor, escapeHtml(tickText(v, ax, AxisFormat::kNumber)));
  }
  out += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\"/>", coord(x0), coord(y1), coord(x1),
                     coord(y1), kAxisColor);
  out += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"12\" text-anchor=\"middle\" fill=\"{}\">{}</text>",
                     coord((x0 + x1) / 2), coord(c.height - 10), kAxisColor, escapeHtml(c.x_label));

  for (const auto& m : c.markers) {
    const double x = px(m.x);
    out += fmt::format(
        "<g class=\"marker\"><title>{}</title><line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" "
        "stroke-dasharray=\"4 3\"/><text transform=\"translate({} {}) rotate(-90)\" font-size=\"10\" "
        "text-anchor=\"end\" fill=\"{}\">{}</text></g>",
        escapeHtml(m.tooltip.empty() ? m.label : m.tooltip), coord(x), coord(y0), coord(x), coord(y1), m.color,
        coord(x - 3), coord(y0 + 2), m.color, escapeHtml(m.label));
  }
  for (const auto& s : c.series) {
    out += fmt::format("<g class=\"series\" data-run=\"{}\" data-series=\"{}\"><title>{}: {}</title>",
                       escapeHtml(s.run), escapeHtml(s.series), escapeHtml(s.run), escapeHtml(s.series));
    std::string pts;
    double prevY = std::numeric_limits<double>::quiet_NaN();
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i])) continue;
      if (s.steps && std::isfinite(prevY)) pts += coord(px(s.x[i])) + "," + coord(py(prevY)) + " ";
      pts += coord(px(s.x[i])) + "," + coord(py(s.y[i])) + " ";
      prevY = s.y[i];
    }
    out += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.8\"{}/>", pts, s.color,
                       s.dashed ? " stroke-dasharray=\"6 4\"" : "");
    if (s.dots) {
      for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
        if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i])) continue;
        out += fmt::format("<circle cx=\"{}\" cy=\"{}\" r=\"3.5\" fill=\"{}\"><title>{}: {} at {} s</title></circle>",
                           coord(px(s.x[i])), coord(py(s.y[i])), s.color, escapeHtml(s.run),
                           escapeHtml(formatValue(s.y[i], c.y_format)), fmt::format("{:.1f}", s.x[i]));
      }
    }
    out += "</g>";
  }
  return out + "</svg>";
}

std::string renderBarChart(const BarChart& c) {
  std::vector<LegendItem> legend;
  for (size_t b = 0; b < c.bar_names.size(); ++b) legend.push_back({c.bar_names[b], c.bar_colors[b], false});
  int rows = 0;
  const std::string legendSvg = renderLegend(legend, c.width, &rows);
  const double x0 = kLeft, x1 = c.width - kRight;
  const double y0 = kTitle + rows * kLegendRow + 14, y1 = c.height - kBottom;
  double ymax = 0;
  for (const auto& g : c.values) {
    for (const auto& v : g) {
      if (v && std::isfinite(*v)) ymax = std::max(ymax, *v);
    }
  }
  std::string out = frame(c.width, c.height, c.id, c.title) + legendSvg;
  const Axis ay = niceAxis(0, ymax > 0 ? ymax : 1, 5);
  auto py = [&](double v) { return y1 - (v - ay.lo) / (ay.hi - ay.lo) * (y1 - y0); };
  out += renderYAxis(ay, c.y_format, x0, x1, y0, y1, c.y_label);
  out += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\"/>", coord(x0), coord(y1), coord(x1),
                     coord(y1), kAxisColor);
  const size_t groups = std::max<size_t>(1, c.groups.size()), bars = std::max<size_t>(1, c.bar_names.size());
  const double groupWidth = (x1 - x0) / static_cast<double>(groups);
  const double barWidth = std::min(60.0, groupWidth * 0.8 / static_cast<double>(bars));
  for (size_t g = 0; g < c.groups.size(); ++g) {
    const double center = x0 + (static_cast<double>(g) + 0.5) * groupWidth;
    out += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"12\" text-anchor=\"middle\" fill=\"{}\">{}</text>",
                       coord(center), coord(y1 + 17), kAxisColor, escapeHtml(c.groups[g]));
    for (size_t b = 0; b < c.bar_names.size(); ++b) {
      // A NaN for "none" (an optional copied here trips GCC 12's -Wmaybe-uninitialized).
      double value = std::numeric_limits<double>::quiet_NaN();
      if (g < c.values.size() && b < c.values[g].size() && c.values[g][b]) value = *c.values[g][b];
      const double left = center - barWidth * static_cast<double>(bars) / 2 + barWidth * static_cast<double>(b);
      const std::string series = b < c.bar_series.size() ? c.bar_series[b] : c.bar_names[b];
      out += fmt::format("<g class=\"series\" data-run=\"{}\" data-series=\"{}\"><title>{} {}: {}</title>",
                         escapeHtml(c.run), escapeHtml(series), escapeHtml(c.groups[g]), escapeHtml(c.bar_names[b]),
                         std::isfinite(value) ? escapeHtml(formatValue(value, c.y_format)) : "n/a");
      if (std::isfinite(value)) {
        out += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"/>", coord(left + 1),
                           coord(py(value)), coord(barWidth - 2), coord(y1 - py(value)), c.bar_colors[b]);
        out += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"10\" text-anchor=\"middle\">{}</text>",
                           coord(left + barWidth / 2), coord(py(value) - 3), escapeHtml(formatValue(value, c.y_format)));
      } else {
        out += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"10\" text-anchor=\"middle\" fill=\"#888\">n/a</text>",
                           coord(left + barWidth / 2), coord(y1 - 3));
      }
      out += "</g>";
    }
  }
  return out + "</svg>";
}

std::string renderGantt(const GanttChart& c) {
  static const char* const kColors[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                        "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
  const auto color = [](int g) { return kColors[static_cast<size_t>(std::max(0, g)) % std::size(kColors)]; };
  std::vector<LegendItem> legend;
  for (size_t g = 0; g < c.groups.size(); ++g) legend.push_back({c.groups[g], color(static_cast<int>(g)), false});
  int legendRows = 0;
  const std::string legendSvg = renderLegend(legend, c.width, &legendRows);
  constexpr double kRow = 26;
  const double x0 = kLeft, x1 = c.width - kRight;
  const double y0 = kTitle + legendRows * kLegendRow + 14;
  const double y1 = y0 + kRow * static_cast<double>(std::max<size_t>(1, c.rows.size()));
  const int height = static_cast<int>(y1) + kBottom;
  double lo = 0, hi = 0;
  for (const GanttBar& b : c.bars) {
    lo = std::min(lo, b.load);
    hi = std::max(hi, b.end);
  }
  const Axis ax = niceAxis(lo, hi > lo ? hi : lo + 1, 8);
  const auto px = [&](double v) { return x0 + (v - ax.lo) / (ax.hi - ax.lo) * (x1 - x0); };
  std::string out = frame(c.width, height, c.id, c.title) + legendSvg;
  for (double v : ax.ticks) {
    out += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\"/>", coord(px(v)), coord(y0),
                       coord(px(v)), coord(y1), kGridColor);
    out += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"middle\" fill=\"{}\">{}</text>",
                       coord(px(v)), coord(y1 + 15), kAxisColor, escapeHtml(tickText(v, ax, AxisFormat::kSeconds)));
  }
  for (size_t r = 0; r < c.rows.size(); ++r) {
    out += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"12\" text-anchor=\"end\" fill=\"{}\">{}</text>",
                       coord(x0 - 6), coord(y0 + kRow * (static_cast<double>(r) + 0.5) + 4), kAxisColor,
                       escapeHtml(c.rows[r]));
  }
  for (const GanttBar& b : c.bars) {
    const double top = y0 + kRow * b.row + 3, h = kRow - 6;
    out += fmt::format("<g class=\"unit\" data-group=\"{}\"><title>{}</title>", b.group, escapeHtml(b.label));
    if (b.start > b.load) {
      out += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\" opacity=\"0.3\"/>",
                         coord(px(b.load)), coord(top + h / 3), coord(px(b.start) - px(b.load)), coord(h / 3),
                         color(b.group));
    }
    out += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"/></g>", coord(px(b.start)),
                       coord(top), coord(std::max(0.5, px(b.end) - px(b.start))), coord(h), color(b.group));
  }
  out += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"12\" text-anchor=\"middle\" fill=\"{}\">{}</text>",
                     coord((x0 + x1) / 2), coord(height - 10), kAxisColor,
                     "seconds (a unit's load lighter and thinner before its compute)");
  return out + "</svg>";
}

}  // namespace hydrozoa::report
