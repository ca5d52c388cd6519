#include "runtime/schedule/two_bw.h"

#include <fmt/format.h>

#include "plan/cost/round_robin.h"

namespace hydrozoa::runtime {

Status TwoBwSchedule::check(const PipelineShape& shape) const {
  HZ_RETURN_IF_ERROR(Schedule::check(shape));
  if (shape.roundRobin()) {
    // A step must hold what every stage's copies keep in flight.
    const auto w = static_cast<int>(plan::roundRobinStepInFlight(shape.stageReplicas));
    if (shape.stepMicrobatches < w) {
      return invalidArgument(fmt::format(
          "the 2bw schedule needs at least as many microbatches per step as a stage's copies keep in flight over "
          "them ({} < {}), or a third weight version would be live; raise num_microbatches",
          shape.stepMicrobatches, w));
    }
    return Status();
  }
  if (shape.microbatches < shape.stages) {
    return invalidArgument(fmt::format(
        "the 2bw schedule needs at least as many microbatches per step as stages ({} < {}), or a third weight "
        "version would be live; use --microbatches {} or more",
        shape.microbatches, shape.stages, shape.stages));
  }
  return Status();
}

std::vector<Action> TwoBwSchedule::lower(const std::vector<Action>& passes, const PipelineShape& shape) const {
  return lowerFlushed(passes, shape);
}

}  // namespace hydrozoa::runtime
