// The `hydrozoa` subcommands. Each add*Command registers one subcommand whose
// callback stores its outcome in *status; main() prints a failed Status as
// one line and exits non-zero. Profile, select, cleanup and the workers are
// the full program's (cmd_*.cc there, cli/front_end.cc in the front end:
// NOTE [The front end and the full program]).
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

// What `hydrozoa --help` says of the commands the front end hands whole to
// the full program (NOTE [The front end and the full program]).
inline constexpr const char* kProfileAbout = "Measure (or predict) a model's per-layer costs";
inline constexpr const char* kSelectAbout =
    "Train every model of a grid (a base job and values to try) and rank them (docs/select.md)";
inline constexpr const char* kCleanupAbout =
    "Remove the containers, namespaces, bridges and cgroups, and cancel the Slurm allocations and steps, that crashed "
    "jobs left behind";

}  // namespace hydrozoa::cli
