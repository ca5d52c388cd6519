#include "plan/search.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "plan/cost/tensor_parallel.h"
#include "plan/nothing_fits.h"
#include "plan/partition/exact.h"
#include "plan/round_robin_search.h"
#include "plan/strategies.h"

namespace hydrozoa::plan {

Result<Objective> parseObjective(const std::string& text) {
  if (text == "fastest") return Objective::kFastest;
  if (text == "cheapest") return Objective::kCheapest;
  if (text == "samples-per-dollar" || text == "value") return Objective::kSamplesPerDollar;
  return invalidArgument(fmt::format("--objective: unknown objective \"{}\"; use fastest, cheapest or "
                                     "samples-per-dollar",
                                     text));
}

const char* objectiveName(Objective objective) {
  switch (objective) {
    case Objective::kFastest: return "fastest";
    case Objective::kCheapest: return "cheapest";
    case Objective::kSamplesPerDollar: return "samples-per-dollar";
  }
  return "?";
}

double computeScale(int workers, int threads, int hostCores) {
  if (hostCores <= 0) return 1;
  const double busy = static_cast<double>(workers) * std::max(1, threads);
  return std::max(1.0, busy / hostCores);
}

Seconds updateSeconds(const profile::LayerInfo& layer, bool stepBefore) {
  return (layer.optimizer_ms + (stepBefore ? layer.snapshot_ms : 0)) / 1e3;
}

int Candidate::workersUsed() const {
  if (stage_replicas.empty()) return data_parallel * stages * tensor_parallel;
  return std::accumulate(stage_replicas.begin(), stage_replicas.end(), 0) * tensor_parallel;
}

std::string strategyText(int dataParallel, int stages, const std::vector<int>& stageReplicas, int tensorParallel,
                         bool threeD) {
  if (!stageReplicas.empty()) {
    const std::string copies = fmt::format("{}", fmt::join(stageReplicas, "+"));
    return tensorParallel > 1 ? fmt::format("{}×t{}", copies, tensorParallel) : copies;
  }
  if (tensorParallel > 1 || threeD) return fmt::format("p{}×t{}×d{}", stages, tensorParallel, dataParallel);
  return fmt::format("{}×{}", dataParallel, stages);
}

std::string Candidate::strategy(bool threeD) const {
  return strategyText(data_parallel, stages, stage_replicas, tensor_parallel, threeD);
}

Bytes Candidate::maxWorkerMemory() const {
  Bytes most = 0;
  for (const StageDetail& d : stage_details) most = std::max(most, d.memory);
  return most;
}

namespace {

bool better(const Candidate& a, const Candidate& b, Objective objective) {
  if (a.feasible != b.feasible) return a.feasible;
  if (!a.feasible) return false;
  switch (objective) {
    case Objective::kFastest:
      if (a.samples_per_second != b.samples_per_second) return a.samples_per_second > b.samples_per_second;
      return a.cost_per_hour < b.cost_per_hour;
    case Objective::kCheapest:
      if (a.cost_per_hour != b.cost_per_hour) return a.cost_per_hour < b.cost_per_hour;
      return a.samples_per_second > b.samples_per_second;
    case Objective::kSamplesPerDollar:
      if (a.samples_per_dollar != b.samples_per_dollar) return a.samples_per_dollar > b.samples_per_dollar;
      return a.samples_per_second > b.samples_per_second;
  }
  return false;
}

std::string limitText(const std::optional<Bytes>& limit) { return limit ? formatBytes(*limit) : "unlimited memory"; }

// The search of one tensor-parallel degree t: `profile` is what one rank of
// a t-way group sees (cost/tensor_parallel.h; the profile itself at t = 1),
// and every strategy A×B runs on A·B·t workers.
class Searcher {
 public:
  Searcher(const profile::Profile& profile, const Catalog& catalog, const SearchOptions& o, Partitioner& partitioner,
           int t = 1, const TensorModel* tensorModel = nullptr)
      : profile_(profile), catalog_(catalog), o_(o), partitioner_(partitioner), t_(t), tensor_(tensorModel) {
    HZ_CHECK(t == 1 || tensorModel != nullptr);
    limit_ = o.memory_limit;
    if (auto platform = platformMemoryLimit(catalog, o.accelerator)) {
      limit_ = limit_ ? std::min(*limit_, *platform) : *platform;
    }
  }

