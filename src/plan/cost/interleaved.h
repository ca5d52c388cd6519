// Interleaved 1F1B (PTD-P, seed 003 §4.2.2; Megatron-LM's interleaved
// schedule) as the planner models it.
//
// The model is cut into p·v consecutive chunks; stage s holds chunks
// s, s + p, ..., s + (v−1)p, so a microbatch crosses every stage v times
// (v× the point-to-point traffic of 1F1B). Order: the step's M·v passes of
// each kind are taken in groups of p microbatches — chunk 0's p forwards,
// then chunk 1's, ... (backwards: the last chunk first) — with
// (p − s − 1)·2 + (v − 1)·p warm-up forwards, then one forward and one
// backward at a time, then the remaining backwards, then the flush. A short
// step whose M is not a multiple of p (an epoch's last) runs its last group
// with the microbatches left, every forward before the first backward (1F1B
// with a partial group deadlocks).
//
// Time: the flow shop of the p·v virtual stages with this order, simulated
// (pipeline.h); with balanced chunks the bubble is (1/v)(p − 1)/M of the
// ideal time, v times smaller than 1F1B's.
// Memory: each stage holds its v chunks' state, and per chunk the most
// microbatches its order stashes at once (bounded by the first stage's).
#pragma once

#include <cstdint>
#include <vector>

#include "plan/cost/schedules.h"

namespace hydrozoa::plan {

std::vector<Pass> interleavedOrder(int stage, int stages, int chunks, std::int64_t microbatches);

}  // namespace hydrozoa::plan
