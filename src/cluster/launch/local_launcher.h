// LocalLauncher: workers as processes of this machine.
//
// Each worker gets its own session (setsid), so a Ctrl-C in the terminal
// reaches only the coordinator, which then stops the workers in order; and
// PR_SET_PDEATHSIG, so the kernel ends a worker whose coordinator died
// without a chance to clean up (kill -9). No worker outlives its job.
#pragma once

#include <map>

#include "cluster/launcher.h"

namespace hydrozoa::cluster {

class LocalLauncher final : public Launcher {
 public:
  // `executable`: the hydrozoa binary to run workers from.
  explicit LocalLauncher(std::string executable);
  ~LocalLauncher() override;

  const char* name() const override { return "local"; }
  bool sharesHostMemory() const override { return true; }
  Status launch(const WorkerLaunch& launch) override;
  std::vector<WorkerExit> poll() override;
  bool alive(int id) const override;
  pid_t pid(int id) const override;
  void signal(int id, bool force) override;
  std::vector<WorkerExit> stopAll(Seconds grace) override;

 private:
  std::string executable_;
  std::map<int, pid_t> live_;
};

}  // namespace hydrozoa::cluster
