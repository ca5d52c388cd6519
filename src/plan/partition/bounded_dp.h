// BoundedDpPartitioner: Hydrozoa's own algorithm (Hydrozoa appendix A.2),
// kept to measure ours against it.
//
// V evenly spaced bounds B1 for t_k in [min f_i, max(Σ f, max c)] and V for
// r_1 in [min b_i, max(Σ b, max c)]; for each of the V² pairs a
// minimum-communication DP under t_k <= B1, r_1 <= B2; every partition found
// is scored by R and the best per stage count kept. ε-optimal with
// ε = 2(M−1)Δ/(V−1): Theorem 1 states Δ/V, but V evenly spaced bounds
// including both ends are Δ/(V−1) apart. The inner DP is our O(k·L) sliding-window
// MinCommDp, which is faster than the O(k·L²) recurrence the paper states,
// so timings of this baseline flatter it.
#pragma once

#include "core/status.h"
#include "plan/partition/partitioner.h"

namespace hydrozoa::plan {

class BoundedDpPartitioner : public Partitioner {
 public:
  // REQUIRES: bounds >= 2 (a grid from the least to the largest bound).
  explicit BoundedDpPartitioner(int bounds = 1000) : bounds_(bounds) { HZ_CHECK(bounds >= 2); }

  const char* name() const override { return "bounded-dp"; }
  std::vector<PartitionResult> partitionAll(const PartitionProblem& problem, int maxStages) override;

 private:
  int bounds_;
};

}  // namespace hydrozoa::plan
