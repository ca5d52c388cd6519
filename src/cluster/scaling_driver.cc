// Job: generations at epoch boundaries (NOTE [Changing the replicas]): the
// scaling schedule, each generation's plan, pre-starting, a rule's decision,
// and the change itself; and the new generation of fresh invocations before
// functions reach their time limit (NOTE [Functions' time limit])
// (coordinator_job.h).
#include "cluster/coordinator_job.h"
#include "cluster/coordinator.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <utility>

namespace hydrozoa::cluster::coordinator {

void Job::makeSampler() {
  data::SamplerOptions so;
  so.dataset_size = trainSize_;
  so.global_batch = globalBatch();
  so.replicas = A_;
  so.idle_replicas = idle_;
  so.microbatch_size = gen_.microbatch_size;
  so.drop_last = spec_.drop_last;
  sampler_.emplace(so);
  perEpoch_ = sampler_->stepsPerEpoch();
}

void Job::countSteps() {
  totalSteps_ = epochs_.epochStart(spec_.epochs);
  if (spec_.max_steps) totalSteps_ = std::min(totalSteps_, *spec_.max_steps);
  stopStep_ = stopAfter_ ? std::min(totalSteps_, *stopAfter_) : totalSteps_;
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
// Under tensor parallelism each tensor group gathers its split layers into
// that checkpoint (whole layers: runtime/checkpoint.cc), and the next
// generation's groups cut them again, for whatever t its plan has.
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
    // NOTE [Re-planned resume] (cli/cmd_train.cc): a fixed number of
    // replicas planned anew keeps the global batch, and so each step's
    // samples; only their split over the replicas changes.
    const bool sameSteps = epochs_.segments().size() == 1 &&
                           epochs_.segments().front().replicas * epochs_.perReplicaBatch() == spec_.global_batch;
    if (epochs_.perReplicaBatch() != perReplica && o_.replan && spec_.scaling.policy == "fixed" && sameSteps) {
      epochs_ = EpochSchedule(trainSize_, perReplica, spec_.drop_last);
      epochs_.append(0, plan_.data_parallel, 1.0, "");
    }
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
    for (const plan::LayerRange& r : p.pieces()) ends.push_back(r.last);
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

void Job::maybePrestart() {
  if (!next_.empty() || genStop_ >= stopStep_ || policy_->usesMetrics() || stopping_ || resizeTo_ > 0 || tierMarket_ ||
      stepSeconds_.size() < 3 || !launcher_->overlapsGenerations()) {
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
    const StartDelay d = spec_.start_delay.value_or(StartDelay{});
    delay = d.distribution == "uniform" ? d.b : d.distribution == "normal" ? d.a + 2 * d.b : d.a;
  }
  const double lead = 1.25 * delay + 1.0;
  if (eta > lead) return;
  const int replicas = epochs_.atStep(genStop_).replicas;
  auto plan = planAt(genStop_);
  if (!plan.ok()) return;  // said at the boundary
  // The layout below lays out this generation's tensor groups; a plan that
  // splits its layers otherwise starts its workers at the boundary.
  if (plan->tensor_parallel != T_) return;
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
  if (resizeTo_ > 0) {
    const int replicas = std::exchange(resizeTo_, 0);
    return {replicas, epochs_.atStep(reached_).lr_factor, "resized by its handle",
            spec_.scaling.replan && replicas != A_};
  }
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
  retire(leaving_, 5.0);  // left at a regroup, if any still runs
  leaving_.clear();
  dropJoiners();  // started to join at a regroup that did not happen
  const bool reinvoked = reinvoking_;
  reinvoking_ = false;
  resizeIssued_ = false;
  const bool tiered = tierStopIssued_;  // the transient tier leaves or comes back here
  const bool resized = resizeTo_ > 0 && !reinvoked;
  if ((policy_->usesMetrics() || resized) && !reinvoked && !tiered) {
    const ScalingDecision d = decided_ ? *decided_ : decideNow();
    decided_.reset();
    if (resized) epochs_.truncateAfter(epoch - 1);  // what the policy laid out for later epochs
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
  if (Status s = tiersAtNewGeneration(); !s.ok()) return s;
  if (Status s = useGenerationPlan(reached_); !s.ok()) return failure(s.message());
  setReplicas(seg.replicas);
  makeSampler();
  resumeStep_ = maxStarted_ = reached_;
  genStop_ = generationStop();
  ++generation_;
  agreement_ = {};  // what the last generation agreed on is done
  store_.erasePrefix(fmt::format("gen{}/", generation_ - 1));
  if (channel_) channel_->clearGeneration(generation_ - 1);
  steps_.clear();
  boundaries_.clear();
  evals_.clear();
  checkpoints_.clear();
  training_ = false;

  // The next generation: the pre-started workers when they fit, else new ones.
  const bool prestarted = !next_.empty() && static_cast<int>(next_.size()) == W_ &&
                          nextPlan_.pipeline_stages == B_ && nextPlan_.tensor_parallel == T_;
  if (prestarted) {
    token_ = nextToken_;
    workers_ = std::move(next_);
  } else {
    retire(next_, 0.5);
    control_->admit("");
    token_ = wire::newToken();
    workers_ = layout(A_, B_, stageReplicas_);
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
  if (tiered) {
    tierChanged(before, /*regrouped=*/false, {{"released_at", boundary}});
    return Status();
  }
  if (reinvoked) {
    const Json event = {{"t", priorSeconds_ + since(trainingStart_)},
                        {"event", "reinvoked"},
                        {"generation", generation_},
                        {"step", reached_},
                        {"workers", W_}};
    reinvocations_.push_back(event);
    report(event);
    return Status();
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
                {"global_batch", globalBatch()},
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
      globalBatch(), perEpoch_,
      !prestarted               ? std::string("starting the workers now")
      : ready == recorded.end() ? std::string("waiting for pre-started workers still starting")
                                : fmt::format("the pre-started workers were ready {} before the boundary",
                                              formatSeconds(ready->get<double>()))));
  return Status();
}

// NOTE [Resizing from the handle]
// A job's handle may ask for A' replicas (JobHandle::resize). Replicas change
// at epoch boundaries only (the sampler deals each epoch over its replicas),
// so the workers are told to stop at the first epoch start they have not
// begun, checkpointing there after the epoch's evaluation, and rescale()
// starts a generation of A' replicas from it, as for a policy's change (the
// per-replica batch stays; the learning-rate factor stays). The change
// replaces what the policy laid out for the later epochs; a rule still
// decides at the later boundaries (its workers hold at every epoch end, and
// decideNow() takes the resize at the next). A resize asked for while the
// job ends before the next epoch has nothing to change.
void Job::takeRequests() {
  if (o_.checkpoint_request && o_.checkpoint_request->load() > 0) {
    o_.checkpoint_request->store(0);
    const std::int64_t at = agreedStep();
    progress_.note(fmt::format("Checkpoint requested: after step {}", at + 1));
    for (const auto& w : workers_) control_->send(from(w.id), {{"type", "checkpoint"}, {"step", at}});
  }
  if (o_.resize_request) {
    if (const int replicas = o_.resize_request->exchange(0); replicas > 0) {
      resizeTo_ = replicas;
      resizeIssued_ = false;
    }
  }
  if (resizeTo_ > 0 && !resizeIssued_ && !stopping_ && !reinvoking_ && !agreeing()) issueResize();
}

void Job::issueResize() {
  resizeIssued_ = true;
  if (policy_->usesMetrics()) {
    progress_.note(fmt::format("{} replicas from the next epoch's end on (asked by the job's handle)", resizeTo_));
    return;
  }
  const std::int64_t at = std::max(resumeStep_ + 1, agreedStep());
  const std::int64_t epoch = epochs_.epochOf(at);
  const std::int64_t boundary = epochs_.epochStart(epoch) == at ? at : epochs_.epochStart(epoch + 1);
  if (boundary >= stopStep_) {
    progress_.note(fmt::format("Not resizing to {} replicas: this run stops at step {}, before the next epoch",
                               resizeTo_, stopStep_));
    resizeTo_ = 0;
    return;
  }
  progress_.note(fmt::format("Resizing to {} replicas at the epoch boundary at step {} (asked by the job's handle)",
                             resizeTo_, boundary));
  if (boundary >= genStop_) return;  // this generation ends there anyway; rescale() takes the resize
  genStop_ = boundary;
  proposeStop(boundary, [this](std::int64_t next) {  // the epoch boundary after
    const std::int64_t epoch = epochs_.epochOf(next);
    genStop_ = epochs_.epochStart(epoch) == next ? next : epochs_.epochStart(epoch + 1);
    return genStop_;
  });
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

// NOTE [Functions' time limit]
// A function runs at most the platform's time limit (launcher_->maxDuration()).
// Before the first of a generation's would reach it (a quarter of the limit
// before, at most a minute), every worker is told to finish the step half a
// second ahead (agreedStep()), checkpoint it and end, as for a stop at
// --max-steps; run() then starts the next generation from that checkpoint
// with the same plan (rescale(), its "reinvoked" event), fresh invocations
// with a full time limit, as FuncPipe's function manager does (§3.1). The
// training is the same as without the limit: a stop and resume at a step
// boundary (tests: FunctionWorkers.*).
void Job::maybeReinvoke() {
  const Seconds limit = launcher_ ? launcher_->maxDuration() : 0;
  if (limit <= 0 || stopping_ || reinvoking_ || workers_.empty() || agreeing()) return;
  double first = -1;
  for (const auto& w : workers_) {
    if (w.started_at >= 0 && (first < 0 || w.started_at < first)) first = w.started_at;
  }
  if (first < 0 || now() - first < limit - std::min(60.0, limit / 4)) return;
  const std::int64_t at = std::max(resumeStep_ + 1, agreedStep());
  if (at >= genStop_) return;  // the generation ends before that anyway
  reinvoking_ = true;
  progress_.note(fmt::format("Step {}: the functions near their time limit ({}); they save the state and fresh "
                             "invocations continue it",
                             at, formatSeconds(limit)));
  proposeStop(at);
}

}  // namespace hydrozoa::cluster::coordinator
