#include "plan/cost/memory.h"

#include <algorithm>

#include "core/limits.h"
#include "core/status.h"

namespace hydrozoa::plan {

Bytes stageMemory(const MemoryCosts& memory, int first, int last, std::int64_t microbatches) {
  HZ_CHECK(0 <= first && first <= last && last < memory.numLayers());
  Bytes fixed = 0, stashed = 0, workspace = 0;
  for (int i = first; i <= last; ++i) {
    fixed += memory.fixed[i];
    stashed += memory.stashed[i];
    workspace = std::max(workspace, memory.workspace[i]);
  }
  return stageMemoryFromSums(memory, fixed, stashed, workspace, first, last, microbatches);
}

Bytes stageMemoryFromSums(const MemoryCosts& memory, Bytes fixedSum, Bytes stashedSum, Bytes workspaceMax,
                          int first, int last, std::int64_t microbatches) {
  const bool readsData = first == 0 || last == memory.numLayers() - 1;
  // Everything but the microbatch term is bounded by memoryCostsFit.
  const Bytes once = memory.runtime + fixedSum + workspaceMax + (readsData ? memory.data : 0);
  if (memory.recompute) {
    return saturatingAdd(saturatingAdd(once, memory.input[first] + stashedSum),
                         saturatingMul(microbatches, memory.input[first]));
  }
  return saturatingAdd(once, saturatingMul(microbatches, memory.input[first] + stashedSum));
}

bool memoryCostsFit(const MemoryCosts& m) {
  Bytes total = 0;
  auto add = [&](Bytes b) {
    if (b < 0) return false;
    auto sum = checkedAdd(total, b);
    if (!sum) return false;
    total = *sum;
    return true;
  };
  if (!add(m.runtime) || !add(m.data)) return false;
  for (int i = 0; i < m.numLayers(); ++i) {
    if (!add(m.fixed[i]) || !add(m.stashed[i]) || !add(m.workspace[i]) || !add(m.input[i])) return false;
  }
  return true;
}

}  // namespace hydrozoa::plan
