// BoundedDpPartitioner: Hydrozoa's own algorithm (seed 000 appendix A.2),
// kept to measure ours against it.
//
// V evenly spaced bounds B1 for t_k in [min f_i, max(Σ f, max c)] and V for
// r_1 in [min b_i, max(Σ b, max c)]; for each of the V² pairs a
// minimum-communication DP under t_k <= B1, r_1 <= B2; every partition found
// is scored by R and the best per stage count kept. ε-optimal with
// ε = 2(M−1)Δ/V (Theorem 1). The inner DP is our O(k·L) sliding-window
// MinCommDp, which is faster than the O(k·L²) recurrence the paper states,
// so timings of this baseline flatter it.
#pragma once

#include "plan/partition/partitioner.h"

namespace hydrozoa::plan {

class BoundedDpPartitioner : public Partitioner {
 public:
  explicit BoundedDpPartitioner(int bounds = 1000) : bounds_(bounds) {}

  const char* name() const override { return "bounded-dp"; }
  std::vector<PartitionResult> partitionAll(const PartitionProblem& problem, int maxStages) override;

 private:
  int bounds_;
};

}  // namespace hydrozoa::plan
