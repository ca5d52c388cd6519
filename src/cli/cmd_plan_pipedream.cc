// `hydrozoa plan --planner pipedream`: PipeDream's optimizer over a machine
// hierarchy (plan/planners/pipedream_dp.h), and with -o its plan for
// `hydrozoa train`.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <iostream>
#include <sstream>

#include "cli/cmd_plan.h"
#include "cli/common.h"
#include "core/units.h"
#include "plan/plan.h"
#include "plan/planners/pipedream_dp.h"
#include "plan/planners/pipedream_plan.h"
#include "plan/resources.h"

namespace hydrozoa::cli {

std::vector<std::string> splitList(const std::string& text) {
  std::vector<std::string> out;
  std::string item;
  std::istringstream in(text);
  while (std::getline(in, item, ',')) out.push_back(item);
  return out;
}

// --planner pipedream: PipeDream's hierarchical DP (plan/planners/pipedream_dp.h).
Status runPipeDream(const PlanArgs& a, bool json) {
  if (a.machines.empty()) {
    return invalidArgument("--planner pipedream needs --machines: the machines per level, the lowest first (e.g. "
                           "--machines 4, or --machines 4,4 for 4 servers of 4)");
  }
  const std::vector<std::string> machines = splitList(a.machines), bandwidths = splitList(a.bandwidth);
  if (bandwidths.size() != machines.size()) {
    return invalidArgument(fmt::format("--planner pipedream needs one --bandwidth per level of --machines ({} given "
                                       "for {} levels), e.g. --machines 4,4 --bandwidth 10GB/s,1GB/s",
                                       bandwidths.size(), machines.size()));
  }
  plan::PipeDreamOptions o;
  for (size_t i = 0; i < machines.size(); ++i) {
    plan::PipeDreamLevel level;
    HZ_ASSIGN_OR_RETURN(const std::int64_t m, parseCount(machines[i], "--machines", {1, 1024}));
    level.machines = static_cast<int>(m);
    HZ_ASSIGN_OR_RETURN(level.bandwidth, parseBandwidth(bandwidths[i], "--bandwidth"));
    if (!(level.bandwidth > 0)) return invalidArgument("--bandwidth must be positive");
    o.levels.push_back(level);
  }
  o.straight = a.straight_pipeline;
  o.fewer_machines = a.fewer_machines;
  if (!a.memory.empty()) {
    HZ_ASSIGN_OR_RETURN(Bytes limit, parseBytes(a.memory, "--memory"));
    if (limit <= 0) return invalidArgument("--memory must be positive");
    o.memory_limit = limit;
  }
  if (!a.activation_compression.empty()) {
    HZ_ASSIGN_OR_RETURN(const double r, nonNegativeNumber(a.activation_compression, "--activation-compression", 1e6));
    if (r <= 0) return invalidArgument("--activation-compression must be a positive ratio, e.g. 1 (uncompressed)");
    o.activation_compression = r;
  }
  // A graph.txt is cut where PipeDream cuts it (its antichains); any other
  // profile at the boundaries of its chain of layers.
  plan::PipeDreamStates states;
  std::string text;
  if (!a.profile.empty()) {
    HZ_ASSIGN_OR_RETURN(text, readTextFile(a.profile));
  }
  // What plan.json says of the model (-o): a graph.txt's is its file.
  std::string model = a.profile, device, source = "pipedream";
  std::vector<std::pair<std::string, std::string>> modelOptions;
  std::optional<profile::Profile> measured;  // a Hydrozoa profile's, not a graph.txt
  std::int64_t microbatchSize = 1;
  HZ_ASSIGN_OR_RETURN(const auto globalBatch, optionalCount(a.global_batch, "--global-batch", kSamplesRange));
  HZ_ASSIGN_OR_RETURN(const auto pinnedSize, optionalCount(a.microbatch_size, "--microbatch-size", kSamplesRange));
  if (profile::looksLikePipeDreamGraph(text)) {
    HZ_ASSIGN_OR_RETURN(const profile::PipeDreamGraph graph, profile::parsePipeDreamGraph(text, a.profile));
    HZ_ASSIGN_OR_RETURN(states, plan::pipeDreamStates(graph));
    HZ_ASSIGN_OR_RETURN(microbatchSize, parseCount(a.graph_batch_size, "--graph-batch-size", kSamplesRange));
  } else {
    HZ_ASSIGN_OR_RETURN(profile::Profile prof, obtainProfile(a, globalBatch));
    // The microbatch: the pinned size (measured in the profile), else its first.
    microbatchSize = prof.measurements.front().microbatch_size;
    if (pinnedSize) {
      std::vector<std::int64_t> sizes;
      for (const auto& m : prof.measurements) sizes.push_back(m.microbatch_size);
      if (std::find(sizes.begin(), sizes.end(), *pinnedSize) == sizes.end()) {
        return invalidArgument(fmt::format("--microbatch-size {}: the profile has microbatches of {} only; profile "
                                           "that size too (--microbatch-sizes)",
                                           *pinnedSize, fmt::join(sizes, ", ")));
      }
      microbatchSize = *pinnedSize;
    }
    states = plan::pipeDreamChain(prof, microbatchSize);
    model = prof.model;
    modelOptions = prof.options;
    device = prof.device;
    source = prof.source;
    measured = std::move(prof);
  }
  HZ_ASSIGN_OR_RETURN(const plan::PipeDreamResult r, plan::planPipeDream(states, o));
  if (a.output_given && a.output != "-") {
    HZ_ASSIGN_OR_RETURN(plan::Plan p, plan::pipeDreamPlan(r, states, o, microbatchSize, globalBatch));
    // From a Hydrozoa profile, workers sized and priced as Hydrozoa's own
    // plans are, by its memory model. A graph.txt names no device (PipeDream
    // profiled GPUs): its stages keep PipeDream's memory figure, unpriced.
    if (measured) {
      plan::stageMemoryFromProfile(p, *measured, *measured->at(microbatchSize));
      HZ_ASSIGN_OR_RETURN(const plan::Catalog catalog, plan::loadCatalog(a.platform));
      const bool onGpus = a.accelerator.empty() && measured->device_kind == "gpu";
      HZ_RETURN_IF_ERROR(plan::priceStages(p, catalog, onGpus ? measured->device : a.accelerator));
    }
    p.model = model;
    p.model_options = modelOptions;
    p.device = device;
    p.profile_source = source;
    if (globalBatch) p.global_batch_requested = *globalBatch;
    HZ_RETURN_IF_ERROR(plan::savePlan(p, a.output));
  }
  if (json) {
    Json levels = Json::array();
    for (const auto& level : r.levels) {
      Json stages = Json::array();
      for (const auto& s : level) {
        stages.push_back({{"first_layer", s.first_layer}, {"last_layer", s.last_layer}, {"replicas", s.replicas},
                          {"compute_seconds", s.compute}});
      }
      levels.push_back(stages);
    }
    std::cout << Json({{"planner", "pipedream"},
                       {"levels", levels},
                       {"time_per_stage_seconds", r.time_per_stage},
                       {"single_machine_seconds", r.single_machine},
                       {"data_parallel_seconds", r.data_parallel}})
                     .dump(2)
              << "\n";
    return Status();
  }
  std::cout << plan::renderPipeDream(r, o, states);
  if (a.output_given && a.output != "-") {
    std::cout << "Wrote " << a.output << " (schedule pipedream"
              << (measured ? "" : "; its workers unsized and unpriced: a graph.txt names no device") << ")\n";
  }
  return Status();
}

}  // namespace hydrozoa::cli
