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

#include "runtime/schedule/async_one_f_one_b.h"

namespace hydrozoa::runtime {

class TwoBwSchedule final : public AsyncOneFOneB {
 public:
  const char* name() const override { return "2bw"; }
  Status check(const PipelineShape& shape) const override;
  int weightVersions(const PipelineShape& /*shape*/) const override { return 2; }

 private:
  std::vector<Action> lower(const std::vector<Action>& passes, const PipelineShape& shape) const override;
};

}  // namespace hydrozoa::runtime
