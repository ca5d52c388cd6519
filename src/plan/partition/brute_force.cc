#include "plan/partition/brute_force.h"

#include "core/status.h"

namespace hydrozoa::plan {

std::vector<PartitionResult> BruteForcePartitioner::partitionAll(const PartitionProblem& problem, int maxStages) {
  const int L = problem.costs.numLayers();
  HZ_CHECK_MSG(L >= 1 && L <= kMaxLayers, "brute force is for chains of at most 24 layers");
  std::vector<PartitionResult> results(maxStages);
  for (int k = 1; k <= maxStages; ++k) results[k - 1].stages = k;
  const bool limited = problem.memory && problem.memory_limit;
  for (std::uint32_t mask = 0; mask < (1u << (L - 1)); ++mask) {
    Partition p;
    p.first.push_back(0);
    for (int u = 0; u + 1 < L; ++u) {
      if (mask & (1u << u)) p.first.push_back(u + 1);
    }
    const int k = p.numStages();
    if (k > maxStages) continue;
    bool fits = true;
    for (int s = 0; s < k && limited; ++s) {
      fits = stageMemory(*problem.memory, p.first[s], p.lastLayer(s, L), problem.stashedMicrobatches()) <=
             *problem.memory_limit;
      if (!fits) break;
    }
    if (!fits) continue;
    const PipelineTime t = pipelineTime(problem.costs, p, problem.microbatches);
    PartitionResult& best = results[k - 1];
    if (!best.feasible || t.total < best.time.total) {
      best.feasible = true;
      best.partition = p;
      best.time = t;
    }
    ++best.evaluations;
  }
  return results;
}

}  // namespace hydrozoa::plan
