#include "plan/cost/two_bw.h"

#include <algorithm>

namespace hydrozoa::plan {

int carriedForwards(int stage, int stages, std::int64_t microbatches) {
  return static_cast<int>(std::min<std::int64_t>(stages - stage - 1, microbatches));
}

std::vector<Pass> asyncOneFOneBOrder(int stage, int stages, std::int64_t microbatches, int carried, int next) {
  return asyncOneFOneBOrderInFlight(stages - stage, microbatches, carried, next);
}

std::vector<Pass> asyncOneFOneBOrderInFlight(int inFlight, std::int64_t microbatches, int carried, int next) {
  const int M = static_cast<int>(microbatches);
  // Forward passes over this step's microbatches and then the next's (j ≥ M),
  // those not run yet: [carried, end).
  const int end = std::min(M + inFlight - 1, M + next);
  auto forward = [&](int j) { return j < M ? Pass{false, j, 0, 0} : Pass{false, j - M, 0, 1}; };
  std::vector<Pass> order;
  order.reserve(2 * static_cast<size_t>(M + next));
  for (int j = carried; j < std::min(inFlight - 1, end); ++j) order.push_back(forward(j));
  for (int j = 0; j < M; ++j) {
    const int f = j + inFlight - 1;
    if (f >= carried && f < end) order.push_back(forward(f));
    order.push_back({true, j});
  }
  return order;
}

std::vector<Pass> twoBwOrder(int stage, int stages, std::int64_t microbatches) {
  return asyncOneFOneBOrder(stage, stages, microbatches, carriedForwards(stage, stages, microbatches),
                            static_cast<int>(microbatches));
}

}  // namespace hydrozoa::plan
