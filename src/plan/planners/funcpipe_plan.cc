#include "plan/planners/funcpipe_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "core/table.h"

namespace hydrozoa::plan {

namespace {

// Consecutive groups of the profile's layers, at most `most` of them, each
// closing once it holds its share of the whole compute (FuncPipe merges by
// computation time, §4).
std::vector<std::pair<int, int>> mergeLayers(const profile::Measurement& m, int most) {
  const int L = static_cast<int>(m.layers.size());
  std::vector<std::pair<int, int>> groups;
  if (L <= most) {
    for (int i = 0; i < L; ++i) groups.push_back({i, i});
    return groups;
  }
  double total = 0;
  for (const auto& c : m.layers) total += c.forward_ms + c.backward_ms;
  const double share = total / most;
  double acc = 0;
  int first = 0;
  for (int i = 0; i < L; ++i) {
    acc += m.layers[i].forward_ms + m.layers[i].backward_ms;
    const int after = most - static_cast<int>(groups.size()) - 1;  // groups there may be after this one
    if (i + 1 == L || (acc >= share && after > 0)) {
      groups.push_back({first, i});
      first = i + 1;
      acc = 0;
    }
  }
  return groups;
}

Result<FuncPipeProblem> problemAt(const profile::Profile& prof, const profile::Measurement& m,
                                  const std::vector<std::pair<int, int>>& groups, const Catalog& catalog,
                                  const FuncPipePlannerOptions& o, std::int64_t microbatches) {
  FuncPipeProblem p;
  const BytesPerSecond bandwidth = o.bandwidth.value_or(catalog.network_bandwidth);
  HZ_ASSIGN_OR_RETURN(const std::vector<Bytes> tiers, functionTiers(catalog));
  for (Bytes size : tiers) p.tiers.push_back({size, bandwidth});
  const double threads = std::max(1, prof.threads);
  Bytes params = 0, state = 0;
  for (const auto& [first, last] : groups) {
    double fs = 0, bs = 0;
    for (int i = first; i <= last; ++i) {
      fs += m.layers[i].forward_ms / 1e3;
      bs += m.layers[i].backward_ms / 1e3;
    }
    std::vector<Seconds> f, b;
    for (Bytes size : tiers) {
      // A function gets vCPUs in proportion to its memory; below a core per
      // compute thread, its passes take that much longer.
      const double vcpus = static_cast<double>(size) / 1e9 * catalog.vcpus_per_gb;
      const double slower = vcpus > 0 ? std::max(1.0, threads / vcpus) : 1.0;
      f.push_back(fs * slower);
      b.push_back(bs * slower);
    }
    p.forward.push_back(f);
    p.backward.push_back(b);
    Bytes stashed = 0, weights = 0;
    for (int i = first; i <= last; ++i) {
      stashed += m.layers[i].stashed_bytes;
      weights += prof.layers[i].parameter_bytes;
      state += prof.layers[i].optimizer_state_bytes;
    }
    params += weights;
    p.output.push_back(m.layers[last].output_bytes);
    p.activation.push_back(stashed);
    p.parameters.push_back(weights);
  }
  p.optimizer_state = params > 0 ? static_cast<double>(state) / static_cast<double>(params) : 0;
  p.worker_bytes = prof.runtime_bytes + m.heap_bytes;
  p.microbatches = microbatches;
  p.workers = o.workers;
  p.data_parallel.clear();
  for (int d = 1; d <= o.workers; d *= 2) {
    if (microbatches % d == 0) p.data_parallel.push_back(d);
  }
  p.latency = *o.latency;
  p.price_per_gb_second = catalog.memory_gb_per_hour / 3600;
  p.sync = o.sync;
  return p;
}

}  // namespace

Result<FuncPipePlannerResult> planFuncPipe(const profile::Profile& prof, const Catalog& catalog,
                                           const FuncPipePlannerOptions& given) {
  if (catalog.kind != PlatformKind::kFunction) {
    return invalidArgument(fmt::format("--planner funcpipe plans for serverless functions; platform {} is not a "
                                       "function platform: pass --platform lambda or alibaba-fc (or a catalog of "
                                       "kind: function)",
                                       catalog.name));
  }
  if (given.workers < 1 || given.workers > 4096) {
    return invalidArgument("--planner funcpipe needs --workers from 1 to 4096 (the most functions running at once)");
  }
  if (given.global_batch < 1) return invalidArgument("--global-batch must be at least 1");
  if (given.merge_to < 2) return invalidArgument("the layers to merge down to must be at least 2");
  FuncPipePlannerOptions o = given;
  if (!o.latency) o.latency = catalog.storage_latency;
  if (!o.latency) {
    return invalidArgument(fmt::format("platform {} gives no storage_latency: pass --latency (one access to the "
                                       "storage channel, e.g. 20ms)",
                                       catalog.name));
  }
  const auto start = std::chrono::steady_clock::now();
  FuncPipePlannerResult out;
  out.layers = static_cast<int>(prof.numLayers());
  // Per profiled microbatch size that divides the global batch: its problem.
  struct Size {
    const profile::Measurement* m;
    std::vector<std::pair<int, int>> groups;
    FuncPipeProblem problem;
  };
  std::vector<Size> sizes;
  Status lastError;
  for (const profile::Measurement& m : prof.measurements) {
    if (o.global_batch % m.microbatch_size != 0) continue;
    Size s{&m, mergeLayers(m, o.merge_to), {}};
    HZ_ASSIGN_OR_RETURN(s.problem, problemAt(prof, m, s.groups, catalog, o, o.global_batch / m.microbatch_size));
    out.merged_layers = static_cast<int>(s.groups.size());
    sizes.push_back(std::move(s));
  }
  if (sizes.empty()) {
    return invalidArgument(fmt::format("no profiled microbatch size divides the global batch of {}: profile a "
                                       "divisor of it, or choose a --global-batch that one divides",
                                       o.global_batch));
  }
  // Each size's frontier; then the frontier of them all.
  std::vector<FuncPipePoint> points;
  for (const Size& s : sizes) {
    int programs = 0;
    auto frontier = funcPipeFrontier(s.problem, o.limit, &programs);
    out.programs += programs;
    if (!frontier.ok()) {
      if (frontier.status().code() != ErrorCode::kInfeasible) return frontier.status();
      lastError = frontier.status();
      continue;
    }
    for (const FuncPipeSolution& f : *frontier) {
      FuncPipePoint p;
      p.microbatch_size = s.m->microbatch_size;
      p.microbatches = s.problem.microbatches;
      p.config = f.config;
      p.cost = f.cost;
      for (int k = 0; k < f.config.numStages(); ++k) {
        const int firstGroup = f.config.first[k];
        const int lastGroup = k + 1 < f.config.numStages() ? f.config.first[k + 1] - 1
                                                           : static_cast<int>(s.groups.size()) - 1;
        p.stages.push_back({s.groups[firstGroup].first, s.groups[lastGroup].second});
        p.stage_memory.push_back(s.problem.tiers[f.config.tier[k]].memory);
      }
      const double samples = static_cast<double>(o.global_batch);
      p.samples_per_second = samples / f.cost.iteration;
      p.samples_per_dollar = f.cost.dollars > 0 ? samples / f.cost.dollars : 0;
      points.push_back(std::move(p));
    }
  }
  if (points.empty()) return lastError.ok() ? infeasible("no configuration fits") : lastError;
  out.frontier = fastestFirstFrontier(std::move(points));
  out.cheapest = static_cast<int>(out.frontier.size()) - 1;
  const FuncPipePoint& c = out.frontier[out.cheapest];
  for (size_t i = 0; i < out.frontier.size(); ++i) {
    FuncPipePoint& p = out.frontier[i];
    if (static_cast<int>(i) == out.cheapest) continue;
    const double speedup = c.cost.iteration / p.cost.iteration - 1;
    const double extra = p.cost.dollars / c.cost.dollars - 1;
    p.delta = extra > 0 ? speedup / extra : HUGE_VAL;
    if (out.recommended < 0 && p.delta >= 0.8) out.recommended = static_cast<int>(i);
  }
  if (out.recommended < 0) out.recommended = out.cheapest;
  out.solve_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

std::string renderFuncPipe(const FuncPipePlannerResult& r, const Catalog& catalog) {
  TextTable t({"", "microbatches", "replicas", "stages (layers: function size)", "iteration", "$/iteration",
               "samples/s", "samples/$", "δ"},
              {false, true, true, false, true, true, true, true, true});
  for (size_t i = 0; i < r.frontier.size(); ++i) {
    const FuncPipePoint& p = r.frontier[i];
    std::string stages;
    for (size_t k = 0; k < p.stages.size(); ++k) {
      stages += fmt::format("{}{}-{}: {}", k ? ", " : "", p.stages[k].first, p.stages[k].second,
                            formatBytes(p.stage_memory[k]));
    }
    const bool cheapest = static_cast<int>(i) == r.cheapest;
    t.addRow({static_cast<int>(i) == r.recommended ? "*" : "", fmt::format("{} × {}", p.microbatches, p.microbatch_size),
              std::to_string(p.config.data_parallel), stages, formatSeconds(p.cost.iteration),
              fmt::format("{:.3g}", p.cost.dollars), fmt::format("{:.1f}", p.samples_per_second),
              fmt::format("{:.0f}", p.samples_per_dollar),
              cheapest ? "cheapest" : std::isinf(p.delta) ? "inf" : fmt::format("{:.2f}", p.delta)});
  }
  std::string out = fmt::format(
      "FuncPipe's co-optimiser on {} (cost/time Pareto frontier, fastest first; * recommended: the fastest with "
      "δ ≥ 0.8, δ = (t_cheapest/t − 1)/(c/c_cheapest − 1)):\n",
      catalog.name);
  out += t.render() + "\n";
  out += fmt::format("{} MILPs solved exactly (COIN-OR CBC) in {} over {} layers", r.programs,
                     formatSeconds(r.solve_seconds), r.merged_layers);
  if (r.merged_layers < r.layers) out += fmt::format(" (the profile's {} merged by compute time)", r.layers);
  return out + "\n";
}

Result<Plan> funcPipePlan(const FuncPipePoint& point, const profile::Profile& prof, const Catalog& catalog,
                          const FuncPipePlannerOptions& o) {
  const profile::Measurement* m = prof.at(point.microbatch_size);
  HZ_CHECK(m != nullptr);
  const int d = point.config.data_parallel;
  Plan p = planOfProfile(prof);
  p.data_parallel = d;
  p.pipeline_stages = static_cast<int>(point.stages.size());
  p.microbatch_size = point.microbatch_size;
  p.num_microbatches = point.microbatches / d;
  for (size_t k = 0; k < point.stages.size(); ++k) {
    PlanStage st;
    st.first_layer = point.stages[k].first;
    st.last_layer = point.stages[k].second;
    for (int i = st.first_layer; i <= st.last_layer; ++i) {
      st.parameter_bytes += prof.layers[static_cast<size_t>(i)].parameter_bytes;
      st.forward_seconds += m->layers[static_cast<size_t>(i)].forward_ms / 1e3;
      st.backward_seconds += m->layers[static_cast<size_t>(i)].backward_ms / 1e3;
    }
    st.memory_bytes = k < point.cost.needs.size() ? point.cost.needs[k] : 0;
    st.worker_memory_bytes = point.stage_memory[k];
    const double gb = static_cast<double>(st.worker_memory_bytes) / static_cast<double>(kGB);
    st.vcpus = gb * catalog.vcpus_per_gb;
    st.cost_per_hour = gb * catalog.memory_gb_per_hour;
    st.worker = fmt::format("{:.2f} vCPU, {} function", st.vcpus, formatBytes(st.worker_memory_bytes));
    p.cost_per_hour += d * st.cost_per_hour;
    p.stages.push_back(st);
  }
  p.iteration_seconds = point.cost.iteration;
  p.pipeline_seconds = point.cost.iteration;
  p.samples_per_second = point.samples_per_second;
  p.samples_per_dollar = point.samples_per_dollar;
  p.workers = o.workers;
  p.bandwidth = o.bandwidth.value_or(catalog.network_bandwidth);
  p.latency = o.latency.value_or(catalog.storage_latency.value_or(0));
  p.global_batch_requested = o.global_batch;
  p.objective = "funcpipe";
  p.platform = catalog.name;
  return p;
}

}  // namespace hydrozoa::plan
