// Partitioning a layer chain into pipeline stages.
//
// A Partitioner returns, for every stage count k = 1..K, the partition into
// exactly k stages that minimises the pipeline runtime R of
// plan/cost/pipeline.h, subject to a per-stage memory limit. Implementations
// (one file each):
//   ExactPartitioner       branch-and-bound over the paper's (t_k, r_1)
//                          bounds: the true optimum, or a reported gap
//   BoundedDpPartitioner   the paper's algorithm, V evenly spaced bounds
//                          (Hydrozoa appendix A.2): ε-optimal, for comparison
//   BruteForcePartitioner  every partition (L ≤ 24): the reference in tests
//   ParetoPartitioner      exhaustive DP over non-dominated (S, t, r)
//                          prefixes: an exact reference for longer chains
//
// Thread-safety: partitioners are stateless between calls; a call is
// single-threaded.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "plan/cost/memory.h"
#include "plan/cost/pipeline.h"

namespace hydrozoa::plan {

struct PartitionProblem {
  ChainCosts costs;
  std::int64_t microbatches = 1;    // M
  // Microbatches whose activations a stage holds at once, for its memory: M
  // under GPipe (unset), at most the first stage's under 1F1B (cost/one_f_one_b.h).
  std::optional<std::int64_t> stashed;
  std::int64_t stashedMicrobatches() const { return stashed.value_or(microbatches); }
  std::optional<MemoryCosts> memory;  // with memory_limit: stages must fit
  std::optional<Bytes> memory_limit;
};

struct PartitionResult {
  int stages = 0;
  bool feasible = false;   // false: no partition into `stages` stages fits in memory
  Partition partition;
  PipelineTime time;       // R and its terms
  Seconds proven_gap = 0;  // R minus a proven lower bound; 0 means proven optimal
  std::int64_t evaluations = 0;  // inner dynamic programs solved
};

class Partitioner {
 public:
  virtual ~Partitioner() = default;
  virtual const char* name() const = 0;

  // Result for k = 1..maxStages at index k−1. REQUIRES: maxStages >= 1.
  virtual std::vector<PartitionResult> partitionAll(const PartitionProblem& problem, int maxStages) = 0;

  // Result for exactly `stages` stages. The default calls partitionAll.
  virtual PartitionResult partitionInto(const PartitionProblem& problem, int stages);
};

// Prefix sums and the memory window of a problem, shared by the
// partitioners so that all of them evaluate sums identically.
class ChainIndex {
 public:
  explicit ChainIndex(const PartitionProblem& problem);

  int numLayers() const { return L_; }
  // Σ f_i over [first, last], as PF[last+1] − PF[first].
  Seconds forwardSum(int first, int last) const { return pf_[last + 1] - pf_[first]; }
  Seconds backwardSum(int first, int last) const { return pb_[last + 1] - pb_[first]; }
  Seconds cut(int afterLayer) const { return cut_[afterLayer]; }
  // Smallest first layer x such that [x, last] fits in memory; last+1 when none.
  int memoryFirst(int last) const { return memFirst_[last]; }
  bool fits(int first, int last) const { return first >= memFirst_[last]; }
  Seconds constantTime() const { return pf_[L_] + pb_[L_]; }  // Σ (f + b)
  // R of `partition` from the prefix sums: O(stages), for scoring many partitions.
  Seconds pipelineTotal(const Partition& partition, std::int64_t microbatches) const;

 private:
  int L_;
  std::vector<Seconds> pf_, pb_, cut_;
  std::vector<int> memFirst_;
};

// Minimum total communication Σ c over partitions into i stages (i = 1..k)
// with every stage's forward sum <= maxForward, backward sum <= maxBackward,
// every cut <= min(maxForward, maxBackward), and every stage in memory.
// Dynamic program over rows i with a sliding-window minimum: O(k·L).
class MinCommDp {
 public:
  static constexpr double kInfinity = std::numeric_limits<double>::infinity();

  explicit MinCommDp(const ChainIndex& index) : index_(index) {}

  // Solves rows 1..k; afterwards comm(i) is the optimum for i stages
  // (kInfinity when none is feasible) and partition(i) rebuilds it.
  void solve(Seconds maxForward, Seconds maxBackward, int k);
  Seconds comm(int stages) const { return rows_[stages - 1][index_.numLayers() - 1]; }
  Partition partition(int stages) const;

 private:
  const ChainIndex& index_;
  std::vector<std::vector<Seconds>> rows_;  // rows_[i−1][j]: layers 0..j in i stages
  std::vector<std::vector<int>> from_;      // from_[i−1][j]: first layer of the last stage
  std::vector<int> first_;
  std::vector<int> deque_;
};

}  // namespace hydrozoa::plan
