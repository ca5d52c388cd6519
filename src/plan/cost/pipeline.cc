#include "plan/cost/pipeline.h"

#include <algorithm>

#include "core/status.h"

namespace hydrozoa::plan {

std::string Partition::toString(int numLayers) const {
  std::string s;
  for (int i = 0; i < numStages(); ++i) {
    if (i) s += ",";
    s += std::to_string(first[i]) + "-" + std::to_string(lastLayer(i, numLayers));
  }
  return s;
}

PipelineTime pipelineTime(const ChainCosts& costs, const Partition& partition, std::int64_t microbatches) {
  const int L = costs.numLayers();
  const int k = partition.numStages();
  HZ_CHECK(k >= 1 && partition.first[0] == 0 && microbatches >= 1);
  PipelineTime t;
  for (int s = 0; s < k; ++s) {
    const int first = partition.first[s], last = partition.lastLayer(s, L);
    HZ_CHECK(first <= last && last < L);
    Seconds f = 0, b = 0;
    for (int i = first; i <= last; ++i) {
      f += costs.forward[i];
      b += costs.backward[i];
    }
    t.compute += f + b;
    t.max_forward = std::max(t.max_forward, f);
    t.max_backward = std::max(t.max_backward, b);
    if (s > 0) {
      const Seconds c = costs.cut[first - 1];
      t.communication += 2 * c;
      t.max_cut = std::max(t.max_cut, c);
    }
  }
  t.t_k = std::max(t.max_forward, t.max_cut);
  t.r_1 = std::max(t.max_backward, t.max_cut);
  t.total = t.compute + t.communication + static_cast<double>(microbatches - 1) * (t.t_k + t.r_1);
  return t;
}

double bubbleFraction(const PipelineTime& time, int stages, std::int64_t microbatches) {
  if (time.total <= 0 || stages <= 0) return 0;
  return std::max(0.0, 1.0 - static_cast<double>(microbatches) * time.compute / (stages * time.total));
}

}  // namespace hydrozoa::plan
