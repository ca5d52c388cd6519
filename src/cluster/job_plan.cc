#include "cluster/job_plan.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <numeric>
#include <thread>

#include "cluster/launch/container/container_launcher.h"
#include "cluster/launch/local/local_launcher.h"
#include "core/cpus.h"
#include "model/model.h"
#include "plan/cost/round_robin.h"
#include "plan/search.h"
#include "profile/profile.h"

namespace hydrozoa::cluster {
namespace fs = std::filesystem;

Result<ModelInfo> inspectModel(const JobSpec& spec) {
  ModelInfo info;
  if (model::isZooModel(spec.model)) {
    HZ_ASSIGN_OR_RETURN(model::Arch arch, model::buildArch({spec.model, spec.model_options}));
    info.name = arch.name;
    for (const auto& l : arch.layers) info.layer_names.push_back(l.name);
    info.input = arch.input;
    info.task = arch.task;
    return info;
  }
  HZ_ASSIGN_OR_RETURN(model::Model m, model::buildModel({spec.model, spec.model_options}));
  info.name = m.name;
  for (const auto& l : m.layers) info.layer_names.push_back(l.name);
  info.input = m.input;
  info.task = m.task;
  return info;
}

// NOTE [Where FlexRR reassigns]: a helper computes a straggler's whole
// microbatch, forward and backward, from the data; in a pipeline a
// microbatch's input on stage s > 0 comes from stage s − 1 of its own
// replica, sent before the straggler could give it away, so only one-stage
// replicas reassign (docs/stragglers.md).
Status checkFlexrr(const plan::Plan& p, const JobSpec& spec, const std::string& origin) {
  if (!spec.flexrr.enabled || p.data_parallel < 2) return Status();
  const bool flushes = p.schedule == plan::ScheduleKind::kGPipe || p.schedule == plan::ScheduleKind::kOneFOneB;
  if (p.pipeline_stages == 1 && p.tensor_parallel == 1 && flushes && p.evenlyReplicated() && spec.channel.empty()) {
    return Status();
  }
  return invalidArgument(fmt::format(
      "{}: flexrr reassigns microbatches among data-parallel replicas of one stage (gpipe or 1f1b, workers "
      "connected to each other), but the plan has {} stages × {}-way tensor parallelism under {}{}: use "
      "--stages 1 --tensor-parallel 1, or turn flexrr off",
      origin, p.pipeline_stages, p.tensor_parallel, plan::scheduleName(p.schedule),
      spec.channel.empty() ? "" : " through a channel"));
}

// NOTE [Tiers are data-parallel replicas] (cluster/job_spec.cc): with the
// transient tier gone, the R reliable replicas compute the step's R + T
// replicas' microbatches, M·(R + T)/R each, so R must divide M·(R + T).
Status checkTiers(const plan::Plan& p, const JobSpec& spec, const std::string& origin) {
  const TierSpec& t = spec.tiers;
  if (!t.enabled()) return Status();
  const int all = t.reliable + t.transient;
  const bool flushes = p.schedule == plan::ScheduleKind::kGPipe || p.schedule == plan::ScheduleKind::kOneFOneB;
  if (p.pipeline_stages != 1 || p.tensor_parallel != 1 || p.data_parallel != all || !flushes ||
      !p.evenlyReplicated()) {
    return invalidArgument(fmt::format("{}: cluster.tiers trains {} data-parallel replicas of one stage under gpipe "
                                       "or 1f1b, but the plan has {} replicas × {} stages × {}-way tensor "
                                       "parallelism under {}: plan with --data-parallel {} --stages 1",
                                       origin, all, p.data_parallel, p.pipeline_stages, p.tensor_parallel,
                                       plan::scheduleName(p.schedule), all));
  }
  if (t.reliable > 0 && (p.num_microbatches * all) % t.reliable != 0) {
    return invalidArgument(fmt::format("{}: without the transient tier the {} reliable replicas take over the step's "
                                       "{} × {} microbatches, which they cannot share evenly: pin --microbatches to "
                                       "a multiple of {}",
                                       origin, t.reliable, all, p.num_microbatches,
                                       t.reliable / std::gcd(t.reliable, all)));
  }
  return Status();
}

Status checkPlan(const plan::Plan& p, const ModelInfo& model, const JobSpec& spec, const std::string& origin) {
  const int L = static_cast<int>(model.layer_names.size());
  if (p.pieces().back().last + 1 != L) {
    return invalidArgument(fmt::format("{} splits {} layers but the job's model {} has {}; make a plan for this model "
                                       "(hydrozoa plan, or drop plan.file to plan here)",
                                       origin, p.pieces().back().last + 1, model.name, L));
  }
  if (!p.layer_names.empty() && p.layer_names != model.layer_names) {
    for (int i = 0; i < L; ++i) {
      if (p.layer_names[i] != model.layer_names[i]) {
        return invalidArgument(fmt::format("{} was made for another model: its layer {} is \"{}\", the job's model has "
                                           "\"{}\"",
                                           origin, i, p.layer_names[i], model.layer_names[i]));
      }
    }
  }
  if (!p.evenlyReplicated() && spec.scaling.policy != "fixed") {
    return invalidArgument(fmt::format("{} replicates its stages unevenly (round-robin); scaling.policy {} changes "
                                       "every stage's replicas alike: use policy fixed with this plan",
                                       origin, spec.scaling.policy));
  }
  if (!p.evenlyReplicated() && p.workersUsed() > spec.workers) {
    return invalidArgument(fmt::format("{} needs {} workers (its stages' replicas) but cluster.workers is {}", origin,
                                       p.workersUsed(), spec.workers));
  }
  if (p.data_parallel * p.pipeline_stages > spec.workers && p.evenlyReplicated() && p.tensor_parallel == 1) {
    return invalidArgument(fmt::format("{} needs {}×{} = {} workers but cluster.workers is {}", origin, p.data_parallel,
                                       p.pipeline_stages, p.data_parallel * p.pipeline_stages, spec.workers));
  }
  if (p.tensor_parallel > 1) {
    if (p.workersUsed() > spec.workers) {
      return invalidArgument(fmt::format("{} needs {}×{}×{} = {} workers (data-parallel × stages × tensor-parallel) but "
                                         "cluster.workers is {}",
                                         origin, p.data_parallel, p.pipeline_stages, p.tensor_parallel,
                                         p.workersUsed(), spec.workers));
    }
    const bool flushes = p.schedule == plan::ScheduleKind::kGPipe || p.schedule == plan::ScheduleKind::kOneFOneB ||
                         p.schedule == plan::ScheduleKind::kInterleaved;
    if (!flushes || !p.evenlyReplicated()) {
      return invalidArgument(fmt::format("{} splits layers {} ways under the {} schedule; tensor parallelism runs with "
                                         "gpipe, 1f1b or interleaved and every stage replicated alike: pin one of "
                                         "those schedules or tensor_parallel: 1",
                                         origin, p.tensor_parallel, plan::scheduleName(p.schedule)));
    }
    JobSpec split = spec;
    split.tensor_parallel = p.tensor_parallel;
    HZ_RETURN_IF_ERROR(checkTensorParallel(split));
  }
  HZ_RETURN_IF_ERROR(checkFlexrr(p, spec, origin));
  HZ_RETURN_IF_ERROR(checkTiers(p, spec, origin));
  if (p.globalBatch() != spec.global_batch) {
    return invalidArgument(fmt::format("{} trains with a global batch of {} ({} replicas × {} microbatches of {}) but "
                                       "training.global_batch is {}; re-plan, or set global_batch: {}",
                                       origin, p.globalBatch(), p.data_parallel, p.num_microbatches, p.microbatch_size,
                                       spec.global_batch, p.globalBatch()));
  }
  return Status();
}

Status checkTensorParallel(const JobSpec& spec) {
  const int t = spec.tensor_parallel.value_or(1);
  if (t == 1) return Status();
  if (!model::isZooModel(spec.model)) {
    return invalidArgument(fmt::format("tensor parallelism {} splits the zoo's transformers, and {} is not one of "
                                       "them: use tensor parallelism 1",
                                       t, spec.model));
  }
  HZ_ASSIGN_OR_RETURN(model::Arch arch, model::buildArch({spec.model, spec.model_options}));
  return model::checkTensorParallel(arch, t);
}

namespace {

std::string cacheDir() {
  if (const char* d = std::getenv("HYDROZOA_CACHE_DIR"); d && *d) return d;
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.cache/hydrozoa/profiles";
  return "";
}

// Sizes to profile: exactly the pinned one, else powers of two up to what
// the global batch allows (and 64, which is plenty on CPU workers).
Result<std::vector<std::int64_t>> profileSizes(const JobSpec& s) {
  if (s.microbatch_size) return std::vector<std::int64_t>{*s.microbatch_size};
  if (s.data_parallel && s.microbatches) {
    const std::int64_t per = s.global_batch / *s.data_parallel;
    if (per % *s.microbatches != 0) {
      return invalidArgument(fmt::format("plan: {} replicas × {} microbatches do not divide training.global_batch {}",
                                         *s.data_parallel, *s.microbatches, s.global_batch));
    }
    return std::vector<std::int64_t>{per / *s.microbatches};
  }
  std::vector<std::int64_t> sizes;
  for (std::int64_t m = 1; m <= std::min<std::int64_t>(s.global_batch, 64); m *= 2) sizes.push_back(m);
  return sizes;
}

std::string lastLines(const std::string& path, int n) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) lines.push_back(line);
  }
  std::string out;
  for (size_t i = lines.size() > static_cast<size_t>(n) ? lines.size() - n : 0; i < lines.size(); ++i) {
    out += (out.empty() ? "" : " | ") + lines[i];
  }
  return out;
}

