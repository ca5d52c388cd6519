// Job: a lost worker (NOTE [Recovering from a lost worker]): halting the
// survivors, their saves, stopping a generation, and the next one from the
// restore point (coordinator_job.h).
#include "cluster/coordinator_job.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <set>
#include <thread>

namespace hydrozoa::cluster::coordinator {

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
  // Left at a regroup, or started to join one (NOTE [Regrouping at a step boundary]).
  for (auto it = leaving_.begin(); it != leaving_.end(); ++it) {
    if (it->id != e.id) continue;
    exits_.emplace_back(it->name(), e.how);
    leaving_.erase(it);
    return;
  }
  for (auto it = joining_.begin(); it != joining_.end(); ++it) {
    if (it->id != e.id) continue;
    const std::string name = it->name();
    exits_.emplace_back(name, e.how);
    joining_.erase(it);
    if (regroupAt_ >= 0) {  // the survivors wait for it at the regroup: lost, as a transient worker
      evictedIds_.insert(e.id);
      (void)failure(fmt::format("{}, started to join at step {}, {}; see {}", name, regroupAt_, e.how,
                                run_.workerLog(e.id)));
    } else {  // issueTierStop() lets the others go: the return restarts every worker
      spdlog::warn("{}, started to join, {}; the transient workers come back with a new generation", name, e.how);
      tierJoinFailed_ = true;
    }
    return;
  }
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

// That estimate can still be behind on a loaded machine (the workers' reports
// queued behind others at a coordinator short of CPU; seen in CI: a worker
// began step S before its "stop at S" came, the others stopped there, and it
// was left alone in S's allreduce). So each worker answers a stop or regroup
// with the step it had begun, and waits at S for the coordinator's "confirm",
// sent once every worker had not begun S (at once, in the usual case, long
// before S). If one had, the coordinator moves every worker's S past it
// instead, the same way; a worker waiting at the old S goes on.
void Job::propose(std::int64_t step, std::map<int, Json> messages, std::function<std::int64_t(std::int64_t)> revise,
                  std::function<void()> confirmed) {
  agreement_ = Agreement{step, std::move(messages), {}, std::move(revise), std::move(confirmed), false, 0};
  for (auto& [id, m] : agreement_.messages) {
    m["at_step"] = step;
    control_->send(from(id), m);
  }
}

void Job::proposeStop(std::int64_t step, std::function<std::int64_t(std::int64_t)> revise) {
  std::map<int, Json> stops;
  for (const auto& w : workers_) stops[w.id] = {{"type", "stop"}, {"checkpoint", true}};
  propose(step, std::move(stops), std::move(revise));
}

void Job::onStepAck(int id, const Json& m) {
  Agreement& a = agreement_;
  const std::int64_t at = m.value("at_step", std::int64_t{-1}), begun = m.value("begun", std::int64_t{-1});
  if (a.confirmed || at != a.step || !a.messages.count(id)) return;  // not the proposal pending
  if (begun >= at) {
    // Past the step it had begun (fresher than the reports, which may be
    // queued here), each move by a wider margin: a worker that heard late
    // once may again, and one running alone runs on while it hears.
    maxStarted_ = std::max(maxStarted_, begun);
    const std::int64_t margin = agreedStep() - maxStarted_;
    std::int64_t next = maxStarted_ + margin * (1 + a.moves);
    if (a.revise) next = a.revise(next);
    ++a.moves;
    report({{"t", priorSeconds_ + since(trainingStart_)},
            {"event", "step_moved"},
            {"from", at},
            {"to", next},
            {"worker", id},
            {"begun", begun}});
    spdlog::info("worker {} had begun step {} when asked to stop or regroup before it: step {} instead", id, at, next);
    a.step = next;
    a.acked.clear();
    for (auto& [to, message] : a.messages) {
      message["at_step"] = next;
      control_->send(from(to), message);
    }
    return;
  }
  a.acked.insert(id);
  if (a.acked.size() < a.messages.size()) return;
  a.confirmed = true;
  for (const auto& [to, message] : a.messages) control_->send(from(to), {{"type", "confirm"}, {"at_step", a.step}});
  if (a.onConfirmed) a.onConfirmed();
}

Status Job::lose(int worker, bool outOfMemory) {
  loss_.worker = worker;
  loss_.out_of_memory = outOfMemory;
  // A peer's report of the loss may come first (worker −1).
  loss_.evicted = evictedIds_.count(worker) > 0 || (worker < 0 && !evictedIds_.empty());
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
  if (!loss.evicted) ++recoveries_;  // the spot market's take is no failure
  const double lostAt = now();
  const std::int64_t reachedBefore = reached_;
  progress_.note(loss.evicted ? fmt::format("Lost {}; recovering", why)
                              : fmt::format("Lost {}; recovering ({} of at most {})", why, recoveries_,
                                            spec_.max_recoveries));
  report({{"t", tLost},
          {"event", "worker_lost"},
          {"generation", generation_},
          {"worker", loss.worker},
          {"why", why},
          {"steps_completed", reachedBefore}});

  // What the survivors hold. Their reports of steps they finish before the
  // halt reaches them, and the checkpoint of their save, are still taken in
  // meanwhile, and must not switch to a regroup's new group (its joiners
  // are dropped below): a switch there moved the restore point past the
  // steps the survivors could save, and the run started again from its
  // last checkpoint instead of from them (seen in CI:
  // Tiers.AJoinerKilledOnceItHasItsRoleIsRecoveredFrom restored from the start).
  halting_ = true;
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
  // Any step newer than the disk's is worth saving: also the step a regroup
  // started the generation at (resumeStep_), whose state is in memory only
  // (a joiner killed before the group did a step beside it found that).
  if (best > diskStep) {
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
  halting_ = false;

  // End this generation (not the next one's pre-started workers); restore.
  retire(workers_, 1.0);
  retire(leaving_, 1.0);
  leaving_.clear();
  dropJoiners();  // started to join at a regroup that did not happen
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
    report({{"t", tLost},
            {"epoch", a.epoch + 1},
            {"step", step + 1},
            {"loss", a.loss * full / a.samples},
            {"partial", true},
            {"workers", W_},
            {"cost_usd", cost()}});
  }
  reached_ = resumeStep_ = maxStarted_ = restore;
  // Joiners that have their role in a regroup that will not happen now
  // cannot take another: the return starts them again.
  if (std::any_of(joining_.begin(), joining_.end(), [](const WorkerState& w) { return w.assigned; })) dropJoiners();
  if (Status s = tiersAtNewGeneration(); !s.ok()) return s;
  if (Status s = useGenerationPlan(restore); !s.ok()) return failure(s.message());
  decided_.reset();  // a rule decides again at the next epoch end
  setReplicas(epochs_.atStep(restore).replicas);
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
  agreement_ = {};  // what the last generation agreed on is done
  reinvoking_ = false;  // a stop for fresh invocations that a loss overtook
  resizeIssued_ = false;  // a resize asked for is told to the new generation (takeRequests())
  store_.erasePrefix(fmt::format("gen{}/", generation_ - 1));
  store_.erasePrefix(fmt::format("gen{}/", generation_));  // a regroup into it, begun before the loss
  if (channel_) channel_->clearGeneration(generation_ - 1);
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
  if (loss.evicted) events_.back()["evicted"] = true;
  recoveringSince_ = lostAt;  // until the new generation's first step (onStepComplete)
  progress_.note(fmt::format("Restoring from {} at step {} ({} steps to redo): generation {} starts",
                             source == "checkpoint" ? "the last checkpoint" : source, restore,
                             std::max<std::int64_t>(0, reachedBefore - restore), generation_));
  return launchWorkers();
}

}  // namespace hydrozoa::cluster::coordinator
