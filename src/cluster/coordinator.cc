#include "cluster/coordinator.h"

#include <fmt/format.h>
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
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// A stage's accelerators per worker: one of its kind, or none (a plan's
// worker is one GPU; plan/resources.h).
int acceleratorCount(const std::string& accelerator) { return accelerator.empty() ? 0 : 1; }

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

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

std::string lastLogLine(const std::string& path) {
  std::ifstream in(path);
  std::string line, last;
  while (std::getline(in, line)) {
    if (!line.empty()) last = line;
  }
  return last;
}

// The control-plane identity of worker `id`.
std::string from(int id) { return fmt::format("w{}", id); }

// A worker of a generation: `rank` (replica · B + stage) is its place in the
// generation, `id` its launcher and control-plane identity (NOTE [Changing
// the replicas]: the next generation's workers run beside this one's).
struct WorkerState {
  int id = 0, rank = 0, replica = 0, stage = 0;
  bool registered = false, ready = false, done = false;
  double launched_at = -1, registered_at = -1;  // now(); -1: not yet
  Bytes peak_memory = 0;                         // resident, the most reported
  Clock::time_point last_seen;
  std::string name() const { return fmt::format("worker {} (replica {}, stage {})", id, replica, stage); }
};

struct StepAccount {
  int reports = 0;
  double loss = 0, samples = 0;
  double compute_replica0 = 0;  // summed over replica 0's stages
  double iteration = 0;         // the slowest worker's
  int epoch = 0;
  // Per stage, summed over its replicas: the passes' compute, and the wait
  // for the allreduce after them.
  std::vector<double> compute, allreduce;
};

struct EvalAccount {
  int reports = 0;
  double loss_sum = 0, correct = 0, count = 0;
};

// One training job, from launch to summary.
class Job {
 public:
  Job(const TrainOptions& o, RunDir run, JobSpec spec, plan::Plan plan, ModelInfo model, std::int64_t trainSize,
      std::int64_t testSize, Bytes dataBytes, std::int64_t startStep, std::string checkpoint, const Json& resumed)
      : o_(o), run_(std::move(run)), spec_(std::move(spec)), plan_(std::move(plan)), model_(std::move(model)),
        trainSize_(trainSize), testSize_(testSize), dataBytes_(dataBytes), startStep_(startStep),
        checkpoint_(std::move(checkpoint)),
        progress_(o.progress), resumeStep_(startStep), reached_(startStep) {
    // A resumed run goes on counting time, samples and money where its
    // checkpoint left them.
    priorSeconds_ = resumed.value("training_seconds", 0.0);
    priorCost_ = resumed.value("cost_usd", 0.0);
    priorSamples_ = resumed.value("samples", 0.0);
    if (resumed.contains("scaling")) resumedScaling_ = resumed["scaling"];
  }

  Result<TrainResult> run();

 private:
  Status start();
  Status train();  // announces the generation, then watch()
  // The workers of a generation of A_ replicas, with ids not in use.
  std::vector<WorkerState> layout(int replicas, int stages) const;
  Status launch(WorkerState& w, const std::string& token, int generation, const plan::PlanStage& stage, Bytes memory);
  void makeSampler();   // sampler_ and perEpoch_ for A_ replicas
  void countSteps();    // totalSteps_ and stopStep_ from epochs_
  Status launchWorkers();
  // NOTE [Changing the replicas]
  Status scalingSchedule();
  // A plan made for `replicas` (scaling.replan), as a segment records it.
  Result<Json> replan(int replicas);
  // The plan of the segment `step` is in.
  Result<plan::Plan> planAt(std::int64_t step) const;
  // gen_, B_ and the stages' memory from the segment `step` is in.
  Status useGenerationPlan(std::int64_t step);
  std::int64_t generationStop() const;
  void maybePrestart();
  // Every worker holds at the epoch end `step` (a rule): go on, or end the
  // generation there for rescale().
  void onBoundary(std::int64_t step);
  ScalingDecision decideNow();
  Status rescale();
  // Stops `ws` (asks, then forces after `grace`) and bills them no more.
  void retire(std::vector<WorkerState>& ws, Seconds grace);
  // An exit of a worker that is not in this generation (a pre-started one).
  void onOtherExit(const WorkerExit& e);
  // This generation's workers that ended since the last call, billed no
  // more; other workers' exits go to onOtherExit().
  std::vector<std::pair<WorkerExit, WorkerState*>> endedWorkers();
  // `w` registered: running, billed from now at its stage of `plan`.
  void onRegistered(WorkerState& w, const plan::Plan& plan);
  WorkerState* current(int id);
  static UsdPerHour rateOf(const plan::Plan& plan, int stage);
  void sendAssign(const WorkerState& w);
  void onFile(const WorkerState& w, const Json& m);
  // Once the generation after a boundary has all registered: how long the
  // boundary waited for them, if it did.
  void noteReadyIfScaling();
  Status recover();
  // The job lost a worker (`worker`, or -1 when unknown): failure_ says how.
  Status lose(int worker, bool outOfMemory);
  // A step no worker has begun by the time they all hear of it.
  std::int64_t agreedStep() const;
  Status waitFor(const char* what, const std::function<bool(const WorkerState&)>& reached);
  Status watch();
  void handle(int worker, const Json& m);
  // Waits up to `timeoutMs` for one control message and handles it; false
  // when none came.
  bool receiveOne(int timeoutMs);
  void onStepComplete(std::int64_t step, const StepAccount& a);
  // Dollars so far: each worker is billed while it runs (ledger_).
  double cost() const { return priorCost_ + ledger_.cost(now()); }
  double now() const { return launched_ == Clock::time_point{} ? 0 : since(launched_); }
  Status makeLauncher();
  Status failure(const std::string& message);
  void stopWorkers(Seconds grace);
  void finish(const std::string& status, const std::string& reason);
  int workerOf(const std::string& identity) const;
  Json cpusOf(const WorkerState& w) const;
  bool coresShared() const;

