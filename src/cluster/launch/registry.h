// The launchers a job can run its workers with, by name (`cluster.launcher`,
// `--launcher`): one line each in registry.cc, so a new kind is its folder
// under launch/ and that line.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cluster/job_spec.h"
#include "cluster/launch/launcher.h"
#include "core/status.h"
#include "core/units.h"

namespace hydrozoa::cluster {

// What any launcher may take from the job; each kind builds its own options
// from it (container/: ContainerOptions).
struct LauncherContext {
  std::string executable;        // the hydrozoa binary the workers run
  BytesPerSecond bandwidth = 0;  // each worker's link, as planned
  Seconds latency = 0;           // added to each worker's link (cluster.latency)
  // The job's first generation, for a launcher that reserves resources for
  // it up front (slurm/: one allocation): its workers and the largest one.
  std::string job_name;
  int workers = 0;
  double worker_cpus = 0;
  Bytes worker_memory = 0;
  int worker_gpus = 0;
  SlurmSpec slurm;               // cluster.slurm
  // function/: the platform's catalog (cluster.platform) and the functions' time limit.
  std::string platform;
  Seconds max_duration = 900;
};

struct LauncherKind {
  std::string name;
  std::string workers_as;  // "containers": "cannot run the workers as containers: ..."
  std::function<Result<std::unique_ptr<Launcher>>(const LauncherContext&)> make;
};

const std::vector<LauncherKind>& launcherKinds();
// The launcher `name`; an unknown name is an error listing the known ones,
// one that cannot start here an error saying why and what to use instead.
Result<std::unique_ptr<Launcher>> makeLauncher(const std::string& name, const LauncherContext& context);

}  // namespace hydrozoa::cluster
