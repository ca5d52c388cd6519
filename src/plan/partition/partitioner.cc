#include "plan/partition/partitioner.h"

#include <algorithm>
#include <deque>

#include "core/status.h"

namespace hydrozoa::plan {

PartitionResult Partitioner::partitionInto(const PartitionProblem& problem, int stages) {
  return partitionAll(problem, stages).back();
}

ChainIndex::ChainIndex(const PartitionProblem& problem) : L_(problem.costs.numLayers()) {
  const ChainCosts& c = problem.costs;
  HZ_CHECK_MSG(L_ >= 1, "a chain needs at least one layer");
  HZ_CHECK(static_cast<int>(c.backward.size()) == L_ && static_cast<int>(c.cut.size()) == L_ - 1);
  HZ_CHECK(problem.microbatches >= 1);
  pf_.assign(L_ + 1, 0);
  pb_.assign(L_ + 1, 0);
  for (int i = 0; i < L_; ++i) {
    pf_[i + 1] = pf_[i] + c.forward[i];
    pb_[i + 1] = pb_[i] + c.backward[i];
  }
  cut_ = c.cut;

  memFirst_.assign(L_, 0);
  if (!problem.memory || !problem.memory_limit) return;
  const MemoryCosts& m = *problem.memory;
  HZ_CHECK(m.numLayers() == L_);
  HZ_CHECK_MSG(memoryCostsFit(m), "memory costs overflow 64 bits; searchPlan checks profiles first");
  const Bytes limit = *problem.memory_limit;
  const std::int64_t M = problem.stashedMicrobatches();
  std::vector<Bytes> fixed(L_ + 1, 0), stashed(L_ + 1, 0);
  for (int i = 0; i < L_; ++i) {
    fixed[i + 1] = fixed[i] + m.fixed[i];
    stashed[i + 1] = stashed[i] + m.stashed[i];
  }
  // Two pointers: the smallest feasible first layer never moves left as the
  // last layer moves right (memory grows with the stage, see cost/memory.h;
  // the dataset term, held when first == 0 or last == L−1, only adds to that);
  // a monotone deque keeps the window's maximum workspace.
  std::deque<int> maxWs;
  int x = 0;
  for (int j = 0; j < L_; ++j) {
    while (!maxWs.empty() && m.workspace[maxWs.back()] <= m.workspace[j]) maxWs.pop_back();
    maxWs.push_back(j);
    auto memory = [&](int first) {
      return stageMemoryFromSums(m, fixed[j + 1] - fixed[first], stashed[j + 1] - stashed[first],
                                 m.workspace[maxWs.front()], first, j, M);
    };
    while (x <= j && memory(x) > limit) {
      ++x;
      while (!maxWs.empty() && maxWs.front() < x) maxWs.pop_front();
    }
    memFirst_[j] = x;  // j + 1 when even layer j alone does not fit
  }
}

Seconds ChainIndex::pipelineTotal(const Partition& p, std::int64_t microbatches) const {
  Seconds comm = 0, maxF = 0, maxB = 0, maxC = 0;
  for (int s = 0; s < p.numStages(); ++s) {
    const int first = p.first[s], last = p.lastLayer(s, L_);
    maxF = std::max(maxF, forwardSum(first, last));
    maxB = std::max(maxB, backwardSum(first, last));
    if (s > 0) {
      comm += cut_[first - 1];
      maxC = std::max(maxC, cut_[first - 1]);
    }
  }
  return constantTime() + 2 * comm + static_cast<double>(microbatches - 1) * (std::max(maxF, maxC) + std::max(maxB, maxC));
}

void MinCommDp::solve(Seconds maxForward, Seconds maxBackward, int k) {
  const int L = index_.numLayers();
  HZ_CHECK(k >= 1);
  if (static_cast<int>(rows_.size()) < k) {
    rows_.resize(k);
    from_.resize(k);
  }
  first_.resize(L);
  // The first feasible layer of a stage ending at j, from the two bounds and memory.
  int fx = 0, bx = 0;
  for (int j = 0; j < L; ++j) {
    while (fx <= j && index_.forwardSum(fx, j) > maxForward) ++fx;
    while (bx <= j && index_.backwardSum(bx, j) > maxBackward) ++bx;
    first_[j] = std::max({index_.memoryFirst(j), fx, bx});
  }
  const Seconds maxCut = std::min(maxForward, maxBackward);

  rows_[0].assign(L, kInfinity);
  from_[0].assign(L, 0);
  for (int j = 0; j < L; ++j) {
    if (first_[j] == 0) rows_[0][j] = 0;
  }
  std::vector<Seconds> value(L, kInfinity);
  for (int i = 1; i < k; ++i) {
    const std::vector<Seconds>& prev = rows_[i - 1];
    std::vector<Seconds>& cur = rows_[i];
    std::vector<int>& from = from_[i];
    cur.assign(L, kInfinity);
    from.assign(L, -1);
    // C_i[j] = min over u in [first_[j] − 1, j − 1] of C_{i−1}[u] + cut(u):
    // both window ends only move right, so a monotone deque gives each
    // minimum in amortised O(1).
    deque_.clear();
    size_t head = 0;
    int next = 0;
    for (int j = 0; j < L; ++j) {
      for (; next <= j - 1; ++next) {
        const int u = next;
        if (prev[u] == kInfinity || index_.cut(u) > maxCut) continue;
        value[u] = prev[u] + index_.cut(u);
        while (deque_.size() > head && value[deque_.back()] >= value[u]) deque_.pop_back();
        deque_.push_back(u);
      }
      const int lowest = first_[j] - 1;
      while (deque_.size() > head && deque_[head] < lowest) ++head;
      if (first_[j] <= j && deque_.size() > head) {
        cur[j] = value[deque_[head]];
        from[j] = deque_[head] + 1;
      }
    }
  }
}

Partition MinCommDp::partition(int stages) const {
  const int L = index_.numLayers();
  HZ_CHECK(comm(stages) != kInfinity);
  Partition p;
  int j = L - 1;
  for (int i = stages; i >= 1; --i) {
    const int first = from_[i - 1][j];
    HZ_CHECK(first >= 0 && first <= j);
    p.first.push_back(first);
    j = first - 1;
  }
  HZ_CHECK(j == -1);
  std::reverse(p.first.begin(), p.first.end());
  return p;
}

}  // namespace hydrozoa::plan
