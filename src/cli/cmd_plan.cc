// `hydrozoa plan`: the best hybrid-parallel plan for a worker budget.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <iostream>

#include "cli/cmd_plan.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "core/log.h"
#include "core/table.h"
#include "core/units.h"
#include "model/zoo.h"
#include "plan/plan.h"
#include "plan/planners/two_bw_planner.h"
#include "plan/search.h"
#include "plan/tensor_report.h"
#include "profile/predict.h"

namespace hydrozoa::cli {

Result<double> nonNegativeNumber(const std::string& text, const std::string& flag, double most) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !std::isfinite(v) || v < 0 || v > most) {
    return invalidArgument(fmt::format("{}: \"{}\" must be a number of seconds from 0 to {}", flag, text, most));
  }
  return v;
}

namespace {

// Powers of two up to `limit` (the global batch, or 512).
std::vector<std::int64_t> powersOfTwo(std::int64_t limit) {
  std::vector<std::int64_t> sizes;
  for (std::int64_t m = 1; m <= limit; m *= 2) sizes.push_back(m);
  return sizes;
}

}  // namespace

Result<profile::Profile> obtainProfile(const PlanArgs& a, const std::optional<std::int64_t>& globalBatch) {
  if (!a.profile.empty()) {
    if (!a.model.empty()) return invalidArgument("give either --profile or --model, not both");
    HZ_ASSIGN_OR_RETURN(std::int64_t graphBatch, parseCount(a.graph_batch_size, "--graph-batch-size", kSamplesRange));
    return profile::loadProfile(a.profile, graphBatch);
  }
  if (a.model.empty()) {
    return invalidArgument("say what to plan: --profile FILE (from `hydrozoa profile`, or PipeDream's graph.txt), or "
                           "--model NAME --device DEVICE to predict costs");
  }
  if (a.device.empty()) {
    return invalidArgument(fmt::format("--model {} needs --device (k80, v100, a100, h100, cpu or a device file) to "
                                       "predict costs, or measure them first: hydrozoa profile --model {} -o p.json",
                                       a.model, a.model));
  }
  if (model::isTorchScriptPath(a.model)) {
    return invalidArgument("costs of a TorchScript model cannot be predicted; measure them: hydrozoa profile --model " +
                           a.model + " -o p.json");
  }
  HZ_ASSIGN_OR_RETURN(model::Options options, parseModelOptions(a.model_options));
  HZ_ASSIGN_OR_RETURN(model::Arch arch, model::buildArch({a.model, options}));
  HZ_ASSIGN_OR_RETURN(profile::DeviceSpec device, deviceFor(a.device, 1));
  std::vector<std::int64_t> sizes = powersOfTwo(globalBatch.value_or(512));
  if (!a.microbatch_sizes.empty()) {
    HZ_ASSIGN_OR_RETURN(sizes, parseSizeList(a.microbatch_sizes, "--microbatch-sizes"));
  }
  return profile::predictProfile(arch, device, sizes, a.optimizer);
}

