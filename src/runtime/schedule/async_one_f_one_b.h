// Asynchronous 1F1B (NOTE [Asynchronous schedules] in schedule.h): what
// PipeDream-2BW (two_bw.h) and PipeDream (pipedream.h) share. They run the
// same order of passes, 1F1B without a flush, stage s keeping p − s
// microbatches in flight (or, its stages replicated unevenly, the workers
// after it plus one, round-robin: NOTE [Round-robin over a stage's
// replicas]); they differ in when they update (once a step, or after every
// microbatch) and in the weights a pass sees.
#pragma once

#include "runtime/schedule/schedule.h"

namespace hydrozoa::runtime {

class AsyncOneFOneB : public Schedule {
 public:
  bool asynchronous() const override { return true; }
  std::vector<Action> computeOrder(const PipelineShape& shape) const override;
  std::vector<Action> actions(const PipelineShape& shape) const override;
  std::vector<Action> actions(const PipelineShape& shape, int carried, int next) const override;
  // Round-robin, `carried` and `next` count the step's microbatches over
  // all of the stage's replicas, as the result does.
  int carriedInto(const PipelineShape& shape, int next) const override;

 protected:
  // The step's passes (carried, next as actions()).
  static std::vector<Action> passes(const PipelineShape& shape, int carried, int next);
  // Flushed, or an update per microbatch.
  virtual std::vector<Action> lower(const std::vector<Action>& passes, const PipelineShape& shape) const = 0;
};

}  // namespace hydrozoa::runtime
