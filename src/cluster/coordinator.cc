#include "cluster/coordinator.h"
#include "cluster/coordinator_job.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <fstream>
#include <map>
#include <optional>
#include <functional>
#include <thread>

#include "cluster/billing.h"
#include "cluster/progress.h"
#include "cluster/run_dir.h"
#include "cluster/scaling/epochs.h"
#include "cluster/scaling/policy.h"
#include "cluster/straggler_driver.h"
#include "core/cpus.h"
#include "data/sampler.h"
#include "wire/control.h"

namespace hydrozoa::cluster {
namespace coordinator {
namespace {

std::int64_t monotonicUs() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
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
  HZ_RETURN_IF_ERROR(openTiers());  // before the first generation's replicas: BidBrain may start without some
  setReplicas(epochs_.atStep(startStep_).replicas);
  makeSampler();
  if (startStep_ >= stopStep_) {
    return invalidArgument(fmt::format("nothing to train: the run has done {} steps and this invocation stops at {} "
                                       "(the job has {}); raise --max-steps or training.epochs",
                                       startStep_, stopStep_, totalSteps_));
  }
  token_ = wire::newToken();
  HZ_RETURN_IF_ERROR(makeLauncher());
  for (const StragglerSpec& x : spec_.stragglers) {
    HZ_RETURN_IF_ERROR(StragglerDriver::modeFor(x, launcher_->cpuQuotas()).status());
  }
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
  if (spec_.channel.empty() && launcher_->maxDuration() > 0) {
    // Functions cannot reach each other: their tensors go through a store.
    spec_.channel = "redis";
  }
  if (!spec_.channel.empty()) {
    // Beside the coordinator, where every worker reaches it (docs/functions.md).
    const std::string job = wire::newToken().substr(0, 12);
    HZ_ASSIGN_OR_RETURN(channel_, JobChannel::open(spec_, run_.root() + "/redis", launcher_->coordinatorHost(), job));
    progress_.note(fmt::format("Workers exchange tensors through the Redis channel at {} ({} scatter-reduce)",
                               channel_->describe(), spec_.channel_sync));
  }
  genStop_ = generationStop();
  return launchWorkers();
}

bool Job::interruptAsked() const { return o_.interrupt && o_.interrupt->load(); }

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
      preempted_ = o_.preempt_request && o_.preempt_request->load();
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
  const int id = idOf(sender);
  for (WorkerState& w : leaving_) {  // left at a regroup, stopping
    if (w.id == id && m.value("type", "") == "done") control_->send(from(id), {{"type", "done_ack"}});
  }
  for (WorkerState& w : joining_) {  // to join at a regroup, waiting for its role
    if (w.id != id) continue;
    w.last_seen = Clock::now();
    const std::string type = m.value("type", "");
    if (type == "register" && !w.registered) onRegistered(w, gen_);
    if (type == "ready") w.ready = true;  // set up ahead: "go" at the switch (maybeRegroup())
    // Its exit, which follows, decides what becomes of the return (onOtherExit()).
    if (type == "error") spdlog::warn("{}, started to join, failed: {}", w.name(), m.value("message", ""));
  }
  // A pre-started worker of the next generation: running (billed) and
  // waiting for its role until the boundary.
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

void Job::handle(int rank, const Json& m) {
  WorkerState& w = workers_[rank];
  const int id = w.id;
  w.last_seen = Clock::now();
  const std::string type = m.value("type", "");
  if (type == "register") {
    if (!w.registered) onRegistered(w, gen_);
    sendAssign(w);
    noteReadyIfScaling();
  } else if (type == "step_ack") {
    onStepAck(id, m);
  } else if (type == "ready") {
    w.ready = true;
    if (training_) control_->send(from(id), {{"type", "go"}});  // joined at a regroup
  } else if (type == "file_chunk" || type == "fetch" || type == "stored_file") {
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
    a.reassigned += m.value("reassigned", 0);
    a.skipped = a.skipped || m.value("skipped", false);
    a.loss_scale = m.value("loss_scale", a.loss_scale);
    a.iteration = std::max(a.iteration, m.value("iteration_s", 0.0));
    // Per (replica, stage): a tensor group's first slice speaks for it (its
    // slices compute alike).
    const bool counted = w.tensor_rank == 0;
    if (w.replica == 0 && counted) a.compute_replica0 += m.value("compute_s", 0.0);
    if (a.compute.empty()) {
      a.compute.assign(static_cast<size_t>(B_), 0.0);
      a.allreduce.assign(static_cast<size_t>(B_), 0.0);
    }
    if (w.stage >= 0 && w.stage < B_ && counted) {
      a.compute[static_cast<size_t>(w.stage)] += m.value("compute_s", 0.0);
      a.allreduce[static_cast<size_t>(w.stage)] += m.value("allreduce_s", 0.0);
    }
    // From a regroup's step on, the new group's, once it has happened (NOTE
    // [Regrouping at a step boundary]: maybeRegroup() then completes those in).
    if (a.reports == W_ && (regroupAt_ < 0 || step < regroupAt_)) {
      completeSteps();
      maybeRegroup();
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
      report({{"t", priorSeconds_ + since(trainingStart_)},
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
      if (channel_) channel_->dropState(step);
      checkpoints_.erase(step);
    } else if (static_cast<int>(stages.size()) == B_) {
      const Json manifest = {{"step", step},
                             {"epoch", epochs_.epochOf(step)},
                             {"step_in_epoch", epochs_.stepInEpoch(step)},
                             {"steps_per_epoch", perEpoch_},
                             {"scaling", epochs_.toJson()},
                             {"layers", model_.layer_names.size()},
                             {"model", model_.name},
                             {"plan", {{"data_parallel", A_}, {"pipeline_stages", B_}, {"tensor_parallel", T_}}},
                             {"training_seconds", priorSeconds_ + since(trainingStart_)},
                             {"samples", priorSamples_ + samples_},
                             {"cost_usd", cost()}};
      if (Status s = run_.finalizeCheckpoint(step, manifest); !s.ok()) {
        spdlog::error("{}", s.message());
        if (channel_) channel_->dropState(step);
      } else {
        progress_.note(fmt::format("checkpoint at step {} in {}", step, run_.checkpointsDir()));
        auto latest = run_.latestCheckpoint();
        emit({{"event", "checkpoint"}, {"step", step}, {"dir", latest.ok() && *latest ? (*latest)->dir : ""}});
        if (channel_ && latest.ok() && *latest) channel_->keepState(step, (*latest)->dir);
      }
      finalized_ = step;
      maybeRegroup();  // joiners wait for this save
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
  // Slow workers for experiments (cluster.stragglers): this generation's,
  // continued and their quota restored when it ends.
  std::optional<StragglerDriver> stragglers;
  if (!spec_.stragglers.empty()) {
    std::vector<StragglerDriver::Target> targets;
    for (const StragglerSpec& x : spec_.stragglers) {
      for (const auto& w : workers_) {
        if (w.rank == x.worker) targets.push_back({x, launcher_->handle(w.id), w.name()});
      }
    }
    stragglers.emplace(std::move(targets), since(trainingStart_), spec_.seed);
  }
  emit({{"event", "running"},
        {"generation", generation_},
        {"step", resumeStep_},
        {"stop_step", stopStep_},
        {"total_steps", totalSteps_},
        {"replicas", A_},
        {"stages", B_},
        {"workers", W_},
        {"launcher", launcher_->name()}});
  Clock::time_point stopSent{};
  for (;;) {
    if (std::all_of(workers_.begin(), workers_.end(), [](const WorkerState& w) { return w.done; })) return Status();
    if (receiveOne(100)) {
      // Drain what else is waiting, for 20 ms at most: on a loaded machine
      // the workers' reports can arrive faster than this process, starved
      // of CPU, handles them, and the duties below (the tiers' market, the
      // heartbeats) must still run (a price spike went unseen for the
      // whole of a 5 s run).
      const auto until = Clock::now() + std::chrono::milliseconds(20);
      while (Clock::now() < until && receiveOne(0)) {
      }
    }
    // A worker that ended before saying it was done has failed.
    maybePrestart();
    pollTiers();
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
    if (o_.interrupt && o_.interrupt->load() && !stopping_ && !agreeing()) {
      // Every worker stops after the same step and checkpoints it.
      stopping_ = interrupted_ = true;
      preempted_ = o_.preempt_request && o_.preempt_request->load();
      const std::int64_t at = std::max(resumeStep_ + 1, agreedStep());
      progress_.note(fmt::format("{}: the workers finish step {}, checkpoint it and exit...",
                                 preempted_ ? "Preempted" : "Stopping", at));
      proposeStop(at);
      stopSent = Clock::now();
    }
    maybeReinvoke();
    if (stopping_ && o_.interrupt && o_.interrupt->load() >= 2) {
      // NOTE [Stopping on signals] in cli/cmd_train.cc: a second interrupt stops now.
      return failure("stopped at once by a second interrupt (the steps since the last checkpoint are not saved)");
    }
    if (stopping_ && std::chrono::duration<double>(Clock::now() - stopSent).count() > 60) {
      return failure("the workers did not stop within 60 s of being asked; they were killed");
    }
    takeRequests();
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
  // moments (tearing down Gloo, joining their threads). Given all but a
  // second of the grace before the launcher's SIGTERM, the summary says how
  // they ended ("exited with status 0") instead of "killed by signal 15" for
  // a run that stopped as asked (one second was not always enough on a
  // loaded 2-core machine). An interrupt does not wait.
  if (!interrupted_) {
    const Seconds wait = std::max<Seconds>(grace / 2, grace - 1.0);
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
  for (const auto& w : leaving_) ledger_.stop(w.id, now());
  for (const auto& w : joining_) ledger_.stop(w.id, now());
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
    if (s.ok() || interrupted_ || !loss_.recoverable || (recoveries_ >= spec_.max_recoveries && !loss_.evicted)) {
      break;
    }
    s = recover();
  }
  stopWorkers(s.ok() ? 5.0 : 3.0);
  billFromAccounting();
  if (!s.ok() && !interrupted_) {
    finish("failed", s.message());
    return s;
  }
  if (interrupted_ && reached_ < stopStep_) {
    finish(preempted_ ? "preempted" : "interrupted", preempted_ ? "preempted by its handle" : "stopped by the user");
    return TrainResult{run_.root(), true, preempted_};
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
  } else if (generation_ == 0 && plan_.compute_scale > 1 && W_ > 1 && launcher_ && launcher_->onThisHost()) {
    progress_.note(fmt::format("Note: {} workers computing at once on this machine's {} cores slow each other down "
                               "(measured with the profile); the plan counts their compute at up to {:.2f}× the "
                               "profiled times (docs/plan.md, \"Shared hosts\")",
                               W_, usableCpus().size(), plan_.compute_scale));
  }
  std::string split;
  for (const auto& st : gen_.stages) {
    split += fmt::format("{}{}", split.empty() ? "" : " | ", st.layersText());
  }
  const std::string data =
      spec_.dataset == "synthetic"
          ? fmt::format("synthetic data ({} random samples; data.dataset names a real one)", formatCount(trainSize_))
          : fmt::format("{} ({} samples)", spec_.dataset, formatCount(trainSize_));
  // Stages replicated unevenly: each stage's copies, and the step's microbatches dealt over them.
  const std::string strategy = stageReplicas_.empty()
                                   ? plan::strategyText(A_, B_, {}, T_, false)
                                   : fmt::format("stages replicated {}", fmt::join(stageReplicas_, ", "));
  const std::int64_t microbatches = gen_.num_microbatches * (stageReplicas_.empty() ? 1 : A_);
  progress_.note(fmt::format("Training {} on {} with {} on {} {} workers (layers {}; {}{} of {}; predicted "
                             "{} per step): steps {}..{} of {}; run directory {}",
                             model_.name, data, strategy, W_, launcher_->name(), split,
                             countOf(microbatches, "microbatch", "microbatches"),
                             stageReplicas_.empty() ? "" : " a step, round-robin",
                             gen_.microbatch_size, formatSeconds(gen_.iteration_seconds), resumeStep_ + 1, stopStep_,
                             totalSteps_, run_.root()));
  if (idle_ > 0) noteIdle();
  idleBefore_ = idle_;
  return watch();
}

}  // namespace coordinator
}  // namespace hydrozoa::cluster
