#include "runtime/schedule/one_f_one_b.h"

#include "plan/cost/one_f_one_b.h"

namespace hydrozoa::runtime {

std::vector<Action> OneFOneBSchedule::computeOrder(const PipelineShape& shape) const {
  if (shape.roundRobin()) {
    return dealtPasses(plan::oneFOneBOrderWithWarmup(shape.downstreamWorkers(), shape.stepMicrobatches), shape);
  }
  return fromPasses(plan::oneFOneBOrder(shape.stage, shape.stages, shape.microbatches));
}

}  // namespace hydrozoa::runtime