  const std::optional<Bytes>& limit() const { return limit_; }

  Candidate evaluate(int A, int B, const profile::Measurement& meas, std::int64_t M) {
    Candidate c;
    c.data_parallel = A;
    c.stages = B;
    c.tensor_parallel = t_;
    c.microbatch_size = meas.microbatch_size;
    c.microbatches = M;
    // Interleaved: the model is cut into B·v pieces, stage s holding pieces
    // s, s + B, ... (cost/interleaved.h); otherwise v = 1.
    const int v = chunksOf(o_.schedule, o_.chunks);
    // Each stage runs on A·t workers at once (its copies, each a tensor group).
    const int groupWorkers = A * t_;
    const double shareScale = computeScale(groupWorkers * B, o_.threads, o_.host_cores);
    PartitionProblem problem;
    problem.costs = chainCosts(profile_, meas, o_.bandwidth, o_.latency + o_.transfer_latency, v > 1);
    // The tensor group's allreduces are part of the passes that issue them
    // (and run again with a recomputed forward pass); their α and β, CPU
    // work, scale on a shared host as the data-parallel allreduce's do (NOTE
    // [Allreduce on a shared host]). (The split profile's measurement: its
    // boundary activations are the unsplit one's.)
    std::vector<Seconds> tensorSeconds;
    if (t_ > 1) {
      tensorSeconds = addTensorParallelCosts(problem.costs, *tensor_, meas, tensorLink(shareScale),
                                             {o_.bandwidth, o_.latency + o_.transfer_latency, o_.scatter_gather});
    }
    if (o_.recompute) {  // every backward pass runs its forward pass again first
      for (int i = 0; i < problem.costs.numLayers(); ++i) problem.costs.backward[i] += problem.costs.forward[i];
    }
    const bool fullHost = o_.host_cores > 0 && groupWorkers * B * std::max(1, o_.threads) >= o_.host_cores;
    // Before the shared host's scaling; with the messages' CPU on the passes
    // that send and receive them (not in the partitioner's choice).
    ChainCosts ownCores = problem.costs;
    if (o_.message_cpu) addMessageCpu(ownCores, meas, *o_.message_cpu, fullHost);
    const HostShare host{o_.host_cores, groupWorkers, o_.threads, o_.busy_slowdown};
    // Every stage computing at once: the host's cores shared and slowing
    // each other (NOTE [Compute beside busy cores], cost/pipeline.cc). The
    // allreduce's fits were measured with the probe's workers all busy, so
    // they scale by the sharing alone.
    c.compute_scale = host.scale(B);
    for (auto* times : {&problem.costs.forward, &problem.costs.backward}) {
      for (Seconds& t : *times) t *= c.compute_scale;
    }
    problem.microbatches = M;
    const int pieces = B * v;
    // The first stage holds the most microbatches' activations; every piece
    // is partitioned within that (exact for GPipe, a bound for the others).
    problem.stashed = stashedMicrobatches(o_.schedule, 0, B, M, v);
    // Replicated pipelines keep each stage's state from before its last
    // update for recovery: a copy in memory, and copying it each step.
    // (Not under 2bw: docs/schedules.md, "2bw".)
    const bool stepBefore = o_.recovery_copies && A > 1 && B > 1 && !asynchronous(o_.schedule);
    // 2bw's two weight versions are working copies besides the optimizer's
    // (runtime/worker/stage_setup.cc).
    // (pipedream: stage 0's p, every stage bounded by it.)
    const int workingCopies = weightVersions(o_.schedule, 0, B) > 1 ? weightVersions(o_.schedule, 0, B) : 0;
    problem.memory = memoryCosts(profile_, meas, stepBefore, o_.data_bytes, o_.shared_memory && A > 1, workingCopies);
    problem.memory->recompute = o_.recompute;
    problem.memory_limit = limit_;
    const int L = static_cast<int>(profile_.numLayers());
    if (pieces > L) {
      c.reason = fmt::format("{} layers cannot be cut into {} stages × {} chunks", L, B, v);
      return c;
    }
    if (v > 1 && (B < 2 || M % B != 0)) {
      c.reason = B < 2 ? "the interleaved schedule needs at least 2 stages"
                       : fmt::format("the interleaved schedule needs the microbatches ({}) to be a multiple of the {} "
                                     "stages",
                                     M, B);
      return c;
    }
    if (o_.schedule == ScheduleKind::kTwoBW && M < B) {
      c.reason = fmt::format("the {} schedule needs at least as many microbatches ({}) as stages ({})",
                             scheduleName(o_.schedule), M, B);
      return c;
    }
    if (o_.partition) {
      c.partition = *o_.partition;
    } else {
      const PartitionResult r = partitioner_.partitionInto(problem, pieces);
      if (!r.feasible) {
        c.reason = fmt::format("no {}-{} split fits in {} with {} of {}", pieces, v > 1 ? "chunk" : "stage",
                               limitText(limit_), countOf(M, "microbatch", "microbatches"), meas.microbatch_size);
        c.memory_bound = true;
        return c;
      }
      c.partition = r.partition;
      c.partition_gap = r.proven_gap;
    }
    // Stage s's layer ranges: its pieces s, s + B, ...
    auto rangesOf = [&](int s) {
      std::vector<LayerRange> ranges;
      for (int piece = s; piece < pieces; piece += B) {
        ranges.push_back({c.partition.first[piece], c.partition.lastLayer(piece, L)});
      }
      return ranges;
    };
    // The partition is chosen with every time scaled (all stages computing at
    // once); its time comes from the schedule on the shared host. There,
    // what each stage computes after its last backward pass (the sum through
    // shared memory, the update) shares the cores with the stages still
    // draining, so the simulation runs it too; a ring allreduce's helper
    // threads are costed apart (NOTE [Allreduce on a shared host]).
    // Per stage: its layers' parameter bytes (its allreduce's buckets) and
    // its update on a core of its own.
    std::vector<std::vector<Bytes>> stageBytes(B);
    std::vector<Seconds> stageUpdate(B, 0);
    for (int s = 0; s < B; ++s) {
      for (const LayerRange& range : rangesOf(s)) {
        for (int i = range.first; i <= range.last; ++i) {
          stageBytes[s].push_back(profile_.layers[i].parameter_bytes);
          stageUpdate[s] += updateSeconds(profile_.layers[i], stepBefore);
        }
      }
    }
    // (An asynchronous schedule's steady state waits for the whole tail.)
    const bool tailsShared = host.oversubscribed(B) && (A == 1 || o_.shared_memory) && !asynchronous(o_.schedule);
    if (tailsShared) {
      std::vector<StageTail> tails(B);
      for (int s = 0; s < B; ++s) {
        tails[s].update = stageUpdate[s];
        if (A > 1) tails[s].allreduce = sharedMemoryAllreduce(stageBytes[s], 0, A, *o_.shared_memory).total;
      }
      c.pipeline = simulatedPipelineTime(ownCores, c.partition, M, host, tails, o_.schedule, v);
    } else {
      c.pipeline = pipelineTime(ownCores, c.partition, M, host, o_.schedule, v);
    }
    std::vector<WorkerSpec> workers;
    Seconds tail = 0;
    for (int s = 0; s < B; ++s) {
      // Stage s's last backward pass ends this long before the pipeline does.
      const Seconds drain = c.pipeline.drain[static_cast<size_t>(s)];
      StageDetail d;
      const std::vector<LayerRange> ranges = rangesOf(s);
      d.first_layer = ranges.front().first;
      d.last_layer = ranges.front().last;
      if (v > 1) d.chunks = ranges;
      const std::vector<Bytes>& layerBytes = stageBytes[s];  // per layer of the stage, for its allreduce
      std::vector<Seconds> layerBackward;
      // Each chunk's state and, per chunk, the most microbatches its order
      // stashes; the worker's runtime once.
      const std::vector<std::int64_t> stash = chunkStashPeaks(o_.schedule, s, B, M, v);
      Seconds tensorPerMicrobatch = 0;
      for (size_t chunk = 0; chunk < ranges.size(); ++chunk) {
        for (int i = ranges[chunk].first; i <= ranges[chunk].last; ++i) {
          if (!tensorSeconds.empty()) tensorPerMicrobatch += tensorSeconds[i];
          d.forward += problem.costs.forward[i];
          d.backward += problem.costs.backward[i];
          d.parameter_bytes += profile_.layers[i].parameter_bytes;
          layerBackward.push_back(problem.costs.backward[i]);
        }
        const Bytes chunkMemory = stageMemory(*problem.memory, ranges[chunk].first, ranges[chunk].last, stash[chunk]);
        d.memory = saturatingAdd(d.memory, chunk == 0 ? chunkMemory : chunkMemory - problem.memory->runtime);
      }
      if (limit_ && d.memory > *limit_) {
        c.reason = fmt::format("stage {} (layers {}-{}) needs {}, more than {}", s, d.first_layer, d.last_layer,
                               formatBytes(d.memory), formatBytes(*limit_));
        c.memory_bound = true;
        return c;
      }
      // NOTE [Allreduce on a shared host]: α and β are the allreduce's CPU
      // work beyond the link's 1/D (copies through the kernel, the sums,
      // Gloo's threads), measured with each probe worker's compute thread
      // busy on a core of its own. When more workers than cores share the
      // host, that work gets a share of a core as their compute does, so it
      // is scaled as the compute is; the link's part (1/D, a shaped
      // container's bandwidth) and its latency are not. Measured on 2 cores
      // before this: every local 4x1 plan ran 34-98% over its prediction
      // (VGG-11 2,144 ms against 1,296), and the planner chose VGG-11's 4x1
      // over the 1x4 that was 3x faster (bench/README.md).
      AllreduceTime ar;
      if (o_.shared_memory) {
        // On the compute thread (plan/cost/allreduce.h), so scaled as the
        // compute is, and never hidden behind the backward pass: the full
        // host's rule below changes nothing for it.
        SharedMemoryCost cost = *o_.shared_memory;
        cost.seconds_per_byte *= shareScale;
        cost.seconds_per_allreduce *= shareScale;
        ar = sharedMemoryAllreduce(layerBytes, drain, A, cost);
      } else {
        ar = overlappedAllreduce(layerBytes, layerBackward, drain, A, o_.bandwidth,
                                 o_.allreduce_alpha * shareScale, o_.allreduce_beta * shareScale + o_.latency);
      }
      d.allreduce = ar.total;
      // NOTE [Allreduce on a full host]: when the plan's compute threads take
      // every core of the host, the allreduce (Gloo's threads, the kernel's
      // copies, the sums) runs on the cores the backward pass needs, so
      // overlapping it hides nothing: measured on 2 cores, VGG-11 2x1's
      // backward pass took 1.43 s against 0.6 s alone while its buckets
      // reduced (bench/README.md). Then the whole of it is charged.
      const bool ringOnFullHost = fullHost && !o_.shared_memory;
      d.allreduce_exposed = ringOnFullHost ? ar.total : ar.exposed;
      // NOTE [The update]: once its gradients are summed, each stage steps
      // its optimizer (profile's optimizer_ms; NOTE [Timing the update],
      // profile/measure.cc), on its compute thread, so scaled as the compute
      // is. A stage after the first does so while the stages before it still
      // drain their backward passes; the iteration waits for what is left.
      // Measured on 2 cores, the update was 13% of a VGG-11 step and 19% of
      // the MLP's before the planner counted it (bench/README.md). With the
      // step before kept, the copy of it comes first (snapshot_ms).
      d.update = stageUpdate[s] * c.compute_scale;
      d.tail = ringOnFullHost ? ar.total + std::max<Seconds>(0, d.update - drain)
                              : std::max<Seconds>(0, ar.after + d.update - drain);
      if (tailsShared) {  // as simulated: the allreduce, then the update, the iteration waits for what outlasts R
        const auto at = static_cast<size_t>(s);
        d.allreduce = c.pipeline.update_start[at] - (c.pipeline.total - drain);
        d.update = c.pipeline.end[at] - c.pipeline.update_start[at];
        d.tail = std::max<Seconds>(0, c.pipeline.end[at] - c.pipeline.total);
        d.allreduce_exposed = d.tail - std::min(d.tail, d.update);
      }
      d.worker = rightSize(catalog_, {d.memory, d.parameter_bytes, o_.accelerator});
      if (!d.worker.feasible) {
        c.reason = fmt::format("stage {}: {}", s, d.worker.reason);
        return c;
      }
      c.allreduce = std::max(c.allreduce, d.allreduce_exposed);
      c.tensor_communication = std::max(c.tensor_communication, tensorPerMicrobatch * static_cast<double>(M));
      tail = std::max(tail, d.tail);
      for (int r = 0; r < groupWorkers; ++r) workers.push_back(d.worker);
      c.stage_details.push_back(std::move(d));
    }
    c.update = tail - c.allreduce;  // >= 0: each stage's tail holds its exposed allreduce
    // pipedream: an allreduce and an update per microbatch, none hidden.
    if (updatePerMicrobatch(o_.schedule)) tail *= static_cast<double>(M);
    c.iteration = c.pipeline.total + tail;
    c.samples_per_second = static_cast<double>(c.globalBatch()) / c.iteration;
    c.cost_per_hour = totalCostPerHour(catalog_, workers);
    c.samples_per_dollar = c.cost_per_hour > 0 ? c.samples_per_second * 3600.0 / c.cost_per_hour : 0;
    c.bubble_fraction = bubbleFraction(c.pipeline, B);
    c.feasible = true;
    return c;
  }

