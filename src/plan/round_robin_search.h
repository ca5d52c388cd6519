// Hydrozoa's search's row for PipeDream's 1F1B-RR (stages replicated
// unevenly, docs/schedules.md "In Hydrozoa's own search"): PipeDream's
// optimizer (planners/pipedream_dp.h) picks the stages and their copies for
// the plan's workers at one profiled microbatch size, and this search's
// models cost them: time by cost/round_robin.h, memory by cost/memory.h,
// workers right-sized and priced by resources.h.
#pragma once

#include <optional>

#include "plan/search.h"

namespace hydrozoa::plan {

// nullopt when the optimizer replicates every stage alike (an even row),
// when the global batch or a pinned microbatch count cannot be dealt over
// its copies, or when the optimizer would take long (L layers and W workers
// with L³·W² above 5·10^7); an infeasible row when a stage does not fit `limit` or any worker.
std::optional<Candidate> roundRobinCandidate(const profile::Profile& profile, const Catalog& catalog,
                                             const SearchOptions& o, const std::optional<Bytes>& limit,
                                             const profile::Measurement& meas);

// What a copy of the stage of layers first..last holds with `held`
// microbatches in flight (cost/round_robin.h): cost/memory.h's stage memory
// with their activations and, beyond the first, a stashed weight version
// each; `data`, `sharedSlot` and `recompute` as memoryCosts and MemoryCosts
// take them.
Bytes roundRobinStageMemory(const profile::Profile& prof, const profile::Measurement& meas, int first, int last,
                            std::int64_t held, Bytes data = 0, bool sharedSlot = false, bool recompute = false);

}  // namespace hydrozoa::plan
