// hydrozoa: plan and train deep networks on many small, elastic workers.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>

#include "cli/commands.h"
#include "core/allocator.h"
#include "core/log.h"

int main(int argc, char** argv) {
  hydrozoa::configureAllocatorForTraining();  // NOTE [glibc malloc and tensor-sized allocations]
  CLI::App app{"hydrozoa: plan and train deep networks on many small, elastic workers", "hydrozoa"};
  app.require_subcommand(1);
  std::string logLevel = "info";
  app.add_option("--log-level", logLevel, "warn, info or debug")->capture_default_str();
  app.footer("Run `hydrozoa COMMAND --help` for a command's options.");

  hydrozoa::Status status;
  hydrozoa::cli::addModelsCommand(app, &status);
  hydrozoa::cli::addProfileCommand(app, &status);
  hydrozoa::cli::addPlanCommand(app, &status);
  hydrozoa::cli::addShowCommand(app, &status);
  hydrozoa::cli::addTrainCommand(app, &status);
  hydrozoa::cli::addCleanupCommand(app, &status);
  hydrozoa::cli::addNetprobeWorkerCommand(app, &status);
  hydrozoa::cli::addWorkerCommand(app, &status);

  app.parse_complete_callback([&] { hydrozoa::initLogging(logLevel); });
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const hydrozoa::InternalError& e) {
    std::fprintf(stderr, "hydrozoa: internal error (a bug; please report it): %s\n", e.what());
    return 70;
  }
  if (!status.ok()) {
    if (status.message() == "interrupted") return 130;  // said already, resumable
    std::fprintf(stderr, "hydrozoa: error: %s\n", status.message().c_str());
    return 1;
  }
  return 0;
}
