// `hydrozoa cleanup`: removes the containers (network namespaces, bridges,
// cgroups) and cancels the Slurm allocations and steps of jobs whose
// coordinator is gone, e.g. after kill -9, and removes the shared-memory
// segments that no process holds any more and the models SHARP spilled to
// /dev/shm for selections whose run directory is gone.

#include <unistd.h>

#include <iostream>

#include "cli/commands.h"
#include "cluster/channel.h"
#include "cluster/launch/container/container_launcher.h"
#include "cluster/launch/slurm/slurm_launcher.h"
#include "runtime/comm/shm_segments.h"
#include "select/exec/spill.h"

namespace hydrozoa::cli {
namespace {

Status runCleanup() {
  const std::string dir = cluster::launcherStateDir();
  cluster::CleanupReport r = cluster::cleanupContainers(dir);
  if (::access((dir + "/slurm").c_str(), F_OK) == 0) {
    // Slurm allocations and steps of dead coordinators (needs Slurm's clients).
    const cluster::CleanupReport s = cluster::cleanupSlurm(dir);
    r.removed.insert(r.removed.end(), s.removed.begin(), s.removed.end());
    r.live.insert(r.live.end(), s.live.begin(), s.live.end());
    r.errors.insert(r.errors.end(), s.errors.begin(), s.errors.end());
  }
  if (::access(cluster::channelRecordDir().c_str(), F_OK) == 0) {
    // Keys that killed jobs left in a Redis channel of the user's.
    const cluster::CleanupReport k =
        cluster::cleanupRecords(cluster::channelRecordDir(), "job", cluster::removeChannelKeys);
    r.removed.insert(r.removed.end(), k.removed.begin(), k.removed.end());
    r.live.insert(r.live.end(), k.live.begin(), k.live.end());
    r.errors.insert(r.errors.end(), k.errors.begin(), k.errors.end());
  }
  for (const auto& line : r.removed) std::cout << "Removed " << line << "\n";
  for (const auto& line : r.live) std::cout << "Left running: " << line << "\n";
  const std::vector<std::string> segments = runtime::removeAbandonedSegments();
  for (const auto& path : segments) std::cout << "Removed " << path << " (shared memory that no worker holds)\n";
  std::vector<std::string> spills, kept;  // SHARP's (docs/select.md)
  select::cleanupSpills(&spills, &kept);
  for (const auto& line : spills) std::cout << "Removed " << line << "\n";
  for (const auto& line : kept) std::cout << "Kept " << line << "\n";
  if (r.removed.empty() && r.live.empty() && r.errors.empty() && segments.empty() && spills.empty() &&
      kept.empty()) {
    std::cout << "Nothing to clean up (no container or Slurm records in " << dir << ")\n";
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
  CLI::App* cmd = app.add_subcommand("cleanup", kCleanupAbout);
  cmd->footer("Jobs whose coordinator still runs are left alone. Records live in $HYDROZOA_STATE_DIR or "
              "/run/hydrozoa.\n");
  cmd->callback([status] { *status = runCleanup(); });
}

}  // namespace hydrozoa::cli
