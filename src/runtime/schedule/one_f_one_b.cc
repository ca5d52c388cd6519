#include "runtime/schedule/one_f_one_b.h"

#include "plan/cost/one_f_one_b.h"

namespace hydrozoa::runtime {

// p − s − 1 warm-up forwards are the workers after the stage, one per
// stage; round-robin, all of theirs (NOTE [Round-robin over a stage's replicas]).
std::vector<Action> OneFOneBSchedule::computeOrder(const PipelineShape& shape) const {
  return dealtPasses(plan::oneFOneBOrderWithWarmup(shape.downstreamWorkers(), shape.orderMicrobatches()), shape);
}

}  // namespace hydrozoa::runtime
