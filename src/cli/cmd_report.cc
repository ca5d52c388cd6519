// `hydrozoa report RUN_DIR [RUN_DIR ...]`: one self-contained HTML page of
// one run or several overlaid (src/report/html.h; docs/report.md).
#include <fmt/format.h>

#include <filesystem>
#include <iostream>

#include "cli/commands.h"
#include "core/files.h"
#include "core/limits.h"
#include "plan/plan.h"
#include "report/html.h"
#include "report/run_report.h"
#include "report/timeline.h"

namespace hydrozoa::cli {
namespace {

struct ReportArgs {
  std::vector<std::string> dirs;
  std::string output, timeline;
  bool json = false;
};

// --timeline STEP or FIRST-LAST: the pipeline's timeline of traced steps as an SVG.
Status writeTimeline(const ReportArgs& a) {
  if (a.dirs.size() != 1) return invalidArgument("--timeline draws one run: give one run directory");
  const size_t dash = a.timeline.find('-', 1);
  HZ_ASSIGN_OR_RETURN(const std::int64_t step,
                      parseCount(a.timeline.substr(0, dash), "--timeline", {0, kStepsRange.max}));
  std::int64_t last = step;
  if (dash != std::string::npos) {
    HZ_ASSIGN_OR_RETURN(last, parseCount(a.timeline.substr(dash + 1), "--timeline", {step, step + 16}));
  }
  const std::string steps = last > step ? fmt::format("{}-{}", step, last) : std::to_string(step);
  const std::string tracePath = (std::filesystem::path(a.dirs[0]) / "trace.json").string();
  HZ_ASSIGN_OR_RETURN(const Json trace, readJsonFile(tracePath));
  HZ_ASSIGN_OR_RETURN(const report::Timeline timeline, report::timelineFromTrace(trace, step, last));
  std::string title = fmt::format("{}: step{} {}", a.dirs[0], last > step ? "s" : "", steps);
  const std::string planPath = (std::filesystem::path(a.dirs[0]) / "plan.json").string();
  if (auto plan = plan::loadPlan(planPath); plan.ok()) {
    // Stages replicated unevenly: the step's microbatches, dealt round-robin.
    title += plan->evenlyReplicated()
                 ? fmt::format(", {} schedule, {} microbatches", plan::scheduleName(plan->schedule),
                               plan->num_microbatches)
                 : fmt::format(", {} schedule, {} microbatches a step dealt round-robin",
                               plan::scheduleName(plan->schedule), plan->num_microbatches * plan->data_parallel);
  }
  const std::string output =
      !a.output.empty() ? a.output : (std::filesystem::path(a.dirs[0]) / fmt::format("timeline-{}.svg", steps)).string();
  HZ_RETURN_IF_ERROR(writeFileAtomically(output, report::renderTimeline(timeline, title)));
  std::cout << fmt::format("Wrote {} ({} workers, {:.1f} ms)\n", output, timeline.lanes.size(), timeline.end_ms);
  return Status();
}

Status runReport(const ReportArgs& a) {
  if (!a.timeline.empty()) return writeTimeline(a);
  std::vector<report::RunReport> runs;
  for (const auto& dir : a.dirs) {
    HZ_ASSIGN_OR_RETURN(report::RunReport run, report::loadRunReport(dir));
    runs.push_back(std::move(run));
  }
  report::labelRuns(runs);
  // One run: beside its files; several: here, as none of them owns it.
  const std::string output =
      !a.output.empty() ? a.output
                        : runs.size() == 1 ? (std::filesystem::path(a.dirs[0]) / "report.html").string() : "report.html";
  HZ_RETURN_IF_ERROR(writeFileAtomically(output, report::renderHtmlReport(runs)));
  if (a.json) {
    Json j = {{"output", output}, {"runs", Json::array()}};
    for (const auto& r : runs) j["runs"].push_back(report::runReportToJson(r));
    std::cout << j.dump(2) << "\n";
    return Status();
  }
  for (const auto& r : runs) {
    for (const auto& n : r.notes) std::cerr << r.label << ": " << n << "\n";
  }
  std::cout << fmt::format("Wrote {} ({} run{}); open it in a browser: file://{}\n", output, runs.size(),
                           runs.size() == 1 ? "" : "s", std::filesystem::absolute(output).lexically_normal().string());
  return Status();
}

}  // namespace

void addReportCommand(CLI::App& app, Status* status) {
  auto args = std::make_shared<ReportArgs>();
  CLI::App* cmd = app.add_subcommand(
      "report", "Write one self-contained HTML page of a training run, or of several runs overlaid");
  cmd->footer(
      "Examples:\n"
      "  hydrozoa report runs/x                      # runs/x/report.html\n"
      "  hydrozoa report runs/a runs/b -o ab.html    # two runs overlaid\n"
      "  hydrozoa report runs/x --json               # also the report's data as JSON on stdout\n"
      "  hydrozoa report runs/x --timeline 1         # runs/x/timeline-1.svg: what each worker computed in step 1\n"
      "  hydrozoa report runs/x --timeline 4-5       # steps 4 and 5 (an asynchronous schedule's overlap)\n");
  cmd->add_option("run_dirs", args->dirs, "Run directories of `hydrozoa train`")->required();
  cmd->add_option("-o,--output", args->output,
                  "The HTML file (default: RUN_DIR/report.html for one run, report.html here for several)");
  cmd->add_flag("--json", args->json, "Print the runs' data (series, events, plan, stages) as JSON on stdout");
  cmd->add_option("--timeline", args->timeline,
                  "Instead, draw the pipeline's timeline of this traced step (global, from 0), or of steps "
                  "FIRST-LAST (up to 17), as an SVG (default RUN_DIR/timeline-STEP.svg)");
  cmd->callback([args, status] { *status = runReport(*args); });
}

}  // namespace hydrozoa::cli
