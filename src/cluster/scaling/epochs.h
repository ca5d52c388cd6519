// The epochs of a job whose replicas change (Hydrozoa §3.5; docs/scaling.md): a
// piecewise map between global steps and (epoch, step in epoch).
//
// The per-replica batch b stays the same, so an epoch at A replicas has a
// global batch of A·b and ceil(N / (A·b)) steps (floor with drop_last, at
// least 1): changing A at an epoch boundary changes how many steps the
// following epochs have. A segment is a run of epochs with the same
// replicas; global steps count on across segments, so step k of the job is
// in exactly one epoch, and every sample is used once per epoch whatever the
// replicas (the sampler shards each step's samples over the replicas).
//
//   EpochSchedule s(60000, 64, false);
//   s.append(0, 1, 1.0, "");        // epoch 1: 1 replica, 938 steps
//   s.append(1, 2, 0.75, "double"); // epochs 2..: 2 replicas, 469 steps each
//   s.epochStart(2) == 938 + 469
//
// Thread-safety: not synchronised; const methods may be called concurrently.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/files.h"
#include "core/status.h"

namespace hydrozoa::cluster {

struct Segment {
  std::int64_t first_epoch = 0;  // 0-based
  std::int64_t first_step = 0;   // the global step first_epoch begins at
  int replicas = 1;
  double lr_factor = 1;          // times the job's learning rate
  std::string why;               // the policy's reason ("" for the first)
  Json plan;                     // a plan.json made for these replicas; null: the job's plan
};

class EpochSchedule {
 public:
  EpochSchedule() = default;
  // REQUIRES: datasetSize >= 1, perReplicaBatch >= 1.
  EpochSchedule(std::int64_t datasetSize, std::int64_t perReplicaBatch, bool dropLast);

  // From epoch `firstEpoch` (0-based) on, `replicas` replicas. Epochs must
  // increase; an append at the last segment's epoch replaces it.
  void append(std::int64_t firstEpoch, int replicas, double lrFactor, std::string why, Json plan = Json());
  // Drops the segments that begin after `epoch` (a decision is taken back).
  void truncateAfter(std::int64_t epoch);

  std::int64_t stepsPerEpoch(int replicas) const;
  std::int64_t perReplicaBatch() const { return batch_; }
  const std::vector<Segment>& segments() const { return segments_; }
  // REQUIRES: at least one segment.
  const Segment& atEpoch(std::int64_t epoch) const;
  const Segment& atStep(std::int64_t step) const;
  std::int64_t epochStart(std::int64_t epoch) const;   // global step
  std::int64_t epochOf(std::int64_t step) const;       // 0-based
  std::int64_t stepInEpoch(std::int64_t step) const;
  // Whether `step` (global) begins an epoch.
  bool isEpochStart(std::int64_t step) const { return stepInEpoch(step) == 0; }

  // {"per_replica_batch", "segments": [{first_epoch, first_step, replicas, lr_factor, why, plan?}]}
  Json toJson() const;
  static Result<EpochSchedule> fromJson(const Json& j, std::int64_t datasetSize, bool dropLast);

 private:
  std::int64_t size_ = 1, batch_ = 1;
  bool dropLast_ = false;
  std::vector<Segment> segments_;
};

}  // namespace hydrozoa::cluster
