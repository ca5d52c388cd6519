#include "report/timeline.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>

#include "report/svg_chart.h"

namespace hydrozoa::report {
namespace {

// "forward mb3", "backward mb3 c1" -> (3, 1); -1 when not a pass.
std::pair<int, int> passOf(const std::string& name, const char* prefix) {
  const std::string p = prefix;
  if (name.rfind(p, 0) != 0) return {-1, 0};
  int mb = -1, chunk = 0;
  if (std::sscanf(name.c_str() + p.size(), "%d c%d", &mb, &chunk) < 1) return {-1, 0};
  return {mb, chunk};
}

}  // namespace

Result<Timeline> timelineFromTrace(const Json& trace, std::int64_t step, std::int64_t lastStep) {
  if (lastStep < step) lastStep = step;
  const Json* events = trace.is_object() && trace.contains("traceEvents") ? &trace["traceEvents"] : nullptr;
  if (!events || !events->is_array()) return parseError("trace.json: expected {\"traceEvents\": [...]}");
  std::map<int, std::string> names;  // pid -> process name
  for (const Json& e : *events) {
    if (e.value("ph", "") == "M" && e.value("name", "") == "process_name" && e.contains("args")) {
      names[e.value("pid", 0)] = e["args"].value("name", "");
    }
  }
  Timeline t;
  t.step = step;
  t.last_step = lastStep;
  std::map<int, int> laneOf;  // pid -> lane
  double origin = std::numeric_limits<double>::infinity();
  std::vector<std::pair<int, TimelineSpan>> found;  // (pid, span in µs)
  for (const Json& e : *events) {
    if (e.value("ph", "") != "X" || e.value("cat", "") != "compute" || !e.contains("args") || !e["args"].is_object()) {
      continue;
    }
    const std::int64_t of = e["args"].value("step", std::int64_t{-1});
    if (of < step || of > lastStep) continue;
    const std::string name = e.value("name", "");
    TimelineSpan s;
    s.step = of;
    auto [fmb, fchunk] = passOf(name, "forward mb");
    auto [bmb, bchunk] = passOf(name, "backward mb");
    if (fmb >= 0) {
      s.kind = TimelineSpan::Kind::kForward;
      s.microbatch = fmb;
      s.chunk = fchunk;
    } else if (bmb >= 0) {
      s.kind = TimelineSpan::Kind::kBackward;
      s.microbatch = bmb;
      s.chunk = bchunk;
    } else if (name == "optimizer step") {
      s.kind = TimelineSpan::Kind::kUpdate;
    } else {
      continue;
    }
    s.start_ms = e.value("ts", 0.0);
    s.end_ms = s.start_ms + e.value("dur", 0.0);
    origin = std::min(origin, s.start_ms);
    found.emplace_back(e.value("pid", 0), s);
  }
  if (found.empty()) {
    return notFound(fmt::format("trace.json has no compute spans of step {} (the workers trace their first "
                                "output.trace_steps steps of each run)",
                                lastStep > step ? fmt::format("{}-{}", step, lastStep) : std::to_string(step)));
  }
  for (const auto& [pid, s] : found) laneOf.emplace(pid, 0);
  for (auto& [pid, lane] : laneOf) {
    lane = static_cast<int>(t.lanes.size());
    t.lanes.push_back(names.count(pid) ? names[pid] : fmt::format("worker {}", pid));
  }
  for (auto [pid, s] : found) {
    s.lane = laneOf[pid];
    s.start_ms = (s.start_ms - origin) / 1e3;
    s.end_ms = (s.end_ms - origin) / 1e3;
    t.end_ms = std::max(t.end_ms, s.end_ms);
    t.spans.push_back(s);
  }
  return t;
}

std::string renderTimeline(const Timeline& t, const std::string& title) {
  const int left = 210, right = 20, top = 40, row = 34, bottom = 40, width = 960;
  const int height = top + row * static_cast<int>(t.lanes.size()) + bottom;
  const double plot = width - left - right;
  const double scale = t.end_ms > 0 ? plot / t.end_ms : 1;
  std::string out = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {0} {1}\" width=\"{0}\" height=\"{1}\" "
      "font-family=\"sans-serif\" font-size=\"11\">\n<rect width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n"
      "<text x=\"{2}\" y=\"22\" font-size=\"14\">{3}</text>\n",
      width, height, left, escapeHtml(title));
  for (size_t i = 0; i < t.lanes.size(); ++i) {
    const int y = top + row * static_cast<int>(i);
    out += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n", left - 8, y + row / 2 + 4,
                       escapeHtml(t.lanes[i]));
    out += fmt::format("<line x1=\"{}\" x2=\"{}\" y1=\"{}\" y2=\"{}\" stroke=\"#eee\"/>\n", left, width - right,
                       y + row, y + row);
  }
  // Forward blue, backward green; odd chunks a darker shade.
  auto color = [](const TimelineSpan& s) -> const char* {
    switch (s.kind) {
      case TimelineSpan::Kind::kForward:
        return s.chunk % 2 ? "#1f5fa8" : "#6fa8dc";
      case TimelineSpan::Kind::kBackward:
        return s.chunk % 2 ? "#38761d" : "#93c47d";
      case TimelineSpan::Kind::kUpdate:
        return "#999999";
    }
    return "#000";
  };
  for (const TimelineSpan& s : t.spans) {
    const double x = left + s.start_ms * scale, w = std::max(0.5, (s.end_ms - s.start_ms) * scale);
    const int y = top + row * s.lane + 4;
    const std::string what = s.kind == TimelineSpan::Kind::kUpdate ? "optimizer step"
                             : fmt::format("{} mb{}{}", s.kind == TimelineSpan::Kind::kForward ? "forward" : "backward",
                                           s.microbatch, s.chunk ? fmt::format(" chunk {}", s.chunk) : "");
    out += fmt::format(
        "<g class=\"span\"><rect x=\"{:.1f}\" y=\"{}\" width=\"{:.1f}\" height=\"{}\" fill=\"{}\"{} stroke=\"white\" "
        "stroke-width=\"0.5\"><title>step {} {} {:.2f}-{:.2f} ms</title></rect>",
        x, y, w, row - 8, color(s), (s.step - t.step) % 2 ? " fill-opacity=\"0.55\"" : "", s.step, what, s.start_ms,
        s.end_ms);
    if (s.microbatch >= 0 && w >= 12) {
      out += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\" fill=\"white\">{}</text>", x + w / 2,
                         y + (row - 8) / 2 + 4, s.microbatch);
    }
    out += "</g>\n";
  }
  // The time axis: at most 8 ticks at 1, 2 or 5 × 10^k ms.
  const double raw = std::max(t.end_ms / 8, 1e-6);
  const double base = std::pow(10.0, std::floor(std::log10(raw)));
  double tick = base * 10;
  for (const double m : {1.0, 2.0, 5.0}) {
    if (base * m >= raw) {
      tick = base * m;
      break;
    }
  }
  const int axis = top + row * static_cast<int>(t.lanes.size()) + 4;
  for (double v = 0; v <= t.end_ms + 1e-9; v += tick) {
    const double x = left + v * scale;
    out += fmt::format("<line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1}\" y2=\"{2}\" stroke=\"#999\"/>"
                       "<text x=\"{0:.1f}\" y=\"{3}\" text-anchor=\"middle\">{4}</text>\n",
                       x, axis, axis + 5, axis + 18, v == 0 ? "0" : formatValue(v / 1e3, AxisFormat::kSeconds));
  }
  out += fmt::format("<text x=\"{}\" y=\"{}\" fill=\"#555\">forward: blue, backward: green (darker: odd chunks); "
                     "grey: optimizer step; numbers: microbatches{}</text>\n",
                     left, height - 6, t.last_step > t.step ? "; paler: every other step" : "");
  return out + "</svg>\n";
}

}  // namespace hydrozoa::report
