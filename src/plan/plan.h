// Plan: the planner's decision as a plain value, its JSON form plan.json
// (schema "hydrozoa.plan/1", docs/formats.md) and its table.
//
// plan.json holds the chosen strategy, microbatches, stages (0-based layer
// ranges into the profile's chain, with the memory each needs and the worker
// it was right-sized to), the predicted time and money, the inputs it was
// planned for, and every alternative considered. The runtime executes it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/files.h"
#include "core/status.h"
#include "core/units.h"
#include "plan/search.h"
#include "profile/profile.h"

namespace hydrozoa::plan {

inline constexpr const char* kPlanSchema = "hydrozoa.plan/1";

struct PlanStage {
  int first_layer = 0, last_layer = 0;  // its first chunk's, when interleaved
  // Interleaved: the stage's chunks in order (chunk c of stage s is virtual
  // stage c·p + s of the model's p·v consecutive pieces); else empty.
  std::vector<LayerRange> chunks;
  // The layers the stage holds: its chunks, or [first_layer, last_layer].
  std::vector<LayerRange> layerRanges() const {
    return chunks.empty() ? std::vector<LayerRange>{{first_layer, last_layer}} : chunks;
  }
  // Those ranges as the tables print them: "0-3", or "0-0 + 2-2" (chunks).
  std::string layersText() const;
  // Its copies (plan.json "replicas"); 0: the plan's data_parallel. Stages
  // replicated unevenly (PipeDream's 1F1B-RR) take the step's microbatches
  // round-robin: NOTE [Unevenly replicated stages] in plan.cc.
  int replicas = 0;
  Bytes memory_bytes = 0;
  Bytes parameter_bytes = 0;
  Seconds forward_seconds = 0, backward_seconds = 0;
  Seconds allreduce_seconds = 0;          // its buckets' allreduces, one after another
  Seconds allreduce_exposed_seconds = 0;  // the part that outlasts the backward pass
  Seconds update_seconds = 0;             // the optimizer's step (NOTE [The update], search.cc)
  std::string worker;  // "4 vCPU, 6.00 GB, 1x k80"
  double vcpus = 0;
  Bytes worker_memory_bytes = 0;
  std::string accelerator;
  UsdPerHour cost_per_hour = 0;  // one worker of this stage
};

struct PlanAlternative {
  int data_parallel = 0, pipeline_stages = 0;
  int tensor_parallel = 1;
  std::vector<int> stage_replicas;  // stages replicated unevenly (1F1B-RR); empty: data_parallel each
  std::int64_t microbatch_size = 0, num_microbatches = 0;
  bool feasible = false;
  bool chosen = false;
  std::string note;  // infeasibility reason or remark
  Seconds iteration_seconds = 0;
  double samples_per_second = 0;
  UsdPerHour cost_per_hour = 0;
  double samples_per_dollar = 0;
  Bytes max_worker_memory = 0;

  std::string strategy(bool threeD = false) const;  // strategyText (search.h)
};

struct Plan {
  // What was planned.
  std::string model;
  std::vector<std::pair<std::string, std::string>> model_options;
  std::string profile_source, device;
  std::vector<std::string> layer_names;
  // The decision.
  int data_parallel = 1, pipeline_stages = 1;
  // t: workers sharing each stage's transformer layers, Megatron's splits
  // (plan.json strategy.tensor_parallel; absent: 1; docs/plan.md "Tensor
  // parallelism"). Each stage's figures below are one of its t workers'.
  int tensor_parallel = 1;
  // Stage boundaries sent 1/t from each slice and all-gathered by the
  // receiving group (strategy.scatter_gather; absent: false). Only with
  // tensor_parallel > 1: makePlan and planFromJson keep that so.
  bool scatter_gather = false;
  std::int64_t microbatch_size = 1, num_microbatches = 1;
  ScheduleKind schedule = ScheduleKind::kGPipe;  // plan.json "schedule" (absent: gpipe)
  int chunks = 1;  // model chunks per stage (plan.json "chunks"; > 1 only interleaved)
  bool recompute = false;  // activations recomputed in the backward pass (plan.json "recompute")
  std::vector<PlanStage> stages;
  // Predictions.
  // iteration = pipeline + allreduce + update (the update: what the iteration waits for beyond the allreduce)
  Seconds iteration_seconds = 0, pipeline_seconds = 0, allreduce_seconds = 0, update_seconds = 0;
  double samples_per_second = 0;
  UsdPerHour cost_per_hour = 0;
  double samples_per_dollar = 0;
  double bubble_fraction = 0;
  Seconds partition_gap_seconds = 0;
  double compute_scale = 1;  // the profile's compute times × this (workers sharing a host's cores)
  // Inputs.
  int workers = 0;
  int host_cores = 0, threads = 1;  // the shared host's cores (0: a core per worker thread)
  double busy_slowdown = 1;          // a thread's compute with every core busy over alone (SearchOptions)
  std::optional<Bytes> memory_limit;
  BytesPerSecond bandwidth = 0;
  double allreduce_alpha = 0;
  Seconds allreduce_beta = 0;
  Seconds latency = 0;  // per message, beyond α and β (SearchOptions::latency)
  Seconds transfer_latency = 0;  // the transport's per message, paid by transfers (SearchOptions::transfer_latency)
  std::optional<SharedMemoryCost> shared_memory;  // replicas summed through shared memory (SearchOptions)
  std::optional<std::int64_t> global_batch_requested;
  std::string objective, platform;
  // Everything considered, the chosen row included.
  std::vector<PlanAlternative> alternatives;

