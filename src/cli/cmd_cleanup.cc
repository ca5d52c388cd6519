// `hydrozoa cleanup`: removes the containers (network namespaces, bridges,
// cgroups) of jobs whose coordinator is gone, e.g. after kill -9, and the
// shared-memory segments that no process holds any more.

#include <iostream>

#include "cli/commands.h"
#include "cluster/launch/container/container_launcher.h"
#include "runtime/comm/shm_segments.h"

namespace hydrozoa::cli {
namespace {

Status runCleanup() {
  const std::string dir = cluster::containerStateDir();
  const cluster::CleanupReport r = cluster::cleanupContainers(dir);
  for (const auto& line : r.removed) std::cout << "Removed " << line << "\n";
  for (const auto& line : r.live) std::cout << "Left running: " << line << "\n";
  const std::vector<std::string> segments = runtime::removeAbandonedSegments();
  for (const auto& path : segments) std::cout << "Removed " << path << " (shared memory that no worker holds)\n";
  if (r.removed.empty() && r.live.empty() && r.errors.empty() && segments.empty()) {
    std::cout << "Nothing to clean up (no container records in " << dir << ")\n";
  }
  if (!r.errors.empty()) {
    std::string all;
    for (const auto& e : r.errors) all += (all.empty() ? "" : "; ") + e;
    return ioError(all);
  }
  return Status();
}

}  // namespace

void addCleanupCommand(CLI::App& app, Status* status) {
  CLI::App* cmd = app.add_subcommand(
      "cleanup", "Remove the containers, namespaces, bridges and cgroups that crashed jobs left behind");
  cmd->footer("Jobs whose coordinator still runs are left alone. Records live in $HYDROZOA_STATE_DIR or "
              "/run/hydrozoa.\n");
  cmd->callback([status] { *status = runCleanup(); });
}

}  // namespace hydrozoa::cli
