// Interleaved 1F1B (PTD-P, Narayanan et al. 2021, seed 003 §4.2.2): each
// stage holds v model chunks (stage s holds chunks s, s+p, ...), so the
// pipeline bubble shrinks to (1/v)(p − 1)/M of the ideal time at the cost of
// v× the point-to-point traffic. The same training as GPipe. The order is
// the planner's (plan/cost/interleaved.h).
#pragma once

#include "runtime/schedule/schedule.h"

namespace hydrozoa::runtime {

class InterleavedSchedule final : public Schedule {
 public:
  const char* name() const override { return "interleaved"; }
  // At least 2 chunks, at most kMaxChunks; the step's microbatches a
  // multiple of the stages.
  Status check(const PipelineShape& shape) const override;
  std::vector<Action> computeOrder(const PipelineShape& shape) const override;
};

}  // namespace hydrozoa::runtime
