// Microbatch and hybrid-strategy search (Hydrozoa §3.3 "Selecting Size and
// Number of Microbatches", §3.4 Algorithm 1; docs/plan.md).
//
// For each strategy A×B (A data-parallel replicas of a B-stage pipeline) the
// search tries every profiled microbatch size m; the number of microbatches
// M is fixed by the global batch (A·m·M = G) or, without one, is the largest
// that fits in memory (binary search; GPipe keeps M microbatches of
// activations). Each (A, B, m, M) is partitioned optimally (ExactPartitioner
// unless another is given) and costed:
//
//   T = R + max_j X_j
//
// where X_j is the part of stage j's gradient allreduce and optimizer update
// (U_j, the profile's optimizer_ms) that outlasts the backward passes still
// draining through the stages before it (NOTE [The update], search.cc): the
// runtime reduces the stage's gradients in buckets, each
// a ring allreduce over the A replicas, 2(A−1)(|b|/(A·D) + α|b|/A + β) for a
// bucket of |b| bytes (the seed prints B where the group size A is meant),
// started as soon as the final microbatch's backward pass has made the
// bucket's gradients final (plan/cost/allreduce.h). The seed's T^(D)_j, the
// whole stage's allreduce after the pipeline, is the case of one bucket.
// Workers are right-sized and priced from a catalog. The best (m, M) per
// strategy is one row of the table; the chosen row is the best by the objective.
//
// With tensor parallelism (PTD-P, seed 003 §4.3) every strategy is searched
// again for each tensor-parallel degree t: t workers share each stage's
// transformer layers (cost/tensor_parallel.h), so A·B·t = workers, and the
// rows of every t compete.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/limits.h"
#include "core/status.h"
#include "plan/cost/allreduce.h"
#include "plan/cost/pipeline.h"
#include "plan/partition/partitioner.h"
#include "plan/resources.h"
#include "profile/profile.h"

