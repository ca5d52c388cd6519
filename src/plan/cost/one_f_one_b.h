// 1F1B with a flush (PipeDream-Flush, seed 003 §3.2; Megatron-LM's
// non-interleaved schedule, §4.2.1) as the planner models it.
//
// Order: stage s of p runs w = min(p − s − 1, M) warm-up forward passes, then
// one forward and one backward pass at a time, then w backward passes, then
// the flush (the allreduce and one update, as GPipe).
//
// Time: the same flow shop as GPipe's R (pipeline.h) with this order; its
// pipeline time is simulated (simulatedPipelineTime with kOneFOneB). For
// balanced stages it equals GPipe's, (M + p − 1)(f + b); with unbalanced
// ones it can be shorter (a stage alternates instead of waiting for every
// forward of the slowest forward stage) or longer (the alternation idles a
// stage that GPipe's order keeps busy; up to 22% on random chains,
// tests/plan/cost/one_f_one_b_test.cc).
//
// Memory: stage s stashes the activations of at most min(p − s, M)
// microbatches (GPipe: M), so the memory of cost/memory.h with that count.
// The partitioners bound every stage by stage 0's min(p, M).
#pragma once

#include <cstdint>
#include <vector>

#include "plan/cost/schedules.h"

namespace hydrozoa::plan {

std::vector<Pass> oneFOneBOrder(int stage, int stages, std::int64_t microbatches);
// The same with `warmup` forwards before the first backward (1F1B: p − s − 1).
std::vector<Pass> oneFOneBOrderWithWarmup(int warmup, std::int64_t microbatches);

// min(stages − stage, microbatches).
std::int64_t oneFOneBStashed(int stage, int stages, std::int64_t microbatches);

}  // namespace hydrozoa::plan
