// `hydrozoa plan --planner funcpipe`: FuncPipe's co-optimiser of partition,
// replicas and function sizes on a function platform (plan/planners/
// funcpipe_plan.h), its cost/time frontier and recommendation printed.
#include <fmt/format.h>

#include <iostream>

#include "cli/cmd_plan.h"
#include "cli/common.h"
#include "core/limits.h"
#include "core/units.h"
#include "plan/plan.h"
#include "plan/planners/funcpipe_plan.h"
#include "plan/resources.h"

namespace hydrozoa::cli {

Status runFuncPipe(const PlanArgs& a, bool json) {
  if (a.workers.empty()) {
    return invalidArgument("--planner funcpipe needs --workers: the most functions running at once (replicas × stages)");
  }
  plan::FuncPipePlannerOptions o;
  HZ_ASSIGN_OR_RETURN(const std::int64_t workers, parseCount(a.workers, "--workers", {1, 4096}));
  o.workers = static_cast<int>(workers);
  HZ_ASSIGN_OR_RETURN(const std::int64_t merge, parseCount(a.merge_layers, "--merge-layers", {2, 100000}));
  o.merge_to = static_cast<int>(merge);
  if (!a.global_batch.empty()) {
    HZ_ASSIGN_OR_RETURN(o.global_batch, parseCount(a.global_batch, "--global-batch", kSamplesRange));
  }
  if (!a.latency.empty()) {
    HZ_ASSIGN_OR_RETURN(const Seconds latency, parseSeconds(a.latency, "--latency"));
    if (!(latency >= 0 && latency <= 60)) return invalidArgument("--latency must be from 0 to 60 s");
    o.latency = latency;
  }
  if (!a.bandwidth.empty()) {
    HZ_ASSIGN_OR_RETURN(const BytesPerSecond bandwidth, parseBandwidth(a.bandwidth, "--bandwidth"));
    o.bandwidth = bandwidth;
  }
  HZ_ASSIGN_OR_RETURN(const profile::Profile prof, obtainProfile(a, o.global_batch));
  HZ_ASSIGN_OR_RETURN(const plan::Catalog catalog, plan::loadCatalog(a.platform));
  if (!a.frontier_point.empty() && !(a.output_given && a.output != "-")) {
    return invalidArgument("--frontier-point says which configuration -o writes: give -o plan.json too");
  }
  HZ_ASSIGN_OR_RETURN(const plan::FuncPipePlannerResult r, plan::planFuncPipe(prof, catalog, o));
  int chosen = r.recommended;
  if (!a.frontier_point.empty()) {
    const std::int64_t rows = static_cast<std::int64_t>(r.frontier.size());
    auto n = parseCount(a.frontier_point, "--frontier-point", {1, 1 << 20});
    if (!n.ok() || *n > rows) {
      return invalidArgument(fmt::format("--frontier-point {}: the frontier has {} configuration{} (1 = the fastest); "
                                         "pick one of 1..{}",
                                         a.frontier_point, rows, rows == 1 ? "" : "s", rows));
    }
    chosen = static_cast<int>(*n - 1);
  }
  if (a.output_given && a.output != "-" && chosen >= 0) {
    // The chosen configuration, as `hydrozoa train --plan FILE --launcher function` runs it.
    HZ_ASSIGN_OR_RETURN(const plan::Plan p, plan::funcPipePlan(r.frontier[chosen], prof, catalog, o));
    HZ_RETURN_IF_ERROR(plan::savePlan(p, a.output));
    if (!json) {
      std::cout << fmt::format("Wrote {} ({}; train it with --launcher function)\n", a.output,
                               chosen == r.recommended ? "the recommendation"
                                                       : fmt::format("configuration {} of the frontier", chosen + 1));
    }
  }
  if (json) {
    Json points = Json::array();
    for (size_t i = 0; i < r.frontier.size(); ++i) {
      const plan::FuncPipePoint& p = r.frontier[i];
      Json stages = Json::array();
      for (size_t k = 0; k < p.stages.size(); ++k) {
        stages.push_back({{"first_layer", p.stages[k].first},
                          {"last_layer", p.stages[k].second},
                          {"memory_bytes", p.stage_memory[k]}});
      }
      points.push_back({{"microbatch_size", p.microbatch_size},
                        {"microbatches", p.microbatches},
                        {"data_parallel", p.config.data_parallel},
                        {"stages", stages},
                        {"iteration_seconds", p.cost.iteration},
                        {"dollars_per_iteration", p.cost.dollars},
                        {"samples_per_second", p.samples_per_second},
                        {"recommended", static_cast<int>(i) == r.recommended},
                        {"cheapest", static_cast<int>(i) == r.cheapest}});
    }
    std::cout << Json({{"planner", "funcpipe"},
                       {"platform", catalog.name},
                       {"frontier", points},
                       {"layers", r.layers},
                       {"merged_layers", r.merged_layers},
                       {"programs", r.programs},
                       {"solve_seconds", r.solve_seconds}})
                     .dump(2)
              << "\n";
    return Status();
  }
  if (a.global_batch.empty()) {
    std::cout << fmt::format("Note: no --global-batch, so {} samples per iteration\n", o.global_batch);
  }
  std::cout << plan::renderFuncPipe(r, catalog);
  return Status();
}

}  // namespace hydrozoa::cli