  std::int64_t globalBatch() const { return data_parallel * microbatch_size * num_microbatches; }
  // Stage s's copies; whether every stage has data_parallel of them; the
  // workers all stages take.
  int replicasOf(size_t s) const { return stages[s].replicas > 0 ? stages[s].replicas : data_parallel; }
  std::vector<int> stageReplicas() const;  // every stage's replicasOf
  bool evenlyReplicated() const;
  int workersUsed() const;  // every stage's copies, times tensor_parallel
  // The model's pieces in order: the stages' layer ranges, or interleaved,
  // chunk 0 of every stage, then chunk 1, ...
  std::vector<LayerRange> pieces() const;
};

// The rank of replica `replica` of stage `stage` when stage s has
// `replicas[s]` of them: replica-major, (replica 0 of every stage, then
// replica 1 of the stages that have one, ...); with every stage alike,
// replica · stages + stage.
int workerRank(const std::vector<int>& replicas, int stage, int replica);

// NOTE [Ranks of a 3D grid]
// With tensor parallelism (t > 1, every stage replicated alike) a worker is
// (replica, stage, tensor rank) and its rank is
//   ((replica · stages) + stage) · t + tensor_rank
// = workerRank(replicas, stage, replica) · t + tensor_rank: a tensor group's
// t workers hold consecutive ranks (placed together, on the fastest link),
// and at t = 1 the ranks are workerRank's.
int workerRank(const std::vector<int>& replicas, int stage, int replica, int tensorParallel, int tensorRank);

// A plan of `profile`'s model: its name, options, device, the profile's
// source and its layers' names; the strategy is the caller's to fill.
Plan planOfProfile(const profile::Profile& profile);

// Builds the plan from a search result.
Plan makePlan(const SearchResult& result, const profile::Profile& profile, const SearchOptions& options,
              const std::string& platform);

Json planToJson(const Plan& plan);
Result<Plan> planFromJson(const Json& j, const std::string& origin);
// Every count has its range (core/limits.h: strategy in kWorkersRange, their
// product (with tensor_parallel, and uneven replicas' sum × tensor_parallel) too; microbatch_size and the global batch in kSamplesRange;
// num_microbatches in kMicrobatchesRange; layer indices in kLayersRange),
// sizes are 0 to kMaxBytes and times and prices finite; anything else is an
// error naming the field, the value and the range.
Result<Plan> loadPlan(const std::string& path);
// The same for plan.json's text; errors name `origin`.
Result<Plan> parsePlan(const std::string& text, const std::string& origin);
Status savePlan(const Plan& plan, const std::string& path);

// The table `hydrozoa plan` prints: every alternative, the chosen one marked,
// then the chosen plan's stages. Strategies as p×t×d when an alternative has
// t > 1 or `threeD` (tensor parallelism was considered elsewhere).
std::string renderPlanTable(const Plan& plan, bool threeD = false);

}  // namespace hydrozoa::plan
