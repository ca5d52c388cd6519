#include "report/profile_correction.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/limits.h"

namespace hydrozoa::report {

Result<ProfileCorrection> correctProfile(const profile::Profile& profile, const RunReport& run) {
  if (!run.plan) {
    return invalidArgument(fmt::format("{} has no plan.json: nothing to compare the measurements with", run.dir));
  }
  const plan::Plan& plan = *run.plan;
  const int L = static_cast<int>(profile.numLayers());
  if (plan.model != profile.model) {
    return invalidArgument(fmt::format("{}'s plan is for {}, the profile for {}: give the run's own profile.json",
                                       run.dir, plan.model, profile.model));
  }
  for (const auto& st : plan.stages) {
    for (const plan::LayerRange& r : st.layerRanges()) {
      if (r.first < 0 || r.last < r.first || r.last >= L) {
        return invalidArgument(fmt::format("{}'s plan has a stage of layers {}-{}, but the profile has {} layers: "
                                           "give the run's own profile.json",
                                           run.dir, r.first, r.last, L));
      }
    }
  }
  ProfileCorrection out;
  out.profile = profile;
  for (const StageTiming& t : run.stages) {
    if (t.stage < 0 || t.stage >= static_cast<int>(plan.stages.size())) continue;
    if (!t.predicted_compute || !t.measured_compute || *t.predicted_compute <= 0 || *t.measured_compute <= 0) continue;
    const plan::PlanStage& st = plan.stages[static_cast<size_t>(t.stage)];
    StageCorrection c;
    c.stage = t.stage;
    c.layers = st.layersText();
    c.predicted = *t.predicted_compute;
    c.measured = *t.measured_compute;
    c.factor = c.measured / c.predicted;
    auto comparable = [&](const char* what, double factor, Seconds measured, Seconds predicted) -> Status {
      if (std::isfinite(factor) && factor <= kMaxCorrection && factor >= 1 / kMaxCorrection) return Status();
      return invalidArgument(fmt::format(
          "{}: stage {}'s {} took {} per step against a predicted {} ({:.2f}x); a run this far from its profile "
          "was not made with it (another machine, or a run that spent its traced steps waiting)",
          run.dir, t.stage, what, formatSeconds(measured), formatSeconds(predicted), factor));
    };
    HZ_RETURN_IF_ERROR(comparable("compute", c.factor, c.measured, c.predicted));
    // Every layer the stage ran: its layers, or an interleaved stage's chunks.
    const std::vector<plan::LayerRange> ranges = st.layerRanges();
    for (profile::Measurement& m : out.profile.measurements) {
      for (const plan::LayerRange& r : ranges) {
        for (int i = r.first; i <= r.last; ++i) {
          profile::LayerCost& l = m.layers[static_cast<size_t>(i)];
          for (double* ms : {&l.forward_ms, &l.backward_ms, &l.cold_forward_ms, &l.cold_backward_ms}) *ms *= c.factor;
        }
      }
    }
    if (t.predicted_update && t.measured_update && *t.predicted_update > 0 && *t.measured_update > 0) {
      c.update_predicted = t.predicted_update;
      c.update_measured = t.measured_update;
      c.update_factor = *t.measured_update / *t.predicted_update;
      HZ_RETURN_IF_ERROR(comparable("optimizer update", c.update_factor, *c.update_measured, *c.update_predicted));
      for (const plan::LayerRange& r : ranges) {
        for (int i = r.first; i <= r.last; ++i) {
          auto& layer = out.profile.layers[static_cast<size_t>(i)];
          layer.optimizer_ms *= c.update_factor;  // the span holds both when the plan kept the step before
          layer.snapshot_ms *= c.update_factor;
        }
      }
    }
    out.stages.push_back(c);
  }

  // Memory: the worker furthest above its stage's plan (or, when all are
  // below, the one closest to it).
  out.runtime_before = out.runtime_after = profile.runtime_bytes;
  Bytes excess = std::numeric_limits<Bytes>::min();
  if (run.outcome) {
    for (const WorkerOutcome& w : run.outcome->workers) {
      if (!w.peak_memory || w.stage >= static_cast<int>(plan.stages.size())) continue;
      const Bytes planned = plan.stages[static_cast<size_t>(w.stage)].memory_bytes;
      if (planned <= 0) continue;
      if (*w.peak_memory - planned > excess) {
        excess = *w.peak_memory - planned;
        out.memory_worker = w.id;
        out.memory_planned = planned;
        out.memory_peak = *w.peak_memory;
      }
    }
  }
  if (out.memory_worker) {
    out.runtime_after = std::max<Bytes>(0, saturatingAdd(profile.runtime_bytes, excess));
    out.profile.runtime_bytes = out.runtime_after;
  }
  if (out.stages.empty() && !out.memory_worker) {
    return invalidArgument(fmt::format(
        "{} has neither traced steps (trace.json; output.trace_steps) nor workers' peak memory (summary.json): "
        "nothing to correct the profile with",
        run.dir));
  }
  return out;
}

}  // namespace hydrozoa::report
