#include "cluster/launch/function/function_launcher.h"

#include <fmt/format.h>

#include <cmath>

namespace hydrozoa::cluster {

Result<Bytes> functionSize(const plan::Catalog& c, Bytes memory, const std::string& what) {
  const Bytes step = std::max<Bytes>(1, c.memory_increment);
  Bytes size = (memory + step - 1) / step * step;
  size = std::max(size, c.min_memory);
  if (c.max_memory > 0 && size > c.max_memory) {
    return infeasible(fmt::format("{} needs a function of {}, but {}'s functions have {} to {}: plan with more "
                                  "stages (smaller ones), or give a size that exists (--memory-limit)",
                                  what, formatBytes(size), c.name, formatBytes(c.min_memory),
                                  formatBytes(c.max_memory)));
  }
  return size;
}

Result<std::unique_ptr<FunctionLauncher>> FunctionLauncher::create(const FunctionOptions& options) {
  FunctionOptions o = options;
  if (o.catalog.kind != plan::PlatformKind::kFunction) {
    return invalidArgument(fmt::format("platform {} is not a function platform; use --platform lambda or alibaba-fc "
                                       "(or a catalog of kind function) with --launcher function",
                                       o.catalog.name));
  }
  if (!(o.max_duration > 0)) return invalidArgument("the functions' time limit must be positive");
  if (o.bandwidth <= 0) o.bandwidth = o.catalog.network_bandwidth;
  ContainerOptions co;
  co.executable = o.executable;
  co.bandwidth = o.bandwidth;
  co.state_dir = o.state_dir;
  co.isolated = true;
  co.shape_downloads = true;
  HZ_ASSIGN_OR_RETURN(std::unique_ptr<ContainerLauncher> c, ContainerLauncher::create(co));
  return std::unique_ptr<FunctionLauncher>(new FunctionLauncher(std::move(o), std::move(c)));
}

Status FunctionLauncher::launch(const WorkerLaunch& w) {
  WorkerLaunch f = w;
  HZ_ASSIGN_OR_RETURN(f.memory, functionSize(o_.catalog, w.memory, fmt::format("worker {}", w.id)));
  // The platform's CPU share for that memory (AWS: a vCPU per 1,769 MB).
  f.cpus = static_cast<double>(f.memory) / static_cast<double>(kGB) * o_.catalog.vcpus_per_gb;
  f.gpus = 0;
  HZ_RETURN_IF_ERROR(containers_->launch(f));
  size_[w.id] = f.memory;
  // The limit counts from the invocation's start, after its cold start.
  deadline_[w.id] = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                       std::chrono::duration<double>(w.start_delay + o_.max_duration));
  return Status();
}

UsdPerHour FunctionLauncher::hourlyRate(int id) const {
  auto it = size_.find(id);
  if (it == size_.end()) return -1;
  return static_cast<double>(it->second) / static_cast<double>(kGB) * o_.catalog.memory_gb_per_hour;
}

void FunctionLauncher::explain(WorkerExit* e) {
  deadline_.erase(e->id);
  if (timedOut_.erase(e->id) > 0) {
    e->how = fmt::format("was ended by the platform at its time limit ({}), as a function is; the coordinator starts "
                         "fresh invocations before it, so a step or a save took longer than the margin it leaves",
                         formatSeconds(o_.max_duration));
  }
}

std::vector<WorkerExit> FunctionLauncher::poll() {
  const auto now = Clock::now();
  for (const auto& [id, deadline] : deadline_) {
    if (now >= deadline && containers_->alive(id) && !timedOut_.count(id)) {
      timedOut_.insert(id);
      containers_->signal(id, /*force=*/true);
    }
  }
  std::vector<WorkerExit> out = containers_->poll();
  for (WorkerExit& e : out) explain(&e);
  return out;
}

std::vector<WorkerExit> FunctionLauncher::stopAll(Seconds grace) {
  std::vector<WorkerExit> out = containers_->stopAll(grace);
  for (WorkerExit& e : out) explain(&e);
  return out;
}

}  // namespace hydrozoa::cluster
