// LocalLauncher: workers as processes of this machine.
//
// Each worker gets its own session (setsid), so a Ctrl-C in the terminal
// reaches only the coordinator, which then stops the workers in order; and
// PR_SET_PDEATHSIG, so the kernel ends a worker whose coordinator died
// without a chance to clean up (kill -9). No worker outlives its job.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "cluster/launch/launcher.h"

namespace hydrozoa::cluster {

// Where a process starts, for a launcher that runs its workers through a
// LocalLauncher (container/): the network namespace it enters and the cgroup
// files it adds itself to before it runs.
struct ProcessPlacement {
  std::string netns_path;
  std::vector<std::string> cgroup_procs;
};

class LocalLauncher final : public Launcher {
 public:
  // `executable`: the hydrozoa binary to run workers from.
  explicit LocalLauncher(std::string executable);
  ~LocalLauncher() override;

  const char* name() const override { return "local"; }
  bool sharesHostMemory() const override { return true; }
  Status launch(const WorkerLaunch& launch) override { return launchIn(launch, {}); }
  Status launchIn(const WorkerLaunch& launch, const ProcessPlacement& placement);
  std::vector<WorkerExit> poll() override;
  bool alive(int id) const override;
  void signal(int id, bool force) override;
  std::vector<WorkerExit> stopAll(Seconds grace) override;
  WorkerHandle handle(int id) const override {
    auto it = live_.find(id);
    WorkerHandle h;
    if (it != live_.end()) h.pid = it->second;
    return h;
  }

 private:
  std::string executable_;
  std::map<int, pid_t> live_;
};

}  // namespace hydrozoa::cluster
