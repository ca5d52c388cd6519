#include "plan/partition/pareto.h"

#include <algorithm>

#include "core/status.h"

namespace hydrozoa::plan {
namespace {

struct State {
  Seconds comm, x, y;
  int prevLast;   // last layer of the previous stage (−1 for the first stage)
  int prevState;  // index in the previous front
};

bool dominates(const State& a, const State& b) { return a.comm <= b.comm && a.x <= b.x && a.y <= b.y; }

void insert(std::vector<State>& front, const State& s) {
  for (const State& o : front) {
    if (dominates(o, s)) return;
  }
  front.erase(std::remove_if(front.begin(), front.end(), [&](const State& o) { return dominates(s, o); }), front.end());
  front.push_back(s);
}

}  // namespace

std::vector<PartitionResult> ParetoPartitioner::partitionAll(const PartitionProblem& problem, int maxStages) {
  const ChainIndex index(problem);
  const int L = index.numLayers();
  const int K = std::min(maxStages, L);
  const double m1 = static_cast<double>(problem.microbatches - 1);
  // fronts[i][j]: states of partitions of layers 0..j into i+1 stages.
  std::vector<std::vector<std::vector<State>>> fronts(K, std::vector<std::vector<State>>(L));
  for (int j = 0; j < L; ++j) {
    if (index.fits(0, j)) fronts[0][j].push_back({0, index.forwardSum(0, j), index.backwardSum(0, j), -1, -1});
  }
  for (int i = 1; i < K; ++i) {
    for (int j = i; j < L; ++j) {
      for (int u = i - 1; u < j; ++u) {
        if (!index.fits(u + 1, j)) continue;
        const Seconds f = index.forwardSum(u + 1, j), b = index.backwardSum(u + 1, j), c = index.cut(u);
        const auto& prev = fronts[i - 1][u];
        for (int s = 0; s < static_cast<int>(prev.size()); ++s) {
          insert(fronts[i][j], {prev[s].comm + c, std::max({prev[s].x, f, c}), std::max({prev[s].y, b, c}), u, s});
        }
      }
    }
  }
  std::vector<PartitionResult> results(maxStages);
  for (int k = 1; k <= maxStages; ++k) {
    results[k - 1].stages = k;
    if (k > K) continue;
    const auto& front = fronts[k - 1][L - 1];
    int best = -1;
    Seconds bestR = 0;
    for (int s = 0; s < static_cast<int>(front.size()); ++s) {
      const Seconds r = index.constantTime() + 2 * front[s].comm + m1 * (front[s].x + front[s].y);
      if (best < 0 || r < bestR) {
        best = s;
        bestR = r;
      }
    }
    if (best < 0) continue;
    Partition p;
    int i = k - 1, j = L - 1, s = best;
    while (i >= 0) {
      const State& st = fronts[i][j][s];
      p.first.push_back(st.prevLast + 1);
      j = st.prevLast;
      s = st.prevState;
      --i;
    }
    std::reverse(p.first.begin(), p.first.end());
    results[k - 1].feasible = true;
    results[k - 1].partition = p;
    results[k - 1].time = pipelineTime(problem.costs, p, problem.microbatches);
  }
  return results;
}

}  // namespace hydrozoa::plan
