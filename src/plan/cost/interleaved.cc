#include "plan/cost/interleaved.h"

#include <algorithm>

namespace hydrozoa::plan {

std::vector<Pass> interleavedOrder(int stage, int stages, int chunks, std::int64_t microbatches) {
  const std::int64_t p = stages, v = chunks, M = microbatches;
  const std::int64_t total = M * v;
  // The k-th pass of a kind: group g of p microbatches (the last may hold
  // fewer), chunk by chunk within the group.
  auto at = [&](std::int64_t k, bool backward) {
    const std::int64_t g = k / (p * v);
    const std::int64_t size = std::min(p, M - g * p);
    const std::int64_t offset = k - g * p * v;
    const std::int64_t chunk = offset / size;
    Pass pass;
    pass.backward = backward;
    pass.microbatch = static_cast<int>(g * p + offset % size);
    pass.chunk = static_cast<int>(backward ? v - 1 - chunk : chunk);
    return pass;
  };
  // A short step (M not a multiple of p: the epoch's last) runs every
  // forward first: with a partial group, 1F1B's alternation deadlocks (a
  // stage would wait for a chunk's gradient that needs its own forward of the
  // next chunk first; runtime/schedule verifySchedule finds it).
  const std::int64_t warmup = M % p == 0 ? std::min(total, (p - stage - 1) * 2 + (v - 1) * p) : total;
  std::vector<Pass> order;
  order.reserve(2 * static_cast<size_t>(total));
  for (std::int64_t k = 0; k < warmup; ++k) order.push_back(at(k, false));
  for (std::int64_t k = warmup; k < total; ++k) {
    order.push_back(at(k, false));
    order.push_back(at(k - warmup, true));
  }
  for (std::int64_t k = total - warmup; k < total; ++k) order.push_back(at(k, true));
  return order;
}

}  // namespace hydrozoa::plan
