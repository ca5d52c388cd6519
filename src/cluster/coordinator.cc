#include "cluster/coordinator.h"
#include "cluster/coordinator_job.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <torch/cuda.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <fstream>
#include <map>
#include <optional>
#include <functional>
#include <set>
#include <thread>

#include "cluster/billing.h"
#include "cluster/job_plan.h"
#include "cluster/launch/container/container_launcher.h"
#include "cluster/launch/registry.h"
#include "cluster/progress.h"
#include "cluster/run_dir.h"
#include "cluster/scaling/epochs.h"
#include "cluster/scaling/policy.h"
#include "core/cpus.h"
#include "core/paths.h"
#include "data/dataset.h"
#include "data/sampler.h"
#include "model/zoo.h"
#include "wire/control.h"
#include "wire/file_transfer.h"

namespace hydrozoa::cluster {
namespace coordinator {
namespace {

// A stage's accelerators per worker: one of its kind, or none (a plan's
// worker is one GPU; plan/resources.h).
int acceleratorCount(const std::string& accelerator) { return accelerator.empty() ? 0 : 1; }

std::int64_t monotonicUs() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
}

std::string defaultRunDir(const JobSpec& spec) {
  const std::time_t now = std::time(nullptr);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", std::localtime(&now));
  return fmt::format("runs/{}-{}", spec.name, stamp);
}

// A stage's layers as the worker's assign message has them: [[first, last], ...].
Json layerRangesJson(const plan::PlanStage& stage) {
  Json ranges = Json::array();
  for (const plan::LayerRange& r : stage.layerRanges()) ranges.push_back({r.first, r.last});
  return ranges;
}

std::string lastLogLine(const std::string& path) {
  std::ifstream in(path);
  std::string line, last;
  while (std::getline(in, line)) {
    if (!line.empty()) last = line;
  }
  return last;
}

}  // namespace

Job::Job(const TrainOptions& o, RunDir run, JobSpec spec, plan::Plan plan, ModelInfo model, std::int64_t trainSize,
         std::int64_t testSize, Bytes dataBytes, std::int64_t startStep, std::string checkpoint, const Json& resumed)
    : o_(o), stopAfter_(o.stop_after), run_(std::move(run)), spec_(std::move(spec)), plan_(std::move(plan)),
      model_(std::move(model)), trainSize_(trainSize), testSize_(testSize), dataBytes_(dataBytes),
      startStep_(startStep), checkpoint_(std::move(checkpoint)), progress_(o.progress), resumeStep_(startStep),
      reached_(startStep) {
  // A resumed run goes on counting time, samples and money where its
  // checkpoint left them.
  priorSeconds_ = resumed.value("training_seconds", 0.0);
  priorCost_ = resumed.value("cost_usd", 0.0);
  priorSamples_ = resumed.value("samples", 0.0);
  if (resumed.contains("scaling")) resumedScaling_ = resumed["scaling"];
}

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
bool Job::coresShared() const {
  if (launcher_ && !launcher_->onThisHost()) return false;
  return static_cast<std::int64_t>(W_) * spec_.threads > static_cast<std::int64_t>(usableCpus().size());
}

Json Job::cpusOf(const WorkerState& w) const {
  Json cpus = Json::array();
  const std::vector<int> usable = usableCpus();
  if (usable.empty() || !launcher_->onThisHost()) return cpus;
  if (coresShared()) {
    if (spec_.threads == 1) cpus.push_back(usable[static_cast<size_t>(w.stage + w.replica) % usable.size()]);
    return cpus;
  }
  for (int t = 0; t < spec_.threads; ++t) cpus.push_back(usable[w.rank * spec_.threads + t]);
  return cpus;
}

int idOf(const std::string& identity) {
  if (identity.size() < 2 || identity[0] != 'w') return -1;
  return std::atoi(identity.c_str() + 1);
}

int Job::workerOf(const std::string& identity) const {
  const int id = idOf(identity);
  for (const auto& w : workers_) {
    if (w.id == id) return w.rank;
  }
  return -1;
}

WorkerState* Job::current(int id) {
  for (auto& w : workers_) {
    if (w.id == id) return &w;
  }
  return nullptr;
}

Status Job::start() {
  HZ_RETURN_IF_ERROR(scalingSchedule());
  HZ_RETURN_IF_ERROR(useGenerationPlan(startStep_));
  setReplicas(epochs_.atStep(startStep_).replicas);
  makeSampler();
  if (startStep_ >= stopStep_) {
    return invalidArgument(fmt::format("nothing to train: the run has done {} steps and this invocation stops at {} "
                                       "(the job has {}); raise --max-steps or training.epochs",
                                       startStep_, stopStep_, totalSteps_));
  }
  token_ = wire::newToken();
  HZ_RETURN_IF_ERROR(makeLauncher());
  launched_ = Clock::now();
  HZ_ASSIGN_OR_RETURN(control_, wire::ControlServer::bind(launcher_->coordinatorHost(), spec_.control_port, token_));
  // NOTE [The rendezvous]
  // The workers find each other's Gloo addresses through a c10d Store that
  // this coordinator serves on its control socket (wire/store.h; each
  // worker's runtime/comm/control_store.h), under "gen<N>/" a generation:
  // it opens no port of its own, answers only requests with the job's
  // token, and needs nothing shared with the workers but the network, so
  // it serves workers on other machines as it serves local ones (issue 10
  // §1). Before it, a FileStore in the run directory (every worker had to
  // see this file system); libtorch 1.13's TCPStore binds every interface,
  // against "listeners bind only to the job's addresses" (issue 4 §5).
  HZ_RETURN_IF_ERROR(run_.writeJson("coordinator.json", {{"pid", ::getpid()}, {"control", control_->endpoint()}}));
  genStop_ = generationStop();
  return launchWorkers();
}

void Job::setReplicas(int replicas) {
  A_ = replicas;
  stageReplicas_.clear();
  W_ = A_ * B_;
  if (!gen_.evenlyReplicated()) {
    for (size_t s = 0; s < gen_.stages.size(); ++s) stageReplicas_.push_back(gen_.replicasOf(s));
    W_ = gen_.workersUsed();
  }
}

std::vector<WorkerState> Job::layout(int replicas, int stages, const std::vector<int>& stageReplicas) const {
  std::set<int> taken;
  for (const auto& w : workers_) {
    if (launcher_->alive(w.id)) taken.insert(w.id);
  }
  for (const auto& w : next_) taken.insert(w.id);
  // Replica-major ranks (plan::workerRank).
  std::vector<std::pair<int, int>> places;  // (replica, stage)
  const int most = stageReplicas.empty() ? replicas : *std::max_element(stageReplicas.begin(), stageReplicas.end());
  for (int r = 0; r < most; ++r) {
    for (int s = 0; s < stages; ++s) {
      if (r < (stageReplicas.empty() ? replicas : stageReplicas[static_cast<size_t>(s)])) places.emplace_back(r, s);
    }
  }
  std::vector<WorkerState> ws;
  int id = 0;
  for (size_t rank = 0; rank < places.size(); ++rank) {
    while (taken.count(id)) ++id;
    WorkerState w;
    w.id = id++;
    w.rank = static_cast<int>(rank);
    w.replica = places[rank].first;
    w.stage = places[rank].second;
    w.last_seen = Clock::now();
    ws.push_back(w);
  }
  return ws;
}

Status Job::launch(WorkerState& w, const std::string& token, int generation, const plan::PlanStage& st,
                  Bytes memory) {
  WorkerLaunch l;
  l.id = w.id;
  l.args = {"--log-level", "info", "worker", "--join", control_->endpoint(), "--id", std::to_string(w.id)};
  l.env = {{"HYDROZOA_TOKEN", token}};
  l.log_path = run_.workerLog(w.id);
  l.process_name = fmt::format("hydrozoa-worker r{}s{}", w.replica, w.stage);
  l.cpus = spec_.cpu_limit.value_or(st.vcpus);
  l.memory = spec_.memory_limit.value_or(memory);
  l.gpus = acceleratorCount(st.accelerator);
  l.start_delay = drawStartDelay(spec_.start_delay,
                                 spec_.seed * 7919 + static_cast<std::uint64_t>(w.id) + 104729ULL * generation);
  HZ_RETURN_IF_ERROR(launcher_->launch(l));
  w.launched_at = now();
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
  for (std::size_t i = 0; i < gen_.stages.size(); ++i) {
    context.worker_cpus = std::max(context.worker_cpus, spec_.cpu_limit.value_or(gen_.stages[i].vcpus));
    context.worker_memory = std::max(context.worker_memory, spec_.memory_limit.value_or(stageMemory_[i]));
    context.worker_gpus = std::max(context.worker_gpus, acceleratorCount(gen_.stages[i].accelerator));
  }
  HZ_ASSIGN_OR_RETURN(launcher_, cluster::makeLauncher(kind, context));
  // Billing: the platform's unit, each worker at its stage's rate.
  BillingUnit unit = BillingUnit::kSecond;
  if (auto catalog = plan::loadCatalog(plan_.platform.empty() ? spec_.platform : plan_.platform); catalog.ok()) {
    if (auto u = parseBillingUnit(catalog->billing, catalog->name); u.ok()) unit = *u;
  }
  ledger_ = Ledger(unit);
  return Status();
}

Status Job::failure(const std::string& message) {
  if (failure_.empty()) failure_ = message;
  return unavailable(failure_);
}

// Pumps messages until every worker has `reached` a state, watching for
// workers that die or report an error on the way.
Status Job::waitFor(const char* what, const std::function<bool(const WorkerState&)>& reached) {
  const auto t0 = Clock::now();
  for (;;) {
    if (std::all_of(workers_.begin(), workers_.end(), reached)) return Status();
    receiveOne(100);
    if (!failure_.empty()) return unavailable(failure_);
    for (const auto& [e, w] : endedWorkers()) {
      failure_ = fmt::format("{} {} before it was {} (pid {}); its log {} ends: {}", w->name(), e.how, what, e.pid,
                             run_.workerLog(e.id), lastLogLine(run_.workerLog(e.id)));
      // One that could not start at all would fail the same way again; one
      // killed while starting (out of memory, a preempted host) may not.
      if (!e.killed && !e.out_of_memory) fatal_ = true;
      return lose(e.id, e.out_of_memory);
    }
    if (o_.interrupt && o_.interrupt->load()) {
      interrupted_ = true;
      return failure("interrupted while starting the workers");
    }
    if (since(t0) > spec_.start_timeout) {
      for (const auto& w : workers_) {
        if (!reached(w)) {
          return failure(fmt::format("{} was not {} within {} (cluster.start_timeout); see {}", w.name(), what,
                                     formatSeconds(spec_.start_timeout), run_.workerLog(w.id)));
        }
      }
    }
  }
}

bool Job::receiveOne(int timeoutMs) {
  std::string sender;
  Json m;
  const bool got = control_->receive(&sender, &m, timeoutMs);
  if (wire::serveStore(*control_, store_, sender, got ? &m : nullptr)) return true;  // checked by the store itself
  if (!got) return false;
  if (Status s = wire::checkWorkerMessage(m); !s.ok()) {
    // Authenticated but malformed: a broken worker, which the job cannot trust.
    const int rank = workerOf(sender);
    const std::string who = rank >= 0 ? workers_[rank].name() : sender;
    if (failure_.empty()) failure_ = fmt::format("{} sent a malformed control message: {}", who, s.message());
    fatal_ = true;
    return true;
  }
  if (const int rank = workerOf(sender); rank >= 0) {
    handle(rank, m);
    return true;
  }
  // A pre-started worker of the next generation: running (billed) and
  // waiting for its role until the boundary.
  const int id = idOf(sender);
  for (WorkerState& w : next_) {
    if (w.id != id) continue;
    const std::string type = m.value("type", "");
    if (type == "register" && !w.registered) {
      onRegistered(w, nextPlan_);
    } else if (type == "error") {
      spdlog::warn("{}, started ahead of the next generation, failed: {}", w.name(), m.value("message", ""));
    }
  }
  return true;
}

void Job::onRegistered(WorkerState& w, const plan::Plan& plan) {
  w.registered = true;
  w.registered_at = now();
  startDelays_.push_back(w.registered_at - w.launched_at);
  ledger_.start(w.id, now(), rateOf(plan, w.stage));
}

UsdPerHour Job::rateOf(const plan::Plan& plan, int stage) {
  const plan::PlanStage& st = plan.stages[stage];
  return st.cost_per_hour > 0 ? st.cost_per_hour : plan.cost_per_hour / (plan.data_parallel * plan.pipeline_stages);
}

void Job::sendAssign(const WorkerState& w) {
  const Segment& seg = epochs_.atStep(resumeStep_);
  const std::int64_t firstEpoch = epochs_.epochOf(resumeStep_);
  Json assign = {{"type", "assign"},
                 {"generation", generation_},
                 {"rank", w.rank},
                 {"world_size", W_},
                 {"replica", w.replica},
                 {"replicas", stageReplicas_.empty() ? A_ : stageReplicas_[static_cast<size_t>(w.stage)]},
                 {"stage", w.stage},
                 {"stages", B_},
                 {"first_layer", gen_.stages[w.stage].first_layer},
                 {"layer_ranges", layerRangesJson(gen_.stages[w.stage])},
                 {"last_layer", gen_.stages[w.stage].last_layer},
                 {"microbatch_size", gen_.microbatch_size},
                 {"microbatches", stageReplicas_.empty() ? gen_.num_microbatches
                                                         : A_ * gen_.num_microbatches /
                                                               stageReplicas_[static_cast<size_t>(w.stage)]},
                 {"train_size", trainSize_},
                 {"test_size", spec_.eval ? testSize_ : 0},
                 {"start_step", resumeStep_},
                 {"total_steps", totalSteps_},
                 {"stop_step", genStop_},
                 {"epoch_start_step", epochs_.epochStart(firstEpoch)},
                 {"first_epoch", firstEpoch},
                 {"global_batch", A_ * epochs_.perReplicaBatch()},
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
  if (!stageReplicas_.empty()) assign["stage_replicas"] = stageReplicas_;
  control_->send(from(w.id), assign);
}

// NOTE [Shipped checkpoints]
// Without output.checkpoint_dir, workers share nothing with the coordinator
// but the network (issue 10 §1): each ships its stage's files of a step
// (wire/file_transfer.h) before its "checkpoint" message, into the step's
// .partial directory here, and a new generation's workers fetch their
// layers of the restore point from here. A worker may only write and read
// the layers of its own stage; a refused chunk spoils the step, which is
// then not finalized (the previous checkpoint stays the restore point).
void Job::onFile(const WorkerState& w, const Json& m) {
  const plan::PlanStage& st = gen_.stages.at(static_cast<std::size_t>(w.stage));
  const std::vector<plan::LayerRange> ranges = st.layerRanges();
  auto ownLayer = [&](int layer) {
    return std::any_of(ranges.begin(), ranges.end(),
                       [&](const plan::LayerRange& r) { return layer >= r.first && layer <= r.last; });
  };
  if (m.value("type", "") == "fetch") {
    auto reply = checkpoint_.empty() ? Result<Json>(notFound("this generation starts from no checkpoint"))
                                     : wire::serveFetch(m, checkpoint_, ownLayer);
    if (!reply.ok()) {
      spdlog::warn("{} asked for checkpoint file {}: {}", w.name(), m.value("file", "?"), reply.status().message());
      control_->send(from(w.id), {{"type", "fetch_failed"}, {"file", m.value("file", "")},
                                  {"message", reply.status().message()}});
      return;
    }
    control_->send(from(w.id), *reply);
    return;
  }
  const std::int64_t step = m.value("step", std::int64_t{0});
  if (step < 0 || step > totalSteps_) {  // no directory for a step the job does not have
    spdlog::error("refused a checkpoint file from {}: step {} is not one of the job's 0..{}", w.name(), step,
                  totalSteps_);
    spoiled_.emplace(step, fmt::format("{} sent a file for a step the job does not have", w.name()));
    return;
  }
  if (Status s = wire::acceptChunk(m, run_.partialCheckpoint(step), ownLayer); !s.ok()) {
    spdlog::error("refused a checkpoint file from {}: {}", w.name(), s.message());
    spoiled_.emplace(step, fmt::format("{} sent a bad file: {}", w.name(), s.message()));
  }
}

void Job::handle(int rank, const Json& m) {
  WorkerState& w = workers_[rank];
  const int id = w.id;
  w.last_seen = Clock::now();
  const std::string type = m.value("type", "");
  if (type == "register") {
    if (!w.registered) onRegistered(w, gen_);
    sendAssign(w);
    noteReadyIfScaling();
  } else if (type == "ready") {
    w.ready = true;
  } else if (type == "file_chunk" || type == "fetch") {
    onFile(w, m);
  } else if (type == "heartbeat") {
    maxStarted_ = std::max(maxStarted_, m.value("step", std::int64_t{0}));
    w.peak_memory = std::max<Bytes>(w.peak_memory, m.value("peak_memory", Bytes{0}));
  } else if (type == "step") {
    const std::int64_t step = m.value("step", std::int64_t{0});
    maxStarted_ = std::max(maxStarted_, step);
    StepAccount& a = steps_[step];
    ++a.reports;
    w.tensor_peak = std::max<Bytes>(w.tensor_peak, m.value("tensor_peak", Bytes{0}));
    a.epoch = m.value("epoch", 0);
    a.loss += m.value("loss", 0.0);
    a.samples += m.value("samples", 0.0);
    a.iteration = std::max(a.iteration, m.value("iteration_s", 0.0));
    if (w.replica == 0) a.compute_replica0 += m.value("compute_s", 0.0);
    if (a.compute.empty()) {
      a.compute.assign(static_cast<size_t>(B_), 0.0);
      a.allreduce.assign(static_cast<size_t>(B_), 0.0);
    }
    if (w.stage >= 0 && w.stage < B_) {
      a.compute[static_cast<size_t>(w.stage)] += m.value("compute_s", 0.0);
      a.allreduce[static_cast<size_t>(w.stage)] += m.value("allreduce_s", 0.0);
    }
    if (a.reports == W_) {
      onStepComplete(step, a);
      steps_.erase(step);
    }
  } else if (type == "eval") {
    const std::int64_t epoch = m.value("epoch", std::int64_t{0});
    EvalAccount& e = evals_[epoch];
    ++e.reports;
    e.loss_sum += m.value("loss_sum", 0.0);
    e.correct += m.value("correct", 0.0);
    e.count += m.value("count", 0.0);
    if (e.reports == (stageReplicas_.empty() ? A_ : stageReplicas_.back()) && e.count > 0) {
      finalTestLoss_ = e.loss_sum / e.count;
      finalAccuracy_ = e.correct / e.count;
      (void)run_.appendMetrics({{"t", priorSeconds_ + since(trainingStart_)},
                                {"epoch", epoch + 1},
                                {"test_loss", finalTestLoss_},
                                {"test_accuracy", finalAccuracy_},
                                {"cost_usd", cost()}});
      lastEvalSeconds_ = since(lastStepAt_);
      lastEpochSeconds_ = now() - epochStartedAt_;
      epochStartedAt_ = now();
      lastStepAt_ = Clock::now();  // the next step's time starts after the evaluation
      progress_.note(fmt::format("epoch {}: test accuracy {:.2f}%, test loss {:.4f}", epoch + 1, 100 * finalAccuracy_,
                                 finalTestLoss_));
      evals_.erase(epoch);
    }
  } else if (type == "checkpoint") {
    const std::int64_t step = m.value("step", std::int64_t{0});
    auto& stages = checkpoints_[step];
    stages.insert(m.value("stage", 0));
    if (static_cast<int>(stages.size()) == B_ && spoiled_.count(step)) {
      spdlog::error("no checkpoint at step {}: {}", step, spoiled_[step]);
      checkpoints_.erase(step);
    } else if (static_cast<int>(stages.size()) == B_) {
      const Json manifest = {{"step", step},
                             {"epoch", epochs_.epochOf(step)},
                             {"step_in_epoch", epochs_.stepInEpoch(step)},
                             {"steps_per_epoch", perEpoch_},
                             {"scaling", epochs_.toJson()},
                             {"layers", model_.layer_names.size()},
                             {"model", model_.name},
                             {"plan", {{"data_parallel", A_}, {"pipeline_stages", B_}}},
                             {"training_seconds", priorSeconds_ + since(trainingStart_)},
                             {"samples", priorSamples_ + samples_},
                             {"cost_usd", cost()}};
      if (Status s = run_.finalizeCheckpoint(step, manifest); !s.ok()) {
        spdlog::error("{}", s.message());
      } else {
        progress_.note(fmt::format("checkpoint at step {} in {}", step, run_.checkpointsDir()));
      }
      finalized_ = step;
      stepSamples_.erase(stepSamples_.begin(), stepSamples_.lower_bound(step));  // never rolled back past it
      lastStepAt_ = Clock::now();
      checkpoints_.erase(step);
    }
  } else if (type == "boundary") {
    const std::int64_t step = m.value("step", std::int64_t{0});
    if (++boundaries_[step] == W_) {
      boundaries_.erase(step);
      onBoundary(step);
    }
  } else if (type == "halted") {
    halted_[rank] = m.value("can_save", std::vector<std::int64_t>{});
  } else if (type == "save_failed") {
    saveFailed_.insert(rank);
    spdlog::warn("{} could not save its state: {}", w.name(), m.value("message", ""));
  } else if (type == "done") {
    w.done = true;
    w.peak_memory = std::max<Bytes>(w.peak_memory, m.value("peak_memory", Bytes{0}));
    control_->send(from(id), {{"type", "done_ack"}});
  } else if (type == "error") {
    const std::string kind = m.value("kind", "fatal");
    const std::string message = m.value("message", "");
    if (kind == "peer_lost") {
      // Usually the echo of another worker's death; prefer that news (watch()).
      exits_.emplace_back(w.name(), "lost a peer: " + message);
      if (failure_.empty()) failure_ = fmt::format("{} lost a peer: {}", w.name(), message);
    } else {
      fatal_ = true;
      failure_ = fmt::format("{} failed: {}", w.name(), message);
    }
  }
}

Status Job::watch() {
  if (trainingStart_ == Clock::time_point{}) {
    trainingStart_ = Clock::now();
    originUs_ = monotonicUs();
  }
  lastStepAt_ = Clock::now();
  epochStartedAt_ = now();
  loss_ = Loss{};
  training_ = true;
  for (auto& w : workers_) {
    control_->send(from(w.id), {{"type", "go"}});
    w.last_seen = Clock::now();
  }
  Clock::time_point stopSent{};
  for (;;) {
    if (std::all_of(workers_.begin(), workers_.end(), [](const WorkerState& w) { return w.done; })) return Status();
    if (receiveOne(100)) {
      while (receiveOne(0)) {  // drain what else is waiting
      }
    }
    // A worker that ended before saying it was done has failed.
    maybePrestart();
    for (const auto& [e, cw] : endedWorkers()) {
      WorkerState& w = *cw;
      exits_.emplace_back(w.name(), e.how);
      // A worker that ended well may have said "done" just after the drain.
      const auto grace = Clock::now() + std::chrono::seconds(1);
      while (e.success && !w.done && Clock::now() < grace && receiveOne(100)) {
      }
      if (!w.done || !e.success) {
        // A worker's own death outranks its peers' "lost a peer" reports.
        failure_ = fmt::format("{} (pid {}) {}; its log {} ends: {}", w.name(), e.pid, e.how, run_.workerLog(e.id),
                               lastLogLine(run_.workerLog(e.id)));
        if (!w.done) return lose(e.id, e.out_of_memory);
      }
    }
    if (!failure_.empty()) {
      // Give a dying peer a moment to be seen, so the message names the cause.
      const auto grace = Clock::now() + std::chrono::milliseconds(500);
      while (Clock::now() < grace) {
        for (const auto& [e, cw] : endedWorkers()) {
          if (!cw->done) {
            failure_ = fmt::format("{} (pid {}) {}; its log {} ends: {}", cw->name(), e.pid, e.how,
                                   run_.workerLog(e.id), lastLogLine(run_.workerLog(e.id)));
            return lose(e.id, e.out_of_memory);
          }
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      return lose(-1, false);
    }
    for (const auto& w : workers_) {
      if (!w.done && std::chrono::duration<double>(Clock::now() - w.last_seen).count() > spec_.heartbeat_timeout) {
        const std::string seen = launcher_->diagnose(w.id);
        failure_ = fmt::format("{} sent nothing for {} (cluster.heartbeat_timeout): {}; see {}", w.name(),
                               formatSeconds(spec_.heartbeat_timeout),
                               seen.empty() ? "it hangs or its host is unreachable" : seen, run_.workerLog(w.id));
        return lose(w.id, !seen.empty());
      }
    }
    if (o_.interrupt && o_.interrupt->load() && !stopping_) {
      // Every worker stops after the same step and checkpoints it.
      stopping_ = interrupted_ = true;
      const std::int64_t at = std::max(resumeStep_ + 1, agreedStep());
      progress_.note(fmt::format("Stopping: the workers finish step {}, checkpoint it and exit...", at));
      for (const auto& w : workers_) {
        control_->send(from(w.id), {{"type", "stop"}, {"at_step", at}, {"checkpoint", true}});
      }
      stopSent = Clock::now();
    }
    if (stopping_ && o_.interrupt && o_.interrupt->load() >= 2) {
      // NOTE [Stopping on signals] in cli/cmd_train.cc: a second interrupt stops now.
      return failure("stopped at once by a second interrupt (the steps since the last checkpoint are not saved)");
    }
    if (stopping_ && std::chrono::duration<double>(Clock::now() - stopSent).count() > 60) {
      return failure("the workers did not stop within 60 s of being asked; they were killed");
    }
    if (o_.checkpoint_request && o_.checkpoint_request->load() > 0) {
      const_cast<std::atomic<int>*>(o_.checkpoint_request)->store(0);
      const std::int64_t at = agreedStep();
      progress_.note(fmt::format("Checkpoint requested: after step {}", at + 1));
      for (const auto& w : workers_) control_->send(from(w.id), {{"type", "checkpoint"}, {"step", at}});
    }
  }
}

void Job::stopWorkers(Seconds grace) {
  if (!launcher_) return;
  for (const auto& w : workers_) {
    if (launcher_->alive(w.id)) control_->send(from(w.id), {{"type", "stop"}});
  }
  auto record = [&](const WorkerExit& e) {
    const WorkerState* w = current(e.id);
    exits_.emplace_back(w ? w->name() : everyWorker_[e.id], e.how);
  };
  // Workers that finished or were told to stop exit by themselves within
  // moments (tearing down Gloo, joining their threads). Given a second of the
  // grace before the launcher's SIGTERM, the summary says how they ended
  // ("exited with status 0") instead of "killed by signal 15" for a run that
  // stopped as asked. An interrupt does not wait.
  if (!interrupted_) {
    const Seconds wait = std::min<Seconds>(1.0, grace / 2);
    const auto deadline = Clock::now() + std::chrono::duration<double>(wait);
    auto anyAlive = [&] {
      return std::any_of(workers_.begin(), workers_.end(), [&](const WorkerState& w) { return launcher_->alive(w.id); });
    };
    while (anyAlive() && Clock::now() < deadline) {
      for (const WorkerExit& e : launcher_->poll()) record(e);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    grace -= wait;
  }
  for (const WorkerExit& e : launcher_->stopAll(grace)) record(e);
  for (const auto& w : workers_) ledger_.stop(w.id, now());
  for (const auto& w : next_) ledger_.stop(w.id, now());
}

// Where the system the workers ran on accounts for them (Slurm's sacct),
// its figures replace the coordinator's clock in the bill.
void Job::billFromAccounting() {
  if (!launcher_) return;
  const auto accounted = launcher_->accountedSeconds();
  if (accounted.empty()) return;
  const int n = ledger_.useAccounted(accounted, launcher_->accountingName());
  spdlog::info("billed {} worker runs on the times {} gives", n, launcher_->accountingName());
}

Result<TrainResult> Job::run() {
  Status s = start();
  for (;;) {
    if (s.ok()) s = waitFor("registered", [](const WorkerState& w) { return w.registered; });
    if (s.ok()) s = waitFor("ready", [](const WorkerState& w) { return w.ready; });
    if (s.ok()) s = train();
    if (s.ok() && !interrupted_ && reached_ < stopStep_) {
      s = rescale();
      continue;
    }
    if (s.ok() || interrupted_ || !loss_.recoverable || recoveries_ >= spec_.max_recoveries) break;
    s = recover();
  }
  stopWorkers(s.ok() ? 5.0 : 3.0);
  billFromAccounting();
  if (!s.ok() && !interrupted_) {
    finish("failed", s.message());
    return s;
  }
  if (interrupted_) {
    finish("interrupted", "stopped by the user");
    return TrainResult{run_.root(), true};
  }
  if (reached_ < totalSteps_) {
    // Stopped by --max-steps (or training.max_steps): resumable, not done.
    finish("stopped", fmt::format("stopped at step {} of {} (max_steps); continue with hydrozoa train --resume {}",
                                  reached_, totalSteps_, run_.root()));
    return TrainResult{run_.root(), false};
  }
  finish("completed", "");
  return TrainResult{run_.root(), false};
}

Status Job::train() {
  if (generation_ == 0 && coresShared()) {
    progress_.note(fmt::format(
        "Note: {} workers × {} thread{} share this machine's {} cores; {}", W_, spec_.threads,
        spec_.threads == 1 ? "" : "s", usableCpus().size(),
        plan_.compute_scale > 1
            ? fmt::format("the plan counts their compute at up to {:.2f}× the profiled times (docs/plan.md, "
                          "\"Shared hosts\")",
                          plan_.compute_scale)
            : "the plan's predicted times assume a core per busy worker (it was made for other machines)"));
  }
  std::string split;
  for (const auto& st : gen_.stages) {
    std::string ranges;
    for (const plan::LayerRange& r : st.layerRanges()) ranges += fmt::format("{}{}-{}", ranges.empty() ? "" : "+", r.first, r.last);
    split += fmt::format("{}{}", split.empty() ? "" : " | ", ranges);
  }
  const std::string data =
      spec_.dataset == "synthetic"
          ? fmt::format("synthetic data ({} random samples; data.dataset names a real one)", formatCount(trainSize_))
          : fmt::format("{} ({} samples)", spec_.dataset, formatCount(trainSize_));
  // Stages replicated unevenly: each stage's copies, and the step's microbatches dealt over them.
  const std::string strategy = stageReplicas_.empty()
                                   ? fmt::format("{}×{}", A_, B_)
                                   : fmt::format("stages replicated {}", fmt::join(stageReplicas_, ", "));
  const std::int64_t microbatches = gen_.num_microbatches * (stageReplicas_.empty() ? 1 : A_);
  progress_.note(fmt::format("Training {} on {} with {} on {} {} workers (layers {}; {}{} of {}; predicted "
                             "{} per step): steps {}..{} of {}; run directory {}",
                             model_.name, data, strategy, W_, launcher_->name(), split,
                             countOf(microbatches, "microbatch", "microbatches"),
                             stageReplicas_.empty() ? "" : " a step, round-robin",
                             gen_.microbatch_size, formatSeconds(gen_.iteration_seconds), resumeStep_ + 1, stopStep_,
                             totalSteps_, run_.root()));
  return watch();
}

}  // namespace coordinator

using coordinator::defaultRunDir;
using coordinator::Job;

Result<TrainResult> runTraining(const TrainOptions& o) {
  JobSpec spec = o.spec;
  HZ_RETURN_IF_ERROR(validateJobSpec(spec, "the job"));
  if (spec.scaling.every_steps > 0) {
    return invalidArgument(fmt::format(
        "scaling.every_steps is {}: hydrozoa train changes the replicas at epoch boundaries only (docs/scaling.md); "
        "remove every_steps",
        spec.scaling.every_steps));
  }
  if (spec.device == "cuda" && !torch::cuda::is_available()) {
    return invalidArgument("training.device is cuda but this machine has no usable CUDA device, or this hydrozoa was "
                           "built against a CPU-only libtorch (Debian's is); use device: cpu or auto, or build "
                           "against a CUDA libtorch (docs/train.md)");
  }
  const bool resuming = !o.resume_dir.empty();
  if (!resuming) {
    // The run directory's job.yaml must work from anywhere (--resume from
    // another directory): files the spec names are kept as absolute paths.
    auto absolute = [](std::string* path) {
      if (!path->empty()) *path = std::filesystem::absolute(*path).lexically_normal().string();
    };
    if (model::isTorchScriptPath(spec.model)) absolute(&spec.model);
    absolute(&spec.data_path);
    absolute(&spec.plan_file);
    absolute(&spec.profile_file);
    absolute(&spec.checkpoint_dir);
  }
  std::optional<RunDir> run;
  if (resuming) {
    HZ_ASSIGN_OR_RETURN(run, RunDir::open(o.resume_dir));
  } else {
    HZ_ASSIGN_OR_RETURN(run, RunDir::create(spec.out_dir.empty() ? defaultRunDir(spec) : spec.out_dir));
  }
  // A new run that fails before it trains leaves nothing behind, so the same
  // --out works once the problem is fixed.
  struct DiscardUnlessStarted {
    const RunDir* run;
    bool armed;
    ~DiscardUnlessStarted() {
      if (armed) run->discard();
    }
  } discardUnlessStarted{&*run, !resuming};
  if (!spec.checkpoint_dir.empty()) HZ_RETURN_IF_ERROR(run->useCheckpointsDir(spec.checkpoint_dir));
  HZ_ASSIGN_OR_RETURN(ModelInfo model, inspectModel(spec));

  // The data must be there before any worker starts.
  data::DataSpec ds;
  ds.kind = spec.dataset;
  ds.path = spec.data_path;
  ds.seq_len = model.input.kind == model::InputKind::kTokens ? model.input.shape.at(0) : 0;
  ds.synthetic_train = spec.synthetic_train;
  ds.synthetic_test = spec.synthetic_test;
  ds.synthetic_input = model.input;
  ds.synthetic_task = model.task;
  ds.seed = spec.seed;
  HZ_ASSIGN_OR_RETURN(auto train, data::openDataset(ds, data::Split::kTrain));
  std::int64_t testSize = 0;
  Bytes dataBytes = train->memoryBytes();
  if (spec.eval) {
    HZ_ASSIGN_OR_RETURN(auto test, data::openDataset(ds, data::Split::kTest));
    testSize = test->size();
    if (spec.dataset != "text") dataBytes += test->memoryBytes();  // text: both splits share the file
  }
  if (train->task().classes != model.task.classes && spec.dataset != "synthetic") {
    return invalidArgument(fmt::format("the model has {} outputs but {} has {} classes; set the model's classes option",
                                       model.task.classes, train->describe(), train->task().classes));
  }

  Progress planning(o.progress);
  std::int64_t startStep = 0;
  std::string checkpoint;
  plan::Plan p;
  if (resuming) {
    HZ_ASSIGN_OR_RETURN(p, plan::loadPlan(run->file("plan.json")));
    HZ_RETURN_IF_ERROR(checkPlan(p, model, spec, run->file("plan.json")));
    run->removePartialCheckpoints();
    HZ_ASSIGN_OR_RETURN(auto latest, run->latestCheckpoint());
    if (latest) {
      startStep = latest->step;
      checkpoint = latest->dir;
      // Metrics after the checkpoint belong to the interrupted attempt.
      HZ_RETURN_IF_ERROR(run->keepMetricsThrough(startStep, latest->manifest.value("epoch", std::int64_t{0})));
      planning.note(fmt::format("Resuming {} from its checkpoint at step {}", run->root(), startStep));
    } else {
      HZ_RETURN_IF_ERROR(run->writeText("metrics.jsonl", ""));
      planning.note(fmt::format("{} has no complete checkpoint: training it from the start", run->root()));
    }
  } else {
    HZ_RETURN_IF_ERROR(run->writeText("job.yaml", toYaml(jobSpecToJson(spec))));
    HZ_RETURN_IF_ERROR(run->writeText("metrics.jsonl", ""));
    auto planned =
        planJob(spec, model, dataBytes, *run, o.executable.empty() ? "/proc/self/exe" : o.executable,
                o.refresh_profile, planning, o.interrupt);
    if (!planned.ok()) return planned.status();
    p = std::move(*planned);
  }
  if (resuming) HZ_RETURN_IF_ERROR(run->writeText("job.yaml", toYaml(jobSpecToJson(spec))));
  Json resumedFrom = Json::object();  // the latest checkpoint's checked manifest
  if (resuming && !checkpoint.empty()) {
    HZ_ASSIGN_OR_RETURN(auto latest, run->latestCheckpoint());
    if (latest) resumedFrom = latest->manifest;
  }
  discardUnlessStarted.armed = false;
  Job job(o, *run, spec, p, model, train->size(), testSize, dataBytes, startStep, checkpoint, resumedFrom);
  return job.run();
}

}  // namespace hydrozoa::cluster