  const TrainOptions& o_;
  RunDir run_;
  JobSpec spec_;
  plan::Plan plan_;
  ModelInfo model_;
  std::int64_t trainSize_, testSize_;
  Bytes dataBytes_;  // the datasets in memory (planning)
  std::int64_t startStep_;
  std::string checkpoint_;
  Progress progress_;

  int A_ = 1, B_ = 1, W_ = 1;
  std::int64_t perEpoch_ = 1, totalSteps_ = 0, stopStep_ = 0;
  std::optional<data::EpochSampler> sampler_;
  std::string token_;
  std::unique_ptr<wire::ControlServer> control_;
  // The workers' c10d Store, served over control_ (wire/store.h): each
  // generation's process groups meet there under "gen<N>/".
  wire::StoreService store_;
  std::unique_ptr<Launcher> launcher_;
  Ledger ledger_;
  std::vector<WorkerState> workers_;
  std::map<std::int64_t, StepAccount> steps_;
  std::map<std::int64_t, EvalAccount> evals_;
  std::map<std::int64_t, std::set<int>> checkpoints_;
  std::map<std::int64_t, std::string> spoiled_;  // steps with a refused checkpoint file, and why
  std::int64_t stepsDone_ = 0, maxStarted_ = 0;
  double samples_ = 0, lastLoss_ = 0, rateEma_ = 0;
  std::vector<double> stepSeconds_, bubbles_;
  void checkPrediction(double stepSeconds);
  int predictionGeneration_ = -1;
  void recordStageTimes(const StepAccount& a);
  Json stageTimesJson() const;
  struct StageSteps {
    std::vector<double> compute, allreduce;
  };
  std::vector<StageSteps> stageSteps_;  // this generation's, per stage
  int stageGeneration_ = -1;
  std::vector<double> predictionSteps_;  // this generation's first step times
  Clock::time_point launched_, trainingStart_, lastStepAt_;
  std::int64_t originUs_ = 0;
  double finalAccuracy_ = -1, finalTestLoss_ = -1;
  double priorSeconds_ = 0, priorCost_ = 0, priorSamples_ = 0;
  double stepTime_ = 0;  // wall time spent in this run's steps (evaluations and checkpoints excluded)
  bool stopping_ = false, interrupted_ = false;
  std::string failure_;

  // Recovery (NOTE [Recovering from a lost worker]).
  struct Loss {
    int worker = -1;
    bool recoverable = false, out_of_memory = false;
  };
  Loss loss_;
  bool fatal_ = false;            // a worker failed on its own (its error would recur)
  bool training_ = false;         // this generation was told to go
  int generation_ = 0, recoveries_ = 0;
  std::int64_t resumeStep_ = 0;   // where the current generation starts
  std::int64_t reached_ = 0;      // global steps completed
  std::int64_t finalized_ = -1;   // the last checkpoint completed
  std::map<std::int64_t, double> stepSamples_;  // samples of the steps since the last checkpoint
  std::map<int, std::vector<std::int64_t>> halted_;  // survivor's rank -> the steps it can save, its completed first
  std::set<int> saveFailed_;  // ranks
  std::vector<Bytes> stageMemory_;              // per stage, raised after an out-of-memory loss
  Json events_ = Json::array();
  double recoveringSince_ = -1;   // now() at the loss, until training again
  std::vector<std::pair<std::string, std::string>> exits_;  // worker name -> how it ended
  std::map<int, std::string> everyWorker_;  // id -> name, over all generations (traces)

  // Scaling (NOTE [Changing the replicas]).
  std::unique_ptr<ScalingPolicy> policy_;
  EpochSchedule epochs_;
  plan::Plan gen_;                     // this generation's plan: plan_, or a re-plan for its replicas
  plan::Plan nextPlan_;                // the pre-started generation's
  Json resumedScaling_;                // the checkpoint's record, when resuming
  std::int64_t genStop_ = 0;           // where this generation stops
  std::vector<WorkerState> next_;      // the next generation's, pre-started
  std::string nextToken_;
  double prestartedAt_ = -1, predictedBoundary_ = -1;
  std::vector<double> startDelays_;    // measured: launch to register
  double lastEvalSeconds_ = 0;         // the last epoch end's evaluation
  double epochStartedAt_ = 0, lastEpochSeconds_ = 0;
  Json scalingEvents_ = Json::array();
  double scalingSince_ = -1;           // now() at the boundary, until training again
  std::map<std::int64_t, int> boundaries_;       // epoch-end step -> workers holding there
  std::optional<ScalingDecision> decided_;       // a rule's decision, taken at the boundary
};

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

void Job::makeSampler() {
  data::SamplerOptions so;
  so.dataset_size = trainSize_;
  so.global_batch = A_ * epochs_.perReplicaBatch();
  so.replicas = A_;
  so.microbatch_size = gen_.microbatch_size;
  so.drop_last = spec_.drop_last;
  sampler_.emplace(so);
  perEpoch_ = sampler_->stepsPerEpoch();
}

void Job::countSteps() {
  totalSteps_ = epochs_.epochStart(spec_.epochs);
  if (spec_.max_steps) totalSteps_ = std::min(totalSteps_, *spec_.max_steps);
  stopStep_ = o_.stop_after ? std::min(totalSteps_, *o_.stop_after) : totalSteps_;
}