  // PipeDream's 1F1B-RR: its optimizer's stages and copies for the plan's
  // workers (planners/pipedream_dp.h), costed by this search's model
  // (cost/round_robin.h), at the profiled size that does best; nullopt when
  // its plan replicates every stage alike (an A×B row already).
  std::optional<Candidate> bestRoundRobin() {
    std::optional<Candidate> best;
    for (const profile::Measurement& meas : profile_.measurements) {
      if (o_.microbatch_size && meas.microbatch_size != *o_.microbatch_size) continue;
      std::optional<Candidate> c = roundRobinCandidate(profile_, catalog_, o_, limit_, meas);
      if (c && (!best || better(*c, *best, o_.objective))) best = std::move(c);
    }
    return best;
  }

  // The best (m, M) for strategy A×B, or an infeasible row saying why.
  Candidate bestFor(int A, int B) {
    Candidate best;
    best.data_parallel = A;
    best.stages = B;
    best.reason = "no profiled microbatch size fits the constraints";
    bool any = false;
    for (const profile::Measurement& meas : profile_.measurements) {
      const std::int64_t m = meas.microbatch_size;
      if (o_.microbatch_size && m != *o_.microbatch_size) continue;
      Candidate c;
      if (o_.global_batch) {
        const std::int64_t perReplica = *o_.global_batch / A;
        if (perReplica % m != 0) continue;
        const std::int64_t M = perReplica / m;
        if (o_.microbatches && M != *o_.microbatches) continue;
        c = evaluate(A, B, meas, M);
      } else if (o_.microbatches) {
        c = evaluate(A, B, meas, *o_.microbatches);
      } else {
        c = largestFitting(A, B, meas);
      }
      if (!any || better(c, best, o_.objective)) {
        best = c;
        any = true;
      }
    }
    return best;
  }

