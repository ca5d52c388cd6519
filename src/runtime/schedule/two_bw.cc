#include "runtime/schedule/two_bw.h"

#include <fmt/format.h>

#include <algorithm>

#include "plan/cost/two_bw.h"

namespace hydrozoa::runtime {

Status TwoBwSchedule::check(const PipelineShape& shape) const {
  HZ_RETURN_IF_ERROR(Schedule::check(shape));
  if (shape.microbatches < shape.stages) {
    return invalidArgument(fmt::format(
        "the 2bw schedule needs at least as many microbatches per step as stages ({} < {}), or a third weight "
        "version would be live; use --microbatches {} or more",
        shape.microbatches, shape.stages, shape.stages));
  }
  return Status();
}

std::vector<Action> TwoBwSchedule::computeOrder(const PipelineShape& shape) const {
  return fromPasses(plan::asyncOneFOneBOrder(shape.stage, shape.stages, shape.microbatches, 0, 0));
}

std::vector<Action> TwoBwSchedule::actions(const PipelineShape& shape, int carried, int next) const {
  return lowerFlushed(
      fromPasses(plan::asyncOneFOneBOrder(shape.stage, shape.stages, shape.microbatches, carried, next)), shape);
}

int TwoBwSchedule::carriedInto(const PipelineShape& shape, int next) const {
  return plan::carriedForwards(shape.stage, shape.stages, next);
}

}  // namespace hydrozoa::runtime
