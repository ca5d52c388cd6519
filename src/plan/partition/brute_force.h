// BruteForcePartitioner: scores every one of the 2^(L−1) partitions with
// pipelineTime() and stageMemory() directly. The reference the faster
// partitioners are tested against; L <= 24.
#pragma once

#include "plan/partition/partitioner.h"

namespace hydrozoa::plan {

class BruteForcePartitioner : public Partitioner {
 public:
  static constexpr int kMaxLayers = 24;
  const char* name() const override { return "brute-force"; }
  std::vector<PartitionResult> partitionAll(const PartitionProblem& problem, int maxStages) override;
};

}  // namespace hydrozoa::plan
