// Job: regrouping the running workers at a step boundary when transient
// workers leave or join (NOTE [Regrouping at a step boundary]): whether a
// change can regroup, the joiners started ahead, the switch to the new
// group (coordinator_job.h; cluster/tier_driver.cc decides the changes).
#include "cluster/coordinator_job.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>

namespace hydrozoa::cluster::coordinator {

// NOTE [Regrouping at a step boundary]
// Gloo's groups cannot shrink or grow, but a process can leave one and join
// another. So a change of the transient workers restarts no worker that
// stays. When some leave (an eviction notice, or BidBrain holding fewer),
// the leavers are told to stop at the agreed step S and the others to
// regroup there ("regroup": the new generation's number, width, microbatches
// per replica and joiners), which none acts on until every one has said it
// had not begun S (NOTE [Agreeing on a step]). When some come back, they are started at once
// (the instances are bought and billed from then, as the cloud would boot
// them) and wait for their role; once all have registered, the running
// workers are told to regroup at S. Nothing is saved: the running workers
// hold the state (measured on the tiers test, shipping a save was 0.4 s of
// a 0.46 s regroup). At S each running worker drops its transport, syncs,
// channels, loaders and step executor and builds them again for its place
// in the new group, its rendezvous under the new generation's prefix of
// the store, keeping its model, optimizer state, data sets and process
// (its libtorch loaded, its container, its cores). The coordinator
// switches to the new group once step S − 1 is complete (maybeRegroup()).
// The joiners got their role (start at S, the state from replica 0) when S
// was confirmed (NOTE [Roles for joiners ahead]) and meet the others at the
// rendezvous, where replica 0 sends them its state (NOTE [State for
// joiners], runtime/worker/stage_setup.cc).
// Meanwhile the new group's reports of S and later wait for the switch
// (completeSteps() completes no step from S on until then); the leavers are
// answered until they exit. The job token stays: the running workers are
// the authenticated processes they were, and the joiners got it at launch.
// What regroups: the replicas of one stage without tensor groups or a
// channel, under a flushing schedule, the tiers' own case (and joins need a
// launcher that runs two sets of workers at once); S is moved off an
// epoch's first step (the epoch's evaluation reports count the old group). Otherwise, with `regroup: false`, or once a joiner failed to
// start, a change is a new generation of every worker. Measured on the
// bench's CNN (bench/proteus_bench.sh): see bench/README.md.
bool Job::canRegroup(std::int64_t* at) const {
  const int after = spec_.tiers.reliable + tierTarget_;
  const int working = after - idleBeside(tierTarget_);
  const bool flushing = gen_.schedule == plan::ScheduleKind::kGPipe || gen_.schedule == plan::ScheduleKind::kOneFOneB;
  const bool joins = tierTarget_ > tierActive_;
  if (!spec_.tiers.regroup || tierTarget_ == tierActive_ || after < 1 || B_ != 1 || T_ != 1 ||
      !stageReplicas_.empty() || channel_ || spec_.flexrr.enabled || policy_->usesMetrics() || !flushing ||
      stepMicrobatches() % working != 0 || (joins && (tierJoinFailed_ || !launcher_->overlapsGenerations()))) {
    return false;
  }
  if (at == nullptr) return true;
  if (epochs_.stepInEpoch(*at) == 0) ++*at;
  return *at < genStop_;
}

void Job::dropJoiners() {
  retire(joining_, 0.5);
  joining_.clear();
}

// The transient workers of a return, started now (billed from their
// registration, as the instances are from the market's acquire): they wait
// for their role until the survivors' regroup takes them in. True once all
// have registered.
bool Job::joinersReady() {
  const int want = tierTarget_ - tierActive_;
  if (!joining_.empty() && static_cast<int>(joining_.size()) != want) {  // the change changed: start again
    dropJoiners();
  }
  if (joining_.empty()) {
    const std::vector<WorkerState> all = layout(A_ + want, B_, {});
    for (const WorkerState& w : all) {
      if (w.replica >= A_) joining_.push_back(w);
    }
    for (WorkerState& w : joining_) {
      if (Status s = launch(w, token_, generation_ + 1, gen_.stages[0], stageMemory_[0]); !s.ok()) {
        spdlog::warn("could not start {} to join: {}; the transient workers come back with a new generation",
                     w.name(), s.message());
        dropJoiners();
        tierJoinFailed_ = true;
        return false;
      }
    }
  }
  return std::all_of(joining_.begin(), joining_.end(), [](const WorkerState& w) { return w.registered; });
}

// NOTE [Roles for joiners ahead]
// A joiner needs its role to set up (its model, its data sets and loaders:
// most of a second in a container of half a core), and the regroup's step
// S is final once confirmed (NOTE [Agreeing on a step]). So the joiners get
// their role then, the new group's (its generation, width, microbatches,
// start at S, the state from replica 0), while the running workers train
// on to S: they set up meanwhile and wait at the new group's rendezvous,
// and their "ready" waits for the switch, where they get "go". Before, they
// got their role at the switch and set up while every other worker waited.
// A regroup that does not happen after all (a worker lost before S) drops
// them: a worker that has a role takes no other (recover()).
void Job::assignJoiners() {
  for (WorkerState& w : joining_) {
    control_->send(from(w.id), assignMessage(w, /*stateFrom=*/0, &regroupRole_));
    w.assigned = true;
  }
}

void Job::maybeRegroup() {
  if (halting_ || regroupAt_ < 0 || reached_ < regroupAt_ || !confirmed(regroupAt_)) return;
  const std::int64_t at = regroupAt_;
  const int before = A_;
  for (auto it = workers_.begin(); it != workers_.end();) {
    if (it->replica < regroupWorkers_) {
      ++it;
      continue;
    }
    leaving_.push_back(*it);
    it = workers_.erase(it);
  }
  // The transient workers of the new group (tierTarget_ may have changed
  // since the regroup was asked: the next change brings that).
  (void)tiersAtNewGeneration(regroupWorkers_ - spec_.tiers.reliable);
  if (Status s = useGenerationPlan(at); !s.ok()) {
    (void)failure(s.message());
    return;
  }
  setReplicas(epochs_.atStep(at).replicas);
  makeSampler();
  ++generation_;
  agreement_ = {};  // what the last generation agreed on is done
  store_.erasePrefix(fmt::format("gen{}/", generation_ - 1));
  resumeStep_ = at;
  const bool ahead = !joining_.empty() && std::all_of(joining_.begin(), joining_.end(),
                                                     [](const WorkerState& w) { return w.assigned; });
  for (WorkerState& w : joining_) {  // their role: the new group's, its state from replica 0
    w.last_seen = Clock::now();
    workers_.push_back(w);
    if (!w.assigned) sendAssign(w, /*stateFrom=*/0);
    if (w.ready) control_->send(from(w.id), {{"type", "go"}});
  }
  joining_.clear();
  // At step `at`: reached_ is at, the steps after it wait.
  tierChanged(before, /*regrouped=*/true, ahead ? Json{{"roles_ahead", true}} : Json::object());
  completeSteps();  // the survivors' reports of the steps since may all be in
}

}  // namespace hydrozoa::cluster::coordinator
