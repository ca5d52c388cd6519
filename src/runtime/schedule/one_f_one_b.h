// 1F1B with a flush (PipeDream-Flush, Narayanan et al. 2021, seed 003 §3.2;
// Megatron-LM's non-interleaved schedule, §4.2.1): stage s of p runs
// min(p − s − 1, M) warm-up forward passes, then alternates one forward and
// one backward pass, then the remaining backward passes (cool-down), then the
// flush. The same training as GPipe (every microbatch's forward and backward
// see the step's weights) with the same bubble, but stage s holds at most
// p − s microbatches' activations instead of M. The order is the planner's
// (plan/cost/one_f_one_b.h), where its time and memory are modelled. Stages
// replicated unevenly: NOTE [Round-robin over a stage's replicas].
#pragma once

#include "runtime/schedule/schedule.h"

namespace hydrozoa::runtime {

class OneFOneBSchedule final : public Schedule {
 public:
  const char* name() const override { return "1f1b"; }
  std::vector<Action> computeOrder(const PipelineShape& shape) const override;
};

}  // namespace hydrozoa::runtime
