#include "plan/partition/exact.h"

#include <algorithm>
#include <queue>

#include "core/status.h"

namespace hydrozoa::plan {
namespace {

// Sorted distinct candidate values of t_k (forward) or r_1 (backward): every
// contiguous segment sum, computed exactly as the DP computes it, and every
// cut cost. See NOTE [Exact partitioning by branch-and-bound].
std::vector<Seconds> candidates(const ChainIndex& index, bool forward) {
  const int L = index.numLayers();
  std::vector<Seconds> v;
  v.reserve(static_cast<size_t>(L) * (L + 1) / 2 + L);
  for (int x = 0; x < L; ++x) {
    for (int y = x; y < L; ++y) v.push_back(forward ? index.forwardSum(x, y) : index.backwardSum(x, y));
  }
  for (int u = 0; u + 1 < L; ++u) v.push_back(index.cut(u));
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

struct Rect {
  int lo1, hi1, lo2, hi2;
  Seconds comm;   // S* at (hi1, hi2)
  Seconds bound;  // lower bound on R inside
  bool operator>(const Rect& o) const { return bound > o.bound; }
};

class Search {
 public:
  Search(const PartitionProblem& problem, const ChainIndex& index, const std::vector<Seconds>& v1,
         const std::vector<Seconds>& v2, const ExactPartitioner::Options& options)
      : problem_(problem), index_(index), v1_(v1), v2_(v2), options_(options), dp_(index) {}

  PartitionResult run(int k) {
    PartitionResult result;
    result.stages = k;
    const int L = index_.numLayers();
    if (k > L) return result;
    // Any k-stage partition has X >= max(max_i f_i, Σf / k) and Y likewise.
    Seconds maxF = 0, maxB = 0;
    for (int i = 0; i < L; ++i) {
      maxF = std::max(maxF, index_.forwardSum(i, i));
      maxB = std::max(maxB, index_.backwardSum(i, i));
    }
    const Seconds lowX = std::max(maxF, index_.forwardSum(0, L - 1) / k);
    const Seconds lowY = std::max(maxB, index_.backwardSum(0, L - 1) / k);
    auto firstAtLeast = [](const std::vector<Seconds>& v, Seconds x) {
      // Slightly below x: a rounding difference must never exclude the optimum.
      const auto it = std::lower_bound(v.begin(), v.end(), x - 1e-9 * std::max(1.0, x) - 1e-15);
      return static_cast<int>(std::min<std::ptrdiff_t>(it - v.begin(), static_cast<std::ptrdiff_t>(v.size()) - 1));
    };
    const double m1 = static_cast<double>(problem_.microbatches - 1);
    const Seconds constant = index_.constantTime();

    Rect root{firstAtLeast(v1_, lowX), static_cast<int>(v1_.size()) - 1, firstAtLeast(v2_, lowY),
              static_cast<int>(v2_.size()) - 1, 0, 0};
    root.comm = evaluate(root.hi1, root.hi2, k);
    if (root.comm == MinCommDp::kInfinity) {
      result.evaluations = evaluations_;
      return result;  // nothing fits in memory with k stages
    }
    auto bound = [&](const Rect& r) { return constant + 2 * r.comm + m1 * (v1_[r.lo1] + v2_[r.lo2]); };
    root.bound = bound(root);
    std::priority_queue<Rect, std::vector<Rect>, std::greater<>> open;
    open.push(root);
    Seconds gap = 0;
    while (!open.empty()) {
      const Rect r = open.top();
      if (r.bound >= best_ - options_.relative_tolerance * best_) break;  // proven optimal
      open.pop();
      if (r.lo1 == r.hi1 && r.lo2 == r.hi2) continue;  // its own partition was evaluated already
      if (evaluations_ >= options_.max_evaluations) {
        gap = best_ - r.bound;
        break;
      }
      // Split the longer side; the upper half keeps this corner, the lower half needs one DP.
      Rect low = r, high = r;
      if (r.hi1 - r.lo1 >= r.hi2 - r.lo2) {
        const int mid = (r.lo1 + r.hi1) / 2;
        low.hi1 = mid;
        high.lo1 = mid + 1;
      } else {
        const int mid = (r.lo2 + r.hi2) / 2;
        low.hi2 = mid;
        high.lo2 = mid + 1;
      }
      low.comm = evaluate(low.hi1, low.hi2, k);
      for (Rect* child : {&low, &high}) {
        if (child->comm == MinCommDp::kInfinity) continue;
        child->bound = bound(*child);
        if (child->bound < best_ - options_.relative_tolerance * best_) open.push(*child);
      }
    }
    result.feasible = true;
    result.partition = bestPartition_;
    result.time = pipelineTime(problem_.costs, bestPartition_, problem_.microbatches);
    result.proven_gap = std::max(0.0, gap);
    result.evaluations = evaluations_;
    return result;
  }

 private:
  // S* at thresholds (v1[i1], v2[i2]); records the DP's partition if it beats the best.
  Seconds evaluate(int i1, int i2, int k) {
    ++evaluations_;
    dp_.solve(v1_[i1], v2_[i2], k);
    const Seconds comm = dp_.comm(k);
    if (comm != MinCommDp::kInfinity) {
      Partition p = dp_.partition(k);
      const Seconds r = index_.pipelineTotal(p, problem_.microbatches);
      if (r < best_) {
        best_ = r;
        bestPartition_ = std::move(p);
      }
    }
    return comm;
  }

  const PartitionProblem& problem_;
  const ChainIndex& index_;
  const std::vector<Seconds>& v1_;
  const std::vector<Seconds>& v2_;
  const ExactPartitioner::Options& options_;
  MinCommDp dp_;
  Seconds best_ = MinCommDp::kInfinity;
  Partition bestPartition_;
  std::int64_t evaluations_ = 0;
};

}  // namespace

std::vector<PartitionResult> ExactPartitioner::partitionAll(const PartitionProblem& problem, int maxStages) {
  HZ_CHECK(maxStages >= 1);
  const ChainIndex index(problem);
  const std::vector<Seconds> v1 = candidates(index, true), v2 = candidates(index, false);
  std::vector<PartitionResult> results;
  for (int k = 1; k <= maxStages; ++k) results.push_back(Search(problem, index, v1, v2, options_).run(k));
  return results;
}

PartitionResult ExactPartitioner::partitionInto(const PartitionProblem& problem, int stages) {
  HZ_CHECK(stages >= 1);
  const ChainIndex index(problem);
  const std::vector<Seconds> v1 = candidates(index, true), v2 = candidates(index, false);
  return Search(problem, index, v1, v2, options_).run(stages);
}

}  // namespace hydrozoa::plan
