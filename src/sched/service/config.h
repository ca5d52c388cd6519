// The scheduler service's pool (`hydrozoa cluster serve --config
// cluster.yaml`; docs/cluster.md): its worker types, how each type's
// workers are launched, the policy and the round length.
//
//   name: local-pool
//   policy: max_min_fairness
//   round: 30s
//   worker_types:
//     - {name: fast, count: 4, launcher: container, cpu_limit: 1, price: 0.40}
//     - {name: slow, count: 4, launcher: container, cpu_limit: 0.25, price: 0.10}
//
// On a machine without accelerators, container sizes (CPU quota, memory)
// stand in for accelerator types; on a Slurm cluster a type is a
// partition (args: [--partition, gpu]).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/files.h"
#include "core/status.h"
#include "core/units.h"
#include "sched/problem.h"

namespace hydrozoa::sched {

struct PoolType {
  std::string name;
  int count = 1;                      // workers of this type
  std::string launcher = "container";  // local | container | slurm (hydrozoa train --launcher)
  std::optional<double> cpu_limit;     // vCPUs per worker (containers)
  std::optional<Bytes> memory_limit;   // per worker (containers)
  double price = 0;                    // USD per worker-hour (on-demand)
  std::vector<std::string> args;       // more `hydrozoa train` flags for this type
  // The `hydrozoa train` flags that put a job's workers on this type.
  std::vector<std::string> trainFlags() const;
  // Relative speed for a job not yet measured here (NOTE [Throughput
  // estimates], scheduler.cc): its CPU quota, 1 without one.
  double speedHint() const { return cpu_limit.value_or(1.0); }
};

struct ClusterConfig {
  std::string name = "cluster";
  std::vector<PoolType> types;
  std::string policy = "max_min_fairness";
  Seconds round = 360;           // Gavel's 6 minutes
  std::string state_dir;         // "": defaultStateDir()
  int port = 0;                  // the API and status page on 127.0.0.1; 0: any free port
  double budget = -1;            // USD for the pool's jobs (min_makespan_budget); < 0: none
  // Workers the allocation leaves free in a round take jobs still waiting
  // (sched::RoundMechanism::fillIdle; as the simulator, `simulate
  // --no-fill-idle` its opposite). Never under a budget.
  bool fill_idle = true;
  // Policy hierarchical: the entities jobs are submitted to (submit --entity),
  // each with its weight and fairness or FIFO among its jobs.
  std::vector<Problem::Entity> entities;
};

// Every field checked; errors name the file, the field and the fix.
Result<ClusterConfig> parseClusterConfig(const Json& j, const std::string& origin);
Result<ClusterConfig> loadClusterConfig(const std::string& path);

// $HYDROZOA_CLUSTER, else ~/.hydrozoa/cluster: where `serve` keeps its
// state and `submit`, `jobs` and `cancel` find it.
std::string defaultStateDir();

}  // namespace hydrozoa::sched