namespace hydrozoa::plan {

enum class Objective {
  kFastest,           // most samples per second
  kCheapest,          // lowest $ per hour (then fastest)
  kSamplesPerDollar,  // most samples per dollar
};

Result<Objective> parseObjective(const std::string& text);
const char* objectiveName(Objective objective);

struct SearchOptions {
  int workers = 1;
  std::optional<Bytes> memory_limit;  // per worker; no plan exceeds it
  BytesPerSecond bandwidth = 0;       // D, between any two workers
  double allreduce_alpha = 0;         // s per byte per round (beyond 1/D)
  Seconds allreduce_beta = 0;         // s per round
  // Replicas sum through shared memory, not a ring over links: the workers
  // share one host's memory (the local launcher). Costed per bucket on the
  // compute thread (plan/cost/allreduce.h); bandwidth, α, β and latency then
  // apply to the pipeline's transfers only.
  std::optional<SharedMemoryCost> shared_memory;
  // One-way delay of every message between two workers beyond what α and β
  // were measured with (a shaped link's added latency, a remote network's):
  // each transfer between stages and each allreduce round pays it once.
  Seconds latency = 0;
  // The transport's own one-way delay per message (the network probe's
  // small-message ping-pong: profile network.latency_s): each transfer
  // between stages pays it; an allreduce round does not, its β holds it.
  Seconds transfer_latency = 0;
  // What each of those transfers takes from the cores of the workers on
  // either side (the network probe's; none: nothing beyond the link).
  std::optional<profile::MessageCpuTable> message_cpu;
  std::optional<std::int64_t> global_batch;
  std::int64_t max_microbatches = 64;  // cap of the search when there is no global batch
  Objective objective = Objective::kFastest;
  bool all_strategies = false;  // every B of Algorithm 1, not only those that use all workers
  std::string accelerator;      // right-sizing: "" for CPU workers
  // Recovery keeps each stage's state from before its last update in
  // replicated pipelines (A > 1, B > 1): one more copy of its parameters and
  // optimizer state per worker (docs/recovery.md, "The step before").
  bool recovery_copies = true;
  // The dataset a worker of the first or last stage holds in memory (it
  // reads inputs or labels); 0 when planning without data (hydrozoa plan).
  Bytes data_bytes = 0;
  // Shared host: all workers run on one machine with this many cores, each
  // with `threads` compute threads. When a plan's workers need more threads
  // than there are cores, the pipeline's schedule is simulated with the
  // stages computing at each moment sharing the cores (NOTE [A pipeline on a
  // shared host], cost/pipeline.cc) and the allreduce's and the update's
  // times are scaled by the ratio of threads to cores with every thread busy
  // (computeScale); when they take every core, the allreduce no longer hides
  // behind the backward pass (NOTE [Allreduce on a full host], search.cc);
  // 0: a core per worker thread, wherever the workers run.
  int host_cores = 0;
  int threads = 1;
  // On that host, how much slower a compute thread runs with every core
  // computing than alone (the profile's co-run slowdown; NOTE [Compute
  // beside busy cores], cost/pipeline.cc); 1: not slower.
  double busy_slowdown = 1;
  // The pipeline schedule the plan's workers run (cost/schedules.h): its
  // order sets the pipeline's time and how many microbatches' activations
  // each stage holds.
  ScheduleKind schedule = ScheduleKind::kGPipe;
  // Model chunks per stage under the interleaved schedule (v; the model is
  // cut into stages × v pieces); ignored by the others.
  int chunks = 2;
  // Recomputation (activation checkpointing) on every stage: each stage keeps
  // only its microbatches' inputs and runs each forward pass again in its
  // backward pass (cost/memory.h; the backward time grows by the forward's).
  bool recompute = false;
  // Under the pipedream schedule, also PipeDream's stages replicated
  // unevenly (1F1B-RR, cost/round_robin.h) when nothing pins the strategy.
  bool round_robin = true;
  // Tensor parallelism (Megatron's splits of transformer layers, PTD-P;
  // cost/tensor_parallel.h, docs/plan.md "Tensor parallelism"): the search
  // tries every t that divides the workers and the model's heads, hidden,
  // ffn and vocabulary, up to the workers that share a fast link
  // (Takeaway #1 of seed 003 §4.3.2); each of t's plans is a search over
  // workers / t. 1 (the default): no tensor parallelism unless pinned.
  // Only the schedules that flush (gpipe, 1f1b, interleaved) take t > 1.
  int tensor_link_workers = 1;
  // That link's bandwidth (D_t); 0: `bandwidth`. A pinned t beyond
  // tensor_link_workers spans the slower links: `bandwidth` then.
  BytesPerSecond tensor_bandwidth = 0;
  // Pipeline transfers as t ranks send them: each the whole (what the
  // runtime does today), or with the scatter/gather of §4.4.1 each 1/t, then
  // an all-gather at the receiver (a what-if: not in the runtime yet).
  bool scatter_gather = false;
  // A split layer's speed per FLOP over the unsplit layer's (1: the same).
  double tensor_efficiency = 1;
  // Pins: when set, the search keeps them fixed.
  std::optional<int> tensor_parallel;
  std::optional<int> data_parallel, stages;
  std::optional<std::int64_t> microbatch_size, microbatches;
  std::optional<Partition> partition;
};

// Layers first..last (0-based, inclusive) of the profile's chain.
struct LayerRange {
  int first = 0, last = 0;
  bool operator==(const LayerRange& o) const { return first == o.first && last == o.last; }
};

struct StageDetail {
  int first_layer = 0, last_layer = 0;  // its first chunk's, when interleaved
  std::vector<LayerRange> chunks;       // interleaved: every chunk's, in order; else empty
  Seconds forward = 0, backward = 0;  // per microbatch
  Bytes memory = 0;                   // planned per worker
  Bytes parameter_bytes = 0;
  Seconds allreduce = 0;          // the stage's buckets, one after another
  Seconds allreduce_exposed = 0;  // the part the iteration waits for
  Seconds update = 0;             // the optimizer's step over the stage's parameters
  Seconds tail = 0;               // how long the iteration waits for the allreduce and the update
  WorkerSpec worker;
};

struct Candidate {
  int data_parallel = 0, stages = 0;
  int tensor_parallel = 1;  // t: workers sharing each stage's split layers
  // 1F1B-RR (pipedream): each stage's own copies, the first data_parallel;
  // empty: every stage has data_parallel (cost/round_robin.h).
  std::vector<int> stage_replicas;
  bool feasible = false;
  bool memory_bound = false;  // infeasible because no split fits the memory limit
  std::string reason;         // why infeasible, or a note ("uses 15 of 16 workers")
  std::int64_t microbatch_size = 0, microbatches = 0;
  Partition partition;
  PipelineTime pipeline;
  Seconds allreduce = 0;  // max over stages of the exposed allreduce
  Seconds update = 0;     // the rest of the longest tail: the updates (NOTE [The update], search.cc)
  Seconds iteration = 0;  // T = pipeline + allreduce + update
  double samples_per_second = 0;
  UsdPerHour cost_per_hour = 0;
  double samples_per_dollar = 0;
  double bubble_fraction = 0;
  Seconds partition_gap = 0;  // proven optimality gap of the partition (0: optimal)
  double compute_scale = 1;   // its workers' compute times over the profile's (shared host)
  // The tensor group's allreduces an iteration of the busiest stage waits
  // for (M microbatches' forward and backward passes; 0 at t = 1).
  Seconds tensor_communication = 0;
  std::vector<StageDetail> stage_details;

