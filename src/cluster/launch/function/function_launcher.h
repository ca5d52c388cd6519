// FunctionLauncher: each worker as a serverless function invocation, as
// the platform runs it (FuncPipe §2; docs/functions.md, "Function workers").
//
// A function is a container (container/) with a function's rules: its size
// is its memory, rounded up to the platform's increment within its least
// and largest (a size outside them is refused, naming the platform's range),
// and its CPU quota follows the memory (the catalog's vcpus_per_gb: AWS
// gives one vCPU per 1,769 MB); its network namespace's one route is the
// bridge's address, where the coordinator and the storage channel listen,
// so it cannot reach another worker, and its bandwidth is shaped both ways;
// the start delay is its cold start; and it is killed (SIGKILL) when it has
// run for the time limit (maxDuration()). Billing is the catalog's: per
// GB-second at 1 ms plus a fee per invocation (cluster/billing.h).
//
// Needs what containers need (root, iproute2, cgroups).
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "cluster/launch/container/container_launcher.h"
#include "plan/resources.h"

namespace hydrozoa::cluster {

struct FunctionOptions {
  std::string executable;
  plan::Catalog catalog;         // kind function
  BytesPerSecond bandwidth = 0;  // each way; 0: the catalog's network_bandwidth
  Seconds max_duration = 900;
  std::string state_dir;         // as containers'
};

// The size a worker needing `memory` runs as on `catalog`'s functions: rounded
// up to its increment, at least its least; an error past its largest.
Result<Bytes> functionSize(const plan::Catalog& catalog, Bytes memory, const std::string& what);

class FunctionLauncher final : public Launcher {
 public:
  static Result<std::unique_ptr<FunctionLauncher>> create(const FunctionOptions& options);

  const char* name() const override { return "function"; }
  std::string coordinatorHost() const override { return containers_->coordinatorHost(); }
  std::string workerHost(int id) const override { return containers_->workerHost(id); }
  std::string jobId() const override { return containers_->jobId(); }
  std::string diagnose(int id) const override { return containers_->diagnose(id); }
  Seconds maxDuration() const override { return o_.max_duration; }
  UsdPerHour hourlyRate(int id) const override;
  Status launch(const WorkerLaunch& launch) override;
  std::vector<WorkerExit> poll() override;
  bool alive(int id) const override { return containers_->alive(id); }
  void signal(int id, bool force) override { containers_->signal(id, force); }
  std::vector<WorkerExit> stopAll(Seconds grace) override;

  const ContainerLauncher& containers() const { return *containers_; }

 private:
  using Clock = std::chrono::steady_clock;
  FunctionLauncher(FunctionOptions o, std::unique_ptr<ContainerLauncher> c) : o_(std::move(o)), containers_(std::move(c)) {}
  void explain(WorkerExit* e);

  FunctionOptions o_;
  std::unique_ptr<ContainerLauncher> containers_;
  std::map<int, Clock::time_point> deadline_;  // live invocations: when the platform ends them
  std::set<int> timedOut_;
  std::map<int, Bytes> size_;  // each worker's function size
};

}  // namespace hydrozoa::cluster
