// hydrozoa: plan and train deep networks on many small, elastic workers.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>
#include <set>
#include <sstream>

#include "cli/commands.h"
#include "cli/common.h"
#include "core/allocator.h"
#include "core/files.h"
#include "core/log.h"

namespace {

// For "The following arguments were not expected: --wokers": the closest
// flag of the command that was given, as "did you mean --workers?".
void suggestFlag(const CLI::App& app, const std::string& message) {
  const auto colon = message.find(": ");
  if (colon == std::string::npos) return;
  std::istringstream words(message.substr(colon + 2));
  const CLI::App* command = &app;
  for (const CLI::App* sub : app.get_subcommands()) command = sub;
  std::set<std::string> flags;
  for (const CLI::Option* o : command->get_options()) {
    for (const std::string& name : o->get_lnames()) flags.insert("--" + name);
  }
  for (std::string word; words >> word;) {
    if (word.rfind("--", 0) != 0) continue;
    const std::string flag = word.substr(0, word.find('='));
    const std::string guess = hydrozoa::closestName(flag, flags);
    if (!guess.empty()) std::fprintf(stderr, "hydrozoa: did you mean %s (not %s)?\n", guess.c_str(), flag.c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  hydrozoa::cli::rememberCommandLine(argc, argv);
  hydrozoa::configureAllocatorForTraining();  // NOTE [glibc malloc and tensor-sized allocations]
  CLI::App app{"hydrozoa: plan and train deep networks on many small, elastic workers", "hydrozoa"};
  app.require_subcommand(1);
  std::string logLevel = "info";
  app.add_option("--log-level", logLevel, "error, warn, info or debug")
      ->capture_default_str()
      ->check(CLI::IsMember({"error", "warn", "info", "debug"}));
  app.set_version_flag("--version", "hydrozoa " HYDROZOA_VERSION);
  app.footer("Run `hydrozoa COMMAND --help` for a command's options.");

  hydrozoa::Status status;
  hydrozoa::cli::addModelsCommand(app, &status);
  hydrozoa::cli::addProfileCommand(app, &status);
  hydrozoa::cli::addPlanCommand(app, &status);
  hydrozoa::cli::addShowCommand(app, &status);
  hydrozoa::cli::addReportCommand(app, &status);
  hydrozoa::cli::addTrainCommand(app, &status);
  hydrozoa::cli::addCleanupCommand(app, &status);
  hydrozoa::cli::addAllocateCommand(app, &status);
  hydrozoa::cli::addSimulateCommand(app, &status);
  hydrozoa::cli::addSelectCommand(app, &status);
  hydrozoa::cli::addClusterCommands(app, &status);
  hydrozoa::cli::addNetprobeWorkerCommand(app, &status);
  hydrozoa::cli::addWorkerCommand(app, &status);

  app.parse_complete_callback([&] { hydrozoa::initLogging(logLevel); });
  try {
    app.parse(argc, argv);
  } catch (const CLI::ExtrasError& e) {
    // CLI11 says only that an argument was not expected: name the flag meant.
    const int code = app.exit(e);
    suggestFlag(app, e.what());
    return code;
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const hydrozoa::InternalError& e) {
    std::fprintf(stderr, "hydrozoa: internal error (a bug; please report it): %s\n", e.what());
    return 70;
  }
  if (!status.ok()) {
    if (status.message() == "interrupted" || status.message() == "preempted") return 130;  // said already, resumable
    std::fprintf(stderr, "hydrozoa: error: %s\n", status.message().c_str());
    return 1;
  }
  return 0;
}
