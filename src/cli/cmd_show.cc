// `hydrozoa show FILE|RUN_DIR`: validates a profile, plan or PipeDream
// graph.txt and prints it; or sums up a training run's directory (the text
// form of `hydrozoa report`). --json prints the same as JSON.
#include <filesystem>
#include <iostream>

#include "cli/commands.h"
#include "core/files.h"
#include "core/units.h"
#include "plan/plan.h"
#include "profile/profile.h"
#include "profile/summary.h"
#include "report/run_report.h"
#include "report/text.h"

namespace hydrozoa::cli {
namespace {

Status showRun(const std::string& dir, bool json) {
  HZ_ASSIGN_OR_RETURN(report::RunReport run, report::loadRunReport(dir));
  if (json) {
    std::cout << report::runReportToJson(run).dump(2) << "\n";
  } else {
    std::cout << report::renderRunText(run);
  }
  return Status();
}

Status show(const std::string& path, const std::string& graphBatch, bool json) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return showRun(path, json);
  HZ_ASSIGN_OR_RETURN(std::int64_t batch, parsePositiveInt(graphBatch, "--graph-batch-size"));
  HZ_ASSIGN_OR_RETURN(std::string text, readTextFile(path));
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '{') {
    HZ_ASSIGN_OR_RETURN(Json j, parseJson(text, path));
    const std::string schema = j.is_object() && j.contains("schema") && j["schema"].is_string() ? j["schema"].get<std::string>() : "";
    if (schema == plan::kPlanSchema) {
      HZ_ASSIGN_OR_RETURN(plan::Plan p, plan::planFromJson(j, path));
      std::cout << (json ? plan::planToJson(p).dump(2) + "\n" : plan::renderPlanTable(p));
      return Status();
    }
    if (schema != profile::kProfileSchema) {
      return parseError(path + ": not a hydrozoa profile or plan (its \"schema\" field is missing or unknown); a run's "
                               "summary is shown by giving its directory: hydrozoa show RUN_DIR");
    }
  }
  HZ_ASSIGN_OR_RETURN(profile::Profile p, profile::loadProfile(path, batch));
  std::cout << (json ? profile::profileToJson(p).dump(2) + "\n" : profile::renderProfileTable(p));
  return Status();
}

}  // namespace

void addShowCommand(CLI::App& app, Status* status) {
  auto path = std::make_shared<std::string>();
  auto graphBatch = std::make_shared<std::string>("1");
  auto json = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand(
      "show", "Check and print a profile, plan.json or PipeDream graph.txt, or sum up a run directory");
  cmd->add_option("file", *path, "The file, or a run directory of `hydrozoa train`")->required();
  cmd->add_option("--graph-batch-size", *graphBatch, "Batch size a graph.txt was profiled at")->capture_default_str();
  cmd->add_flag("--json", *json, "Print it as JSON (a run: its series, events, plan and time per stage)");
  cmd->callback([=] { *status = show(*path, *graphBatch, *json); });
}

}  // namespace hydrozoa::cli
