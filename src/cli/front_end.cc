// The front end's side of the commands (cli/torch_side.h; NOTE [The front
// end and the full program]): everything that needs libtorch is handed, as
// the whole command line, to the full program next to this one.
#include <fmt/format.h>

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/torch_side.h"
#include "core/paths.h"

namespace hydrozoa::cli {
namespace {

// Runs this process's command line again in the full program; returns only
// when that cannot be done, with the reason and the fix.
Status handOff(const std::string& what) {
  const std::string self = executablePath();
  const std::string full = (std::filesystem::path(self).parent_path() / HYDROZOA_FULL_PROGRAM).string();
  std::fflush(nullptr);
  ::execv(full.c_str(), commandLine());
  return unavailable(fmt::format("{} needs libtorch, which hydrozoa keeps in {}, next to {}, but that cannot be run "
                                 "({}); build both with scripts/setup",
                                 what, full, self.empty() ? std::string("this program") : self, std::strerror(errno)));
}

// A command that is libtorch's from its first flag: listed by --help, its
// arguments (--help too) the full program's.
void addHandedOffCommand(CLI::App& app, const char* name, const char* about, Status* status) {
  CLI::App* cmd = app.add_subcommand(name, about);
  if (*about == '\0') cmd->group("");  // started by hydrozoa itself, hidden from --help
  cmd->set_help_flag();
  cmd->allow_extras();
  cmd->prefix_command();
  cmd->callback([status, name] { *status = handOff(fmt::format("`hydrozoa {}`", name)); });
}

}  // namespace

Status trainJob(cluster::TrainOptions, const std::string&) { return handOff("training"); }

Result<profile::DeviceSpec> calibrateThisCpu(int) { return handOff("--device cpu (calibrating this CPU)"); }

Result<std::int64_t> trainingSetSize(const cluster::JobSpec&) { return handOff("counting the job's training set"); }

void addProfileCommand(CLI::App& app, Status* status) { addHandedOffCommand(app, "profile", kProfileAbout, status); }
void addNetprobeWorkerCommand(CLI::App& app, Status* status) {
  addHandedOffCommand(app, "netprobe-worker", "", status);
}
void addWorkerCommand(CLI::App& app, Status* status) { addHandedOffCommand(app, "worker", "", status); }
void addSelectCommand(CLI::App& app, Status* status) {
  addHandedOffCommand(app, "select", kSelectAbout, status);
  addHandedOffCommand(app, "sharp-worker", "", status);
}
void addCleanupCommand(CLI::App& app, Status* status) { addHandedOffCommand(app, "cleanup", kCleanupAbout, status); }

}  // namespace hydrozoa::cli
