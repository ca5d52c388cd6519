#include "runtime/schedule/two_bw.h"

#include <fmt/format.h>

namespace hydrozoa::runtime {

Status TwoBwSchedule::check(const PipelineShape& shape) const {
  HZ_RETURN_IF_ERROR(Schedule::check(shape));
  if (shape.roundRobin()) {
    // Stage 0 keeps the most in flight: a step must hold them.
    PipelineShape first = shape;
    first.stage = 0;
    const int w = inFlight(first);
    if (shape.stepMicrobatches < w) {
      return invalidArgument(fmt::format(
          "the 2bw schedule needs at least as many microbatches per step as the workers after the first stage, plus "
          "one ({} < {}), or a third weight version would be live; raise num_microbatches",
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
