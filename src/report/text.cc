#include "report/text.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "core/table.h"
#include "core/units.h"

namespace hydrozoa::report {
namespace {

int countEvents(const RunReport& run, const char* kind) {
  return static_cast<int>(
      std::count_if(run.events.begin(), run.events.end(), [kind](const RunEvent& e) { return e.kind == kind; }));
}

std::string optSeconds(const std::optional<Seconds>& s) { return s ? formatSeconds(*s) : "-"; }

}  // namespace

std::string describePlan(const plan::Plan& p) {
  if (!p.evenlyReplicated()) {
    const std::vector<int> replicas = p.stageReplicas();
    const std::int64_t K = p.num_microbatches * p.data_parallel;
    return fmt::format("{} stages replicated {} ({} workers), {} microbatch{} of {} a step dealt round-robin, global "
                       "batch {}",
                       p.pipeline_stages, fmt::join(replicas, ", "), p.workersUsed(), K, K == 1 ? "" : "es",
                       p.microbatch_size, p.globalBatch());
  }
  return fmt::format("{}\u00d7{} ({} replica{} \u00d7 {} stage{}), {} microbatch{} of {}, global batch {}",
                     p.data_parallel, p.pipeline_stages, p.data_parallel, p.data_parallel == 1 ? "" : "s",
                     p.pipeline_stages, p.pipeline_stages == 1 ? "" : "s", p.num_microbatches,
                     p.num_microbatches == 1 ? "" : "es", p.microbatch_size, p.globalBatch());
}

std::string relativeError(const std::optional<double>& measured, const std::optional<double>& predicted) {
  if (!measured || !predicted || *predicted <= 0 || *measured <= 0) return "";
  return fmt::format("{:+.0f}%", 100 * (*measured / *predicted - 1));
}

std::vector<std::pair<std::string, std::string>> runFacts(const RunReport& run) {
  std::vector<std::pair<std::string, std::string>> f;
  const RunOutcome* o = run.outcome ? &*run.outcome : nullptr;
  std::string status = run.status();
  if (o && !o->reason.empty()) status += ": " + o->reason;
  f.emplace_back("status", status);
  if (!run.job_name.empty()) f.emplace_back("job", run.job_name);
  if (!run.model.empty()) f.emplace_back("model", run.model);
  if (run.plan) f.emplace_back("plan", describePlan(*run.plan));
  if (o && o->steps_done) {
    f.emplace_back("steps", o->steps_total ? fmt::format("{} of {}", *o->steps_done, *o->steps_total)
                                           : std::to_string(*o->steps_done));
  } else if (!run.steps.empty()) {
    f.emplace_back("steps", fmt::format("{} (from metrics.jsonl)", run.steps.back().step));
  }
  if (o && o->epochs_completed) f.emplace_back("epochs completed", std::to_string(*o->epochs_completed));
  if (!run.steps.empty()) {
    f.emplace_back("loss", fmt::format("{:.4f} at step 1, {:.4f} at step {}", run.steps.front().loss,
                                       run.steps.back().loss, run.steps.back().step));
  }
  if (!run.evals.empty()) {
    const EvalPoint& e = run.evals.back();
    f.emplace_back("test accuracy",
                   fmt::format("{:.2f}% after epoch {} (test loss {:.4f})", 100 * e.test_accuracy, e.epoch, e.test_loss));
  }
  if (o && o->throughput && *o->throughput > 0) {
    f.emplace_back("throughput", formatCount(*o->throughput) + " samples/s");
  }
  if (o && (o->iteration_measured || o->iteration_predicted)) {
    std::string s = optSeconds(o->iteration_measured) + " measured (median), " + optSeconds(o->iteration_predicted) +
                    " predicted";
    const std::string err = relativeError(o->iteration_measured, o->iteration_predicted);
    if (!err.empty()) s += " (" + err + ")";
    f.emplace_back("step time", s);
  }
  if (o && o->bubble_measured && o->bubble_predicted) {
    f.emplace_back("bubble", fmt::format("{:.1f}% measured, {:.1f}% predicted", 100 * *o->bubble_measured,
                                         100 * *o->bubble_predicted));
  }
  if (o && o->cost) {
    std::string s = formatUsd(*o->cost);
    if (o->samples_per_dollar && *o->samples_per_dollar > 0) {
      s += " (" + formatCount(*o->samples_per_dollar) + " samples/$)";
    }
    f.emplace_back("cost", s);
  } else if (!run.steps.empty()) {
    f.emplace_back("cost", formatUsd(run.steps.back().cost) + " so far");
  }
  if (o && (o->training_seconds || o->wall_seconds)) {
    f.emplace_back("time", optSeconds(o->training_seconds) + " training, " + optSeconds(o->wall_seconds) + " wall");
  }
  const int lost = countEvents(run, "worker_lost"), recovered = countEvents(run, "recovered");
  if (lost > 0 || (o && o->generations && *o->generations > 1)) {
    f.emplace_back("recoveries", fmt::format("{} worker{} lost, {} recovered{}", lost, lost == 1 ? "" : "s", recovered,
                                             o && o->generations ? fmt::format(" ({} generations)", *o->generations)
                                                                 : std::string()));
  }
  const int scaled = countEvents(run, "scaled");
  if (scaled > 0 || (o && o->scaling_policy && *o->scaling_policy != "fixed")) {
    f.emplace_back("scaling", fmt::format("{}, {} change{} of replicas",
                                          o && o->scaling_policy ? *o->scaling_policy : std::string("?"), scaled,
                                          scaled == 1 ? "" : "s"));
  }
  if (o && o->launcher) f.emplace_back("launcher", *o->launcher);
  return f;
}

std::string renderRunText(const RunReport& run) {
  std::string out = fmt::format("Run {}\n", run.dir);
  size_t width = 0;
  const auto facts = runFacts(run);
  for (const auto& [name, value] : facts) width = std::max(width, name.size());
  for (const auto& [name, value] : facts) out += fmt::format("  {:<{}}  {}\n", name, width, value);

  if (!run.evals.empty()) {
    TextTable t({"epoch", "time", "test loss", "test accuracy", "cost"}, {true, true, true, true, true});
    for (const auto& e : run.evals) {
      t.addRow({std::to_string(e.epoch), formatSeconds(e.t), fmt::format("{:.4f}", e.test_loss),
                fmt::format("{:.2f}%", 100 * e.test_accuracy), e.cost ? formatUsd(*e.cost) : "-"});
    }
    out += "\nEvaluations\n" + t.render();
  }
  if (!run.events.empty()) {
    TextTable t({"time", "event", "detail"}, {true, false, false});
    for (const auto& e : run.events) t.addRow({formatSeconds(e.t), e.label, e.detail});
    out += "\nEvents\n" + t.render();
  }
  if (!run.stages.empty()) {
    TextTable t({"stage", "layers", "compute predicted", "measured", "error", "allreduce predicted", "measured", "error",
                 "update predicted", "measured"},
                {true, false, true, true, true, true, true, true, true, true});
    for (const auto& s : run.stages) {
      t.addRow({std::to_string(s.stage), s.layers, optSeconds(s.predicted_compute), optSeconds(s.measured_compute),
                relativeError(s.measured_compute, s.predicted_compute), optSeconds(s.predicted_allreduce),
                optSeconds(s.measured_allreduce), relativeError(s.measured_allreduce, s.predicted_allreduce),
                optSeconds(s.predicted_update), optSeconds(s.measured_update)});
    }
    out += "\nTime per step by stage (predicted: plan.json; measured: trace.json, median of the traced steps)\n" +
           t.render();
  }
  if (run.plan) out += "\n" + plan::renderPlanTable(*run.plan);
  if (!run.notes.empty()) {
    out += "\nNotes\n";
    for (const auto& n : run.notes) out += "  - " + n + "\n";
  }
  return out;
}

}  // namespace hydrozoa::report