 private:
  // GPipe keeps M microbatches of activations: the largest M that fits
  // (binary search; memory grows with M, under 1F1B up to M = stages).
  // The interleaved schedule runs multiples of B only: the search is over
  // M / B then.
  Candidate largestFitting(int A, int B, const profile::Measurement& meas) {
    const std::int64_t unit = chunksOf(o_.schedule, o_.chunks) > 1 ? B : 1;
    // (2bw needs at least B microbatches.)
    const std::int64_t least = o_.schedule == ScheduleKind::kTwoBW ? std::max<std::int64_t>(1, B / unit) : 1;
    Candidate lowest = evaluate(A, B, meas, least * unit);
    if (!lowest.feasible) return lowest;
    std::int64_t lo = least, hi = std::max<std::int64_t>(least, o_.max_microbatches / unit);
    Candidate best = lowest;
    Candidate top = evaluate(A, B, meas, hi * unit);
    if (top.feasible) return top;
    while (hi - lo > 1) {
      const std::int64_t mid = lo + (hi - lo) / 2;
      Candidate c = evaluate(A, B, meas, mid * unit);
      if (c.feasible) {
        lo = mid;
        best = std::move(c);
      } else {
        hi = mid;
      }
    }
    return best;
  }

  // The tensor group's link: the fast one when the group fits in the
  // workers that share it, else the workers' (NOTE [Allreduce on a shared
  // host] for `shareScale`).
  TensorLink tensorLink(double shareScale) const {
    TensorLink link;
    link.t = t_;
    const bool fast = t_ <= o_.tensor_link_workers && o_.tensor_bandwidth > 0;
    link.bandwidth = fast ? o_.tensor_bandwidth : o_.bandwidth;
    link.alpha = o_.allreduce_alpha * shareScale;
    link.beta = o_.allreduce_beta * shareScale + o_.latency;
    return link;
  }

