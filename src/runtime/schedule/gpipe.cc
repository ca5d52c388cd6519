#include "runtime/schedule/gpipe.h"

#include "plan/cost/schedules.h"

namespace hydrozoa::runtime {

std::vector<Action> GPipeSchedule::computeOrder(const PipelineShape& shape) const {
  return fromPasses(plan::gpipeOrder(shape.microbatches));
}

}  // namespace hydrozoa::runtime