// NOTE [Changing the replicas]
// A scaling policy's replicas hold from an epoch boundary on (the per-
// replica batch stays, so the global batch and the steps per epoch change:
// cluster/scaling/epochs.h). Each run of epochs with the same replicas is a
// generation of workers: it stops at the boundary after the epoch's
// evaluation, its replica 0 saves every stage there (the checkpoint the
// workers write at their stop step), and the next generation of A' replicas
// starts from that state with a new token. The sampler shards each step over
// the replicas of its epoch, so every sample is still used once per epoch.
// Policies that read only the epoch (schedule, adabatch) are laid out ahead,
// and the next generation's workers are pre-started so they are running
// when the boundary comes: from the measured step time, the last evaluation
// and the measured start-up delay (launch to register), with a margin. They
// are billed from then; the old generation is released (no longer billed)
// at the boundary. A rule reads the epoch's metrics, so it is decided at
// each epoch end and its workers start then.
Status Job::scalingSchedule() {
  HZ_ASSIGN_OR_RETURN(policy_, ScalingPolicy::make(spec_.scaling, plan_.data_parallel));
  const std::int64_t perReplica = spec_.global_batch / plan_.data_parallel;
  epochs_ = EpochSchedule(trainSize_, perReplica, spec_.drop_last);
  std::int64_t from = 1;  // the first epoch whose replicas the policy decides here
  if (resumedScaling_.is_object()) {
    HZ_ASSIGN_OR_RETURN(epochs_, EpochSchedule::fromJson(resumedScaling_, trainSize_, spec_.drop_last));
    if (epochs_.perReplicaBatch() != perReplica) {
      return invalidArgument(fmt::format("the checkpoint was written with {} samples per replica but the job now has "
                                         "{} (training.global_batch / the plan's replicas); resume with the job it "
                                         "was started with",
                                         epochs_.perReplicaBatch(), perReplica));
    }
    from = epochs_.epochOf(startStep_) + 1;
    epochs_.truncateAfter(from - 1);
  } else {
    const int first = policy_->initialReplicas();
    Json plan;
    if (spec_.scaling.replan) {
      HZ_ASSIGN_OR_RETURN(plan, replan(first));
    }
    epochs_.append(0, first, 1.0, "", plan);
  }
  if (!policy_->usesMetrics()) {
    for (std::int64_t e = from; e < spec_.epochs; ++e) {
      const Segment prev = epochs_.atEpoch(e - 1);
      ScalingInputs in;
      in.epoch = e + 1;
      in.step = epochs_.epochStart(e);
      in.replicas = prev.replicas;
      const ScalingDecision d = policy_->decide(in);
      if (d.replicas == prev.replicas && d.lr_factor == prev.lr_factor) continue;
      Json plan = d.replicas == prev.replicas ? prev.plan : Json();
      if (d.replan) {
        HZ_ASSIGN_OR_RETURN(plan, replan(d.replicas));
      }
      epochs_.append(e, d.replicas, d.lr_factor, d.why, plan);
    }
  }
  countSteps();
  return Status();
}

Result<Json> Job::replan(int replicas) {
  if (replicas == plan_.data_parallel) return Json();  // the job's own plan
  HZ_ASSIGN_OR_RETURN(plan::Plan p, replanForReplicas(spec_, plan_, replicas, dataBytes_, run_));
  return plan::planToJson(p);
}

Result<plan::Plan> Job::planAt(std::int64_t step) const {
  const Segment& seg = epochs_.atStep(step);
  if (seg.plan.is_null()) return plan_;
  return plan::planFromJson(seg.plan, fmt::format("the plan for {} replicas from epoch {}", seg.replicas,
                                                  seg.first_epoch + 1));
}

Status Job::useGenerationPlan(std::int64_t step) {
  HZ_ASSIGN_OR_RETURN(plan::Plan next, planAt(step));
  auto split = [](const plan::Plan& p) {
    std::vector<int> ends;
    for (const auto& st : p.stages) ends.push_back(st.last_layer);
    return ends;
  };
  const bool sameSplit = !stageMemory_.empty() && split(next) == split(gen_);
  gen_ = std::move(next);
  B_ = gen_.pipeline_stages;
  if (!sameSplit) {  // out-of-memory raises hold for a split only
    stageMemory_.clear();
    for (const auto& st : gen_.stages) stageMemory_.push_back(st.worker_memory_bytes);
  }
  return Status();
}

std::int64_t Job::generationStop() const {
  // A rule's changes are not known ahead: its workers hold at each epoch end
  // instead (onBoundary()).
  const std::int64_t stop = stopStep_;
  for (const Segment& s : epochs_.segments()) {
    if (s.first_step > resumeStep_) return std::min(stop, s.first_step);
  }
  return stop;
}