// The profile's name for the job's optimizer: what its state holds and how
// long its update takes (profile/profile.h).
std::string profileOptimizer(const OptimizerSpec& o) {
  if (o.name == "adam") return "adam";
  return o.momentum > 0 ? "sgd_momentum" : "sgd";
}

// Measures the profile by running `hydrozoa profile` in a worker process.
Status profileInWorker(const JobSpec& spec, const std::vector<std::int64_t>& sizes, bool network, const RunDir& run,
                       const std::string& executable, const std::string& out, Progress& progress,
                       const std::atomic<int>* interrupt) {
  WorkerLaunch w;
  w.id = 0;
  w.log_path = run.file("workers/profile.log");
  w.args = {"--log-level", "warn", "profile", "--model", spec.model, "--threads", std::to_string(spec.threads),
            "--optimizer", profileOptimizer(spec.optimizer), "-o", out};
  std::string list;
  for (auto m : sizes) list += (list.empty() ? "" : ",") + std::to_string(m);
  w.args.insert(w.args.end(), {"--microbatch-sizes", list});
  for (const auto& [k, v] : spec.model_options) w.args.insert(w.args.end(), {"-O", k + "=" + v});
  if (network) w.args.push_back("--network");
  LocalLauncher launcher(executable);
  HZ_RETURN_IF_ERROR(launcher.launch(w));
  const auto started = std::chrono::steady_clock::now();
  auto lastNote = started;
  for (;;) {
    for (const WorkerExit& e : launcher.poll()) {
      if (e.success) return Status();
      return unavailable(fmt::format("profiling the model in a worker failed ({}): {} (log: {})", e.how,
                                     lastLines(w.log_path, 2), w.log_path));
    }
    if (interrupt && interrupt->load()) {
      return unavailable("interrupted while profiling the model (nothing was trained)");  // ~launcher ends it
    }
    const auto now = std::chrono::steady_clock::now();
    if (now - lastNote >= std::chrono::seconds(10)) {
      lastNote = now;
      progress.note(fmt::format("  still profiling ({:.0f} s; each size is measured until its median is steady)",
                                std::chrono::duration<double>(now - started).count()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace

bool sharedMemoryAllreduceAllowed() {
  const char* env = std::getenv("HYDROZOA_SHM_ALLREDUCE");
  return !(env && std::string_view(env) == "0");
}

bool replicasShareMemory(const JobSpec& spec) {
  if (!sharedMemoryAllreduceAllowed()) return false;
  return spec.launcher == "local" || (spec.launcher == "auto" && !containerSupport().empty());
}

namespace {

Result<plan::SearchOptions> searchOptions(const JobSpec& spec, const profile::Profile& prof,
                                          const plan::Catalog& catalog, Bytes dataBytes) {
  plan::SearchOptions o;
  o.workers = spec.workers;
  o.memory_limit = spec.memory;
  // Functions: the platform's bandwidth, through the store (the probe's
  // worker-to-worker figures are not theirs).
  const bool measured = prof.network && spec.launcher != "function";
  o.bandwidth = spec.bandwidth ? *spec.bandwidth : measured ? prof.network->bandwidth : catalog.network_bandwidth;
  if (measured) {
    plan::useMeasuredTransport(o, *prof.network);
    if (replicasShareMemory(spec)) o.shared_memory = plan::sharedMemoryCost(*prof.network);
  }
  // Containers delay each worker's egress by cluster.latency (tc netem):
  // every transfer and allreduce round pays it on top of what was measured.
  o.latency = spec.latency;
  o.global_batch = spec.global_batch;
  o.recovery_copies = spec.max_recoveries > 0;  // the workers keep them only then
  o.data_bytes = dataBytes;
  // The local and container launchers start their workers on this machine:
  // they share its cores, and a plan with more compute threads than cores
  // computes slower. Slurm gives each step CPUs of its own on some node.
  // Its cores slow each other down as the profile measured there (NOTE
  // [Compute beside busy cores], plan/cost/pipeline.cc).
  if (spec.launcher != "slurm") {
    o.host_cores = static_cast<int>(usableCpus().size());
    if (prof.corun && prof.corun->cores == o.host_cores) o.busy_slowdown = prof.corun->slowdown;
  }
  o.threads = spec.threads;
  HZ_ASSIGN_OR_RETURN(o.objective, plan::parseObjective(spec.objective));
  o.data_parallel = spec.data_parallel;
  o.stages = spec.stages;
  o.tensor_parallel = spec.tensor_parallel;
  o.scatter_gather = spec.scatter_gather.value_or(false);
  // The local and container launchers' workers share this host: one fast link.
  if (spec.launcher != "slurm") o.tensor_link_workers = spec.workers;
  o.microbatch_size = spec.microbatch_size;
  o.microbatches = spec.microbatches;
  if (spec.schedule) {
    HZ_ASSIGN_OR_RETURN(o.schedule, plan::parseSchedule(*spec.schedule, "plan.schedule"));
  }
  if (spec.chunks) o.chunks = *spec.chunks;
  o.recompute = spec.recompute.value_or(false);
  if (spec.flexrr.enabled) {
    // One-stage plans only (NOTE [Where FlexRR reassigns]); and since work
    // moves a microbatch at a time, up to 8 microbatches per replica unless
    // pinned (FlexRR's first offer is 2.5% of a replica's work).
    if (!o.stages) o.stages = 1;
    if (!o.tensor_parallel) o.tensor_parallel = 1;
    if (!o.microbatches && !o.microbatch_size && o.data_parallel && spec.global_batch % *o.data_parallel == 0) {
      const std::int64_t per = spec.global_batch / *o.data_parallel;
      for (std::int64_t m = std::min<std::int64_t>(8, per); m >= 1; --m) {
        if (per % m == 0) {
          o.microbatches = m;
          break;
        }
      }
    }
  }
  // Scaling changes every stage's replicas alike: stages replicated
  // unevenly only with a fixed set of workers (checkPlan).
  o.round_robin = spec.scaling.policy == "fixed";
  return o;
}

// Plans the job from `prof` and writes plan.json.
Result<plan::Plan> planFromProfile(const JobSpec& spec, const profile::Profile& prof, Bytes dataBytes,
                                   const RunDir& run, Progress& progress) {
  HZ_ASSIGN_OR_RETURN(plan::Catalog catalog, plan::loadCatalog(spec.platform));
  HZ_ASSIGN_OR_RETURN(plan::SearchOptions o, searchOptions(spec, prof, catalog, dataBytes));
  progress.note(fmt::format("Planning with {} between workers ({})", formatBandwidth(o.bandwidth),
                            spec.bandwidth  ? "cluster.bandwidth"
                            : prof.network && spec.launcher != "function" ? "measured here between two worker processes; set cluster.bandwidth to "
                                             "plan and shape for another network"
                                           : fmt::format("the {} catalog's figure", catalog.name)));
  HZ_ASSIGN_OR_RETURN(plan::SearchResult result, plan::searchPlan(prof, catalog, o));
  plan::Plan p = plan::makePlan(result, prof, o, catalog.name);
  HZ_RETURN_IF_ERROR(checkFlexrr(p, spec, "the plan"));
  HZ_RETURN_IF_ERROR(checkTiers(p, spec, "the plan"));
  HZ_RETURN_IF_ERROR(run.writeJson("plan.json", plan::planToJson(p)));
  return p;
}

}  // namespace

Result<plan::Plan> planJob(const JobSpec& spec, const ModelInfo& model, Bytes dataBytes, const RunDir& run,
                           const std::string& executable, bool refreshProfile, Progress& progress,
                           const std::atomic<int>* interrupt) {
  if (!spec.plan_file.empty()) {
    HZ_ASSIGN_OR_RETURN(plan::Plan p, plan::loadPlan(spec.plan_file));
    HZ_RETURN_IF_ERROR(checkPlan(p, model, spec, spec.plan_file));
    if (spec.recompute) p.recompute = *spec.recompute;
    if (spec.scatter_gather) p.scatter_gather = *spec.scatter_gather && p.tensor_parallel > 1;
    if (spec.schedule) {  // the pin runs the plan's stages with another schedule
      const std::string madeFor = plan::scheduleName(p.schedule);
      HZ_ASSIGN_OR_RETURN(p.schedule, plan::parseSchedule(*spec.schedule, "plan.schedule"));
      if ((p.schedule == plan::ScheduleKind::kInterleaved) != (p.chunks > 1)) {
        return invalidArgument(fmt::format("{} was made for the {} schedule; the interleaved schedule needs a plan cut "
                                           "into chunks: plan for it (drop plan.file, or hydrozoa plan --schedule "
                                           "interleaved)",
                                           spec.plan_file, madeFor));
      }
    }
    if (spec.precision == "fp16" && plan::asynchronous(p.schedule)) {
      return invalidArgument(fmt::format("{} runs the {} schedule and training.precision is fp16: {}", spec.plan_file,
                                         plan::scheduleName(p.schedule),
                                         fp16ScheduleProblem(plan::scheduleName(p.schedule))));
    }
    if (!p.evenlyReplicated() && p.schedule == plan::ScheduleKind::kPipeDreamVerticalSync) {
      return invalidArgument(fmt::format("{} replicates its stages unevenly; the pipedream-vs schedule (vertical "
                                         "sync) needs every stage replicated alike: use --schedule pipedream",
                                         spec.plan_file));
    }
    // Round-robin, a step must hold what each stage's copies keep in flight
    // (runtime/schedule/two_bw.cc).
    const std::int64_t inFlight = p.schedule == plan::ScheduleKind::kTwoBW && !p.evenlyReplicated()
                                      ? plan::roundRobinStepInFlight(p.stageReplicas())
                                      : 0;
    if (p.data_parallel * p.num_microbatches < inFlight) {
      return invalidArgument(fmt::format("{}: the 2bw schedule needs at least as many microbatches per step as a "
                                         "stage's copies keep in flight over them ({} < {}); raise num_microbatches "
                                         "to {}",
                                         spec.plan_file, p.data_parallel * p.num_microbatches, inFlight,
                                         (inFlight + p.data_parallel - 1) / p.data_parallel));
    }
    if (p.schedule == plan::ScheduleKind::kTwoBW && p.evenlyReplicated() && p.num_microbatches < p.pipeline_stages) {
      return invalidArgument(fmt::format("{}: the {} schedule needs at least as many microbatches per step as stages "
                                         "({} < {}); plan for it (hydrozoa plan --schedule {}) or pin --microbatches {}",
                                         spec.plan_file, plan::scheduleName(p.schedule), p.num_microbatches, p.pipeline_stages,
                                         plan::scheduleName(p.schedule), p.pipeline_stages));
    }
    HZ_RETURN_IF_ERROR(run.writeJson("plan.json", plan::planToJson(p)));
    return p;
  }
  const std::string here = run.file("profile.json");
  if (!spec.profile_file.empty()) {
    HZ_ASSIGN_OR_RETURN(profile::Profile given, profile::loadProfile(spec.profile_file));
    if (given.model != model.name || given.numLayers() != model.layer_names.size()) {
      return invalidArgument(fmt::format("{} profiles {} ({} layers), but this job trains {} ({} layers): give a "
                                         "profile of this model (hydrozoa profile --from-run of one of its runs), or "
                                         "drop plan.profile / --profile",
                                         spec.profile_file, given.model, given.numLayers(), model.name,
                                         model.layer_names.size()));
    }
    HZ_RETURN_IF_ERROR(profile::saveProfile(given, here));
    progress.note(fmt::format("Using the profile {} (plan.profile)", spec.profile_file));
    return planFromProfile(spec, given, dataBytes, run, progress);
  }
  HZ_ASSIGN_OR_RETURN(std::vector<std::int64_t> sizes, profileSizes(spec));
  const bool network = !spec.bandwidth.has_value();
  // v2: profiles with the optimizer's update time (NOTE [Timing the update]);
  // v5: with the slowdown beside busy cores (NOTE [Compute beside busy cores]);
  // v6: with the CPU a message takes (NOTE [What a message costs the cores]);
  // v7: with a message's delivery on busy cores (NOTE [A message's delivery
  // on busy cores]).
  std::string key =
      fmt::format("v7|{}|{}|{}|{}", spec.model, spec.threads, network, profileOptimizer(spec.optimizer));
  for (const auto& [k, v] : spec.model_options) key += "|" + k + "=" + v;
  for (auto m : sizes) key += "|" + std::to_string(m);
  if (!model::isZooModel(spec.model)) {
    std::error_code ec;
    key += "|" + std::to_string(fs::last_write_time(spec.model, ec).time_since_epoch().count());
  }
  const std::string cached =
      cacheDir().empty() ? "" : fmt::format("{}/{:016x}.json", cacheDir(), std::hash<std::string>()(key));
  std::error_code ec;
  bool reused = false;
  if (!cached.empty() && !refreshProfile && fs::exists(cached, ec)) {
    auto p = profile::loadProfile(cached);
    if (p.ok() && p->numLayers() == model.layer_names.size()) {
      fs::copy_file(cached, here, fs::copy_options::overwrite_existing, ec);
      reused = !ec;
    }
  }
  if (reused) {
    progress.note(fmt::format("Using the cached profile of {} ({}; --refresh-profile measures it again)", model.name,
                              cached));
  } else {
    progress.note(fmt::format("Profiling {} in a worker process (microbatch sizes {}..{}{})...", model.name,
                              sizes.front(), sizes.back(), network ? ", and the network" : ""));
    HZ_RETURN_IF_ERROR(profileInWorker(spec, sizes, network, run, executable, here, progress, interrupt));
    if (!cached.empty()) {
      fs::create_directories(cacheDir(), ec);
      fs::copy_file(here, cached, fs::copy_options::overwrite_existing, ec);
    }
  }
  HZ_ASSIGN_OR_RETURN(profile::Profile prof, profile::loadProfile(here));
  return planFromProfile(spec, prof, dataBytes, run, progress);
}

Result<plan::Plan> replanForReplicas(const JobSpec& spec, const plan::Plan& jobPlan, int replicas, Bytes dataBytes,
                                     const RunDir& run) {
  const std::string here = run.file("profile.json");
  std::error_code ec;
  if (!fs::exists(here, ec)) {
    return invalidArgument(fmt::format("scaling.replan needs the profile the planner measures ({} is missing): a job "
                                       "that brings its own plan.json cannot be re-planned; remove replan",
                                       here));
  }
  HZ_ASSIGN_OR_RETURN(profile::Profile prof, profile::loadProfile(here));
  HZ_ASSIGN_OR_RETURN(plan::Catalog catalog, plan::loadCatalog(jobPlan.platform.empty() ? spec.platform
                                                                                        : jobPlan.platform));
  HZ_ASSIGN_OR_RETURN(plan::SearchOptions o, searchOptions(spec, prof, catalog, dataBytes));
  // The same workers per replica and samples per replica as the job's plan;
  // the stages, their split and the microbatches are the planner's again
  // (unless the job pins them).
  const int perReplica = std::max(1, spec.workers / jobPlan.data_parallel);
  o.workers = replicas * perReplica;
  o.data_parallel = replicas;
  o.global_batch = replicas * (spec.global_batch / jobPlan.data_parallel);
  o.all_strategies = true;  // fewer stages than workers allow may be faster
  o.schedule = jobPlan.schedule;
  if (jobPlan.chunks > 1) o.chunks = jobPlan.chunks;
  o.recompute = jobPlan.recompute;
  o.scatter_gather = jobPlan.scatter_gather;
  auto result = plan::searchPlan(prof, catalog, o);
  if (!result.ok()) {
    return Status(result.status().code(), fmt::format("re-planning for {} replicas on {} workers: {}", replicas,
                                                      o.workers, result.status().message()));
  }
  return plan::makePlan(*result, prof, o, catalog.name);
}

}  // namespace hydrozoa::cluster
