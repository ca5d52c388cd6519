// PipeDream-2BW (double-buffered weights; seed 003 §3.2) as the planner
// models it.
//
// Order: 1F1B without a flush. Stage s of p keeps w = p − s microbatches in
// flight: as one step's last backward passes run, the next step's first
// w − 1 forward passes already do, so the pipeline never drains between
// steps (only where the runtime must: an epoch's end, a checkpoint, a stop).
// One step's passes, from after the previous step's last backward pass to
// after its own, are: the forwards carried over that the step before did not
// run, then for each microbatch j one forward pass of microbatch j + w − 1
// (of this step or, past its end, of the next) and the backward pass of j.
//
// Weights: every microbatch of step t runs forward and backward on W(t−1),
// and the step's gradient updates W(t): W(t+1) = W(t) − ν·∇f(W(t−1)),
// W(−1) = W(0). Two versions are live on a stage at once (the one step t's
// passes use, the one step t+1's early forwards use); the thesis requires
// M ≥ p so that no third is.
//
// Time: in the steady state a step takes what M more microbatches add to a
// long 1F1B pipeline (its bottleneck stage's M·(f + b) when balanced): the
// difference of the simulated 1F1B times for 2M and M microbatches; the
// allreduce and the update are not hidden (the next step's passes wait for
// them on each stage). Memory: 1F1B's stash (p − s microbatches) and, in
// this runtime, two working copies of the weights besides the optimizer's.
#pragma once

#include <cstdint>
#include <vector>

#include "plan/cost/schedules.h"

namespace hydrozoa::plan {

// Forward passes stage `stage` runs of a step before the step itself begins
// (in the step before, when it did not drain): min(p − s − 1, M).
int carriedForwards(int stage, int stages, std::int64_t microbatches);

// One step of stage `stage`: `carried` of its `microbatches` forwards already
// ran in the step before; `next` microbatches of the step after may begin
// (Pass::step = 1; 0: the pipeline drains after this step).
std::vector<Pass> asyncOneFOneBOrder(int stage, int stages, std::int64_t microbatches, int carried, int next);
// The same with `inFlight` microbatches in flight (1F1B: w = p − s); its
// carried forwards are then min(inFlight − 1, M).
std::vector<Pass> asyncOneFOneBOrderInFlight(int inFlight, std::int64_t microbatches, int carried, int next);

// A step in the steady state (carried over and carrying into a next step of
// the same size).
std::vector<Pass> twoBwOrder(int stage, int stages, std::int64_t microbatches);

}  // namespace hydrozoa::plan
