#include "plan/planners/pipedream_plan.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "core/limits.h"
#include "plan/cost/round_robin.h"
#include "plan/round_robin_search.h"

namespace hydrozoa::plan {
namespace {

std::vector<int> stageReplicas(const std::vector<PipeDreamStage>& stages) {
  std::vector<int> out;
  for (const PipeDreamStage& s : stages) out.push_back(s.replicas);
  return out;
}

}  // namespace

Result<Plan> pipeDreamPlan(const PipeDreamResult& result, const PipeDreamStates& states,
                           const PipeDreamOptions& options, std::int64_t microbatch_size,
                           std::optional<std::int64_t> global_batch) {
  auto range = [](const std::vector<double>& cumulative, int i, int j) {
    if (cumulative.empty()) return 0.0;
    return cumulative[static_cast<size_t>(j)] - (i > 0 ? cumulative[static_cast<size_t>(i - 1)] : 0.0);
  };
  // The lowest level's stages; each lies within one stage of every level
  // above, whose replicas multiply its own.
  std::vector<PipeDreamStage> flat = result.levels.back();
  for (PipeDreamStage& s : flat) {
    for (size_t k = 0; k + 1 < result.levels.size(); ++k) {
      for (const PipeDreamStage& above : result.levels[k]) {
        if (above.first_layer <= s.first_layer && s.last_layer <= above.last_layer) s.replicas *= above.replicas;
      }
    }
  }
  Plan p;
  p.layer_names = states.names;
  p.schedule = ScheduleKind::kPipeDream;
  p.pipeline_stages = static_cast<int>(flat.size());
  p.data_parallel = flat.front().replicas;
  p.microbatch_size = microbatch_size;
  const std::vector<int> replicas = stageReplicas(flat);
  int workers = 0;
  for (const PipeDreamStage& s : flat) workers += s.replicas;
  // A step's microbatches must be a multiple of every stage's copies.
  const std::int64_t unit = roundRobinUnit(replicas, kMicrobatchesRange.max);
  if (unit > kMicrobatchesRange.max) {
    return invalidArgument(fmt::format("the stages are replicated {}: a step would need a multiple of more than {} "
                                       "microbatches to deal them evenly; plan with fewer machines",
                                       fmt::join(replicas, ", "), kMicrobatchesRange.max));
  }
  std::int64_t M = 0;
  if (global_batch) {
    const std::int64_t samples = unit * microbatch_size;
    if (*global_batch % samples != 0) {
      const std::int64_t below = *global_batch / samples * samples;
      return invalidArgument(fmt::format(
          "--global-batch {} is not a whole number of steps' microbatches: microbatches of {} go round-robin over "
          "stages replicated {}, so a step holds a multiple of {} microbatches ({} samples); use --global-batch {}{}",
          *global_batch, microbatch_size, fmt::join(replicas, ", "), unit, samples,
          below > 0 ? fmt::format("{} or ", below) : "", below + samples));
    }
    M = *global_batch / microbatch_size / p.data_parallel;
    if (M > kMicrobatchesRange.max) {
      return invalidArgument(fmt::format("--global-batch {} is {} microbatches of {} per input-stage copy, more than "
                                         "{}; raise --microbatch-size",
                                         *global_batch, M, microbatch_size, kMicrobatchesRange.max));
    }
  } else {
    // NOAM, then the first count every stage's copies divide.
    M = roundRobinNoam(replicas, unit);
  }
  p.num_microbatches = M;
  const std::vector<std::int64_t> inFlight = roundRobinInFlight(replicas);
  for (const PipeDreamStage& s : flat) {
    PlanStage st;
    st.first_layer = s.first_layer;
    st.last_layer = s.last_layer;
    st.replicas = s.replicas;
    const double forward = range(states.forward, s.first_layer, s.last_layer);
    st.forward_seconds = states.forward.empty() ? 0 : forward;
    st.backward_seconds = s.compute - st.forward_seconds;
    st.parameter_bytes = static_cast<Bytes>(range(states.parameters, s.first_layer, s.last_layer));
    // PipeDream's memory per machine: a weight version and the activations
    // of each microbatch in flight on it.
    const auto held = static_cast<double>(inFlight[p.stages.size()]);
    st.memory_bytes = static_cast<Bytes>(
        held * (range(states.activation, s.first_layer, s.last_layer) + range(states.parameters, s.first_layer,
                                                                                   s.last_layer)));
    p.stages.push_back(st);
  }
  p.workers = workers;
  p.bandwidth = options.levels.front().bandwidth;
  if (options.memory_limit) p.memory_limit = *options.memory_limit;
  p.iteration_seconds = p.pipeline_seconds = result.time_per_stage * static_cast<double>(p.data_parallel * M);
  p.samples_per_second =
      result.time_per_stage > 0 ? static_cast<double>(microbatch_size) / result.time_per_stage : 0;
  p.objective = "time";
  p.platform = "pipedream";
  PlanAlternative chosen;
  chosen.data_parallel = p.data_parallel;
  chosen.pipeline_stages = p.pipeline_stages;
  chosen.microbatch_size = p.microbatch_size;
  chosen.num_microbatches = p.num_microbatches;
  chosen.feasible = chosen.chosen = true;
  chosen.note = "PipeDream's optimizer";
  chosen.iteration_seconds = p.iteration_seconds;
  chosen.samples_per_second = p.samples_per_second;
  for (const PlanStage& s : p.stages) chosen.max_worker_memory = std::max(chosen.max_worker_memory, s.memory_bytes);
  p.alternatives.push_back(chosen);
  return p;
}

void stageMemoryFromProfile(Plan& plan, const profile::Profile& prof, const profile::Measurement& meas) {
  const std::vector<std::int64_t> inFlight = roundRobinInFlight(plan.stageReplicas());
  for (size_t s = 0; s < plan.stages.size(); ++s) {
    PlanStage& st = plan.stages[s];
    st.memory_bytes = roundRobinStageMemory(prof, meas, st.first_layer, st.last_layer, inFlight[s]);
  }
}

Status priceStages(Plan& plan, const Catalog& catalog, const std::string& accelerator) {
  std::vector<WorkerSpec> workers;
  for (size_t s = 0; s < plan.stages.size(); ++s) {
    PlanStage& st = plan.stages[s];
    const WorkerSpec w = rightSize(catalog, {st.memory_bytes, st.parameter_bytes, accelerator});
    if (!w.feasible) {
      return invalidArgument(fmt::format("stage {} (layers {}-{}, {}): {}; plan with more machines, or another "
                                         "--platform",
                                         s, st.first_layer, st.last_layer, formatBytes(st.memory_bytes), w.reason));
    }
    st.worker = w.description;
    st.vcpus = w.vcpus;
    st.worker_memory_bytes = w.memory;
    st.accelerator = w.accelerator;
    st.cost_per_hour = w.cost_per_hour;
    for (int r = 0; r < plan.replicasOf(s); ++r) workers.push_back(w);
  }
  plan.cost_per_hour = totalCostPerHour(catalog, workers);
  plan.samples_per_dollar = plan.cost_per_hour > 0 ? plan.samples_per_second * 3600.0 / plan.cost_per_hour : 0;
  plan.platform = catalog.name;
  for (PlanAlternative& a : plan.alternatives) {
    a.cost_per_hour = plan.cost_per_hour;
    a.samples_per_dollar = plan.samples_per_dollar;
    a.max_worker_memory = 0;
    for (const PlanStage& st : plan.stages) a.max_worker_memory = std::max(a.max_worker_memory, st.memory_bytes);
  }
  return Status();
}

}  // namespace hydrozoa::plan