namespace {

Result<plan::Partition> parsePartition(const std::string& text) {
  // "0-3,4-9,10-17"
  plan::Partition p;
  int expected = 0;
  size_t start = 0;
  while (start < text.size()) {
    const size_t comma = text.find(',', start);
    const std::string range = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    int first = -1, last = -1;
    char extra = 0;
    if (std::sscanf(range.c_str(), "%d-%d%c", &first, &last, &extra) != 2 || first != expected || last < first ||
        last >= kLayersRange.max) {
      return invalidArgument(fmt::format("--partition: \"{}\" is not a layer range continuing at layer {}; write "
                                         "consecutive ranges such as 0-3,4-9,10-17",
                                         range, expected));
    }
    p.first.push_back(first);
    expected = last + 1;
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (p.first.empty()) return invalidArgument("--partition is empty");
  return p;
}

// When --memory asks for more than the platform's largest worker, the search
// plans with that worker's memory: say so, and which platform lifts it.
std::string memoryCapNote(const plan::Catalog& catalog, const plan::SearchOptions& o) {
  if (!o.memory_limit) return "";
  const auto cap = plan::platformMemoryLimit(catalog, o.accelerator);
  if (!cap || *cap >= *o.memory_limit) return "";
  std::string others;
  for (const char* name : {"aci", "lambda", "azure-vm", "aws-vm"}) {
    if (name == catalog.name) continue;
    auto other = plan::loadCatalog(name);
    if (!other.ok()) continue;
    const auto limit = plan::platformMemoryLimit(*other, "");
    if (limit && *limit >= *o.memory_limit) {  // a platform whose CPU workers are that large
      others += fmt::format("{}--platform {} (up to {})", others.empty() ? "" : ", ", name, formatBytes(*limit));
    }
  }
  return fmt::format("--memory {} is more than the largest {} worker without an accelerator holds ({}); planning "
                     "with {} per worker. {}{}--accelerator (a GPU's own memory) or a catalog of your own "
                     "(--platform FILE, docs/formats.md) lifts it",
                     formatBytes(*o.memory_limit), catalog.name, formatBytes(*cap), formatBytes(*cap), others,
                     others.empty() ? "" : ", or ");
}

// With tensor parallelism considered: the best plan with and without it side
// by side (unless `json`), and in `takeaways` the thesis's takeaways the
// chosen plan departs from (plan/tensor_report.h).
void compareTensorParallel(const profile::Profile& prof, const plan::Catalog& catalog,
                           const std::vector<plan::ScheduleSearch>& searches, const plan::SearchRow& chosen, bool json,
                           std::vector<std::string>* takeaways) {
  if (json || !plan::consideredTensorParallel(searches)) return;
  std::cout << plan::renderTensorComparison(searches, chosen) << "\n";
  if (takeaways) *takeaways = plan::takeawayNotes(prof, catalog, searches, chosen);
  if (takeaways && takeaways->empty()) {
    takeaways->push_back("The chosen plan follows the PTD-P takeaways (seed 003 §4.3): tensor parallelism within the "
                         "fast link before pipelining, the least model parallelism that fits, the microbatch size "
                         "that minimises eq. 4.1");
  }
}

// The plan for --schedule: one schedule's best plan, or with "auto" every
// schedule's, shown side by side (unless `json`), the best by the objective
// chosen.
Result<plan::Plan> planSchedules(const PlanArgs& a, const profile::Profile& prof, const plan::Catalog& catalog,
                                 plan::SearchOptions o, bool json, std::vector<std::string>* takeaways = nullptr) {
  if (a.schedule != "auto") {
    HZ_ASSIGN_OR_RETURN(o.schedule, plan::parseSchedule(a.schedule, "--schedule"));
    HZ_ASSIGN_OR_RETURN(plan::SearchResult result, plan::searchPlan(prof, catalog, o));
    plan::Plan chosen = plan::makePlan(result, prof, o, catalog.name);
    const std::vector<plan::ScheduleSearch> searches{{o, std::move(result)}};
    compareTensorParallel(prof, catalog, searches, {0, static_cast<size_t>(searches[0].result.chosen)}, json,
                          takeaways);
    return chosen;
  }
  TextTable table({"", "schedule", "strategy", "microbatches", "iteration", "samples/s", "memory/worker", "staleness",
                   "note"},
                  {false, false, false, true, true, true, true, false, false});
  std::optional<plan::Plan> best;
  std::optional<plan::Candidate> bestRow;
  std::vector<plan::ScheduleSearch> searches;  // the feasible ones, for the tensor-parallel comparison
  plan::SearchRow chosenRow;
  // Every schedule, and (unless --recompute pins it on) each with and
  // without recomputation.
  struct Row {
    plan::ScheduleKind kind;
    bool recompute;
    Result<plan::SearchResult> result;
  };
  std::vector<Row> rows;
  for (plan::ScheduleKind kind : plan::allSchedules()) {
    for (const bool recompute : {false, true}) {
      if (a.recompute && !recompute) continue;
      o.schedule = kind;
      o.recompute = recompute;
      auto result = plan::searchPlan(prof, catalog, o);
      if (result.ok()) {
        searches.push_back({o, *result});
        if (!bestRow || plan::betterCandidate(result->best(), *bestRow, o.objective)) {
          bestRow = result->best();
          best = plan::makePlan(*result, prof, o, catalog.name);
          chosenRow = {searches.size() - 1, static_cast<size_t>(result->chosen)};
        }
      }
      rows.push_back({kind, recompute, std::move(result)});
    }
  }
  const bool threeD = plan::consideredTensorParallel(searches);
  for (const auto& [kind, recompute, result] : rows) {
    const std::string name = std::string(plan::scheduleName(kind)) + (recompute ? " + recompute" : "");
    if (!result.ok()) {
      table.addRow({"", name, "-", "-", "-", "-", "-", "-", result.status().message()});
      continue;
    }
    const plan::Candidate& c = result->best();
    const Bytes memory = c.maxWorkerMemory();
    const bool chosen = best && best->schedule == kind && best->recompute == recompute;
    table.addRow({chosen ? "*" : "", name, c.strategy(threeD),
                  fmt::format("{} × {}", c.microbatches, c.microbatch_size), formatSeconds(c.iteration),
                  fmt::format("{:.1f}", c.samples_per_second), formatBytes(memory),
                  plan::staleness(kind) == plan::kPerStage      ? "per-stage"
                  : plan::staleness(kind) == plan::kStagesLess1 ? "p - 1"
                                                                : std::to_string(plan::staleness(kind)), ""});
  }
  if (!best) return rows.front().result.status();
  if (!json) {
    std::cout << "Schedules (the best plan of each; * chosen, " << plan::objectiveName(o.objective) << "):\n"
              << table.render() << "\n";
    if (plan::staleness(best->schedule) != 0) {
      std::cout << fmt::format("Note: {} trains on stale weights (docs/schedules.md): not the same training as one "
                               "process; pin --schedule gpipe or 1f1b for that\n",
                               plan::scheduleName(best->schedule));
    }
  }
  compareTensorParallel(prof, catalog, searches, chosenRow, json, takeaways);
  return *best;
}

// --planner 2bw: PipeDream-2BW's planner chooses (d, p, b, recomputation,
// schedule); Hydrozoa's search then cuts and sizes that pinned plan for
// training. The thesis's memory counts weight versions and activations
// only; a configuration whose workers also need their gradients, optimizer
// state and runtime beyond the limit is passed over for the next.
Result<plan::Plan> planWithTwoBw(const PlanArgs& a, const profile::Profile& prof, const plan::Catalog& catalog,
                                 const plan::SearchOptions& o, std::optional<std::int64_t> globalBatch,
                                 const std::string& crossBandwidth, bool json) {
  plan::TwoBwPlannerOptions t;
  t.workers = o.workers;
  if (!globalBatch) return invalidArgument("--planner 2bw needs --global-batch (B: samples per batch)");
  t.global_batch = *globalBatch;
  t.memory_limit = o.memory_limit;
  t.in_pipeline = o.bandwidth;
  t.cross_pipeline = o.bandwidth;
  if (!crossBandwidth.empty()) {
    HZ_ASSIGN_OR_RETURN(t.cross_pipeline, parseBandwidth(crossBandwidth, "--bandwidth"));
  }
  if (!(t.in_pipeline > 0) || !(t.cross_pipeline > 0)) return invalidArgument("--bandwidth must be positive");
  HZ_ASSIGN_OR_RETURN(const plan::TwoBwPlannerResult r, plan::planTwoBw(prof, t));
  if (!json) std::cout << plan::renderTwoBw(r, t) << "\n";
  if (!r.best) {
    return invalidArgument(fmt::format("no configuration of {} workers fits {} per worker under 2bw or 1f1b",
                                       t.workers, t.memory_limit ? formatBytes(*t.memory_limit) : "the memory"));
  }
  std::vector<plan::TwoBwConfig> order;
  for (const plan::TwoBwConfig& c : r.considered) {
    if (c.fits) order.push_back(c);
  }
  std::stable_sort(order.begin(), order.end(), [](const plan::TwoBwConfig& x, const plan::TwoBwConfig& y) {
    return x.samples_per_second > y.samples_per_second;
  });
  Status first;
  for (const plan::TwoBwConfig& c : order) {
    plan::SearchOptions pins = o;
    pins.data_parallel = c.data_parallel;
    pins.stages = c.stages;
    pins.microbatch_size = c.microbatch_size;
    pins.microbatches = c.microbatches;
    pins.recompute = c.recompute;
    pins.tensor_parallel = 1;  // 2BW's planner has no tensor parallelism
    PlanArgs with = a;
    with.schedule = plan::scheduleName(c.schedule);
    auto planned = planSchedules(with, prof, catalog, pins, json);
    if (planned.ok()) {
      if (!first.ok() && !json) {
        std::cout << fmt::format("Note: the 2BW planner's first choice does not fit Hydrozoa's memory model ({}); "
                                 "planned its best that does: {}×{}, {}, microbatch {}{}\n",
                                 first.message(), c.data_parallel, c.stages, plan::scheduleName(c.schedule),
                                 c.microbatch_size, c.recompute ? ", recomputation" : "");
      }
      return std::move(*planned);
    }
    if (first.ok()) first = planned.status();
  }
  if (first.ok()) return internalError("--planner 2bw: no configuration to plan");
  return first;
}

Status runPlan(const PlanArgs& given, bool json) {
  if (given.planner == "pipedream") return runPipeDream(given, json);
  if (given.planner == "funcpipe") return runFuncPipe(given, json);
  if (given.planner != "hydrozoa" && given.planner != "2bw") {
    return invalidArgument(fmt::format("--planner: unknown planner \"{}\"; available: hydrozoa, pipedream, 2bw, funcpipe",
                                       given.planner));
  }
  PlanArgs a = given;
  // --planner 2bw: the bandwidth between stages, then (optionally) between replicas.
  std::string crossBandwidth;
  if (a.planner == "2bw") {
    const std::vector<std::string> bandwidths = splitList(a.bandwidth);
    if (bandwidths.size() > 2) {
      return invalidArgument("--planner 2bw takes --bandwidth IN[,CROSS]: between a pipeline's stages, and between a "
                             "stage's replicas (default: the same)");
    }
    if (bandwidths.size() == 2) {
      a.bandwidth = bandwidths[0];
      crossBandwidth = bandwidths[1];
    }
    if (a.schedule_given) {
      return invalidArgument("--planner 2bw chooses between 2bw and 1f1b (PipeDream-Flush) itself: drop --schedule");
    }
  }
  if (a.schedule != "auto") HZ_RETURN_IF_ERROR(plan::parseSchedule(a.schedule, "--schedule").status());
  HZ_ASSIGN_OR_RETURN(auto globalBatch, optionalCount(a.global_batch, "--global-batch", kSamplesRange));
  HZ_ASSIGN_OR_RETURN(profile::Profile prof, obtainProfile(a, globalBatch));
  HZ_ASSIGN_OR_RETURN(plan::Catalog catalog, plan::loadCatalog(a.platform));

  plan::SearchOptions o;
  o.global_batch = globalBatch;
  HZ_ASSIGN_OR_RETURN(auto dataParallel, optionalCount(a.data_parallel, "--data-parallel", kWorkersRange));
  HZ_ASSIGN_OR_RETURN(auto stages, optionalCount(a.stages, "--stages", kWorkersRange));
  HZ_ASSIGN_OR_RETURN(o.microbatch_size, optionalCount(a.microbatch_size, "--microbatch-size", kSamplesRange));
  HZ_ASSIGN_OR_RETURN(o.microbatches, optionalCount(a.microbatches, "--microbatches", kMicrobatchesRange));
  HZ_ASSIGN_OR_RETURN(o.max_microbatches, parseCount(a.max_microbatches, "--max-microbatches", kMicrobatchesRange));
  HZ_ASSIGN_OR_RETURN(const std::int64_t chunks, parseCount(a.chunks, "--chunks", kChunksRange));
  o.chunks = static_cast<int>(chunks);
  o.recompute = a.recompute;
  if (dataParallel) o.data_parallel = static_cast<int>(*dataParallel);
  if (stages) o.stages = static_cast<int>(*stages);
  HZ_ASSIGN_OR_RETURN(auto tensorParallel, optionalCount(a.tensor_parallel, "--tensor-parallel", kWorkersRange));
  if (tensorParallel) o.tensor_parallel = static_cast<int>(*tensorParallel);
  if (!a.partition.empty()) {
    HZ_ASSIGN_OR_RETURN(plan::Partition p, parsePartition(a.partition));
    o.partition = p;
  }
  HZ_ASSIGN_OR_RETURN(auto workers, optionalCount(a.workers, "--workers", kWorkersRange));
  if (workers) {
    o.workers = static_cast<int>(*workers);
  } else if (o.stages || o.partition) {
    const std::int64_t B = o.partition ? o.partition->numStages() : *o.stages;
    // Each at most 65,536.
    const std::int64_t needed = std::int64_t{o.data_parallel.value_or(1)} * B * o.tensor_parallel.value_or(1);
    if (!inRange(needed, kWorkersRange)) {
      return invalidArgument(fmt::format("--data-parallel {} × {} stages{} needs {} workers; at most {} are supported",
                                         o.data_parallel.value_or(1), B,
                                         o.tensor_parallel ? fmt::format(" × --tensor-parallel {}", *o.tensor_parallel)
                                                           : "",
                                         needed, kWorkersRange.max));
    }
    o.workers = static_cast<int>(needed);
  } else {
    return invalidArgument("--workers is required (how many workers the plan may use), unless --stages pins it");
  }
  // Tensor groups: on `hydrozoa train`'s local launcher every worker shares
  // the host, so by default any t may; the link's speed is --bandwidth's
  // unless --tensor-bandwidth says the group's is faster.
  HZ_ASSIGN_OR_RETURN(auto linkWorkers, optionalCount(a.tensor_link_workers, "--tensor-link-workers", kWorkersRange));
  o.tensor_link_workers = linkWorkers ? static_cast<int>(*linkWorkers) : o.workers;
  if (!a.tensor_bandwidth.empty()) {
    HZ_ASSIGN_OR_RETURN(o.tensor_bandwidth, parseBandwidth(a.tensor_bandwidth, "--tensor-bandwidth"));
    if (!(o.tensor_bandwidth > 0)) return invalidArgument("--tensor-bandwidth must be positive");
  }
  o.scatter_gather = a.scatter_gather;
  HZ_ASSIGN_OR_RETURN(o.objective, plan::parseObjective(a.objective));
  o.all_strategies = a.all_strategies;
  HZ_ASSIGN_OR_RETURN(auto hostCores, optionalCount(a.host_cores, "--host-cores", kThreadsRange));
  HZ_ASSIGN_OR_RETURN(auto threads, optionalCount(a.threads, "--threads", kThreadsRange));
  o.host_cores = static_cast<int>(hostCores.value_or(0));
  o.threads = static_cast<int>(threads.value_or(1));
  // A profile measured on a host of as many cores says how they slow each
  // other down (NOTE [Compute beside busy cores], plan/cost/pipeline.cc).
  if (prof.corun && prof.corun->cores == o.host_cores) o.busy_slowdown = prof.corun->slowdown;

  // The accelerator the workers have: as asked, else the profile's GPU.
  o.accelerator = a.accelerator;
  if (o.accelerator.empty() && prof.device_kind == "gpu") o.accelerator = prof.device;
  // Per-worker memory: as asked, else a GPU's own memory (CPU workers get the platform's limit).
  if (!a.memory.empty()) {
    HZ_ASSIGN_OR_RETURN(Bytes limit, parseBytes(a.memory, "--memory"));
    if (limit <= 0) return invalidArgument("--memory must be positive");
    o.memory_limit = limit;
  } else if (!o.accelerator.empty() && prof.device_memory) {
    o.memory_limit = prof.device_memory;
  }
  // Bandwidth and allreduce: flags, else the profile's measurement, else the platform's figure.
  if (!a.bandwidth.empty()) {
    HZ_ASSIGN_OR_RETURN(o.bandwidth, parseBandwidth(a.bandwidth, "--bandwidth"));
  } else if (prof.network) {
    o.bandwidth = prof.network->bandwidth;
    spdlog::info("bandwidth {} (measured, from the profile)", formatBandwidth(o.bandwidth));
  } else {
    o.bandwidth = catalog.network_bandwidth;
    spdlog::warn("bandwidth {} is the {} catalog's assumed figure; pass --bandwidth or measure with `hydrozoa profile "
                 "--network`",
                 formatBandwidth(o.bandwidth), catalog.name);
  }
  if (prof.network) plan::useMeasuredTransport(o, *prof.network);
  if (!a.alpha.empty()) {
    HZ_ASSIGN_OR_RETURN(o.allreduce_alpha, nonNegativeNumber(a.alpha, "--allreduce-alpha", 1.0));
  }
  if (!a.beta.empty()) {
    HZ_ASSIGN_OR_RETURN(o.allreduce_beta, nonNegativeNumber(a.beta, "--allreduce-beta", 3600.0));
  }
  if (a.shared_memory) {
    if (prof.network) o.shared_memory = plan::sharedMemoryCost(*prof.network);
    if (!o.shared_memory) {
      return invalidArgument(fmt::format("--shared-memory needs the profile's timing of the shared-memory allreduce, "
                                         "which {} does not have: measure one with `hydrozoa profile --network`",
                                         a.profile.empty() ? "the predicted profile" : a.profile));
    }
  }
  // Its range is searchPlan's to check, as for every other search option.
  if (!a.latency.empty()) {
    HZ_ASSIGN_OR_RETURN(o.latency, parseSeconds(a.latency, "--latency"));
  }

  const std::string capped = memoryCapNote(catalog, o);
  if (!capped.empty()) spdlog::warn("{}", capped);
  std::optional<plan::Plan> pinned;
  if (a.planner == "2bw") {
    HZ_ASSIGN_OR_RETURN(pinned, planWithTwoBw(a, prof, catalog, o, globalBatch, crossBandwidth, json));
  }
  std::vector<std::string> takeaways;
  HZ_ASSIGN_OR_RETURN(const plan::Plan chosen,
                      pinned ? Result<plan::Plan>(*pinned) : planSchedules(a, prof, catalog, o, json, &takeaways));
  if (!json && !capped.empty()) std::cout << "Note: " << capped << "\n";
  if (!json && !globalBatch) {
    // Without a global batch, the largest batch that fits wins on throughput;
    // a user who did not expect that many samples per step should hear it.
    std::cout << fmt::format("Note: no --global-batch, so the planner chose {} samples per iteration (the most "
                             "microbatches that fit, up to --max-microbatches {}); pass --global-batch to fix it\n",
                             formatCount(static_cast<double>(chosen.globalBatch())), o.max_microbatches);
  }
  if (a.output != "-") HZ_RETURN_IF_ERROR(plan::savePlan(chosen, a.output));
  if (json) {  // stdout holds only the plan, as plan.json has it
    std::cout << plan::planToJson(chosen).dump(2) << "\n";
    return Status();
  }
  // (Takeaways, even "follows them", come only when tensor parallelism was considered.)
  std::cout << plan::renderPlanTable(chosen, /*threeD=*/!takeaways.empty());
  for (const std::string& note : takeaways) std::cout << note << "\n";
  if (a.output != "-") std::cout << "Wrote " << a.output << "\n";
  return Status();
}

}  // namespace

void addPlanCommand(CLI::App& app, Status* status) {
  auto args = std::make_shared<PlanArgs>();
  CLI::App* cmd = app.add_subcommand("plan", "Choose the best hybrid-parallel plan for a worker budget");
  cmd->footer(
      "Examples:\n"
      "  hydrozoa plan --profile p.json --workers 16 --memory 12GB --bandwidth 10Gbit/s --global-batch 256 -o plan.json\n"
      "  hydrozoa plan --model bert12 --device k80 --workers 16 --global-batch 256\n"
      "  hydrozoa plan --profile graph.txt --graph-batch-size 128 --data-parallel 1 --stages 4 --microbatches 2 "
      "--bandwidth 100MB/s\n");
  cmd->add_option("--profile", args->profile, "Profile to plan from: hydrozoa JSON or PipeDream graph.txt");
  cmd->add_option("--model", args->model, "Zoo model to predict costs for (with --device)");
  cmd->add_option("-O,--model-option", args->model_options, "Model size option key=value (repeatable)");
  cmd->add_option("--device", args->device, "Device to predict for: k80, v100, a100, h100, cpu, or a YAML file");
  cmd->add_option("--microbatch-sizes", args->microbatch_sizes, "Sizes to predict (default: powers of two)");
  cmd->add_option("--optimizer", args->optimizer, "Optimizer for predicted memory: sgd, sgd_momentum, adam")
      ->capture_default_str();
  cmd->add_option("--graph-batch-size", args->graph_batch_size, "Batch size a graph.txt was profiled at")
      ->capture_default_str();
  cmd->add_option("--workers", args->workers, "Workers the plan may use");
  cmd->add_option("--memory", args->memory, "Memory per worker, e.g. 12GB (default: the device's, or the platform's)");
  cmd->add_option("--bandwidth", args->bandwidth, "Bandwidth between workers, e.g. 10Gbit/s or 100MB/s");
  cmd->add_option("--allreduce-alpha", args->alpha, "Allreduce overhead per byte per round, seconds");
  cmd->add_option("--allreduce-beta", args->beta, "Allreduce overhead per round, seconds");
  cmd->add_option("--latency", args->latency,
                  "One-way delay of each message between workers beyond the measured figures, e.g. 2ms (default 0)");
  cmd->add_option("--host-cores", args->host_cores,
                  "All workers share one machine with this many cores (default: a core per worker thread)");
  cmd->add_option("--threads", args->threads, "Compute threads per worker, with --host-cores (default 1)");
  cmd->add_option("--global-batch", args->global_batch, "Samples per iteration across all replicas");
  cmd->add_option("--objective", args->objective, "fastest, cheapest or samples-per-dollar")->capture_default_str();
  cmd->add_option("--platform", args->platform, "Pricing catalog: aci, lambda, azure-vm, aws-vm, or a YAML file")
      ->capture_default_str();
  cmd->add_option("--accelerator", args->accelerator, "Accelerator to price workers with (default: the profile's)");
  cmd->add_option("--data-parallel", args->data_parallel, "Pin the number of data-parallel replicas");
  cmd->add_option("--stages", args->stages, "Pin the number of pipeline stages");
  cmd->add_option("--microbatch-size", args->microbatch_size, "Pin the microbatch size");
  cmd->add_option("--microbatches", args->microbatches, "Pin the number of microbatches per iteration");
  cmd->add_option("--partition", args->partition, "Pin the stages as layer ranges, e.g. 0-3,4-9,10-17");
  cmd->add_option("--tensor-parallel", args->tensor_parallel,
                  "Pin t, the workers that split each transformer layer (Megatron's tensor parallelism; it must divide "
                  "the workers and the model's heads, hidden, ffn and vocabulary)");
  cmd->add_option("--tensor-link-workers", args->tensor_link_workers,
                  "Workers that share a fast link (a host): the search tries t up to this (default: all workers, as "
                  "on one host; 1: no tensor parallelism)");
  cmd->add_option("--tensor-bandwidth", args->tensor_bandwidth,
                  "Bandwidth of that fast link, for the tensor groups' allreduces (default: --bandwidth)");
  cmd->add_flag("--scatter-gather", args->scatter_gather,
                "Cost stage boundaries as Megatron's scatter/gather sends them (1/t from each rank, an all-gather at "
                "the receiver) instead of whole from every rank, as the runtime does today");
  cmd->add_option("--schedule", args->schedule,
                  "Pipeline schedule to plan for: gpipe, 1f1b, interleaved, 2bw, pipedream, pipedream-vs, or auto "
                  "(every schedule's best plan side by side, the best chosen; docs/schedules.md)")
      ->capture_default_str();
  cmd->add_option("--chunks", args->chunks, "Model chunks per stage for the interleaved schedule")->capture_default_str();
  cmd->add_flag("--recompute", args->recompute, "Plan with activations recomputed in the backward pass");
  cmd->add_option("--planner", args->planner,
                  "hydrozoa (stages × replicas × microbatches, right-sized), 2bw (PipeDream-2BW's planner: d × p, "
                  "microbatch size, recomputation, 2bw or 1f1b, by its closed-form costs), pipedream (PipeDream's "
                  "hierarchical DP: stages with their own replica counts over --machines), or funcpipe (FuncPipe's "
                  "co-optimiser of stages, replicas and function sizes on --platform lambda or alibaba-fc: the "
                  "cost/time frontier; docs/functions.md)")
      ->capture_default_str();
  cmd->add_option("--merge-layers", args->merge_layers,
                  "funcpipe: merge the profile's layers, balancing compute, down to at most this many for the "
                  "solver (FuncPipe §4; fewer solve faster)")
      ->capture_default_str();
  cmd->add_option("--frontier-point", args->frontier_point,
                  "funcpipe: with -o, write the frontier's configuration N (1 = the fastest, as printed) instead "
                  "of the recommendation");
  cmd->add_option("--machines", args->machines,
                  "pipedream: machines per level, the lowest first (4; or 4,4: 4 servers of 4), with one "
                  "--bandwidth per level (10GB/s,1GB/s)");
  cmd->add_flag("--straight-pipeline", args->straight_pipeline, "pipedream: no replicated stages");
  cmd->add_flag("--fewer-machines", args->fewer_machines, "pipedream: leave machines unused where that is faster");
  cmd->add_option("--activation-compression", args->activation_compression,
                  "pipedream: count activation transfers, divided by this compression ratio (1: uncompressed)");
  cmd->add_option("--max-microbatches", args->max_microbatches, "Largest microbatch count searched without a global batch")
      ->capture_default_str();
  cmd->add_flag("--shared-memory", args->shared_memory,
                "Replicas sum through shared memory, as workers on one machine do (`hydrozoa train`'s local launcher); "
                "needs a profile with --network");
  cmd->add_flag("--all-strategies", args->all_strategies,
                "Consider every stage count (Algorithm 1), also those that leave workers idle");
  CLI::Option* output =
      cmd->add_option("-o,--output", args->output, "Where to write the plan ('-' for nowhere)")->capture_default_str();
  CLI::Option* schedule = cmd->get_option("--schedule");
  auto json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json, "Print the chosen plan and its alternatives as JSON (plan.json's form) on stdout");
  cmd->callback([args, json, status, output, schedule] {
    args->output_given = output->count() > 0;
    args->schedule_given = schedule->count() > 0;
    *status = runPlan(*args, *json);
  });
}

}  // namespace hydrozoa::cli