Status Job::start() {
  HZ_RETURN_IF_ERROR(scalingSchedule());
  HZ_RETURN_IF_ERROR(useGenerationPlan(startStep_));
  A_ = epochs_.atStep(startStep_).replicas;
  W_ = A_ * B_;
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

std::vector<WorkerState> Job::layout(int replicas, int stages) const {
  std::set<int> taken;
  for (const auto& w : workers_) {
    if (launcher_->alive(w.id)) taken.insert(w.id);
  }
  for (const auto& w : next_) taken.insert(w.id);
  std::vector<WorkerState> ws;
  int id = 0;
  for (int rank = 0; rank < replicas * stages; ++rank) {
    while (taken.count(id)) ++id;
    WorkerState w;
    w.id = id++;
    w.rank = rank;
    w.replica = rank / stages;
    w.stage = rank % stages;
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
  workers_ = layout(A_, B_);
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
    char path[4096] = {};
    const ssize_t n = ::readlink("/proc/self/exe", path, sizeof(path) - 1);
    if (n > 0) exe.assign(path, static_cast<std::size_t>(n));
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
                 {"replicas", A_},
                 {"stage", w.stage},
                 {"stages", B_},
                 {"first_layer", gen_.stages[w.stage].first_layer},
                 {"last_layer", gen_.stages[w.stage].last_layer},
                 {"microbatch_size", gen_.microbatch_size},
                 {"microbatches", gen_.num_microbatches},
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
                 {"schedule", "gpipe"},
                 {"cpus", cpusOf(w)},
                 {"cpus_shared", coresShared()},
                 {"job", jobSpecToJson(spec_)}};
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
  auto ownLayer = [&](int layer) { return layer >= st.first_layer && layer <= st.last_layer; };
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
    if (e.reports == A_ && e.count > 0) {
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

// Each stage's compute and allreduce wait per step, the mean over its
// replicas, for this generation (summary.json's "stages").
void Job::recordStageTimes(const StepAccount& a) {
  if (stageGeneration_ != generation_ || stageSteps_.size() != a.compute.size()) {
    stageGeneration_ = generation_;
    stageSteps_.assign(a.compute.size(), {});
  }
  for (size_t s = 0; s < a.compute.size(); ++s) {
    stageSteps_[s].compute.push_back(a.compute[s] / A_);
    stageSteps_[s].allreduce.push_back(a.allreduce[s] / A_);
  }
}

Json Job::stageTimesJson() const {
  Json stages = Json::array();
  for (size_t s = 0; s < stageSteps_.size() && s < gen_.stages.size(); ++s) {
    const plan::PlanStage& p = gen_.stages[s];
    const double compute = static_cast<double>(gen_.num_microbatches) * (p.forward_seconds + p.backward_seconds);
    stages.push_back({{"stage", s},
                      {"compute_seconds", {{"measured_median", median(stageSteps_[s].compute)}, {"predicted", compute}}},
                      {"allreduce_wait_seconds",
                       {{"measured_median", median(stageSteps_[s].allreduce)},
                        {"predicted", p.allreduce_exposed_seconds}}}});
  }
  return stages;
}

// The plan is only as good as its prediction: after 20 steps of a generation
// the measured median step time is held against the plan's, once, and a gap
// past 25% is said (the summary records both for every run).
void Job::checkPrediction(double stepSeconds) {
  if (predictionGeneration_ != generation_) {
    predictionGeneration_ = generation_;
    predictionSteps_.clear();
  }
  predictionSteps_.push_back(stepSeconds);
  if (predictionSteps_.size() != 20 || gen_.iteration_seconds <= 0) return;
  const double measured = median(predictionSteps_);
  const double error = measured / gen_.iteration_seconds - 1;
  if (std::fabs(error) <= 0.25) return;
  progress_.note(fmt::format("Note: steps take {} (median of 20), the plan predicted {} ({:+.0f}%); the planner's "
                             "choice may not be the fastest here (summary.json records both; docs/plan.md, "
                             "\"How far predictions are off\")",
                             formatSeconds(measured), formatSeconds(gen_.iteration_seconds), 100 * error));
}

void Job::onStepComplete(std::int64_t step, const StepAccount& a) {
  const auto now = Clock::now();
  const double dt = std::chrono::duration<double>(now - lastStepAt_).count();
  lastStepAt_ = now;
  ++stepsDone_;
  samples_ += a.samples;
  reached_ = std::max(reached_, step + 1);
  stepSamples_[step] = a.samples;
  if (recoveringSince_ >= 0 && !events_.empty()) {
    Json& e = events_.back();
    e["seconds_to_training"] = this->now() - recoveringSince_;
    recoveringSince_ = -1;
    (void)run_.appendMetrics(e);
    progress_.note(fmt::format("Training again {} after the loss ({} steps to redo)",
                               formatSeconds(e["seconds_to_training"].get<double>()), e["lost_steps"].get<std::int64_t>()));
  }
  if (scalingSince_ >= 0 && !scalingEvents_.empty()) {
    Json& e = scalingEvents_.back();
    e["seconds_to_training"] = this->now() - scalingSince_;
    scalingSince_ = -1;
    (void)run_.appendMetrics(e);
  }
  lastLoss_ = a.loss;
  // Reports can arrive in bursts (more busy workers than cores: measured, a
  // step "completed" 30 us after the one before, 4M samples/s), so a step
  // takes at least what its slowest worker measured.
  const double span = std::max(dt, a.iteration);
  const double rate = span > 0 ? a.samples / span : 0;
  rateEma_ = rateEma_ == 0 ? rate : 0.9 * rateEma_ + 0.1 * rate;
  // The step times that estimate the pace (the agreed stop step, the
  // prediction check, the summary's median) use the span too: a burst of
  // reports must not make steps look 30 us long.
  stepSeconds_.push_back(span);
  stepTime_ += dt;
  checkPrediction(span);
  if (a.iteration > 0) bubbles_.push_back(std::max(0.0, 1.0 - a.compute_replica0 / (B_ * a.iteration)));
  recordStageTimes(a);
  (void)run_.appendMetrics({{"t", priorSeconds_ + since(trainingStart_)},
                            {"epoch", a.epoch + 1},
                            {"step", step + 1},
                            {"loss", a.loss},
                            {"samples_per_s", rate},
                            {"workers", W_},
                            {"cost_usd", cost()}});
  ProgressState p;
  p.epoch = a.epoch + 1;
  p.epochs = epochs_.epochOf(std::max<std::int64_t>(0, totalSteps_ - 1)) + 1;
  p.step = step + 1;
  p.steps = stopStep_;
  p.loss = a.loss;
  p.samples_per_second = rateEma_;
  p.elapsed = since(trainingStart_);
  p.cost = cost();
  progress_.update(p);
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

void Job::retire(std::vector<WorkerState>& ws, Seconds grace) {
  std::map<int, std::string> live;  // id -> name
  for (const auto& w : ws) {
    if (w.launched_at >= 0 && launcher_->alive(w.id)) {
      control_->send(from(w.id), {{"type", "stop"}});
      live[w.id] = w.name();
    }
  }
  auto reap = [&] {
    for (const WorkerExit& e : launcher_->poll()) {
      auto it = live.find(e.id);
      if (it == live.end()) {
        onOtherExit(e);
        continue;
      }
      ledger_.stop(e.id, now());
      exits_.emplace_back(it->second, e.how);
      live.erase(it);
    }
  };
  for (int pass = 0; pass < 2 && !live.empty(); ++pass) {
    if (pass == 1) {
      for (const auto& [id, name] : live) launcher_->signal(id, /*force=*/true);
    }
    const auto until = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                          std::chrono::duration<double>(pass == 0 ? grace : 10.0));
    while (!live.empty() && Clock::now() < until) {
      reap();
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  for (const auto& w : ws) ledger_.stop(w.id, now());
}

std::vector<std::pair<WorkerExit, WorkerState*>> Job::endedWorkers() {
  std::vector<std::pair<WorkerExit, WorkerState*>> ended;
  for (const WorkerExit& e : launcher_->poll()) {
    WorkerState* w = current(e.id);
    if (!w) {
      onOtherExit(e);
      continue;
    }
    ledger_.stop(e.id, now());
    ended.emplace_back(e, w);
  }
  return ended;
}

void Job::onOtherExit(const WorkerExit& e) {
  ledger_.stop(e.id, now());
  for (WorkerState& w : next_) {
    if (w.id != e.id) continue;
    // Started again at the boundary.
    spdlog::warn("{}, started ahead of the next generation, {}; see {}", w.name(), e.how, run_.workerLog(w.id));
    w.launched_at = -1;
    w.registered = false;
  }
}

// NOTE [Agreeing on a step]
// Stops and checkpoint requests name a step that every worker ends at, so
// it must lie ahead of all of them when the message arrives: two steps past
// the furthest one the coordinator has heard of, plus the steps of half a
// second at the measured pace (a worker on a loaded machine may be further
// along than its last report says; measured in CI, two steps alone were now
// and then already past, and that stop left no complete checkpoint).
std::int64_t Job::agreedStep() const {
  const double step = median(stepSeconds_);
  const std::int64_t pace = step > 0 ? static_cast<std::int64_t>(std::ceil(0.5 / step)) : 0;
  return maxStarted_ + 2 + std::min<std::int64_t>(pace, 1000);
}

Status Job::lose(int worker, bool outOfMemory) {
  loss_.worker = worker;
  loss_.out_of_memory = outOfMemory;
  // A worker's own error would recur, and so would running out of a memory
  // limit the user pinned; anything else (killed, cut off, out of a planned
  // memory size) is worth a new generation.
  loss_.recoverable = !fatal_ && !(outOfMemory && spec_.memory_limit);
  return unavailable(failure_);
}

// NOTE [Recovering from a lost worker]
// The coordinator halts the survivors: each stops before its next optimizer
// step and says which steps it can save: the one it has completed and,
// in a replicated pipeline, the one before (NOTE [The step before] in
// worker.cc: stages can be one step apart). When every stage has a survivor
// that can save the same step, those survivors save their stages there (from
// their control threads: their compute threads may be blocked on the lost
// peer) and the saves form a checkpoint: nothing is lost. Otherwise
// (no replica of the lost stage, or survivors that do not answer) the last
// checkpoint on disk is the restore point. Then every worker of this
// generation is stopped and a new generation starts from the restore point
// with a new job token, so a straggler of the old one is refused. With a
// deterministic data order, the result equals a run that never failed.
Status Job::recover() {
  const Loss loss = loss_;
  loss_ = Loss{};
  const std::string why = failure_;
  const double tLost = priorSeconds_ + since(trainingStart_);
  ++recoveries_;
  const double lostAt = now();
  const std::int64_t reachedBefore = reached_;
  progress_.note(fmt::format("Lost {}; recovering ({} of at most {})", why, recoveries_, spec_.max_recoveries));
  (void)run_.appendMetrics({{"t", tLost},
                            {"event", "worker_lost"},
                            {"generation", generation_},
                            {"worker", loss.worker},
                            {"why", why},
                            {"steps_completed", reachedBefore}});

  // What the survivors hold.
  halted_.clear();
  saveFailed_.clear();
  std::set<int> asked;  // ranks
  for (const auto& w : workers_) {
    if (training_ && w.id != loss.worker && launcher_->alive(w.id)) {  // before "go", nothing to save
      control_->send(from(w.id), {{"type", "halt"}});
      asked.insert(w.rank);
    }
  }
  auto serve = [this](const Clock::time_point until, const std::function<bool()>& enough) {
    while (!enough() && Clock::now() < until) {
      receiveOne(20);
      for (const auto& [e, w] : endedWorkers()) exits_.emplace_back(w->name(), e.how);
    }
  };
  const auto answerBy = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(std::min(5.0, spec_.heartbeat_timeout)));
  serve(answerBy, [&] { return halted_.size() >= asked.size(); });
  std::map<std::int64_t, std::map<int, int>> holders;  // completed steps -> stage -> survivor
  for (const auto& [rank, steps] : halted_) {
    for (const std::int64_t step : steps) holders[step][workers_[rank].stage] = rank;
  }
  std::int64_t best = -1;
  for (auto it = holders.rbegin(); it != holders.rend(); ++it) {
    if (static_cast<int>(it->second.size()) == B_) {
      best = it->first;
      break;
    }
  }
  auto onDisk = run_.latestCheckpoint();
  const std::int64_t diskStep = onDisk.ok() && *onDisk ? (*onDisk)->step : -1;
  std::string source = "checkpoint", survivors;
  for (int rank : asked) {
    auto h = halted_.find(rank);
    survivors += fmt::format("{}{} {}", survivors.empty() ? "" : ", ", workers_[rank].name(),
                             h == halted_.end() || h->second.empty() ? "did not answer"
                                                                     : fmt::format("has done {} steps", h->second.front()));
  }
  spdlog::info("after the loss: {}", survivors.empty() ? "no survivors" : survivors);
  if (best > diskStep && best > resumeStep_) {
    checkpoints_.erase(best);
    for (const auto& [stage, rank] : holders[best]) {
      control_->send(from(workers_[rank].id), {{"type", "save"}, {"step", best}});
    }
    serve(Clock::now() + std::chrono::seconds(60), [&] { return finalized_ == best || !saveFailed_.empty(); });
    if (finalized_ == best) source = "live replicas";
  }
  if (source == "checkpoint" && !asked.empty()) {
    progress_.note(fmt::format("The survivors share no step to restore from ({})", survivors));
  }

  // End this generation (not the next one's pre-started workers); restore.
  retire(workers_, 1.0);
  run_.removePartialCheckpoints();
  auto latest = run_.latestCheckpoint();
  std::int64_t restore = 0;
  checkpoint_.clear();
  if (latest.ok() && *latest) {
    restore = (*latest)->step;
    checkpoint_ = (*latest)->dir;
  } else {
    source = "the start (no checkpoint yet)";
  }
  (void)run_.keepMetricsThrough(restore, epochs_.epochOf(restore));
  for (auto it = stepSamples_.lower_bound(restore); it != stepSamples_.end(); it = stepSamples_.erase(it)) {
    samples_ -= it->second;
  }
  // Steps the survivors completed whose reports the lost worker never sent:
  // their loss is estimated from the replicas that did report, and marked.
  for (const auto& [step, a] : steps_) {
    if (step >= restore || step < reachedBefore || a.samples <= 0) continue;
    const double full = static_cast<double>(sampler_->stepSamples(epochs_.stepInEpoch(step)));
    samples_ += full;
    stepSamples_[step] = full;
    (void)run_.appendMetrics({{"t", tLost},
                              {"epoch", a.epoch + 1},
                              {"step", step + 1},
                              {"loss", a.loss * full / a.samples},
                              {"partial", true},
                              {"workers", W_},
                              {"cost_usd", cost()}});
  }
  reached_ = resumeStep_ = maxStarted_ = restore;
  if (Status s = useGenerationPlan(restore); !s.ok()) return failure(s.message());
  decided_.reset();  // a rule decides again at the next epoch end
  A_ = epochs_.atStep(restore).replicas;
  W_ = A_ * B_;
  makeSampler();
  genStop_ = generationStop();
  steps_.clear();
  boundaries_.clear();
  evals_.clear();
  checkpoints_.clear();
  failure_.clear();
  fatal_ = false;
  if (const WorkerState* lost = current(loss.worker); loss.out_of_memory && lost) {
    Bytes& memory = stageMemory_[lost->stage];
    memory = std::max<Bytes>(2 * memory, kGB / 2);
    progress_.note(fmt::format("Stage {}'s workers get {} of memory from now on", lost->stage, formatBytes(memory)));
  }

  // The next generation.
  ++generation_;
  store_.erasePrefix(fmt::format("gen{}/", generation_ - 1));
  training_ = false;
  token_ = wire::newToken();
  control_->newGeneration(token_);
  events_.push_back({{"generation", generation_},
                     {"event", "recovered"},
                     {"worker", loss.worker},
                     {"why", why},
                     {"lost_at", tLost},
                     {"restored_from", source},
                     {"restore_step", restore},
                     {"lost_steps", std::max<std::int64_t>(0, reachedBefore - restore)}});
  recoveringSince_ = lostAt;  // until the new generation's first step (onStepComplete)
  progress_.note(fmt::format("Restoring from {} at step {} ({} steps to redo): generation {} starts",
                             source == "checkpoint" ? "the last checkpoint" : source, restore,
                             std::max<std::int64_t>(0, reachedBefore - restore), generation_));
  return launchWorkers();
}

void Job::maybePrestart() {
  if (!next_.empty() || genStop_ >= stopStep_ || policy_->usesMetrics() || stopping_ || stepSeconds_.size() < 3 ||
      !launcher_->overlapsGenerations()) {
    return;
  }
  // When is the boundary? The steps left at the recent pace, then the
  // epoch's evaluation (measured at the last epoch end, else estimated as a
  // forward pass over the test set at a third of a training step's cost).
  const size_t recent = std::min<size_t>(stepSeconds_.size(), 50);
  const double step = median(std::vector<double>(stepSeconds_.end() - static_cast<std::ptrdiff_t>(recent),
                                                 stepSeconds_.end()));
  const double eval = !spec_.eval ? 0
                      : lastEvalSeconds_ > 0 ? lastEvalSeconds_
                                             : static_cast<double>(testSize_) / std::max(1.0, rateEma_) / 3;
  // Counted from the last step report, so that the estimate keeps falling
  // while nothing is reported: during the boundary's evaluation, or a step
  // longer than the rest. (Counted from the report alone, an evaluation
  // estimated longer than the lead kept it above the lead until the
  // boundary, and nothing was pre-started.)
  const double eta =
      std::max(0.0, static_cast<double>(genStop_ - reached_) * step + eval - since(lastStepAt_));
  // How long a worker takes from launch to running: the slowest measured so
  // far, else what the start-up delay allows; a quarter more and a second.
  double delay = 0;
  for (double d : startDelays_) delay = std::max(delay, d);
  if (startDelays_.empty()) {
    const StartDelay& d = spec_.start_delay;
    delay = d.distribution == "uniform" ? d.b : d.distribution == "normal" ? d.a + 2 * d.b : d.a;
  }
  const double lead = 1.25 * delay + 1.0;
  if (eta > lead) return;
  const int replicas = epochs_.atStep(genStop_).replicas;
  auto plan = planAt(genStop_);
  if (!plan.ok()) return;  // said at the boundary
  nextPlan_ = std::move(*plan);
  nextToken_ = wire::newToken();
  control_->admit(nextToken_);
  next_ = layout(replicas, nextPlan_.pipeline_stages);
  for (WorkerState& w : next_) {
    const plan::PlanStage& st = nextPlan_.stages[w.stage];
    if (Status s = launch(w, nextToken_, generation_ + 1, st, st.worker_memory_bytes); !s.ok()) {
      spdlog::warn("could not start {} ahead of the boundary (tried again there): {}", w.name(), s.message());
    }
  }
  prestartedAt_ = now();
  predictedBoundary_ = now() + eta;
  progress_.note(fmt::format("Starting {} workers for {} replicas ahead of the boundary at step {} (due in {}; "
                             "workers take up to {} to start)",
                             next_.size(), replicas, genStop_, formatSeconds(eta), formatSeconds(delay)));
}

ScalingDecision Job::decideNow() {
  ScalingInputs in;
  in.epoch = epochs_.epochOf(reached_) + 1;
  in.step = reached_;
  in.replicas = A_;
  in.test_accuracy = finalAccuracy_;
  in.loss = lastLoss_;
  in.epoch_seconds = lastEpochSeconds_;
  in.samples_per_s = rateEma_;
  in.cost_usd = cost();
  return policy_->decide(in);
}

void Job::onBoundary(std::int64_t step) {
  // Each worker's evaluation and checkpoint messages came before its
  // "boundary", so the epoch's accuracy is in and its state saved.
  const ScalingDecision d = decideNow();
  if (d.replicas == A_) {
    for (const auto& w : workers_) control_->send(from(w.id), {{"type", "continue"}, {"step", step}});
    return;
  }
  decided_ = d;
  for (const auto& w : workers_) control_->send(from(w.id), {{"type", "stop"}, {"at_step", step}});
}

Status Job::rescale() {
  const double boundary = now();
  const std::int64_t epoch = epochs_.epochOf(reached_);  // 0-based, about to begin
  const int before = A_, workersBefore = W_, stagesBefore = B_;
  retire(workers_, 5.0);  // they have said done; released, no longer billed
  if (policy_->usesMetrics()) {
    const ScalingDecision d = decided_ ? *decided_ : decideNow();
    decided_.reset();
    if (d.replicas != A_) {
      Json plan;
      if (d.replan) {
        auto made = replan(d.replicas);
        if (!made.ok()) return failure(made.status().message());
        plan = std::move(*made);
      }
      epochs_.append(epoch, d.replicas, d.lr_factor, d.why, plan);
      countSteps();
    }
  }
  auto latest = run_.latestCheckpoint();
  if (!latest.ok() || !*latest || (*latest)->step != reached_) {
    return failure(fmt::format("the state at the epoch boundary (step {}) was not saved, so the next generation "
                               "cannot start from it; resume with hydrozoa train --resume {}",
                               reached_, run_.root()));
  }
  checkpoint_ = (*latest)->dir;
  const Segment seg = epochs_.atEpoch(epoch);
  if (Status s = useGenerationPlan(reached_); !s.ok()) return failure(s.message());
  A_ = seg.replicas;
  W_ = A_ * B_;
  makeSampler();
  resumeStep_ = maxStarted_ = reached_;
  genStop_ = generationStop();
  ++generation_;
  store_.erasePrefix(fmt::format("gen{}/", generation_ - 1));
  steps_.clear();
  boundaries_.clear();
  evals_.clear();
  checkpoints_.clear();
  training_ = false;

  // The next generation: the pre-started workers when they fit, else new ones.
  const bool prestarted = !next_.empty() && static_cast<int>(next_.size()) == W_ &&
                          nextPlan_.pipeline_stages == B_;
  if (prestarted) {
    token_ = nextToken_;
    workers_ = std::move(next_);
  } else {
    retire(next_, 0.5);
    control_->admit("");
    token_ = wire::newToken();
    workers_ = layout(A_, B_);
  }
  next_.clear();
  control_->newGeneration(token_);
  for (WorkerState& w : workers_) {
    if (w.launched_at < 0) {
      if (Status s = launch(w, token_, generation_, gen_.stages[w.stage], stageMemory_[w.stage]); !s.ok()) {
        return failure(s.message());
      }
    }
    if (w.registered) sendAssign(w);
  }
  const std::string why = seg.why.empty() ? spec_.scaling.policy : seg.why;
  Json event = {{"t", priorSeconds_ + since(trainingStart_)},
                {"event", "scaled"},
                {"generation", generation_},
                {"epoch", epoch + 1},
                {"step", reached_},
                {"replicas_before", before},
                {"replicas", A_},
                {"stages_before", stagesBefore},
                {"stages", B_},
                {"workers_released", workersBefore},
                {"released_at", boundary},  // seconds since launch, the billing clock
                {"workers", W_},
                {"global_batch", A_ * epochs_.perReplicaBatch()},
                {"steps_per_epoch", perEpoch_},
                {"lr_factor", seg.lr_factor},
                {"why", why},
                {"prestarted", prestarted}};
  if (prestarted) {
    event["prestarted_s_before_boundary"] = boundary - prestartedAt_;
    event["boundary_predicted_error_s"] = boundary - predictedBoundary_;
  }
  scalingEvents_.push_back(event);
  scalingSince_ = boundary;
  noteReadyIfScaling();  // the pre-started workers may all be running already
  const Json& recorded = scalingEvents_.back();
  const auto ready = recorded.find("ready_before_boundary_s");
  progress_.note(fmt::format(
      "Epoch {}: {} → {} replicas ({}), global batch {}, {} steps per epoch; {}", epoch + 1, before, A_, why,
      A_ * epochs_.perReplicaBatch(), perEpoch_,
      !prestarted               ? std::string("starting the workers now")
      : ready == recorded.end() ? std::string("waiting for pre-started workers still starting")
                                : fmt::format("the pre-started workers were ready {} before the boundary",
                                              formatSeconds(ready->get<double>()))));
  return Status();
}

// Positive: the new workers were running (and billed) this long before the
// boundary; negative: the boundary waited this long for them.
void Job::noteReadyIfScaling() {
  if (scalingSince_ < 0 || scalingEvents_.empty()) return;
  Json& e = scalingEvents_.back();
  if (e.contains("ready_before_boundary_s")) return;
  if (!std::all_of(workers_.begin(), workers_.end(), [](const WorkerState& w) { return w.registered; })) return;
  double last = 0;
  for (const auto& w : workers_) last = std::max(last, w.registered_at);
  e["ready_before_boundary_s"] = scalingSince_ - last;
}

void Job::finish(const std::string& status, const std::string& reason) {
  // Right-sizing, checked: the most a worker held against what the plan gave it.
  for (const auto& w : workers_) {
    const Bytes planned = stageMemory_.empty() ? 0 : stageMemory_[w.stage];
    if (planned > 0 && static_cast<double>(w.peak_memory) > 1.1 * static_cast<double>(planned)) {
      progress_.note(fmt::format("Note: {} held up to {}, more than the {} the plan right-sized for its stage "
                                 "(a container's memory limit; docs/containers.md)",
                                 w.name(), formatBytes(w.peak_memory), formatBytes(planned)));
      break;
    }
  }
  progress_.finish();
  // Every worker of every generation, by id (the trace files are per id).
  std::vector<std::string> names(everyWorker_.empty() ? 0 : everyWorker_.rbegin()->first + 1);
  for (const auto& [id, name] : everyWorker_) names[id] = name;
  if (Status s = run_.mergeTraces(names, originUs_); !s.ok()) spdlog::warn("{}", s.message());
  const double training = trainingStart_ == Clock::time_point{} ? 0 : since(trainingStart_);
  const double measured = median(stepSeconds_);
  const double total = cost(), allSamples = priorSamples_ + samples_;
  Json workers = Json::array();
  for (const auto& w : workers_) {
    std::string how;
    for (const auto& [name, h] : exits_) {
      if (name == w.name()) how = h;
    }
    workers.push_back({{"id", w.id},
                       {"replica", w.replica},
                       {"stage", w.stage},
                       {"log", run_.workerLog(w.id)},
                       {"exit", how},
                       {"planned_memory", stageMemory_.empty() ? 0 : stageMemory_[w.stage]},
                       // What the worker really ran with: cluster.memory_limit when given (containers).
                       {"memory_limit", spec_.memory_limit ? Json(*spec_.memory_limit) : Json(nullptr)},
                       {"peak_memory", w.peak_memory}});
  }
  Json summary = {
      {"status", status},
      {"reason", reason},
      {"model", model_.name},
      {"plan",
       {{"data_parallel", A_},
        {"pipeline_stages", B_},
        {"microbatch_size", gen_.microbatch_size},
        {"num_microbatches", gen_.num_microbatches},
        {"global_batch", spec_.global_batch}}},
      {"steps", {{"done", reached_}, {"total", totalSteps_}, {"this_run", stepsDone_}}},
      {"epochs_completed", epochs_.segments().empty() ? 0 : epochs_.epochOf(reached_)},
      {"generations", generation_ + 1},
      {"recoveries", events_},
      {"scaling",
       {{"policy", spec_.scaling.policy},
        {"segments", epochs_.segments().empty() ? Json::array() : epochs_.toJson()["segments"]},
        {"events", scalingEvents_}}},
      {"samples", allSamples},
      {"final_loss", lastLoss_},
      {"final_test_accuracy", finalAccuracy_ >= 0 ? Json(finalAccuracy_) : Json(nullptr)},
      {"final_test_loss", finalTestLoss_ >= 0 ? Json(finalTestLoss_) : Json(nullptr)},
      {"wall_seconds", launched_ == Clock::time_point{} ? 0.0 : since(launched_)},
      {"training_seconds", priorSeconds_ + training},
      // This run's samples over the time its steps took (evaluations and
      // checkpoints between steps excluded).
      {"throughput_samples_per_s", stepTime_ > 0 ? samples_ / stepTime_ : 0},
      {"iteration_seconds",
       {{"measured_median", measured},
        {"predicted", gen_.iteration_seconds},
        {"relative_error", gen_.iteration_seconds > 0 && measured > 0 ? measured / gen_.iteration_seconds - 1 : 0}}},
      {"bubble_fraction", {{"measured_median", median(bubbles_)}, {"predicted", gen_.bubble_fraction}}},
      {"stages", stageTimesJson()},
      {"cost_usd", total},
      {"cost_per_hour", gen_.cost_per_hour},
      {"billing", ledger_.toJson(now())},
      {"launcher",
       {{"kind", launcher_ ? launcher_->name() : ""},
        {"job", launcher_ ? launcher_->jobId() : ""},
        {"bandwidth_per_worker", spec_.bandwidth.value_or(plan_.bandwidth)},
        {"latency", spec_.latency},
        {"start_delay", formatStartDelay(spec_.start_delay)}}},
      {"samples_per_dollar", total > 0 ? allSamples / total : 0},
      {"refused_control_messages", control_ ? control_->refused() : 0},
      {"workers", workers},
      {"outputs",
       {{"metrics", run_.file("metrics.jsonl")},
        {"trace", run_.file("trace.json")},
        {"checkpoints", run_.checkpointsDir()}}}};
  if (Status s = run_.writeJson("summary.json", summary); !s.ok()) spdlog::error("{}", s.message());
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
  for (const auto& st : gen_.stages) split += fmt::format("{}{}-{}", split.empty() ? "" : " | ", st.first_layer, st.last_layer);
  const std::string data =
      spec_.dataset == "synthetic"
          ? fmt::format("synthetic data ({} random samples; data.dataset names a real one)", formatCount(trainSize_))
          : fmt::format("{} ({} samples)", spec_.dataset, formatCount(trainSize_));
  progress_.note(fmt::format("Training {} on {} with {}×{} on {} {} workers (layers {}; {} of {}; predicted "
                             "{} per step): steps {}..{} of {}; run directory {}",
                             model_.name, data, A_, B_, W_, launcher_->name(), split,
                             countOf(gen_.num_microbatches, "microbatch", "microbatches"),
                             gen_.microbatch_size, formatSeconds(gen_.iteration_seconds), resumeStep_ + 1, stopStep_,
                             totalSteps_, run_.root()));
  return watch();
}

}  // namespace

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
