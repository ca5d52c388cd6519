// Pricing catalogs and right-sizing (Hydrozoa §3.1, §4.3; docs/plan.md).
//
// A catalog is a YAML data file (data/pricing/*.yaml, or a user's own) that
// describes one platform: serverless containers priced per vCPU, GB and
// accelerator (ACI); functions priced per GB (Lambda); or VM instance types
// priced per hour (Azure, AWS). rightSize() turns what a worker needs into
// the cheapest resource the platform sells and its price.
//
// Thread-safety: values and pure functions.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/units.h"

namespace hydrozoa::plan {

enum class PlatformKind { kContainer, kFunction, kVm };

struct ContainerTier {
  double vcpus = 0;
  Bytes max_memory = 0;
  Bytes host_memory = 0;  // GPU tier: host RAM beyond the worker's parameters
  UsdPerHour vcpu_per_hour = 0;
  UsdPerHour memory_gb_per_hour = 0;
  std::vector<std::pair<std::string, UsdPerHour>> accelerators;  // name -> $/h each
};

struct VmInstance {
  std::string name;
  std::string accelerator;  // empty: CPU-only
  int accelerators = 0;
  double vcpus = 0;
  Bytes memory = 0;
  UsdPerHour per_hour = 0;
  UsdPerHour spot_per_hour = 0;  // on the spot market (Gavel ch. 6); 0: not sold there
};

struct Catalog {
  std::string name, description, billing;
  PlatformKind kind = PlatformKind::kContainer;
  BytesPerSecond network_bandwidth = 0;
  Bytes memory_increment = kGB;
  double memory_margin = 0.1;  // fraction added to planned memory
  // Containers:
  std::optional<ContainerTier> cpu, gpu;
  // Functions:
  Bytes min_memory = 0, max_memory = 0;
  UsdPerHour memory_gb_per_hour = 0;
  double vcpus_per_gb = 0;
  // The memory sizes FuncPipe's planner chooses among (`tiers:`, ascending;
  // absent: FuncPipe's eight from 512 MB to 10 GB); it uses those from
  // min_memory to max_memory (functionTiers),
  // and the latency of one access to the storage channel (absent: none
  // given; the planner then asks for --latency).
  std::vector<Bytes> tiers;
  std::optional<Seconds> storage_latency;
  Usd request_fee = 0;  // per invocation (AWS Lambda: $0.20 per million)
  // A function's cold start when the job gives none (cluster.start_delay's
  // syntax, "uniform 1s 3s"; parsed where it is used: cluster/job_spec.h).
  std::string cold_start;
  // VMs:
  std::vector<VmInstance> instances;
};

// A function catalog's tiers from min_memory to max_memory; an error naming
// the catalog when none is.
Result<std::vector<Bytes>> functionTiers(const Catalog& catalog);

// Loads a catalog: a bare name ("aci") from the data directory, or a path.
Result<Catalog> loadCatalog(const std::string& nameOrPath);
// The same for a catalog's YAML text; errors name `origin`. Every count,
// size and price has a range (a price at most $1e9 per hour, vCPUs above 0 to
// 65,536, sizes to kMaxBytes); a value outside it is refused naming the field.
Result<Catalog> catalogFromYaml(const std::string& text, const std::string& origin);

// What one worker needs.
struct WorkerNeeds {
  Bytes memory = 0;           // memory the worker's stage needs (device memory on GPUs)
  Bytes parameter_bytes = 0;  // of its stage (host copy on GPU workers)
  std::string accelerator;    // "" for a CPU worker, else "k80", "v100", ...
};

// What the platform gives it.
struct WorkerSpec {
  bool feasible = false;
  std::string reason;       // why not, when infeasible
  std::string description;  // "container 4 vCPU, 6 GB, 1x k80"
  double vcpus = 0;
  Bytes memory = 0;         // host memory bought
  std::string accelerator;
  std::string instance;     // VM instance type
  int workers_per_instance = 1;
  UsdPerHour cost_per_hour = 0;  // this worker's share
};

WorkerSpec rightSize(const Catalog& catalog, const WorkerNeeds& needs);

// Most memory one worker can have on this platform for this accelerator
// (CPU workers: their own RAM; GPU workers: unbounded here, the device limits).
std::optional<Bytes> platformMemoryLimit(const Catalog& catalog, const std::string& accelerator);

// Total $/h of `workers` workers with these specs; VMs bill whole instances.
UsdPerHour totalCostPerHour(const Catalog& catalog, const std::vector<WorkerSpec>& specs);

}  // namespace hydrozoa::plan
