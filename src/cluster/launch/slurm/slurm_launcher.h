// SlurmLauncher: each worker as a job step on a Slurm cluster (issue 10 §2;
// docs/slurm.md).
//
// Resources. Started inside an allocation (SLURM_JOB_ID set, e.g. from an
// sbatch script), the workers are steps in it. Otherwise the launcher first
// obtains one allocation for the job's first generation (`salloc --no-shell`:
// one task per worker, each with the largest worker's CPUs and memory), so
// that the workers start together or not at all; a worker that does not fit
// in what is left of it (a next generation started ahead of the boundary, a
// scaled-up job) runs as a job of its own (srun without --jobid: queued and
// started by Slurm while the coordinator goes on). Each step asks for its own
// worker's right-sized resources (--cpus-per-task, --mem, --gres=gpu:N) with
// --exact. Nothing waits forever: an allocation not granted within
// cluster.slurm.allocation_timeout is withdrawn (salloc --immediate), and a
// request no node can satisfy is an error naming the resource and the
// partition's largest node.
//
// Processes. Each worker's `srun` is a process of the coordinator (run by a
// LocalLauncher: own session, PR_SET_PDEATHSIG), whose exit is the step's
// end, whatever ended it (the worker exiting, scancel, a failed node); the
// worker's output reaches its log here through srun, so no shared
// filesystem is needed for logs. A step outlives a srun killed with -9, so
// what the launcher creates is recorded first (launch/records.h, under
// <state dir>/slurm/): every job and step it makes is named after the job's
// unique name, and `hydrozoa cleanup` cancels what a dead coordinator left
// by that name (its allocation, its workers' own jobs, its steps in the
// allocation it ran in), also what was still queued when it died.
//
// The workers' addresses are theirs: workerHost() is "", and each worker
// listens on its address toward the coordinator. The coordinator binds to
// cluster.slurm.coordinator_host, by default this host's address toward
// slurmctld (the cluster's network, not every interface).
//
// Thread-safety: the coordinator's thread only.
#pragma once

#include <fmt/format.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "cluster/job_spec.h"
#include "cluster/launch/launcher.h"
#include "cluster/launch/local/local_launcher.h"
#include "cluster/launch/records.h"

namespace hydrozoa::cluster {

struct SlurmOptions {
  std::string executable;  // the hydrozoa binary, at this path on every node
  std::string job_name;    // Slurm's job and step names start with it ("hydrozoa-<name>")
  SlurmSpec spec;          // cluster.slurm
  // The first generation: its workers and the largest one's resources.
  int workers = 0;
  double cpus = 1;
  Bytes memory = 0;
  int gpus = 0;
  std::string state_dir;  // "" : launcherStateDir()
};

// "" when Slurm's controller answers here, else what is wrong and how to
// start a local one (scripts/slurm-local).
std::string slurmSupport();

// Cancels the allocations and steps of every job whose coordinator is gone.
CleanupReport cleanupSlurm(const std::string& state_dir = "");

// The salloc and srun command lines (pure; tested on their own).
std::vector<std::string> sallocCommand(const SlurmSpec& spec, const std::string& name, int tasks, int cpus,
                                       Bytes memory, int gpus);
// In `allocation`, or ("") as a job of its own, with the spec's partition, account and options.
std::vector<std::string> srunCommand(const SlurmSpec& spec, const std::string& allocation, const std::string& name,
                                     int cpus, Bytes memory, int gpus);
// Whole CPUs for `vcpus` (at least 1) and MiB for `bytes` (rounded up), as Slurm counts them.
int slurmCpus(double vcpus);
std::int64_t slurmMegabytes(Bytes bytes);

class SlurmLauncher final : public Launcher {
 public:
  // Obtains the allocation (or takes the one this process runs in).
  static Result<std::unique_ptr<SlurmLauncher>> create(const SlurmOptions& options);
  // Stops every step and cancels the allocations it obtained.
  ~SlurmLauncher() override;

  const char* name() const override { return "slurm"; }
  std::string coordinatorHost() const override { return host_; }
  std::string workerHost(int /*id*/) const override { return ""; }
  bool onThisHost() const override { return false; }
  bool overlapsGenerations() const override { return false; }
  std::string jobId() const override { return main_; }
  Status launch(const WorkerLaunch& launch) override;
  std::vector<WorkerExit> poll() override;
  bool alive(int id) const override { return sruns_.alive(id); }
  void signal(int id, bool force) override;
  std::vector<WorkerExit> stopAll(Seconds grace) override;
  // From Slurm's accounting (sacct: each step's ElapsedRaw), where the
  // cluster keeps it; {} where it does not (accounting_storage/none).
  std::map<int, std::vector<Seconds>> accountedSeconds() override;
  const char* accountingName() const override { return "Slurm's accounting (sacct)"; }

  // The allocation the steps run in (its Slurm job id), and whether this launcher obtained it.
  const std::string& allocation() const { return main_; }
  bool ownsAllocation() const { return ownMain_; }

 private:
  SlurmLauncher(SlurmOptions options, std::string tag, std::string srun);
  // Runs salloc; returns the granted job id.
  Result<std::string> allocate(const std::string& name, int tasks, int cpus, Bytes memory, int gpus);
  std::string stepName(int id) const { return fmt::format("{}.w{}", o_.job_name, id); }
  void killStep(int id);
  void ended(WorkerExit* e);
  Status saveRecord() const;

  SlurmOptions o_;
  std::string tag_, host_, record_;
  std::string main_;     // the allocation steps run in
  bool ownMain_ = false;
  int slots_ = 0;        // workers the main allocation holds (ours only; 0: no bound known)
  std::set<int> inMain_;                 // workers whose step runs in main_
  std::set<int> ownJob_;                 // workers that run as a job of their own
  std::map<int, int> launches_;          // worker -> steps started for it
  std::set<int> everOwnJob_;             // workers that ran as a job of their own at least once
  std::map<int, std::string> logs_;      // worker -> its log (srun's output)
  LocalLauncher sruns_;
};

}  // namespace hydrozoa::cluster
