// ParetoPartitioner: an exhaustive dynamic program whose states are the
// non-dominated (S, X, Y) triples of partial partitions (total cut cost,
// forward and backward bottlenecks so far). R is monotone in each, so
// dropping dominated prefixes never loses the optimum: an exact reference for
// chains too long for brute force (tests; O(K·L²·front)).
#pragma once

#include "plan/partition/partitioner.h"

namespace hydrozoa::plan {

class ParetoPartitioner : public Partitioner {
 public:
  const char* name() const override { return "pareto"; }
  std::vector<PartitionResult> partitionAll(const PartitionProblem& problem, int maxStages) override;
};

}  // namespace hydrozoa::plan
