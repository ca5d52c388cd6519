// PipeDream's partition (plan/planners/pipedream_dp.h) as a plan.json that
// `hydrozoa train` runs with the pipedream schedule: the lowest level's
// stages, each replicated over the machines of every level above it.
#pragma once

#include <cstdint>

#include "plan/plan.h"
#include "plan/planners/pipedream_dp.h"

namespace hydrozoa::plan {

// The stages of `result` (replicas multiplied down the levels) with
// PipeDream's NOAM, ⌈workers / input-stage replicas⌉, microbatches in flight
// per input-stage copy (raised until every stage's copies divide a step's
// microbatches, NOTE [Unevenly replicated stages] in plan.cc), each of
// `microbatch_size` samples; the predicted time is the slowest stage's per
// microbatch (PipeDream's A^L), a step's microbatches one after another.
// The model's name and options are the caller's to fill in.
Plan pipeDreamPlan(const PipeDreamResult& result, const PipeDreamStates& states, const PipeDreamOptions& options,
                   std::int64_t microbatch_size);

}  // namespace hydrozoa::plan
