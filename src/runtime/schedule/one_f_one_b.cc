#include "runtime/schedule/one_f_one_b.h"

#include "plan/cost/one_f_one_b.h"

namespace hydrozoa::runtime {

// p − s − 1 warm-up forwards, one in flight fewer than the stage holds;
// round-robin, over the step's microbatches (NOTE [Round-robin over a
// stage's replicas]).
std::vector<Action> OneFOneBSchedule::computeOrder(const PipelineShape& shape) const {
  return dealtPasses(plan::oneFOneBOrderWithWarmup(shape.inFlight() - 1, shape.orderMicrobatches()), shape);
}

}  // namespace hydrozoa::runtime
