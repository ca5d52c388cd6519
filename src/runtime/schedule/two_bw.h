// PipeDream-2BW (Narayanan et al. 2021, seed 003 §3.2): 1F1B without a flush
// between steps, and two weight versions per stage. Stage s of p keeps
// p − s microbatches in flight across the step boundary: the next step's
// first p − s − 1 forward passes run among this step's last backward passes
// (NOTE [Asynchronous schedules], schedule.h). Every pass of step t runs on
// W(t−1), and step t's gradient, summed over its M microbatches and the
// replicas, updates W(t): W(t+1) = W(t) − ν·∇f(W(t−1)), W(−1) = W(0). M must
// be at least p, so that no third version is live. The order is the
// planner's (plan/cost/two_bw.h).
#pragma once

#include "runtime/schedule/schedule.h"

namespace hydrozoa::runtime {

class TwoBwSchedule final : public Schedule {
 public:
  const char* name() const override { return "2bw"; }
  Status check(const PipelineShape& shape) const override;
  // A step on its own (carried in nothing, draining).
  std::vector<Action> computeOrder(const PipelineShape& shape) const override;
  bool asynchronous() const override { return true; }
  int weightVersions(const PipelineShape& /*shape*/) const override { return 2; }
  std::vector<Action> actions(const PipelineShape& shape, int carried, int next) const override;
  int carriedInto(const PipelineShape& shape, int next) const override;
};

}  // namespace hydrozoa::runtime
