// PipeDream's partition (plan/planners/pipedream_dp.h) as a plan.json that
// `hydrozoa train` runs with the pipedream schedule: the lowest level's
// stages, each replicated over the machines of every level above it.
#pragma once

#include <cstdint>
#include <optional>

#include "core/status.h"
#include "plan/plan.h"
#include "plan/planners/pipedream_dp.h"
#include "plan/resources.h"

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

// What each worker of `plan`'s stages holds by a Hydrozoa profile (cost/
// memory.h), in place of PipeDream's figure (which knows no process runtime,
// gradients nor optimizer state): the runtime, its layers' weights,
// gradients and optimizer state, a working copy of its weights per
// microbatch in flight (weight stashing) and each one's activations, with
// PipeDream's in-flight count ⌈workers of the stage and after / its copies⌉.
void stageMemoryFromProfile(Plan& plan, const profile::Profile& prof, const profile::Measurement& meas);

// Right-sizes and prices every stage's workers on `catalog` (resources.h)
// from its memory_bytes, as Hydrozoa's search does for its own plans; the
// plan's cost per hour, samples per dollar and platform follow. An error
// names a stage that no worker of the platform holds.
Status priceStages(Plan& plan, const Catalog& catalog, const std::string& accelerator);

}  // namespace hydrozoa::plan
