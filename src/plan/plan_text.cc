// The plan as `hydrozoa plan` prints it (renderPlanTable, plan.h): the
// strategies considered, the chosen one and its stages.
#include <fmt/format.h>

#include <algorithm>

#include "core/table.h"
#include "plan/plan.h"

namespace hydrozoa::plan {

std::string renderPlanTable(const Plan& p, bool tensorConsidered) {
  std::string out;
  out += fmt::format("Plan for {} ({} profile, {} layers) on {} workers: {} per worker, {} between workers, ",
                     p.model, p.profile_source.empty() ? "a" : p.profile_source, p.layer_names.size(), p.workers,
                     p.memory_limit ? formatBytes(*p.memory_limit) : "memory unlimited", formatBandwidth(p.bandwidth));
  if (p.latency > 0) out += fmt::format("{} latency per message, ", formatSeconds(p.latency));
  if (p.transfer_latency > 0) out += fmt::format("{} per transfer (measured), ", formatSeconds(p.transfer_latency));
  if (p.shared_memory) out += "replicas summing through shared memory, ";
  out += p.global_batch_requested ? fmt::format("global batch {}", *p.global_batch_requested)
                                  : std::string("global batch searched");
  out += fmt::format(", objective {}, platform {}\n\n", p.objective, p.platform);

  // A table with tensor-parallel rows writes every strategy as p×t×d.
  const bool threeD = tensorConsidered || std::any_of(p.alternatives.begin(), p.alternatives.end(),
                                                      [](const PlanAlternative& a) { return a.tensor_parallel > 1; });
  TextTable alts({"", "strategy", "microbatches", "iteration", "samples/s", "$/hour", "samples/$", "memory/worker", "note"},
                 {false, false, true, true, true, true, true, true, false});
  for (const auto& a : p.alternatives) {
    const std::string mb = a.microbatch_size ? fmt::format("{} × {}", a.num_microbatches, a.microbatch_size) : "-";
    if (a.feasible) {
      alts.addRow({a.chosen ? "*" : "", a.strategy(threeD), mb,
                   formatSeconds(a.iteration_seconds), fmt::format("{:.1f}", a.samples_per_second),
                   formatUsd(a.cost_per_hour), formatCount(a.samples_per_dollar), formatBytes(a.max_worker_memory),
                   a.note});
    } else {
      alts.addRow({"", a.strategy(threeD), mb, "-", "-", "-", "-", "-",
                   "infeasible: " + a.note});
    }
  }
  out += alts.render();
  std::string strategy = fmt::format("{}×{} ({} data-parallel {} of a pipeline of {} stage{})", p.data_parallel,
                                     p.pipeline_stages, p.data_parallel, p.data_parallel == 1 ? "copy" : "copies",
                                     p.pipeline_stages, p.pipeline_stages == 1 ? "" : "s");
  if (p.tensor_parallel > 1 || threeD) {
    strategy = fmt::format("{} ({} data-parallel {} of a pipeline of {} stage{}, {})",
                           strategyText(p.data_parallel, p.pipeline_stages, {}, p.tensor_parallel, true),
                           p.data_parallel, p.data_parallel == 1 ? "copy" : "copies", p.pipeline_stages,
                           p.pipeline_stages == 1 ? "" : "s",
                           p.tensor_parallel > 1
                               ? fmt::format("each stage's transformer layers split across {} workers",
                                             p.tensor_parallel)
                               : std::string("no tensor parallelism"));
  }
  if (!p.evenlyReplicated()) {
    strategy = fmt::format("{} stages on {} workers, each stage's copies taking microbatches round-robin",
                           p.pipeline_stages, p.workersUsed());
  }
  // Per copy of the pipeline; unevenly replicated, the step's.
  const std::int64_t microbatches = p.num_microbatches * (p.evenlyReplicated() ? 1 : p.data_parallel);
  out += fmt::format("\nChosen: {}, {} microbatch{} of {} = {} samples per iteration, schedule {}{}{}\n", strategy,
                     microbatches, microbatches == 1 ? "" : "es", p.microbatch_size, p.globalBatch(), scheduleName(p.schedule),
                     p.chunks > 1 ? fmt::format(" with {} chunks per stage", p.chunks) : "",
                     p.recompute ? ", activations recomputed" : "");
  TextTable stages({"stage", "layers", "replicas", "fwd/mb", "bwd/mb", "params", "memory", "allreduce", "update",
                    "worker", "$/h each"},
                   {true, false, true, true, true, true, true, true, true, false, true});
  for (size_t s = 0; s < p.stages.size(); ++s) {
    const PlanStage& st = p.stages[s];
    std::string layers = st.layersText();
    if (st.chunks.empty() && static_cast<size_t>(st.last_layer) < p.layer_names.size()) {
      // Imported names can be whole module descriptions ("node2 Conv2d(3, 64,
      // kernel_size=..."): keep the column readable; plan.json has them whole.
      auto shortName = [](const std::string& name) {
        return name.size() <= 24 ? name : name.substr(0, 23) + "…";
      };
      layers += st.first_layer == st.last_layer
                    ? fmt::format(" ({})", shortName(p.layer_names[st.first_layer]))
                    : fmt::format(" ({}..{})", shortName(p.layer_names[st.first_layer]),
                                  shortName(p.layer_names[st.last_layer]));
    }
    stages.addRow({std::to_string(s), layers, std::to_string(p.replicasOf(s)), formatSeconds(st.forward_seconds), formatSeconds(st.backward_seconds),
                   formatBytes(st.parameter_bytes), formatBytes(st.memory_bytes), formatSeconds(st.allreduce_seconds),
                   formatSeconds(st.update_seconds), st.worker, formatUsd(st.cost_per_hour)});
  }
  out += stages.render();
  out += fmt::format("Predicted: {} per iteration (pipeline {} + {} of allreduce and {} of optimizer update after "
                     "the backward pass), {:.1f} samples/s, bubble {:.0f}%, {}/hour, {} samples per dollar{}\n",
                     formatSeconds(p.iteration_seconds), formatSeconds(p.pipeline_seconds),
                     formatSeconds(p.allreduce_seconds), formatSeconds(p.update_seconds), p.samples_per_second,
                     100 * p.bubble_fraction,
                     formatUsd(p.cost_per_hour), formatCount(p.samples_per_dollar),
                     p.partition_gap_seconds > 0
                         ? fmt::format(" (partition within {} of optimal)", formatSeconds(p.partition_gap_seconds))
                         : "");
  return out;
}

}  // namespace hydrozoa::plan