  // Saturates (never overflows) for hostile pins; searchPlan's pins keep it exact.
  std::int64_t globalBatch() const {
    return saturatingMul(saturatingMul(data_parallel, microbatch_size), microbatches);
  }
  int workersUsed() const;  // A·B·t (uneven: Σ copies)
  std::string strategy(bool threeD = false) const;  // strategyText
  Bytes maxWorkerMemory() const;  // the largest stage's planned memory
};

// A strategy as the tables show it: "2×3" (A copies of B stages), or with
// each stage's own copies "3+1+1"; with tensor parallelism (t > 1, or
// `threeD` for a table that has such rows) "p3×t2×d2" (seed 003's p, t, d).
std::string strategyText(int dataParallel, int stages, const std::vector<int>& stageReplicas,
                         int tensorParallel = 1, bool threeD = false);

// Whether `a` is the better plan than `b` for `objective` (feasible first).
bool betterCandidate(const Candidate& a, const Candidate& b, Objective objective);

struct SearchResult {
  std::vector<Candidate> considered;  // one row per strategy
  int chosen = -1;                    // index into considered
  std::optional<Bytes> memory_limit;  // per worker as applied: the user's, capped by the platform
  const Candidate& best() const { return considered.at(static_cast<size_t>(chosen)); }
};

// How much slower each worker computes when `workers` × `threads` compute
// threads share `hostCores` cores (1 when they fit, or hostCores is 0):
// processor sharing, every thread busy. Measured on 2 cores, a 4-stage MLP
// pipeline took 1.99× its unshared prediction and a 3-stage one 1.71×
// (docs/plan.md, "Shared hosts").
double computeScale(int workers, int threads, int hostCores);

// A layer's update, and the copy of its state before it when `stepBefore`
// (NOTE [Timing the update], profile/measure.cc), in seconds.
Seconds updateSeconds(const profile::LayerInfo& layer, bool stepBefore);

// Per-layer costs of `profile` at microbatch size m, bandwidth D and a
// message latency: the cut after layer i costs latency + output_i / D.
// `afterOtherChunk`: each pass follows another chunk's (interleaved), so its
// layers' cold times where the profile has them (NOTE [Passes after another
// chunk's], profile/measure.cc).
ChainCosts chainCosts(const profile::Profile& profile, const profile::Measurement& m, BytesPerSecond bandwidth,
                      Seconds latency = 0, bool afterOtherChunk = false);
// Charges `costs` (of `profile` at microbatch size m) with what each
// transfer's message takes from the passes on either side (ChainCosts::send,
// receive): their compute threads' part, and on a host whose cores the
// compute threads fill (`fullHost`), the other threads' part too, which then
// runs on the same cores (NOTE [What a message costs the cores],
// profile/network.cc).
void addMessageCpu(ChainCosts& costs, const profile::Measurement& m, const profile::MessageCpuTable& cpu,
                   bool fullHost);
// `stepBefore`: count recovery's copy of the state before the last update;
// `sharedSlot`: the replica's slot of the shared-memory allreduce's segment,
// one more copy of the gradients (SearchOptions::shared_memory, A > 1);
// `workingCopies`: copies of the weights the passes run on besides the
// optimizer's (2bw: 2).
MemoryCosts memoryCosts(const profile::Profile& profile, const profile::Measurement& m, bool stepBefore = false,
                        Bytes data = 0, bool sharedSlot = false, int workingCopies = 0);

// The planner's cost of the shared-memory allreduce from the network
// probe's fit; none when the probe did not time it.
std::optional<SharedMemoryCost> sharedMemoryCost(const profile::NetworkProfile& network);

// The transport's figures the network probe measured: the ring allreduce's
// α and β, the latency every transfer pays and the CPU its message takes (the bandwidth, and whether
// replicas sum through shared memory, are the caller's to decide).
void useMeasuredTransport(SearchOptions& options, const profile::NetworkProfile& network);
// `table` with what the helper threads take beyond it per message when
// messages go one at a time, as `delivery` measured (NOTE [Messages one at a
// time], profile_costs.cc).
profile::MessageCpuTable messagesOneAtATime(const profile::MessageCpuTable& table,
                                            const profile::MessageDelivery& delivery);

// Runs the search. Errors: inconsistent pins, or nothing feasible (the
// message says what would fit: more memory, more workers, smaller batches).
// `partitioner` may be null (ExactPartitioner).
Result<SearchResult> searchPlan(const profile::Profile& profile, const Catalog& catalog, const SearchOptions& options,
                                Partitioner* partitioner = nullptr);

}  // namespace hydrozoa::plan
