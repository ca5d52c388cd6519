// PipeDream's 1F1B-RR (seed 003 §2.3) as Hydrozoa's search models it: stage
// s of a pipeline has its own r_s copies, and the step's microbatches go
// round-robin over them (NOTE [Round-robin over a stage's replicas],
// runtime/schedule/schedule.h).
//
// Time: in the asynchronous steady state every copy of stage s runs one of
// every r_s microbatches, each costing it f_s + b_s and its part of the
// updates (under pipedream a copy updates once per microbatch of its own,
// summing with its stage's other copies first: NOTE [Updates over unevenly
// replicated stages], runtime/exec/step_executor.cc). A microbatch leaves
// the pipeline every
//
//   t = max( max_s (f_s + b_s + u_s) / r_s,          each stage's copies
//            max_s 2·c_s / min(r_{s−1}, r_s),         each link's pairs of copies
//            Σ_s (f_s + b_s + u_s) / cores )          the host's cores, when fewer than the copies
//
// the compute terms slowed by the host's cores in use (every one in the
// steady state: HostShare::rate, NOTE [Compute beside busy cores],
// pipeline.cc); a copy never computes faster than a core of its own, and
// past the cores the copies that wait leave theirs to the others. With every stage replicated alike and balanced,
// the first term is the even pipedream plan's bottleneck M·(f + b)/A per
// microbatch.
//
// Memory: a copy of stage s holds the microbatches in flight on it,
// ⌈(r_s + Σ_{t>s} r_t) / r_s⌉ (PipeDream's NOAM over the copies: the
// workers of the stage and after it), each one's activations and a stashed
// weight version (planners/pipedream_plan.h, stageMemoryFromProfile).
#pragma once

#include <cstdint>
#include <vector>

#include "core/units.h"
#include "plan/cost/pipeline.h"

namespace hydrozoa::plan {

struct RoundRobinStage {
  Seconds compute = 0;  // f + b, one microbatch, on a core of its own
  Seconds update = 0;   // the copy's sum with the stage's other copies and its update, per microbatch of its own
  Seconds cut_in = 0;   // the transfer into it, one way (0 for the first stage)
  int replicas = 1;     // r_s
};

// t above, in seconds per microbatch. `host.replicas` is ignored: each
// stage's own copies count; `host.threads` threads each.
// REQUIRES: at least one stage, every replicas >= 1.
Seconds roundRobinSecondsPerMicrobatch(const std::vector<RoundRobinStage>& stages, const HostShare& host);

// Microbatches in flight on a copy of each stage (the memory term above).
std::vector<std::int64_t> roundRobinInFlight(const std::vector<int>& replicas);

// The window of stage s's order over a step's microbatches (all of its
// copies'), W_s = r_s·(h_s − 1) + 1 for the h_s above: in a 1F1B order
// holding W of them at once, dealt round-robin, each copy holds
// ⌊(W − 1) / r_s⌋ + 1 of its own (NOTE [Round-robin over a stage's
// replicas], runtime/schedule/schedule.h).
std::int64_t roundRobinWindow(const std::vector<int>& replicas, int stage);
// The largest window over the stages: a 2bw step must hold as many
// microbatches (runtime/schedule/two_bw.cc).
std::int64_t roundRobinStepInFlight(const std::vector<int>& replicas);

// The least number of microbatches a step deals evenly over every stage's
// copies (their least common multiple; NOTE [Unevenly replicated stages],
// plan.cc), or the first partial multiple above `most` once it passes it
// (so that it never overflows). REQUIRES: every replicas >= 1.
std::int64_t roundRobinUnit(const std::vector<int>& replicas, std::int64_t most);

// PipeDream's NOAM per input-stage copy, ⌈workers / replicas[0]⌉, raised to
// the first count whose step (replicas[0] of them) `unit` divides.
std::int64_t roundRobinNoam(const std::vector<int>& replicas, std::int64_t unit);

}  // namespace hydrozoa::plan
