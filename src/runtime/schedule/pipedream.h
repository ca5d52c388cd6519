// PipeDream's asynchronous 1F1B (Narayanan et al. 2019, seed 003 §2.3):
// 1F1B without a flush between steps, as 2bw (runtime/schedule/two_bw.h),
// but every microbatch is an update of its own: after each backward pass
// the stage sums that microbatch's gradient with its replicas' and steps
// its optimizer. Stage s of p keeps w = p − s microbatches in flight, so a
// forward pass of microbatch k runs after k − w + 1 updates and its backward
// pass must use the same weights (weight stashing): w weight versions,
// NOTE [Weight versions]. Microbatch k's gradient on stage s is thus taken
// at the weights w − 1 updates old, PipeDream's per-stage staleness.
//
// Not yet: vertical sync, and stages replicated unevenly (1F1B-RR).
#pragma once

#include "runtime/schedule/schedule.h"

namespace hydrozoa::runtime {

class PipeDreamSchedule final : public Schedule {
 public:
  const char* name() const override { return "pipedream"; }
  std::vector<Action> computeOrder(const PipelineShape& shape) const override;
  bool asynchronous() const override { return true; }
  bool updatePerMicrobatch() const override { return true; }
  int weightVersions(const PipelineShape& shape) const override;
  std::vector<Action> actions(const PipelineShape& shape) const override;
  std::vector<Action> actions(const PipelineShape& shape, int carried, int next) const override;
  int carriedInto(const PipelineShape& shape, int next) const override;
};

}  // namespace hydrozoa::runtime
