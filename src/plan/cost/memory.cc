#include "plan/cost/memory.h"

#include <algorithm>

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
  const bool readsData = first == 0 || last == memory.numLayers() - 1;
  return memory.runtime + fixed + microbatches * (memory.input[first] + stashed) + workspace +
         (readsData ? memory.data : 0);
}

}  // namespace hydrozoa::plan