  const profile::Profile& profile_;
  const Catalog& catalog_;
  const SearchOptions& o_;
  Partitioner& partitioner_;
  const int t_;
  const TensorModel* tensor_;
  std::optional<Bytes> limit_;
};

}  // namespace

Result<SearchResult> searchPlan(const profile::Profile& profile, const Catalog& catalog, const SearchOptions& o,
                                Partitioner* partitioner) {
  const int L = static_cast<int>(profile.numLayers());
  // A count outside its range (SearchOptions comes from flags and job specs).
  auto outOfRange = [](const char* flag, std::optional<std::int64_t> v, Range range) -> std::optional<Status> {
    if (!v || inRange(*v, range)) return std::nullopt;
    return invalidArgument(fmt::format("{}: {} is out of range; expected {}", flag, *v, describeRange(range)));
  };
  for (const auto& bad : {outOfRange("--workers", o.workers, kWorkersRange),
                          outOfRange("--data-parallel", o.data_parallel, kWorkersRange),
                          outOfRange("--microbatches", o.microbatches, kMicrobatchesRange),
                          outOfRange("--global-batch", o.global_batch, kSamplesRange)}) {
    if (bad) return *bad;
  }
  if (o.max_microbatches > kMicrobatchesRange.max) {
    return *outOfRange("--max-microbatches", o.max_microbatches, kMicrobatchesRange);
  }
  if (o.data_bytes < 0 || o.data_bytes > kMaxBytes) return invalidArgument("the dataset's size is out of range");
  if (o.max_microbatches < 1) return invalidArgument("--max-microbatches must be at least 1");
  for (const auto& meas : profile.measurements) {
    if (!memoryCostsFit(memoryCosts(profile, meas, true, o.data_bytes, true))) {
      return invalidArgument(fmt::format("the profile's sizes at microbatch size {} add up to more than 64 bits of "
                                         "bytes (or one is negative); re-measure it with `hydrozoa profile`",
                                         meas.microbatch_size));
    }
  }
  if (!(o.bandwidth > 0)) return invalidArgument("the bandwidth between workers must be positive (--bandwidth)");
  if (!(o.latency >= 0 && o.latency <= 60)) {
    return invalidArgument(fmt::format("the latency between workers must be 0 to 60 s (--latency), not {}", o.latency));
  }
  if (!(o.transfer_latency >= 0 && o.transfer_latency <= 60)) {
    return invalidArgument(
        fmt::format("the transport's latency per message must be 0 to 60 s (the profile's network.latency_s, or its "
                    "network.delivery.mean_s), not {}",
                    o.transfer_latency));
  }
  if (o.shared_memory) {
    const SharedMemoryCost& c = *o.shared_memory;
    if (!(c.seconds_per_byte >= 0 && c.seconds_per_byte < 1 && c.seconds_per_allreduce >= 0 &&
          c.seconds_per_allreduce <= 60 && c.replicas >= 2)) {
      return invalidArgument("the shared-memory allreduce's fit is out of range; re-measure it with `hydrozoa profile "
                             "--network`");
    }
  }
  if (o.microbatch_size && !profile.at(*o.microbatch_size)) {
    std::string sizes;
    for (auto s : profile.microbatchSizes()) sizes += (sizes.empty() ? "" : ", ") + std::to_string(s);
    return invalidArgument(fmt::format("--microbatch-size {} was not profiled (profiled: {}); re-run `hydrozoa profile "
                                       "--microbatch-sizes ...` with it",
                                       *o.microbatch_size, sizes));
  }
  if (o.stages && (*o.stages < 1 || *o.stages > L)) {
    return invalidArgument(fmt::format("--stages {} must be between 1 and the model's {} layers", *o.stages, L));
  }
  if (o.partition) {
    const Partition& p = *o.partition;
    if (p.first.empty() || p.first[0] != 0 || p.first.back() >= L ||
        std::adjacent_find(p.first.begin(), p.first.end(), std::greater_equal<>()) != p.first.end()) {
      return invalidArgument(fmt::format("--partition must list consecutive layer ranges covering 0-{}", L - 1));
    }
    if (o.stages && *o.stages != p.numStages()) {
      return invalidArgument(fmt::format("--partition has {} stages but --stages is {}", p.numStages(), *o.stages));
    }
  }
  if (o.data_parallel && o.global_batch && *o.global_batch % *o.data_parallel != 0) {
    return invalidArgument(fmt::format("--global-batch {} is not divisible by --data-parallel {}", *o.global_batch,
                                       *o.data_parallel));
  }

  if (!inRange(o.tensor_link_workers, kWorkersRange)) {
    return *outOfRange("--tensor-link-workers", o.tensor_link_workers, kWorkersRange);
  }
  if (!(o.tensor_bandwidth >= 0)) return invalidArgument("the tensor group's bandwidth must be positive (--tensor-bandwidth)");
  if (!(o.tensor_efficiency > 0 && o.tensor_efficiency <= 1)) {
    return invalidArgument(fmt::format("the split layers' efficiency must be above 0 and at most 1, not {}",
                                       o.tensor_efficiency));
  }

  // Tensor-parallel degrees: the pinned one, or every t that divides the
  // workers and the model's sizes up to the workers that share a fast link.
  const TensorModel tensorModel = tensorModelOf(profile);
  std::vector<int> degrees{1};
  if (o.tensor_parallel) {
    const int t = *o.tensor_parallel;
    if (auto bad = outOfRange("--tensor-parallel", t, kWorkersRange)) return *bad;
    HZ_RETURN_IF_ERROR(checkTensorParallel(tensorModel, t, o.workers));
    if (t > 1 && asynchronous(o.schedule)) {
      return invalidArgument(fmt::format("--tensor-parallel {} needs a schedule that flushes every step (gpipe, 1f1b "
                                         "or interleaved), not {}",
                                         t, scheduleName(o.schedule)));
    }
    degrees = {t};
  } else if (!asynchronous(o.schedule)) {
    degrees = validTensorParallel(tensorModel, o.workers, o.tensor_link_workers);
  }

  ExactPartitioner exact;
  SearchResult result;
  auto consider = [&](Candidate c) {
    result.considered.push_back(std::move(c));
    const Candidate& row = result.considered.back();
    if (row.feasible && (result.chosen < 0 || better(row, result.best(), o.objective))) {
      result.chosen = static_cast<int>(result.considered.size()) - 1;
    }
  };
  // What nothingFits explains when no plan is feasible: the first degree's.
  std::optional<profile::Profile> firstProfile;
  std::vector<std::pair<int, int>> firstStrategies;
  for (const int t : degrees) {
    const std::vector<std::pair<int, int>> strategies = strategiesFor(o, o.workers / t, L);
    if (strategies.empty()) {
      if (degrees.size() > 1) continue;  // another t has room for the pins
      return noStrategyFits(o, t);
    }
    const profile::Profile split = t > 1 ? tensorParallelProfile(profile, tensorModel, t, o.tensor_efficiency)
                                         : profile::Profile{};
    const profile::Profile& prof = t > 1 ? split : profile;
    Searcher searcher(prof, catalog, o, partitioner ? *partitioner : exact, t, &tensorModel);
    result.memory_limit = searcher.limit();
    if (!firstProfile) {
      firstProfile = prof;
      firstStrategies = strategies;
    }
    for (const auto& [A, B] : strategies) {
      Candidate c = searcher.bestFor(A, B);
      if (c.feasible && c.workersUsed() < o.workers) {
        c.reason = fmt::format("uses {} of {} workers", c.workersUsed(), o.workers);
      }
      consider(std::move(c));
    }
    // PipeDream's stages replicated unevenly, for its schedule when nothing
    // pins the strategy (cost/round_robin.h).
    if (t == 1 && o.schedule == ScheduleKind::kPipeDream && o.round_robin && !o.data_parallel && !o.stages &&
        !o.partition && o.workers >= 3) {
      if (std::optional<Candidate> rr = searcher.bestRoundRobin()) consider(std::move(*rr));
    }
  }
  if (result.considered.empty()) return invalidArgument(fmt::format("no strategy fits {} workers with these pins", o.workers));
  if (result.chosen < 0) {
    return nothingFits(*firstProfile, o, result.memory_limit, result.considered, firstStrategies);
  }
  return result;
}

bool betterCandidate(const Candidate& a, const Candidate& b, Objective objective) { return better(a, b, objective); }

}  // namespace hydrozoa::plan
