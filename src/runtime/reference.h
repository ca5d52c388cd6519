// The single-process reference: one process, the whole model, gradient
// accumulation over exactly the microbatches the pipeline runs (same data
// order, same sizes, same loss weights, same dropout seeds; NOTE
// [Equivalence with one process] in stage.h). The correctness tests compare
// every hybrid run against it, step by step.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "cluster/job_spec.h"
#include "cluster/scaling/epochs.h"
#include "core/status.h"
#include "model/model.h"

namespace hydrozoa::runtime {

struct ReferenceOptions {
  cluster::JobSpec job;
  int replicas = 1;                  // A: how the steps' samples are split
  std::int64_t microbatch_size = 1;  // m
  std::int64_t steps = 1;            // global steps to run
  // A job whose replicas change: each step's replicas, epoch and learning-
  // rate factor from here (the per-replica batch stays); `replicas` and the
  // job's global batch are then unused.
  std::optional<cluster::EpochSchedule> epochs;
  // PipeDream-2BW's update (runtime/schedule/two_bw.h): step t's gradient
  // is taken at the weights before the previous update,
  // W(t+1) = W(t) − ν·∇f(W(t−1)), W(−1) = W(0).
  bool stale_weights = false;
  // PipeDream (runtime/schedule/pipedream.h): an update per microbatch, and
  // each microbatch's passes on stage s (of the stages starting at these
  // layers) at the weights of max(0, j − (p − s) + 1) updates since the
  // pipeline last drained, j its microbatches since then. It drains after
  // an epoch's last step, the run's last, and a step before one in which
  // some replica has no microbatch.
  std::vector<int> weight_stashing_stages;
  // ... with vertical sync (pipedream-vs): every stage at the weights of
  // max(0, j − p + 1) updates since the drain, stage 0's.
  bool vertical_sync = false;
  // ... its stages replicated unevenly, stage s `stage_replicas[s]` times
  // (NOTE [Round-robin over a stage's replicas], runtime/schedule/schedule.h):
  // the step's microbatches of `microbatch_size` (`replicas` unused) dealt
  // round-robin; update u of stage s the samples' mean gradient of
  // microbatches u·r_s to u·r_s + r_s − 1 of its step; each microbatch's
  // passes on stage s at the weights of as many of the stage's updates as
  // its replica had applied at its forward pass in the schedule's order.
  // The pipeline drains after an epoch's last step and the run's last.
  std::vector<int> stage_replicas;
};

struct ReferenceRun {
  std::vector<double> losses;  // mean loss of each step
  model::Model model;          // the final weights
  // fp16: the loss scale after each step (NOTE [Loss scaling]; it halves
  // after a skipped one).
  std::vector<double> loss_scales;
};

Result<ReferenceRun> trainReference(const ReferenceOptions& options);

}  // namespace hydrozoa::runtime
