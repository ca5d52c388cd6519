// A profile corrected by what a run measured (`hydrozoa profile --from-run
// RUN_DIR`; docs/profile.md, "Correcting a profile from a run"), so that the
// next plan starts from the times and memory this machine really showed.
//
// Step times: each stage's measured compute per step (from trace.json, the
// median over its traced steps, mean over its workers) over the plan's
// predicted compute (microbatches × (forward + backward), shared-host scaling
// included) gives a factor; every layer of that stage has its forward and
// backward times (and their cold times, NOTE [Passes after another chunk's],
// profile/measure.cc: the plan's are those of an interleaved stage) multiplied by it, at every microbatch size of the profile
// (a layer's relative error is taken to be the same at every size: only the
// run's size was observed). The allreduce and the transfers are not changed:
// they come from the network figures, not the per-layer times. The
// optimizer's update is corrected the same way, by its own factor per stage
// (measured "optimizer step" over the plan's update_seconds).
//
// Memory: the worker whose peak resident memory most exceeds its stage's
// planned memory sets the excess; the profile's runtime_bytes (the memory of a
// worker process before its model) grows by it, or shrinks when every worker
// peaked below its plan (by the least shortfall, never below zero).
//
// Pure: values in, values out. Thread-safety: none needed.
#pragma once

#include <optional>
#include <vector>

#include "core/status.h"
#include "core/units.h"
#include "profile/profile.h"
#include "report/run_report.h"

namespace hydrozoa::report {

struct StageCorrection {
  int stage = 0;
  std::string layers;                   // the plan's PlanStage::layersText()
  Seconds predicted = 0, measured = 0;  // compute per step
  double factor = 1;                    // measured / predicted
  // The optimizer's update per step, when the plan predicted one and the
  // trace has it: the stage's layers' optimizer_ms are multiplied by its factor.
  std::optional<Seconds> update_predicted, update_measured;
  double update_factor = 1;
};

struct ProfileCorrection {
  profile::Profile profile;             // the corrected profile
  std::vector<StageCorrection> stages;  // the stages whose compute was traced
  Bytes runtime_before = 0, runtime_after = 0;
  std::optional<int> memory_worker;  // the worker that set the memory correction
  Bytes memory_planned = 0, memory_peak = 0;  // its stage's plan and its peak
};

// A factor outside [1/kMaxCorrection, kMaxCorrection] means the run is not
// comparable with the profile (a different machine, a run that spent its
// traced steps waiting): refused rather than applied.
inline constexpr double kMaxCorrection = 20;

// Corrects `profile` (the run's own profile.json) with `run`. Errors, each
// naming the run directory: no plan.json; a plan for another model or number
// of layers; neither a traced stage nor a worker's peak memory to correct
// with; a factor past kMaxCorrection.
Result<ProfileCorrection> correctProfile(const profile::Profile& profile, const RunReport& run);

}  // namespace hydrozoa::report
