// PipeDream-2BW's planner (seed 003 §3.3, Algorithm 1 with the closed-form
// cost functions of §3.3.3): for every split of the workers into d
// data-parallel pipelines of p stages (d·p = workers), every microbatch size
// b the profile measured with m = B/(d·b) microbatches per batch, with and
// without activation recomputation, and for 2BW and PipeDream-Flush (1F1B
// with a flush), the throughput and the memory per worker; the best by
// throughput among those that fit.
//
// Stages split the chain of layers into p contiguous pieces of least
// maximal compute (the thesis's B/p blocks per stage, for any chain). Per
// stage i, with T_i its forward + backward time at b (× c_extra = 4/3 with
// recomputation), C_i = 2·(|A_in| + |A_out|)/bw_in its transfers with its
// neighbours (0 when p = 1) and R_i = 2(d − 1)/d·|W_i|/bw_cross its ring
// allreduce across the d replicas:
//
//   t = max_i max(T_i + C_i, R_i / m)   per microbatch of b (pipelined)
//   2BW: m·t per batch of m·b·d samples; Flush: (m + p − 1)·t (its bubble)
//
// (p = 1 is the thesis's model and data parallelism without pipelining,
// Σ over its one stage; only Flush is considered there, and 2BW only with
// m ≥ p.)
// Memory per worker (the thesis's): 2BW 2|W_i| + p·|A_i(b)| + p·|A_in_i(b)|,
// with recomputation 2|W_i| + |A_i(b)| + p·|A_in_i(b)|; Flush one |W_i|
// instead of two. |A_i(b)| is what the stage's layers stash per microbatch,
// |A_in_i(b)| its input. 2BW needs m ≥ p. Pure C++.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/units.h"
#include "plan/cost/schedules.h"
#include "profile/profile.h"

namespace hydrozoa::plan {

struct TwoBwPlannerOptions {
  int workers = 1;
  std::int64_t global_batch = 0;       // B
  std::optional<Bytes> memory_limit;   // per worker
  BytesPerSecond in_pipeline = 0;      // between a pipeline's stages
  BytesPerSecond cross_pipeline = 0;   // between a stage's replicas
  double c_extra = 4.0 / 3.0;          // compute with recomputation, × this
};

struct TwoBwConfig {
  ScheduleKind schedule = ScheduleKind::kTwoBW;  // kTwoBW or kOneFOneB (PipeDream-Flush)
  int data_parallel = 1, stages = 1;
  std::int64_t microbatch_size = 1, microbatches = 1;
  bool recompute = false;
  std::vector<int> first_layer;  // per stage
  Seconds batch_seconds = 0;     // one batch of B samples
  double samples_per_second = 0;
  Bytes memory = 0;              // the largest stage's, per worker
  bool fits = true;              // within the memory limit
};

struct TwoBwPlannerResult {
  std::vector<TwoBwConfig> considered;  // every configuration evaluated
  std::optional<TwoBwConfig> best;      // the fastest that fits (none: nothing fits)
};

// The configuration's throughput and memory (fields other than the choice
// filled in), with stages cut as planTwoBw cuts them.
TwoBwConfig evaluateTwoBw(const profile::Profile& profile, const profile::Measurement& m,
                          const TwoBwPlannerOptions& o, TwoBwConfig c);

// Every configuration; an error naming the problem when none is possible
// (no measured microbatch size divides the batch among the replicas).
Result<TwoBwPlannerResult> planTwoBw(const profile::Profile& profile, const TwoBwPlannerOptions& o);

// The best configuration of each (d, p) and schedule, the chosen one marked.
std::string renderTwoBw(const TwoBwPlannerResult& r, const TwoBwPlannerOptions& o);

}  // namespace hydrozoa::plan
