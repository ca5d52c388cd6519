#include "runtime/schedule/async_one_f_one_b.h"

#include <algorithm>

#include "plan/cost/two_bw.h"

namespace hydrozoa::runtime {

std::vector<Action> AsyncOneFOneB::passes(const PipelineShape& shape, int carried, int next) {
  return dealtPasses(plan::asyncOneFOneBOrderInFlight(shape.inFlight(), shape.orderMicrobatches(), carried, next),
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
  return std::min(shape.inFlight() - 1, next);
}

}  // namespace hydrozoa::runtime
