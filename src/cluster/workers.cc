// The job's workers: where they run (cores, ranks, the launcher), how they
// are started, and what each is told of its role (the "assign" message).
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "cluster/coordinator.h"
#include "cluster/coordinator_job.h"
#include "cluster/launch/container/container_launcher.h"
#include "cluster/launch/registry.h"
#include "core/cpus.h"
#include "core/paths.h"

namespace hydrozoa::cluster {
namespace coordinator {
namespace {

// A stage's accelerators per worker: one of its kind, or none (a plan's
// worker is one GPU; plan/resources.h).
int acceleratorCount(const std::string& accelerator) { return accelerator.empty() ? 0 : 1; }

// A stage's layers as the worker's assign message has them: [[first, last], ...].
Json layerRangesJson(const plan::PlanStage& stage) {
  Json ranges = Json::array();
  for (const plan::LayerRange& r : stage.layerRanges()) ranges.push_back({r.first, r.last});
  return ranges;
}

}  // namespace

// NOTE [Cores for compute threads]
// When every worker's compute threads fit on this machine's cores at once,
// each worker gets cores of its own: measured here, two unpinned workers on
// two cores now and then shared one for a timeslice, and a 2.5 ms backward
// pass took 15-19 ms. With more single-threaded workers than cores, worker
// (stage s, replica r) gets core (s + r) mod cores: the workers that compute
// at the same moment (a stage's replicas, neighbouring stages in a
// pipeline's wavefront) and the pairs that exchange activations and
// gradients land on different cores. Left to the scheduler, a 4-stage MLP
// on 2 cores ran a stage's backward pass in 4.1 ms against 2.2 ms while one
// neighbour computed beside it and the other two waited; measured in
// alternation, 4-stage MLP steps took 23.5-23.9 ms pinned against 25.3-27.8
// left to the scheduler, and the CNN's 23.3-25.6 against 27.5-29.1. Placed
// by s·A + r first, a 2x2 put each stage-0 replica on the core of the
// stage-1 worker it sends to, and its 128 KB send waited 5.6 ms for that
// worker to run (2x2 MLP 34.4 ms a step, CNN 20.3); by s + r, 0.1 ms
// (30.3-31.9 and 16.4-16.8). Workers with several threads each are left to
// the scheduler. The cores are those this process may use (taskset, a
// cpuset, Slurm's binding), not 0..n-1: pinning to a core outside them fails.
// The workers' compute threads outnumber the cores this process may use.
bool Job::coresShared(int workers) const {
  if (launcher_ && !launcher_->onThisHost()) return false;
  return static_cast<std::int64_t>(workers < 0 ? W_ : workers) * spec_.threads >
         static_cast<std::int64_t>(usableCpus().size());
}

Json Job::cpusOf(const WorkerState& w, int workers) const {
  Json cpus = Json::array();
  const std::vector<int> usable = usableCpus();
  if (usable.empty() || !launcher_->onThisHost()) return cpus;
  if (coresShared(workers)) {
    if (spec_.threads == 1) cpus.push_back(usable[static_cast<size_t>(w.stage + w.replica) % usable.size()]);
    return cpus;
  }
  for (int t = 0; t < spec_.threads; ++t) cpus.push_back(usable[w.rank * spec_.threads + t]);
  return cpus;
}

void Job::setReplicas(int replicas) {
  segmentReplicas_ = replicas;
  A_ = replicas;
  idle_ = tierMarket_ ? idleBeside(tierActive_) : 0;
  if (const int some = spec_.tiers.reliable + tierActive_; tierMarket_ && (gen_.data_parallel > some || idle_ > 0)) {
    // The reliable replicas and the transient ones present take the step's
    // microbatches (NOTE [Evicting at a step boundary]), or the transient
    // ones alone (NOTE [Reliable workers that compute nothing]): the same
    // global batch, in the same microbatches.
    const int working = some - idle_;
    const std::int64_t microbatches = static_cast<std::int64_t>(gen_.num_microbatches) * gen_.data_parallel;
    gen_.iteration_seconds *= static_cast<double>(gen_.data_parallel) / working;  // the compute, about
    gen_.num_microbatches = microbatches / working;
    gen_.data_parallel = some;
    A_ = some;
  }
  stageReplicas_.clear();
  T_ = gen_.tensor_parallel;
  W_ = A_ * B_ * T_;
  if (!gen_.evenlyReplicated()) {
    stageReplicas_ = gen_.stageReplicas();
    W_ = gen_.workersUsed();
  }
}

std::vector<WorkerState> Job::layout(int replicas, int stages, const std::vector<int>& stageReplicas) const {
  std::set<int> taken;
  for (const auto& w : workers_) {
    if (launcher_->alive(w.id)) taken.insert(w.id);
  }
  for (const auto& w : next_) taken.insert(w.id);
  for (const auto& w : joining_) taken.insert(w.id);
  for (const auto& w : leaving_) {
    if (launcher_->alive(w.id)) taken.insert(w.id);
  }
  // Replica-major ranks (plan::workerRank), a tensor group's T_ workers
  // consecutive (NOTE [Ranks of a 3D grid], plan/plan.h).
  std::vector<std::pair<int, int>> places;  // (replica, stage)
  const int most = stageReplicas.empty() ? replicas : *std::max_element(stageReplicas.begin(), stageReplicas.end());
  for (int r = 0; r < most; ++r) {
    for (int s = 0; s < stages; ++s) {
      if (r < (stageReplicas.empty() ? replicas : stageReplicas[static_cast<size_t>(s)])) places.emplace_back(r, s);
    }
  }
  std::vector<WorkerState> ws;
  int id = 0;
  for (size_t place = 0; place < places.size(); ++place) {
    for (int slice = 0; slice < T_; ++slice) {
      while (taken.count(id)) ++id;
      WorkerState w;
      w.id = id++;
      w.rank = static_cast<int>(place) * T_ + slice;
      w.replica = places[place].first;
      w.stage = places[place].second;
      w.tensor_rank = slice;
      w.tensor_parallel = T_;
      w.last_seen = Clock::now();
      ws.push_back(w);
    }
  }
  return ws;
}

Status Job::launch(WorkerState& w, const std::string& token, int generation, const plan::PlanStage& st,
                  Bytes memory) {
  WorkerLaunch l;
  l.id = w.id;
  l.args = {"--log-level", "info", "worker", "--join", control_->endpoint(), "--id", std::to_string(w.id)};
  l.env = {{"HYDROZOA_TOKEN", control_->credential(token)}};  // NOTE [Connections authenticate first]
  l.log_path = run_.workerLog(w.id);
  l.process_name = w.tensor_parallel > 1 ? fmt::format("hydrozoa-worker r{}s{}t{}", w.replica, w.stage, w.tensor_rank)
                                         : fmt::format("hydrozoa-worker r{}s{}", w.replica, w.stage);
  l.cpus = spec_.cpu_limit.value_or(st.vcpus);
  l.memory = spec_.memory_limit.value_or(memory);
  l.gpus = acceleratorCount(st.accelerator);
  l.start_delay = drawStartDelay(spec_.start_delay.value_or(StartDelay{}),
                                 spec_.seed * 7919 + static_cast<std::uint64_t>(w.id) + 104729ULL * generation);
  HZ_RETURN_IF_ERROR(launcher_->launch(l));
  w.launched_at = now();
  w.started_at = w.launched_at + l.start_delay;
  w.registered = w.ready = w.done = false;
  w.last_seen = Clock::now();
  everyWorker_[w.id] = w.name();
  return Status();
}

Status Job::launchWorkers() {
  workers_ = layout(A_, B_, stageReplicas_);
  for (auto& w : workers_) {
    if (Status s = launch(w, token_, generation_, gen_.stages[w.stage], stageMemory_[w.stage]); !s.ok()) {
      return failure(s.message());
    }
  }
  return Status();
}

// NOTE [Launcher choice]
// "auto" runs workers as containers when this process may create them (root,
// iproute2, cgroups) and as plain processes otherwise, saying why; asking for
// "container" where they cannot be made is an error naming the reason.
Status Job::makeLauncher() {
  std::string exe = o_.executable.empty() ? "/proc/self/exe" : o_.executable;
  std::string kind = spec_.launcher;
  if (kind == "slurm" && exe == "/proc/self/exe") {
    // Run on other machines, by the path they install it at: this one's.
    if (std::string path = executablePath(); !path.empty()) exe = path;
  }
  if (kind == "auto") {
    const std::string why = containerSupport();
    kind = why.empty() ? "container" : "local";
    if (!why.empty()) progress_.note(fmt::format("Workers run as plain processes: {}", why));
    if (!why.empty() && spec_.latency > 0) {
      progress_.note(fmt::format("Note: cluster.latency {} is not applied: plain processes have no shaped links",
                                 formatSeconds(spec_.latency)));
    }
  }
  LauncherContext context;
  context.executable = exe;
  context.bandwidth = spec_.bandwidth.value_or(plan_.bandwidth);
  context.latency = spec_.latency;
  context.job_name = spec_.name;
  context.workers = W_;
  context.slurm = spec_.slurm;
  // The catalog the plan names, from where the job has it: a file given as
  // cluster.platform is that file, not the built-in catalog of its name.
  std::string platform = spec_.platform;
  auto catalog = plan::loadCatalog(platform);
  if (!plan_.platform.empty() && !(catalog.ok() && catalog->name == plan_.platform)) {
    platform = plan_.platform;
    catalog = plan::loadCatalog(platform);
  }
  context.platform = platform;
  context.max_duration = spec_.function_timeout;
  for (std::size_t i = 0; i < gen_.stages.size(); ++i) {
    context.worker_cpus = std::max(context.worker_cpus, spec_.cpu_limit.value_or(gen_.stages[i].vcpus));
    context.worker_memory = std::max(context.worker_memory, spec_.memory_limit.value_or(stageMemory_[i]));
    context.worker_gpus = std::max(context.worker_gpus, acceleratorCount(gen_.stages[i].accelerator));
  }
  HZ_ASSIGN_OR_RETURN(launcher_, cluster::makeLauncher(kind, context));
  // Billing: the platform's unit, each worker at its stage's rate.
  // Functions: a fee per invocation too.
  BillingUnit unit = BillingUnit::kSecond;
  Usd fee = 0;
  if (catalog.ok()) {
    if (auto u = parseBillingUnit(catalog->billing, catalog->name); u.ok()) unit = *u;
    if (kind == "function") fee = catalog->request_fee;
    if (kind == "function" && !spec_.start_delay && !catalog->cold_start.empty()) {
      // A function's cold start, as the platform's catalog puts it.
      HZ_ASSIGN_OR_RETURN(spec_.start_delay,
                          parseStartDelay(catalog->cold_start, fmt::format("{}'s cold_start", catalog->name)));
    }
  }
  ledger_ = Ledger(unit, fee);
  return Status();
}

void Job::onRegistered(WorkerState& w, const plan::Plan& plan) {
  w.registered = true;
  w.registered_at = now();
  startDelays_.push_back(w.registered_at - w.launched_at);
  // As it runs where the launcher knows (a function's size), else as planned.
  const UsdPerHour rate = launcher_->hourlyRate(w.id);
  ledger_.start(w.id, now(), rate >= 0 ? rate : rateOf(plan, w.stage));
}

UsdPerHour Job::rateOf(const plan::Plan& plan, int stage) {
  const plan::PlanStage& st = plan.stages[stage];
  return st.cost_per_hour > 0 ? st.cost_per_hour : plan.cost_per_hour / plan.workersUsed();
}

void Job::sendAssign(const WorkerState& w, int stateFrom) { control_->send(from(w.id), assignMessage(w, stateFrom)); }

Json Job::assignMessage(const WorkerState& w, int stateFrom, const Json* next) const {
  const std::int64_t start = next ? regroupAt_ : resumeStep_;
  const Segment& seg = epochs_.atStep(start);
  const std::int64_t firstEpoch = epochs_.epochOf(start);
  Json assign = {{"type", "assign"},
                 {"generation", generation_},
                 {"rank", w.rank},
                 {"world_size", W_},
                 {"replica", w.replica},
                 {"replicas", stageReplicas_.empty() ? A_ : stageReplicas_[static_cast<size_t>(w.stage)]},
                 {"stage", w.stage},
                 {"stages", B_},
                 {"tensor_rank", w.tensor_rank},
                 {"tensor_parallel", T_},
                 {"scatter_gather", gen_.scatter_gather},
                 {"first_layer", gen_.stages[w.stage].first_layer},
                 {"layer_ranges", layerRangesJson(gen_.stages[w.stage])},
                 {"last_layer", gen_.stages[w.stage].last_layer},
                 {"microbatch_size", gen_.microbatch_size},
                 {"microbatches", stageReplicas_.empty() ? gen_.num_microbatches
                                                         : A_ * gen_.num_microbatches /
                                                               stageReplicas_[static_cast<size_t>(w.stage)]},
                 {"idle_replicas", stageReplicas_.empty() ? idle_ : 0},
                 {"train_size", trainSize_},
                 {"test_size", spec_.eval ? testSize_ : 0},
                 {"start_step", start},
                 {"total_steps", totalSteps_},
                 {"stop_step", genStop_},
                 {"epoch_start_step", epochs_.epochStart(firstEpoch)},
                 {"first_epoch", firstEpoch},
                 {"global_batch", globalBatch()},
                 {"lr_factor", seg.lr_factor},
                 {"hold_at_epoch_end", policy_->usesMetrics()},
                 {"shared_memory", launcher_->sharesHostMemory() && sharedMemoryAllreduceAllowed()},
                 {"listen_host", launcher_->workerHost(w.id)},
                 {"checkpoint_root", spec_.checkpoint_dir.empty() ? "" : run_.checkpointsDir()},
                 {"trace_path", run_.workerTrace(w.id)},
                 {"checkpoint", checkpoint_},
                 {"schedule", plan::scheduleName(gen_.schedule)},
                 {"recompute", gen_.recompute},
                 {"cpus", cpusOf(w)},
                 {"cpus_shared", coresShared()},
                 {"job", jobSpecToJson(spec_)}};
  if (stateFrom >= 0) {  // joining a running group (NOTE [State for joiners], runtime/worker/stage_setup.cc)
    assign["checkpoint"] = "";
    assign["state_from"] = stateFrom;
  }
  if (!stageReplicas_.empty()) assign["stage_replicas"] = stageReplicas_;
  if (channel_) assign["channel"] = channel_->assign(generation_, checkpoint_);
  if (next) {  // the group the running workers regroup into (one stage: its replicas are its workers)
    const int workers = (*next)["replicas"].get<int>();
    for (const char* key : {"generation", "replicas", "microbatches", "idle_replicas"}) assign[key] = (*next)[key];
    assign["world_size"] = workers;
    assign["cpus"] = cpusOf(w, workers);
    assign["cpus_shared"] = coresShared(workers);
  }
  return assign;
}

}  // namespace coordinator
}  // namespace hydrozoa::cluster
