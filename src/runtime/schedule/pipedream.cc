#include "runtime/schedule/pipedream.h"

#include <algorithm>

#include "plan/cost/two_bw.h"

namespace hydrozoa::runtime {

std::vector<Action> PipeDreamSchedule::computeOrder(const PipelineShape& shape) const {
  return fromPasses(plan::asyncOneFOneBOrder(shape.stage, shape.stages, shape.microbatches, 0, 0));
}

int PipeDreamSchedule::weightVersions(const PipelineShape& shape) const {
  return std::max(1, shape.stages - shape.stage);
}

std::vector<Action> PipeDreamSchedule::actions(const PipelineShape& shape) const {
  return lowerPerMicrobatch(computeOrder(shape), shape);
}

std::vector<Action> PipeDreamSchedule::actions(const PipelineShape& shape, int carried, int next) const {
  return lowerPerMicrobatch(
      fromPasses(plan::asyncOneFOneBOrder(shape.stage, shape.stages, shape.microbatches, carried, next)), shape);
}

int PipeDreamSchedule::carriedInto(const PipelineShape& shape, int next) const {
  return plan::carriedForwards(shape.stage, shape.stages, next);
}

}  // namespace hydrozoa::runtime
