// The `hydrozoa` subcommands. Each add*Command registers one subcommand whose
// callback stores its outcome in *status; main() prints a failed Status as
// one line and exits non-zero.
#pragma once

#include <CLI/CLI.hpp>

#include "core/status.h"

namespace hydrozoa::cli {

void addModelsCommand(CLI::App& app, Status* status);
void addProfileCommand(CLI::App& app, Status* status);
void addPlanCommand(CLI::App& app, Status* status);
void addShowCommand(CLI::App& app, Status* status);
void addReportCommand(CLI::App& app, Status* status);
void addNetprobeWorkerCommand(CLI::App& app, Status* status);
void addTrainCommand(CLI::App& app, Status* status);
void addWorkerCommand(CLI::App& app, Status* status);
void addCleanupCommand(CLI::App& app, Status* status);
void addAllocateCommand(CLI::App& app, Status* status);
void addSimulateCommand(CLI::App& app, Status* status);
void addSelectCommand(CLI::App& app, Status* status);
// `cluster serve`, `submit`, `jobs`, `cancel`.
void addClusterCommands(CLI::App& app, Status* status);

}  // namespace hydrozoa::cli
