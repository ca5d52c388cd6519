#include "plan/cost/one_f_one_b.h"

#include <algorithm>

namespace hydrozoa::plan {

std::vector<Pass> oneFOneBOrder(int stage, int stages, std::int64_t microbatches) {
  return oneFOneBOrderWithWarmup(stages - stage - 1, microbatches);
}

std::vector<Pass> oneFOneBOrderWithWarmup(int forwardsFirst, std::int64_t microbatches) {
  const int M = static_cast<int>(microbatches);
  const int warmup = std::min(forwardsFirst, M);
  std::vector<Pass> order;
  order.reserve(2 * static_cast<size_t>(M));
  for (int mb = 0; mb < warmup; ++mb) order.push_back({false, mb});
  for (int mb = warmup; mb < M; ++mb) {
    order.push_back({false, mb});
    order.push_back({true, mb - warmup});
  }
  for (int mb = M - warmup; mb < M; ++mb) order.push_back({true, mb});
  return order;
}

std::int64_t oneFOneBStashed(int stage, int stages, std::int64_t microbatches) {
  return std::min<std::int64_t>(stages - stage, microbatches);
}

}  // namespace hydrozoa::plan
