// PipeDream's asynchronous 1F1B (Narayanan et al. 2019, seed 003 §2.3):
// 1F1B without a flush between steps, as 2bw (runtime/schedule/two_bw.h),
// but every microbatch is an update of its own: after each backward pass
// the stage sums that microbatch's gradient with its replicas' and steps
// its optimizer. Stage s of p keeps w = p − s microbatches in flight, so a
// forward pass of microbatch k runs after k − w + 1 updates and its backward
// pass must use the same weights (weight stashing): w weight versions,
// NOTE [Weight versions]. Microbatch k's gradient on stage s is thus taken
// at the weights w − 1 updates old, PipeDream's per-stage staleness.
// Stages replicated unevenly (1F1B-RR): each replica keeps the
// microbatches dealt to it in flight (NOTE [Round-robin over a stage's
// replicas], schedule.h), and update u of stage s sums the gradients of
// local microbatch u over the stage's replicas, microbatches u·r_s to
// u·r_s + r_s − 1 of the step.
//
// With vertical sync ("pipedream-vs", seed 003 §2.3), every stage runs
// microbatch k's passes on the version stage 0 ran it on: the weights of
// max(0, j − p + 1) updates since the pipeline last drained, j its
// microbatches since then, on every stage. So the model a microbatch sees is
// one consistent version (staleness p − 1 everywhere), and stage s keeps p
// versions instead of p − s. Not with stages replicated unevenly.
#pragma once

#include "runtime/schedule/async_one_f_one_b.h"

namespace hydrozoa::runtime {

class PipeDreamSchedule final : public AsyncOneFOneB {
 public:
  explicit PipeDreamSchedule(bool verticalSync = false) : verticalSync_(verticalSync) {}
  const char* name() const override { return verticalSync_ ? "pipedream-vs" : "pipedream"; }
  Status check(const PipelineShape& shape) const override;
  bool updatePerMicrobatch() const override { return true; }
  bool verticalSync() const override { return verticalSync_; }
  int weightVersions(const PipelineShape& shape) const override;

 private:
  bool verticalSync_;
  std::vector<Action> lower(const std::vector<Action>& passes, const PipelineShape& shape) const override;
};

}  // namespace hydrozoa::runtime
