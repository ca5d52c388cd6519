// `hydrozoa show FILE`: validates a profile, plan or PipeDream graph.txt and
// prints it.
#include <iostream>

#include "cli/commands.h"
#include "core/files.h"
#include "core/units.h"
#include "plan/plan.h"
#include "profile/profile.h"
#include "profile/summary.h"

namespace hydrozoa::cli {
namespace {

Status show(const std::string& path, const std::string& graphBatch) {
  HZ_ASSIGN_OR_RETURN(std::int64_t batch, parsePositiveInt(graphBatch, "--graph-batch-size"));
  HZ_ASSIGN_OR_RETURN(std::string text, readTextFile(path));
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '{') {
    HZ_ASSIGN_OR_RETURN(Json j, parseJson(text, path));
    const std::string schema = j.is_object() && j.contains("schema") && j["schema"].is_string() ? j["schema"].get<std::string>() : "";
    if (schema == plan::kPlanSchema) {
      HZ_ASSIGN_OR_RETURN(plan::Plan p, plan::planFromJson(j, path));
      std::cout << plan::renderPlanTable(p);
      return Status();
    }
    if (schema != profile::kProfileSchema) {
      return parseError(path + ": not a hydrozoa profile or plan (its \"schema\" field is missing or unknown)");
    }
  }
  HZ_ASSIGN_OR_RETURN(profile::Profile p, profile::loadProfile(path, batch));
  std::cout << profile::renderProfileTable(p);
  return Status();
}

}  // namespace

void addShowCommand(CLI::App& app, Status* status) {
  auto path = std::make_shared<std::string>();
  auto graphBatch = std::make_shared<std::string>("1");
  CLI::App* cmd = app.add_subcommand("show", "Check and print a profile, plan.json or PipeDream graph.txt");
  cmd->add_option("file", *path, "The file")->required();
  cmd->add_option("--graph-batch-size", *graphBatch, "Batch size a graph.txt was profiled at")->capture_default_str();
  cmd->callback([=] { *status = show(*path, *graphBatch); });
}

}  // namespace hydrozoa::cli
