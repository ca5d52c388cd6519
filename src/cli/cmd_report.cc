// `hydrozoa report RUN_DIR [RUN_DIR ...]`: one self-contained HTML page of
// one run or several overlaid (src/report/html.h; docs/report.md).
#include <fmt/format.h>

#include <filesystem>
#include <iostream>

#include "cli/commands.h"
#include "core/files.h"
#include "report/html.h"
#include "report/run_report.h"

namespace hydrozoa::cli {
namespace {

struct ReportArgs {
  std::vector<std::string> dirs;
  std::string output;
  bool json = false;
};

Status runReport(const ReportArgs& a) {
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
      "  hydrozoa report runs/x --json               # also the report's data as JSON on stdout\n");
  cmd->add_option("run_dirs", args->dirs, "Run directories of `hydrozoa train`")->required();
  cmd->add_option("-o,--output", args->output,
                  "The HTML file (default: RUN_DIR/report.html for one run, report.html here for several)");
  cmd->add_flag("--json", args->json, "Print the runs' data (series, events, plan, stages) as JSON on stdout");
  cmd->callback([args, status] { *status = runReport(*args); });
}

}  // namespace hydrozoa::cli
