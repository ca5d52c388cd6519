#include "runtime/schedule/one_f_one_b.h"

#include <algorithm>

namespace hydrozoa::runtime {

std::vector<Action> OneFOneBSchedule::computeOrder(const PipelineShape& shape) const {
  const int M = shape.microbatches;
  const int warmup = std::min(shape.stages - shape.stage - 1, M);
  std::vector<Action> a;
  a.reserve(2 * static_cast<size_t>(M));
  for (int mb = 0; mb < warmup; ++mb) a.push_back({ActionKind::kForward, mb});
  for (int mb = warmup; mb < M; ++mb) {
    a.push_back({ActionKind::kForward, mb});
    a.push_back({ActionKind::kBackward, mb - warmup});
  }
  for (int mb = M - warmup; mb < M; ++mb) a.push_back({ActionKind::kBackward, mb});
  return a;
}

}  // namespace hydrozoa::runtime
