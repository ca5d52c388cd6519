#include "runtime/schedule/async_one_f_one_b.h"

#include <algorithm>

#include "plan/cost/two_bw.h"

namespace hydrozoa::runtime {

// p − s without replicas; round-robin, NOTE [Round-robin over a stage's replicas].
int AsyncOneFOneB::inFlight(const PipelineShape& shape) { return shape.inFlight(); }

std::vector<Action> AsyncOneFOneB::passes(const PipelineShape& shape, int carried, int next) {
  return dealtPasses(plan::asyncOneFOneBOrderInFlight(inFlight(shape), shape.orderMicrobatches(), carried, next),
                     shape);
}

std::vector<Action> AsyncOneFOneB::computeOrder(const PipelineShape& shape) const { return passes(shape, 0, 0); }

std::vector<Action> AsyncOneFOneB::actions(const PipelineShape& shape) const {
  return lower(computeOrder(shape), shape);
}

std::vector<Action> AsyncOneFOneB::actions(const PipelineShape& shape, int carried, int next) const {
  return lower(passes(shape, carried, next), shape);
}

int AsyncOneFOneB::carriedInto(const PipelineShape& shape, int next) const {
  return std::min(inFlight(shape) - 1, next);
}

}  // namespace hydrozoa::runtime
