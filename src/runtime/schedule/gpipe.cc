#include "runtime/schedule/gpipe.h"

namespace hydrozoa::runtime {

std::vector<Action> GPipeSchedule::computeOrder(const PipelineShape& shape) const {
  std::vector<Action> a;
  a.reserve(2 * static_cast<size_t>(shape.microbatches));
  for (int mb = 0; mb < shape.microbatches; ++mb) a.push_back({ActionKind::kForward, mb});
  for (int mb = shape.microbatches - 1; mb >= 0; --mb) a.push_back({ActionKind::kBackward, mb});
  return a;
}

}  // namespace hydrozoa::runtime
