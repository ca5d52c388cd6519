// ContainerLauncher: each worker as a right-sized container on this machine
// (Hydrozoa §3.1; docs/containers.md).
//
// A job gets a bridge and a private /24 (10.213.N.0/24, the bridge at .1);
// each worker gets its own network namespace with a veth into the bridge and
// its own address (.2 + id), its egress shaped with tc to the plan's
// per-worker bandwidth (and latency, where the kernel has netem), a CPU quota
// and a memory limit in cgroups (v1 or v2), and a start-up delay before its
// process begins. A worker the kernel kills for memory is reported as "out of
// memory". The processes themselves are run by a LocalLauncher (own session,
// PR_SET_PDEATHSIG), so they never outlive the coordinator.
//
// What a job creates is written down first, in <state dir>/<job>.json
// (launch/records.h; default /run/hydrozoa), and removed when the launcher is destroyed; when a
// coordinator dies without that (kill -9), the next container launcher or
// `hydrozoa cleanup` removes what it left (cleanupContainers()).
//
// Needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN for namespaces and cgroups) and
// iproute2. Thread-safety: the coordinator's thread only.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "cluster/launch/local/local_launcher.h"
#include "cluster/launch/launcher.h"
#include "cluster/launch/records.h"
#include "core/files.h"

namespace hydrozoa::cluster {

struct ContainerOptions {
  std::string executable;        // the hydrozoa binary (or any program: tests)
  BytesPerSecond bandwidth = 0;  // each worker's egress; 0: not shaped
  Seconds latency = 0;           // added to each worker's egress (needs sch_netem)
  std::string state_dir;         // "" : $HYDROZOA_STATE_DIR or /run/hydrozoa
  // Function workers (function/): each namespace's one route is the bridge's
  // address (the coordinator and the store), so workers cannot reach each
  // other; and what comes in is shaped too (a function's bandwidth holds
  // both ways).
  bool isolated = false;
  bool shape_downloads = false;
};

// "" when this process can create containers, else why not (not root, no
// iproute2, no writable cgroups).
std::string containerSupport();

// Removes the containers, namespaces, bridges and cgroups of every job whose
// coordinator is no longer running (processes still in them are killed).
CleanupReport cleanupContainers(const std::string& state_dir = "");

class ContainerLauncher final : public Launcher {
 public:
  // Cleans up after dead jobs, then creates this job's bridge and subnet.
  static Result<std::unique_ptr<ContainerLauncher>> create(const ContainerOptions& options);
  // Stops every worker and removes everything the job created.
  ~ContainerLauncher() override;

  const char* name() const override { return "container"; }
  std::string coordinatorHost() const override;
  std::string workerHost(int id) const override;
  Status launch(const WorkerLaunch& launch) override;
  std::vector<WorkerExit> poll() override;
  bool alive(int id) const override { return processes_.alive(id); }
  void signal(int id, bool force) override { processes_.signal(id, force); }
  std::vector<WorkerExit> stopAll(Seconds grace) override;
  std::string diagnose(int id) const override;
  WorkerHandle handle(int id) const override;
  bool cpuQuotas() const override { return true; }
  std::string jobId() const override { return job_; }

  const std::string& job() const { return job_; }
  const std::string& bridge() const { return bridge_; }
  std::string netns(int id) const;
  std::string vethName(int id) const { return "hzv" + job_ + "w" + std::to_string(id); }
  std::vector<std::string> cgroupDirs(int id) const;

 private:
  ContainerLauncher(ContainerOptions options, std::string job, int subnet);
  Status saveRecord() const;
  Status createNetwork(int id);
  void removeWorker(int id);
  void explainExit(WorkerExit* e) const;

  ContainerOptions o_;
  std::string job_, bridge_, record_;
  int subnet_ = 0;  // 10.213.<subnet_>.0/24
  LocalLauncher processes_;
  std::set<int> workers_;                 // created and not yet removed
  std::map<int, Bytes> memory_;           // each worker's limit
  std::map<int, double> cpus_;            // each worker's CPU quota in vCPUs
};

}  // namespace hydrozoa::cluster
