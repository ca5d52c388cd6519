// ExactPartitioner: the true optimum of R for every stage count.
//
// NOTE [Exact partitioning by branch-and-bound]
// R(p) = Σ(f+b) + 2·S(p) + (M−1)·(X(p) + Y(p)), with S the total cut cost,
// X = t_k = max(max stage forward, max cut) and Y = r_1 likewise with
// backward sums. X(p) is always one of the finitely many values "forward sum
// of a contiguous segment" or "a cut cost" (the candidate list V1); Y(p) one
// of V2. For thresholds (T1, T2), MinCommDp gives S*(T1, T2) = the least S
// over partitions with X <= T1 and Y <= T2 (and stages in memory).
//
// The paper (Hydrozoa appendix A.2) tries V evenly spaced thresholds for each
// of T1 and T2 and keeps the best partition found: V² dynamic programs, and
// only ε-optimal. We search the grid V1 × V2 of *exact* candidates instead,
// best-first: a rectangle [a1, b1] × [a2, b2] of thresholds has the lower
// bound Σ(f+b) + 2·S*(b1, b2) + (M−1)(a1 + a2) on R of every partition whose
// (X, Y) lies in it (S* only falls as thresholds rise), and the partition the
// DP returns at (b1, b2) is a real one whose R is an upper bound. Splitting
// the rectangle with the least bound in halves costs one DP (the upper half
// keeps its parent's corner) and stops when that bound reaches the best R
// found: then no partition anywhere is better. A single-point rectangle's
// bound is the R of its own DP solution, so the search always terminates
// with the optimum; an evaluation budget turns it into a reported gap.
#pragma once

#include <cstdint>

#include "plan/partition/partitioner.h"

namespace hydrozoa::plan {

class ExactPartitioner : public Partitioner {
 public:
  struct Options {
    // Inner DPs allowed per stage count before settling for a proven gap.
    std::int64_t max_evaluations = 5'000'000;
    // Stop when the best R is within this fraction of the lower bound.
    double relative_tolerance = 1e-12;
  };

  ExactPartitioner() = default;
  explicit ExactPartitioner(Options options) : options_(options) {}

  const char* name() const override { return "exact"; }
  std::vector<PartitionResult> partitionAll(const PartitionProblem& problem, int maxStages) override;
  PartitionResult partitionInto(const PartitionProblem& problem, int stages) override;

 private:
  Options options_;
};

}  // namespace hydrozoa::plan
