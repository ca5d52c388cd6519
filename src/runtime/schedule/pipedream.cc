#include "runtime/schedule/pipedream.h"

#include <algorithm>

#include "plan/cost/two_bw.h"

namespace hydrozoa::runtime {

Status PipeDreamSchedule::check(const PipelineShape& shape) const {
  HZ_RETURN_IF_ERROR(Schedule::check(shape));
  if (verticalSync_ && shape.roundRobin()) {
    return invalidArgument("the pipedream-vs schedule (vertical sync) needs every stage replicated alike; use "
                           "--schedule pipedream for stages with their own replicas");
  }
  return Status();
}

int PipeDreamSchedule::weightVersions(const PipelineShape& shape) const {
  if (verticalSync_) return std::max(1, shape.stages);
  if (!shape.roundRobin()) return std::max(1, shape.stages - shape.stage);
  // Round-robin: the most microbatches in flight on a replica, in the
  // steady state of its dealt order.
  const PipelineShape steady = shape.forStep(2 * shape.replicasOf(shape.stage) * (shape.inFlight() + 1));
  return std::max(1, peakStashed(passes(steady, 0, steady.stepMicrobatches)));
}

std::vector<Action> PipeDreamSchedule::lower(const std::vector<Action>& passes, const PipelineShape& shape) const {
  return lowerPerMicrobatch(passes, shape);
}

}  // namespace hydrozoa::runtime
