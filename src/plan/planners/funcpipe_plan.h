// `hydrozoa plan --planner funcpipe` (docs/functions.md): FuncPipe's
// co-optimiser (funcpipe_milp.h) on a profile and a function platform's
// catalog. For each profiled microbatch size that divides the global batch,
// the problem of plan/cost/funcpipe.h: the catalog's memory tiers (compute
// slowed where a tier has less than a vCPU per compute thread), the
// profile's layers (merged, balancing compute, down to `merge_to` when
// there are more: FuncPipe §4), the storage channel's latency and the
// functions' bandwidth. Its exact cost/time frontier (funcPipeFrontier:
// every point FuncPipe's weighted-sum sweep of §3.4.1 finds, and the
// unsupported ones between), the sizes' frontiers merged; and FuncPipe's
// recommendation (§5.1): with the cheapest point's t_c, c_c, the fastest
// point whose δ = (t_c/t − 1)/(c/c_c − 1) ≥ 0.8.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "plan/plan.h"
#include "plan/planners/funcpipe_milp.h"
#include "plan/resources.h"
#include "profile/profile.h"

namespace hydrozoa::plan {

struct FuncPipePlannerOptions {
  int workers = 0;                           // most functions at once (d × stages)
  std::int64_t global_batch = 64;            // samples per iteration
  std::optional<Seconds> latency;            // the storage channel's; else the catalog's storage_latency
  std::optional<BytesPerSecond> bandwidth;   // a function's; else the catalog's network_bandwidth
  ScatterReduce sync = ScatterReduce::kPipelined;
  int merge_to = 100;                        // layers the program sees at most
  Seconds limit = 600;                       // per program
};

struct FuncPipePoint {
  std::int64_t microbatch_size = 0, microbatches = 0;
  FuncPipeConfig config;                     // over the merged layers
  std::vector<std::pair<int, int>> stages;   // each stage's first and last layer of the profile
  std::vector<Bytes> stage_memory;           // each stage's function size
  FuncPipeCost cost;
  double samples_per_second = 0, samples_per_dollar = 0;
  double delta = 0;                          // against the cheapest (it: 0)
};

struct FuncPipePlannerResult {
  std::vector<FuncPipePoint> frontier;       // by time, fastest first; none dominated
  int cheapest = -1, recommended = -1;       // indices into frontier
  int layers = 0, merged_layers = 0;         // the profile's, and the program's
  int programs = 0;                          // MILPs solved
  Seconds solve_seconds = 0;
};

Result<FuncPipePlannerResult> planFuncPipe(const profile::Profile& profile, const Catalog& catalog,
                                           const FuncPipePlannerOptions& options);

// The frontier as a table, the recommendation marked, and a line on how it
// was found.
std::string renderFuncPipe(const FuncPipePlannerResult& result, const Catalog& catalog);

// One configuration of the frontier as a plan `hydrozoa train --plan` runs
// (`--launcher function`): its stages, replicas and microbatches, each
// stage's workers sized to its function size (vCPUs by the catalog's
// vcpus_per_gb) and priced per GB-hour, FuncPipe's predicted iteration.
Result<Plan> funcPipePlan(const FuncPipePoint& point, const profile::Profile& profile, const Catalog& catalog,
                          const FuncPipePlannerOptions& options);

}  // namespace hydrozoa::plan
