// `hydrozoa plan`'s flags and what its planners share (cmd_plan.cc: the
// search and its schedules; cmd_plan_pipedream.cc: --planner pipedream).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "profile/profile.h"

namespace hydrozoa::cli {

struct PlanArgs {
  std::string profile, model, device, platform = "aci", accelerator, output = "plan.json";
  std::vector<std::string> model_options;
  std::string workers, memory, bandwidth, global_batch, objective = "fastest";
  std::string data_parallel, stages, microbatch_size, microbatches, partition;
  std::string microbatch_sizes, optimizer = "sgd_momentum", max_microbatches = "64", graph_batch_size = "1";
  std::string alpha, beta, latency, host_cores, threads, schedule = "gpipe", chunks = "2";
  // Tensor parallelism: the pin, the workers that share a fast link (default:
  // all), that link's bandwidth (default: --bandwidth), scatter/gather off.
  std::string tensor_parallel, tensor_link_workers, tensor_bandwidth;
  bool scatter_gather = false;
  bool all_strategies = false;
  bool recompute = false;
  // --planner pipedream; --planner funcpipe
  std::string planner = "hydrozoa", machines, activation_compression, merge_layers = "100", frontier_point;
  bool straight_pipeline = false, fewer_machines = false;
  bool output_given = false;  // -o on the command line
  bool schedule_given = false;  // --schedule on the command line
  bool shared_memory = false;
};

// A number from 0 to `most` (NaN, inf and text refused), naming `flag` in the error.
Result<double> nonNegativeNumber(const std::string& text, const std::string& flag, double most);

// The profile to plan from: --profile's file (JSON or graph.txt), or one
// predicted for --model on --device at powers of two up to the global batch.
Result<profile::Profile> obtainProfile(const PlanArgs& a, const std::optional<std::int64_t>& globalBatch);

// "4,4" or "10GB/s,1GB/s": one value per level, the lowest first.
std::vector<std::string> splitList(const std::string& text);

// --planner pipedream: PipeDream's hierarchical DP, printed, and with -o its plan.
Status runPipeDream(const PlanArgs& a, bool json);
// --planner funcpipe: FuncPipe's co-optimiser on a function platform, its frontier printed.
Status runFuncPipe(const PlanArgs& a, bool json);

}  // namespace hydrozoa::cli
