// PipeDream's partition (plan/planners/pipedream_dp.h) as a plan.json that
// `hydrozoa train` runs with the pipedream schedule: the lowest level's
// stages, each replicated over the machines of every level above it.
#pragma once

#include <cstdint>
#include <optional>

#include "core/status.h"
#include "plan/plan.h"
#include "plan/planners/pipedream_dp.h"

namespace hydrozoa::plan {

// The stages of `result` (replicas multiplied down the levels), each
// microbatch of `microbatch_size` samples, a step of `global_batch` samples
// (which must be a whole number of microbatches that every stage's copies
// divide: NOTE [Unevenly replicated stages] in plan.cc; an error naming the
// nearest that are, otherwise), or when not given, PipeDream's NOAM,
// ⌈workers / input-stage replicas⌉ microbatches per input-stage copy
// (raised until every stage's copies divide a step's). The predicted time
// is the slowest stage's per microbatch (PipeDream's A^L), a step's
// microbatches one after another. The model's name and options are the
// caller's to fill in.
Result<Plan> pipeDreamPlan(const PipeDreamResult& result, const PipeDreamStates& states,
                           const PipeDreamOptions& options, std::int64_t microbatch_size,
                           std::optional<std::int64_t> global_batch = std::nullopt);

}  // namespace hydrozoa::plan
