#include "cluster/launch/registry.h"

#include <fmt/format.h>

#include "cluster/launch/container/container_launcher.h"
#include "cluster/launch/local/local_launcher.h"

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
      return unavailable(fmt::format("cannot run the workers as {}: {} (use --launcher local)", k.workers_as,
                                     made.status().message()));
    }
    return made;
  }
  return invalidArgument(fmt::format("unknown launcher \"{}\" (known: {})", name, known));
}

}  // namespace hydrozoa::cluster
