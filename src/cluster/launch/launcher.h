// Launcher: starts and stops worker processes somewhere (docs/containers.md). A
// worker is `hydrozoa worker --join <coordinator> --id N` with the job token
// in its environment. Each kind is a folder under src/cluster/launch/ (local/:
// processes of this machine; container/: right-sized containers here;
// slurm/: job steps on a Slurm cluster) and a line in launch/registry.cc;
// its own options stay in its own struct.
//
// Thread-safety: used from the coordinator's thread only.
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/units.h"

namespace hydrozoa::cluster {

struct WorkerLaunch {
  int id = 0;
  std::vector<std::string> args;              // after the executable
  // argv[0] as `ps` and `pgrep -f` show it ("hydrozoa-worker r0s1"); "" : the executable's path.
  std::string process_name;
  std::map<std::string, std::string> env;     // added to the environment
  std::string log_path;                       // stdout and stderr go here
  // The right-sized worker (a plain process ignores these).
  double cpus = 0;         // vCPUs; 0: unlimited
  Bytes memory = 0;        // 0: unlimited
  int gpus = 0;            // accelerators (slurm/: --gres=gpu:N)
  Seconds start_delay = 0; // before the process begins (a container starting)
};

struct WorkerExit {
  int id = 0;
  pid_t pid = 0;
  bool success = false;  // exited with status 0
  std::string how;       // "exited with status 1", "killed by signal 9 (SIGKILL)"
  bool out_of_memory = false;  // killed at its memory limit (containers)
  bool killed = false;         // ended by a signal
};

// What an injected straggler (cluster.stragglers, cluster/straggler_driver.h)
// acts on: a worker's process here (0: not one of this machine's) and the
// file of its CPU quota ("" : none; v2's cpu.max or v1's cpu.cfs_quota_us,
// the period 100 ms) with the vCPUs it was given.
struct WorkerHandle {
  pid_t pid = 0;
  std::string quota_file;
  bool cgroup_v2 = false;
  double cpus = 0;
};

class Launcher {
 public:
  virtual ~Launcher() = default;
  virtual const char* name() const = 0;
  // The address the coordinator's listeners bind to, and worker `id`'s own
  // ("": the worker's host is not known before it starts; the worker takes
  // its address toward the coordinator, wire::localAddressToward()).
  virtual std::string coordinatorHost() const { return "127.0.0.1"; }
  virtual std::string workerHost(int /*id*/) const { return "127.0.0.1"; }
  // Each worker's running time as the system it ran on accounted for it, per
  // run in the order they started ({} : no such accounting here; billing
  // then stays on the coordinator's clock). Asked once, after every worker
  // has ended.
  virtual std::map<int, std::vector<Seconds>> accountedSeconds() { return {}; }
  virtual const char* accountingName() const { return ""; }  // for the bill: "Slurm's accounting (sacct)"
  // What names this job's workers to the system they run on ("" : nothing):
  // the containers' id (container/), the Slurm allocation (slurm/).
  virtual std::string jobId() const { return ""; }
  // What the launcher sees of a live worker that stopped responding ("" :
  // nothing to say), e.g. a container at its memory limit.
  virtual std::string diagnose(int /*id*/) const { return ""; }
  // Whether its workers share this machine's memory as processes of one
  // host do, so that replicas may sum gradients through shared memory
  // (NOTE [Shared-memory allreduce], runtime/comm/shared_memory.cc). Not
  // for containers, which stand for separate machines behind shaped links.
  virtual bool sharesHostMemory() const { return false; }
  // Whether its workers run on this machine, sharing its cores, so that the
  // coordinator places their compute threads (NOTE [Cores for compute threads],
  // coordinator.cc). Not for Slurm steps: Slurm places them on their nodes.
  virtual bool onThisHost() const { return true; }
  // Whether a next generation's workers may start while the current one's
  // still run (docs/scaling.md, "Pre-starting"): not where they would wait for
  // the very resources the current ones hold (slurm/: the allocation).
  virtual bool overlapsGenerations() const { return true; }
  // How long a worker may run before the platform ends it (function/: the
  // function's time limit); 0: no limit. The coordinator has the workers
  // save their state and starts fresh ones before it (docs/functions.md).
  virtual Seconds maxDuration() const { return 0; }
  // What worker `id` costs an hour as it runs (function/: its size at the
  // platform's price per GB-hour); < 0: the plan's figure for its stage.
  virtual UsdPerHour hourlyRate(int /*id*/) const { return -1; }

  // Worker `id`'s process and CPU quota, while it runs ({} : none here).
  virtual WorkerHandle handle(int /*id*/) const { return {}; }
  // Whether its workers run under a CPU quota that handle() names (containers).
  virtual bool cpuQuotas() const { return false; }
  // Starts a worker. Fails when the process cannot be created.
  virtual Status launch(const WorkerLaunch& launch) = 0;
  // Workers that ended since the last call (each reported once).
  virtual std::vector<WorkerExit> poll() = 0;
  virtual bool alive(int id) const = 0;
  // Asks a worker to stop (SIGTERM), or forces it (SIGKILL).
  virtual void signal(int id, bool force) = 0;
  // Stops every live worker: SIGTERM, up to `grace` to exit, then SIGKILL;
  // returns once all are reaped. Nothing is left running.
  virtual std::vector<WorkerExit> stopAll(Seconds grace) = 0;
};

// A process's fate in words, from a waitpid() status.
std::string describeWaitStatus(int status);

}  // namespace hydrozoa::cluster
