// Job: what a run measures and reports: per-step accounting, stage times
// against the plan's predictions, and the summary at the end
// (coordinator_job.h).
#include "cluster/coordinator_job.h"
#include "cluster/coordinator.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>

namespace hydrozoa::cluster::coordinator {

// Each stage's compute and allreduce wait per step, the mean over its
// replicas, for this generation (summary.json's "stages").
void Job::recordStageTimes(const StepAccount& a) {
  if (stageGeneration_ != generation_ || stageSteps_.size() != a.compute.size()) {
    stageGeneration_ = generation_;
    stageSteps_.assign(a.compute.size(), {});
  }
  for (size_t s = 0; s < a.compute.size(); ++s) {
    const double replicas = stageReplicas_.empty() ? A_ : stageReplicas_.at(s);
    stageSteps_[s].compute.push_back(a.compute[s] / replicas);
    stageSteps_[s].allreduce.push_back(a.allreduce[s] / replicas);
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

void Job::completeSteps() {
  for (auto it = steps_.begin();
       it != steps_.end() && it->second.reports == W_ && (regroupAt_ < 0 || it->first < regroupAt_);) {
    onStepComplete(it->first, it->second);
    it = steps_.erase(it);
  }
}

void Job::onStepComplete(std::int64_t step, const StepAccount& a) {
  const auto now = Clock::now();
  const double dt = std::chrono::duration<double>(now - lastStepAt_).count();
  lastStepAt_ = lastStepEnd_ = now;
  if (tierChangeFrom_ != Clock::time_point{}) {  // a tier change's stall, from the last step before it
    tierStalls_[tierChangeLeft_ ? 0 : 1].push_back(std::chrono::duration<double>(now - tierChangeFrom_).count());
    tierChangeFrom_ = {};
  }
  ++stepsDone_;
  samples_ += a.samples;
  reached_ = std::max(reached_, step + 1);
  stepSamples_[step] = a.samples;
  if (recoveringSince_ >= 0 && !events_.empty()) {
    Json& e = events_.back();
    e["seconds_to_training"] = this->now() - recoveringSince_;
    recoveringSince_ = -1;
    report(e);
    progress_.note(fmt::format("Training again {} after the loss ({} steps to redo)",
                               formatSeconds(e["seconds_to_training"].get<double>()), e["lost_steps"].get<std::int64_t>()));
  }
  if (scalingSince_ >= 0 && !scalingEvents_.empty()) {
    Json& e = scalingEvents_.back();
    e["seconds_to_training"] = this->now() - scalingSince_;
    scalingSince_ = -1;
    report(e);
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
  Json line = {{"t", priorSeconds_ + since(trainingStart_)},
               {"epoch", a.epoch + 1},
               {"step", step + 1},
               {"loss", a.loss},
               {"samples_per_s", rate},
               {"workers", W_},
               {"cost_usd", cost()}};
  if (spec_.flexrr.enabled) {
    reassigned_ += a.reassigned;
    microbatchesDone_ += static_cast<std::int64_t>(A_) * gen_.num_microbatches;
    line["reassigned_microbatches"] = a.reassigned;
  }
  if (spec_.precision == "fp16") {
    line["loss_scale"] = lossScale_ = a.loss_scale;
    if (a.skipped) {
      line["skipped"] = true;
      ++skippedSteps_;
      progress_.note(fmt::format("step {} skipped: an inf or NaN gradient in fp16; the loss scale is now {}", step + 1,
                                 a.loss_scale));
    }
  }
  report(std::move(line));
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

void Job::report(Json line) {
  (void)run_.appendMetrics(line);
  if (!o_.on_event) return;
  if (!line.contains("event")) line["event"] = line.contains("test_accuracy") ? "epoch" : "step";
  o_.on_event(line);
}

void Job::emit(Json event) const {
  if (o_.on_event) o_.on_event(event);
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
                       {"tensor_rank", w.tensor_rank},
                       {"log", run_.workerLog(w.id)},
                       {"exit", how},
                       {"planned_memory", stageMemory_.empty() ? 0 : stageMemory_[w.stage]},
                       // What the worker really ran with: cluster.memory_limit when given (containers).
                       {"memory_limit", spec_.memory_limit ? Json(*spec_.memory_limit) : Json(nullptr)},
                       {"peak_memory", w.peak_memory},
                       // The counting allocator's peak in a step (NOTE [Tensor memory per step], worker).
                       {"peak_tensor_memory", w.tensor_peak}});
  }
  Json summary = {
      {"status", status},
      {"reason", reason},
      {"model", model_.name},
      {"plan",
       {{"data_parallel", A_},
        {"pipeline_stages", B_},
        {"tensor_parallel", T_},
        {"scatter_gather", gen_.scatter_gather},
        {"microbatch_size", gen_.microbatch_size},
        {"num_microbatches", gen_.num_microbatches},
        {"global_batch", spec_.global_batch},
        {"stage_replicas", stageReplicas_}}},
      {"steps", {{"done", reached_}, {"total", totalSteps_}, {"this_run", stepsDone_}}},
      {"epochs_completed", epochs_.segments().empty() ? 0 : epochs_.epochOf(reached_)},
      {"generations", generation_ + 1},
      {"recoveries", events_},
      {"reinvocations", reinvocations_},
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
        {"start_delay", formatStartDelay(spec_.start_delay.value_or(StartDelay{}))}}},
      {"samples_per_dollar", total > 0 ? allSamples / total : 0},
      {"refused_control_messages", control_ ? control_->refused() : 0},
      {"refused_control_connections", control_ ? control_->refusedConnections() : 0},
      {"workers", workers},
      {"outputs",
       {{"metrics", run_.file("metrics.jsonl")},
        {"trace", run_.file("trace.json")},
        {"checkpoints", run_.checkpointsDir()}}}};
  if (spec_.flexrr.enabled) {
    summary["flexrr"] = flexrrToJson(spec_.flexrr);
    summary["flexrr"]["reassigned_microbatches"] = reassigned_;
    summary["flexrr"]["microbatches"] = microbatchesDone_;
  }
  if (tierMarket_) summary["tiers"] = tiersSummary();
  if (spec_.precision == "fp16") summary["loss_scale"] = {{"final", lossScale_}, {"skipped_steps", skippedSteps_}};
  if (!spec_.stragglers.empty()) {
    Json list = Json::array();
    for (const StragglerSpec& x : spec_.stragglers) list.push_back(formatStraggler(x));
    summary["stragglers"] = list;
  }
  if (channel_) {
    // Keys the workers left (a completed run consumes every message: 0);
    // the coordinator deletes them when it closes the channel.
    summary["channel"] = {{"url", channel_->address().url()},
                          {"sync", spec_.channel_sync},
                          {"keys_left", channel_->keysLeft()}};
  }
  if (Status s = run_.writeJson("summary.json", summary); !s.ok()) spdlog::error("{}", s.message());
  emit({{"event", "finished"},
        {"status", status},
        {"reason", reason},
        {"step", reached_},
        {"total_steps", totalSteps_},
        {"cost_usd", total},
        {"run_dir", run_.root()}});
}

}  // namespace hydrozoa::cluster::coordinator
