#include "plan/round_robin_search.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <functional>

#include "core/limits.h"
#include "plan/cost/allreduce.h"
#include "plan/cost/memory.h"
#include "plan/cost/round_robin.h"
#include "plan/planners/pipedream_dp.h"

namespace hydrozoa::plan {

Bytes roundRobinStageMemory(const profile::Profile& prof, const profile::Measurement& meas, int first, int last,
                            std::int64_t held, Bytes data, bool sharedSlot, bool recompute) {
  MemoryCosts mem = memoryCosts(prof, meas, /*stepBefore=*/false, data, sharedSlot, held > 1 ? static_cast<int>(held) : 0);
  mem.recompute = recompute;
  return stageMemory(mem, first, last, held);
}

std::optional<Candidate> roundRobinCandidate(const profile::Profile& prof, const Catalog& catalog,
                                             const SearchOptions& o, const std::optional<Bytes>& limit,
                                             const profile::Measurement& meas) {
  // PipeDream's DP takes about L³·W² steps: past this, a search that runs
  // it at every profiled size would take seconds; the row is left out.
  constexpr double kMostSteps = 5e7;
  const auto L = static_cast<double>(prof.numLayers());
  if (L * L * L * o.workers * o.workers > kMostSteps) return std::nullopt;
  const std::int64_t m = meas.microbatch_size;
  PipeDreamOptions po;
  po.levels = {{o.workers, o.bandwidth}};
  auto dp = planPipeDream(pipeDreamChain(prof, m), po);
  if (!dp.ok()) return std::nullopt;
  const std::vector<PipeDreamStage>& stages = dp->levels.back();
  const int B = static_cast<int>(stages.size());
  Candidate c;
  c.stages = B;
  c.microbatch_size = m;
  for (const PipeDreamStage& st : stages) c.stage_replicas.push_back(st.replicas);
  if (std::adjacent_find(c.stage_replicas.begin(), c.stage_replicas.end(), std::not_equal_to<>()) ==
      c.stage_replicas.end()) {
    return std::nullopt;
  }
  const int A = c.data_parallel = c.stage_replicas.front();
  c.reason = "1F1B-RR: stages replicated unevenly (PipeDream's optimizer)";
  // A step's K = A·M microbatches, which every stage's copies divide
  // (NOTE [Unevenly replicated stages], plan.cc): the global batch's, or
  // PipeDream's NOAM raised until they do.
  const std::int64_t unit = roundRobinUnit(c.stage_replicas, kMicrobatchesRange.max);
  if (unit > kMicrobatchesRange.max) return std::nullopt;
  std::int64_t M = 0;
  if (o.global_batch) {
    if (*o.global_batch % (A * m) != 0 || (*o.global_batch / m) % unit != 0) return std::nullopt;
    M = *o.global_batch / m / A;
  } else {
    M = roundRobinNoam(c.stage_replicas, unit);
  }
  if (o.microbatches && M != *o.microbatches) return std::nullopt;
  c.microbatches = M;
  ChainCosts costs = chainCosts(prof, meas, o.bandwidth, o.latency + o.transfer_latency);
  if (o.recompute) {
    for (int i = 0; i < costs.numLayers(); ++i) costs.backward[i] += costs.forward[i];
  }
  if (o.message_cpu) {
    const bool fullHost = o.host_cores > 0 && c.workersUsed() * std::max(1, o.threads) >= o.host_cores;
    addMessageCpu(costs, meas, *o.message_cpu, fullHost);
  }
  const std::vector<std::int64_t> held = roundRobinInFlight(c.stage_replicas);
  std::vector<RoundRobinStage> rr;
  std::vector<WorkerSpec> workers;
  for (int s = 0; s < B; ++s) {
    const int first = stages[s].first_layer, last = stages[s].last_layer, r = c.stage_replicas[s];
    StageDetail d;
    d.first_layer = first;
    d.last_layer = last;
    std::vector<Bytes> bytes;
    std::vector<Seconds> backward;
    for (int i = first; i <= last; ++i) {
      d.forward += costs.forward[i];
      d.backward += costs.backward[i];
      d.parameter_bytes += prof.layers[i].parameter_bytes;
      d.update += updateSeconds(prof.layers[i], false);
      bytes.push_back(prof.layers[i].parameter_bytes);
      backward.push_back(costs.backward[i]);
    }
    if (r > 1) {
      d.allreduce = o.shared_memory ? sharedMemoryAllreduce(bytes, 0, r, *o.shared_memory).total
                                     : overlappedAllreduce(bytes, backward, 0, r, o.bandwidth, o.allreduce_alpha,
                                                           o.allreduce_beta + o.latency)
                                           .total;
    }
    d.allreduce_exposed = d.allreduce;
    d.tail = d.allreduce + d.update;
    d.memory = roundRobinStageMemory(prof, meas, first, last, held[static_cast<size_t>(s)], o.data_bytes,
                                     o.shared_memory && r > 1, o.recompute);
    if (limit && d.memory > *limit) {
      c.reason = fmt::format("1F1B-RR {}: stage {} (layers {}-{}) needs {}, more than {}", c.strategy(), s, first,
                             last, formatBytes(d.memory), formatBytes(*limit));
      c.memory_bound = true;
      return c;
    }
    d.worker = rightSize(catalog, {d.memory, d.parameter_bytes, o.accelerator});
    if (!d.worker.feasible) {
      c.reason = fmt::format("1F1B-RR {}: stage {}: {}", c.strategy(), s, d.worker.reason);
      return c;
    }
    for (int k = 0; k < r; ++k) workers.push_back(d.worker);
    const MessagePasses messages = stageMessages(costs, first, last);
    rr.push_back({d.forward + d.backward + messages.forward + messages.backward, d.tail,
                  s > 0 ? costs.cut[first - 1] : 0, r});
    c.stage_details.push_back(std::move(d));
  }
  const HostShare host{o.host_cores, 1, o.threads, o.busy_slowdown};
  const Seconds perMicrobatch = roundRobinSecondsPerMicrobatch(rr, host);
  const auto K = static_cast<double>(A * M);
  // (Each copy's sums and updates are in its steady state, not after it.)
  c.iteration = c.pipeline.total = perMicrobatch * K;
  // Every copy busy: the host's sharing and contention, as HostShare::scale for an even plan.
  c.compute_scale = 1 / host.rate(static_cast<double>(c.workersUsed()) * std::max(1, o.threads));
  Seconds busy = 0;
  for (const RoundRobinStage& st : rr) busy += (st.compute + st.update) * K;
  c.bubble_fraction = std::max(0.0, 1 - busy / (c.workersUsed() * c.iteration));
  c.samples_per_second = static_cast<double>(c.globalBatch()) / c.iteration;
  c.cost_per_hour = totalCostPerHour(catalog, workers);
  c.samples_per_dollar = c.cost_per_hour > 0 ? c.samples_per_second * 3600.0 / c.cost_per_hour : 0;
  c.feasible = true;
  return c;
}

}  // namespace hydrozoa::plan
