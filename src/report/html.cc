#include "report/html.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>

#include "core/status.h"
#include "core/units.h"
#include "report/svg_chart.h"
#include "report/text.h"

namespace hydrozoa::report {
namespace {

// Distinct on white and for the common colour-vision deficiencies (Tableau 10).
constexpr const char* kPalette[] = {"#4e79a7", "#e15759", "#59a14f", "#f28e2b", "#b07aa1",
                                    "#9c755f", "#edc948", "#76b7b2", "#ff9da7", "#bab0ac"};
constexpr size_t kMaxPoints = 1500;  // per series in the time charts

constexpr const char* kStyle = R"(
body { font-family: -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; margin: 24px auto; max-width: 1180px;
       color: #222; background: #fff; padding: 0 16px; }
h1 { font-size: 24px; margin-bottom: 4px; }
h2 { font-size: 19px; margin-top: 32px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
h3 { font-size: 15px; margin: 20px 0 6px; }
p.sub { color: #666; margin-top: 0; }
table { border-collapse: collapse; font-size: 13px; margin: 6px 0 12px; }
th, td { padding: 4px 9px; border-bottom: 1px solid #eee; text-align: left; vertical-align: top; }
th { background: #f6f6f6; font-weight: 600; }
table.runs td:first-child { white-space: nowrap; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.chosen td { background: #fff6d6; font-weight: 600; }
tr.infeasible td { color: #999; }
.swatch { display: inline-block; width: 12px; height: 12px; border-radius: 2px; margin-right: 6px;
          vertical-align: -1px; }
.charts { display: flex; flex-wrap: wrap; gap: 12px; }
svg.chart { border: 1px solid #e6e6e6; border-radius: 4px; max-width: 100%; height: auto; }
ul.notes { color: #8a5a00; font-size: 13px; }
dl.facts { display: grid; grid-template-columns: max-content auto; gap: 3px 14px; font-size: 13px; margin: 6px 0; }
dl.facts dt { color: #666; }
dl.facts dd { margin: 0; }
footer { color: #888; font-size: 12px; margin-top: 40px; }
)";

std::string td(const std::string& text, bool num = false) {
  return fmt::format("<td{}>{}</td>", num ? " class=\"num\"" : "", escapeHtml(text));
}

std::string th(const std::string& text, bool num = false) {
  return fmt::format("<th{}>{}</th>", num ? " class=\"num\"" : "", escapeHtml(text));
}

std::string swatch(size_t run) { return fmt::format("<span class=\"swatch\" style=\"background:{}\"></span>", runColor(run)); }

std::string optText(const std::optional<double>& v, const std::function<std::string(double)>& f) {
  return v ? f(*v) : "-";
}

std::string runsTable(const std::vector<RunReport>& runs) {
  std::string out = "<table class=\"runs\"><tr>" + th("run") + th("model") + th("status") + th("plan") +
                    th("steps", true) + th("final loss", true) + th("test accuracy", true) + th("samples/s", true) +
                    th("step time measured", true) + th("predicted", true) + th("cost", true) +
                    th("samples/$", true) + th("events") + "</tr>";
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunReport& r = runs[i];
    const RunOutcome* o = r.outcome ? &*r.outcome : nullptr;
    std::string steps = "-";
    if (o && o->steps_done) {
      steps = o->steps_total ? fmt::format("{} / {}", *o->steps_done, *o->steps_total) : std::to_string(*o->steps_done);
    } else if (!r.steps.empty()) {
      steps = std::to_string(r.steps.back().step);
    }
    std::string loss = "-", accuracy = "-";
    if (o && o->final_loss) {
      loss = fmt::format("{:.4f}", *o->final_loss);
    } else if (!r.steps.empty()) {
      loss = fmt::format("{:.4f}", r.steps.back().loss);
    }
    if (o && o->final_test_accuracy) {
      accuracy = fmt::format("{:.2f}%", 100 * *o->final_test_accuracy);
    } else if (!r.evals.empty()) {
      accuracy = fmt::format("{:.2f}%", 100 * r.evals.back().test_accuracy);
    }
    std::string events;
    for (const auto& e : r.events) events += (events.empty() ? "" : ", ") + e.label;
    const std::string err = relativeError(o ? o->iteration_measured : std::nullopt, o ? o->iteration_predicted : std::nullopt);
    out += "<tr><td>" + swatch(i) + escapeHtml(r.label) + "</td>" + td(r.model) + td(r.status()) +
           td(r.plan ? fmt::format("{}\u00d7{}, {} \u00d7 {}", r.plan->data_parallel, r.plan->pipeline_stages,
                                   r.plan->num_microbatches, r.plan->microbatch_size)
                     : "-") +
           td(steps, true) + td(loss, true) + td(accuracy, true) +
           td(optText(o ? o->throughput : std::nullopt, formatCount), true) +
           td(optText(o ? o->iteration_measured : std::nullopt, formatSeconds) + (err.empty() ? "" : " (" + err + ")"),
              true) +
           td(optText(o ? o->iteration_predicted : std::nullopt, formatSeconds), true) +
           td(optText(o ? o->cost : std::nullopt, formatUsd), true) +
           td(optText(o ? o->samples_per_dollar : std::nullopt, formatCount), true) + td(events.empty() ? "-" : events) +
           "</tr>";
  }
  return out + "</table>";
}

// One time chart with every run's values of a step field overlaid.
LineChart stepChart(const std::vector<RunReport>& runs, const std::string& id, const std::string& title,
                    const std::string& yLabel, const std::string& series,
                    const std::function<std::optional<double>(const StepPoint&)>& value) {
  LineChart c;
  c.id = id;
  c.title = title;
  c.x_label = "training time (s)";
  c.y_label = yLabel;
  for (size_t i = 0; i < runs.size(); ++i) {
    ChartSeries s;
    s.run = runs[i].label;
    s.series = series;
    s.color = runColor(i);
    for (const auto& p : runs[i].steps) {
      const auto v = value(p);
      if (!v) continue;
      s.x.push_back(p.t);
      s.y.push_back(*v);
    }
    thinSeries(s.x, s.y, kMaxPoints);
    c.series.push_back(std::move(s));
  }
  for (size_t i = 0; i < runs.size(); ++i) {
    for (const auto& e : runs[i].events) {
      c.markers.push_back({e.t, runColor(i), e.label, fmt::format("{}: {} at {:.1f} s{}", runs[i].label, e.label, e.t,
                                                                    e.detail.empty() ? "" : " (" + e.detail + ")")});
    }
  }
  return c;
}

std::string timeCharts(const std::vector<RunReport>& runs) {
  std::vector<LineChart> charts;
  charts.push_back(stepChart(runs, "chart-loss", "Training loss", "loss (per step)", "loss",
                             [](const StepPoint& p) { return std::optional<double>(p.loss); }));
  charts.back().y_from_zero = false;

  LineChart accuracy = stepChart(runs, "chart-accuracy", "Test accuracy", "test accuracy (%)", "test_accuracy",
                                 [](const StepPoint&) { return std::optional<double>(); });
  accuracy.y_format = AxisFormat::kPercent;
  accuracy.y_max = 1;
  for (size_t i = 0; i < runs.size(); ++i) {
    ChartSeries& s = accuracy.series[i];
    s.dots = true;
    for (const auto& e : runs[i].evals) {
      s.x.push_back(e.t);
      s.y.push_back(e.test_accuracy);
    }
  }
  charts.push_back(std::move(accuracy));

  charts.push_back(stepChart(runs, "chart-throughput", "Throughput", "samples/s", "samples_per_s",
                             [](const StepPoint& p) { return p.samples_per_second; }));
  charts.push_back(stepChart(runs, "chart-workers", "Workers", "workers", "workers",
                             [](const StepPoint& p) { return std::optional<double>(p.workers); }));
  for (auto& s : charts.back().series) s.steps = true;
  charts.push_back(stepChart(runs, "chart-cost", "Cost so far", "cost (US$)", "cost_usd",
                             [](const StepPoint& p) { return std::optional<double>(p.cost); }));
  charts.back().y_format = AxisFormat::kUsd;

  // One time axis for every chart, so a moment lines up across them.
  double end = 0;
  for (const auto& r : runs) {
    for (const auto& p : r.steps) end = std::max(end, p.t);
    for (const auto& e : r.evals) end = std::max(end, e.t);
    for (const auto& e : r.events) end = std::max(end, e.t);
  }
  std::string out = "<div class=\"charts\">";
  for (auto& c : charts) {
    c.width = 570;
    if (end > 0) c.x_max = end;
    out += renderLineChart(c);
  }
  return out + "</div>";
}

std::string factsList(const RunReport& run) {
  std::string out = "<dl class=\"facts\">";
  for (const auto& [name, value] : runFacts(run)) out += "<dt>" + escapeHtml(name) + "</dt><dd>" + escapeHtml(value) + "</dd>";
  return out + "</dl>";
}

std::string stageSection(const RunReport& run, size_t index) {
  if (run.stages.empty()) return "";
  BarChart c;
  c.id = fmt::format("chart-stages-{}", index);
  c.title = "Time per step by stage: " + run.label;
  c.y_label = "seconds per step";
  c.run = run.label;
  c.bar_names = {"compute predicted", "compute measured", "allreduce predicted", "allreduce measured"};
  c.bar_series = {"stage_compute_predicted", "stage_compute_measured", "stage_allreduce_predicted",
                  "stage_allreduce_measured"};
  c.bar_colors = {"#a0cbe8", "#4e79a7", "#ffbe7d", "#f28e2b"};
  const bool allreduce = std::any_of(run.stages.begin(), run.stages.end(), [](const StageTiming& s) {
    return s.predicted_allreduce.has_value() || s.measured_allreduce.has_value();
  });
  if (!allreduce) {
    c.bar_names.resize(2);
    c.bar_series.resize(2);
    c.bar_colors.resize(2);
  }
  std::string table = "<table><tr>" + th("stage", true) + th("layers") + th("compute predicted", true) +
                      th("measured", true) + th("error", true) + th("allreduce predicted", true) +
                      th("measured", true) + th("error", true) + th("update predicted", true) + th("measured", true) +
                      th("traced", true) + "</tr>";
  for (const auto& s : run.stages) {
    c.groups.push_back(fmt::format("stage {}", s.stage));
    std::vector<std::optional<double>> v = {s.predicted_compute, s.measured_compute};
    if (allreduce) v.insert(v.end(), {s.predicted_allreduce, s.measured_allreduce});
    c.values.push_back(v);
    table += "<tr>" + td(std::to_string(s.stage), true) +
             td(s.layers) +
             td(optText(s.predicted_compute, formatSeconds), true) + td(optText(s.measured_compute, formatSeconds), true) +
             td(relativeError(s.measured_compute, s.predicted_compute), true) +
             td(optText(s.predicted_allreduce, formatSeconds), true) +
             td(optText(s.measured_allreduce, formatSeconds), true) +
             td(relativeError(s.measured_allreduce, s.predicted_allreduce), true) +
             td(optText(s.predicted_update, formatSeconds), true) + td(optText(s.measured_update, formatSeconds), true) +
             td(s.workers_traced ? fmt::format("{} worker{}, {} steps", s.workers_traced,
                                               s.workers_traced == 1 ? "" : "s", s.steps_traced)
                                 : "-",
                true) +
             "</tr>";
  }
  return "<h3>Predicted vs measured time per step, by stage</h3>"
         "<p class=\"sub\">Predicted: the plan's microbatches \u00d7 (forward + backward), its allreduce and the "
         "optimizer's update; measured: "
         "the workers' spans in trace.json, median over the traced steps, mean over each stage's replicas.</p>" +
         renderBarChart(c) + table + "</table>";
}

std::string planSection(const plan::Plan& p) {
  std::string out = "<h3>Plan</h3><p>" + escapeHtml(describePlan(p)) +
                    escapeHtml(fmt::format("; predicted {} per step, {:.1f} samples/s, bubble {:.0f}%, {}/hour, "
                                           "{} samples/$ ({} workers, {}, objective {}, platform {})",
                                           formatSeconds(p.iteration_seconds), p.samples_per_second,
                                           100 * p.bubble_fraction, formatUsd(p.cost_per_hour),
                                           formatCount(p.samples_per_dollar), p.workers, formatBandwidth(p.bandwidth),
                                           p.objective, p.platform)) +
                    "</p>";
  out += "<table><tr>" + th("stage", true) + th("layers") + th("forward/mb", true) + th("backward/mb", true) +
         th("parameters", true) + th("memory", true) + th("allreduce", true) + th("worker") + th("$/h each", true) +
         "</tr>";
  for (size_t s = 0; s < p.stages.size(); ++s) {
    const plan::PlanStage& st = p.stages[s];
    std::string layers = st.layersText();
    if (st.chunks.empty() && static_cast<size_t>(st.last_layer) < p.layer_names.size() && st.first_layer >= 0) {
      layers += fmt::format(" ({}..{})", p.layer_names[static_cast<size_t>(st.first_layer)],
                            p.layer_names[static_cast<size_t>(st.last_layer)]);
    }
    out += "<tr>" + td(std::to_string(s), true) + td(layers) + td(formatSeconds(st.forward_seconds), true) +
           td(formatSeconds(st.backward_seconds), true) + td(formatBytes(st.parameter_bytes), true) +
           td(formatBytes(st.memory_bytes), true) + td(formatSeconds(st.allreduce_seconds), true) + td(st.worker) +
           td(formatUsd(st.cost_per_hour), true) + "</tr>";
  }
  out += "</table><h3>Alternatives the planner considered</h3><table class=\"alternatives\"><tr>" + th("") +
         th("strategy") + th("microbatches") + th("iteration", true) + th("samples/s", true) + th("$/hour", true) +
         th("samples/$", true) + th("memory/worker", true) + th("note") + "</tr>";
  for (const auto& a : p.alternatives) {
    const std::string mb = a.microbatch_size ? fmt::format("{} \u00d7 {}", a.num_microbatches, a.microbatch_size) : "-";
    const std::string cls = a.chosen ? " class=\"chosen\"" : a.feasible ? "" : " class=\"infeasible\"";
    out += "<tr" + cls + ">" + td(a.chosen ? "\u2605 chosen" : "") +
           td(fmt::format("{}\u00d7{}", a.data_parallel, a.pipeline_stages)) + td(mb);
    if (a.feasible) {
      out += td(formatSeconds(a.iteration_seconds), true) + td(fmt::format("{:.1f}", a.samples_per_second), true) +
             td(formatUsd(a.cost_per_hour), true) + td(formatCount(a.samples_per_dollar), true) +
             td(formatBytes(a.max_worker_memory), true) + td(a.note);
    } else {
      out += td("-", true) + td("-", true) + td("-", true) + td("-", true) + td("-", true) + td("infeasible: " + a.note);
    }
    out += "</tr>";
  }
  return out + "</table>";
}

std::string eventsSection(const RunReport& run) {
  if (run.events.empty()) return "";
  std::string out = "<h3>Events</h3><table class=\"events\"><tr>" + th("time", true) + th("event") + th("detail") +
                    "</tr>";
  for (const auto& e : run.events) {
    out += "<tr>" + td(fmt::format("{:.1f} s", e.t), true) + td(e.label) + td(e.detail) + "</tr>";
  }
  return out + "</table>";
}

std::string runSection(const RunReport& run, size_t index) {
  std::string out = fmt::format("<section class=\"run\" data-run=\"{}\"><h2>{}Run {}</h2><p class=\"sub\">{}</p>",
                                escapeHtml(run.label), swatch(index), escapeHtml(run.label), escapeHtml(run.dir));
  out += factsList(run);
  if (!run.notes.empty()) {
    out += "<ul class=\"notes\">";
    for (const auto& n : run.notes) out += "<li>" + escapeHtml(n) + "</li>";
    out += "</ul>";
  }
  out += stageSection(run, index);
  if (run.plan) out += planSection(*run.plan);
  out += eventsSection(run);
  return out + "</section>";
}

}  // namespace

std::string runColor(size_t index) { return kPalette[index % (sizeof(kPalette) / sizeof(kPalette[0]))]; }

std::string renderHtmlReport(const std::vector<RunReport>& runs) {
  HZ_CHECK(!runs.empty());
  std::string names;
  for (const auto& r : runs) names += (names.empty() ? "" : ", ") + r.label;
  std::string out = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                    "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
                    "<title>hydrozoa report: " +
                    escapeHtml(names) + "</title><style>" + kStyle + "</style></head><body>\n";
  out += "<h1>Training report</h1><p class=\"sub\">" +
         escapeHtml(fmt::format("{} run{}: {}", runs.size(), runs.size() == 1 ? "" : "s", names)) + "</p>\n";
  out += "<h2>Runs</h2>" + runsTable(runs) + "\n";
  out += "<h2>Over training time</h2><p class=\"sub\">Per step, from each run's metrics.jsonl; dashed lines mark "
         "lost workers, recoveries and changes of replicas.</p>" +
         timeCharts(runs) + "\n";
  for (size_t i = 0; i < runs.size(); ++i) out += runSection(runs[i], i) + "\n";
  out += "<footer>Written by <code>hydrozoa report</code>. Self-contained: no scripts, nothing loaded from the "
         "network.</footer></body></html>\n";
  return out;
}

}  // namespace hydrozoa::report
