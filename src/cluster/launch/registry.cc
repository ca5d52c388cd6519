#include "cluster/launch/registry.h"

#include <fmt/format.h>

#include "cluster/launch/container/container_launcher.h"
#include "cluster/launch/function/function_launcher.h"
#include "cluster/launch/local/local_launcher.h"
#include "cluster/launch/slurm/slurm_launcher.h"

namespace hydrozoa::cluster {

const std::vector<LauncherKind>& launcherKinds() {
  static const std::vector<LauncherKind> kinds = {
      {"local", "processes",
       [](const LauncherContext& c) -> Result<std::unique_ptr<Launcher>> {
         return std::unique_ptr<Launcher>(new LocalLauncher(c.executable));
       }},
      {"container", "containers",
       [](const LauncherContext& c) -> Result<std::unique_ptr<Launcher>> {
         ContainerOptions o;
         o.executable = c.executable;
         o.bandwidth = c.bandwidth;
         o.latency = c.latency;
         HZ_ASSIGN_OR_RETURN(std::unique_ptr<ContainerLauncher> made, ContainerLauncher::create(o));
         return std::unique_ptr<Launcher>(std::move(made));
       }},
      {"function", "serverless functions",
       [](const LauncherContext& c) -> Result<std::unique_ptr<Launcher>> {
         FunctionOptions o;
         o.executable = c.executable;
         HZ_ASSIGN_OR_RETURN(o.catalog, plan::loadCatalog(c.platform));
         o.bandwidth = c.bandwidth;
         o.max_duration = c.max_duration;
         HZ_ASSIGN_OR_RETURN(std::unique_ptr<FunctionLauncher> made, FunctionLauncher::create(o));
         return std::unique_ptr<Launcher>(std::move(made));
       }},
      {"slurm", "Slurm job steps",
       [](const LauncherContext& c) -> Result<std::unique_ptr<Launcher>> {
         SlurmOptions o;
         o.executable = c.executable;
         o.job_name = "hydrozoa-" + c.job_name;
         o.spec = c.slurm;
         o.workers = c.workers;
         o.cpus = c.worker_cpus;
         o.memory = c.worker_memory;
         o.gpus = c.worker_gpus;
         HZ_ASSIGN_OR_RETURN(std::unique_ptr<SlurmLauncher> made, SlurmLauncher::create(o));
         return std::unique_ptr<Launcher>(std::move(made));
       }},
  };
  return kinds;
}

Result<std::unique_ptr<Launcher>> makeLauncher(const std::string& name, const LauncherContext& context) {
  std::string known;
  for (const LauncherKind& k : launcherKinds()) {
    if (k.name != name) {
      known += (known.empty() ? "" : ", ") + k.name;
      continue;
    }
    auto made = k.make(context);
    if (!made.ok() && name != "local") {
      // Its own fix where it names one (slurm/); else the launcher that always works.
      const bool local = k.name == "container" || k.name == "function";
      return Status(made.status().code(), fmt::format("cannot run the workers as {}: {}{}", k.workers_as,
                                                      made.status().message(), local ? " (use --launcher local)" : ""));
    }
    return made;
  }
  return invalidArgument(fmt::format("unknown launcher \"{}\" (known: {})", name, known));
}

}  // namespace hydrozoa::cluster
