#include "runtime/worker/worker_impl.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "profile/memory_tracker.h"
#include "runtime/exec/tags.h"
#include "runtime/precision.h"

namespace hydrozoa::runtime {

std::vector<std::int64_t> Worker::microbatchSizes(const data::EpochSampler& sampler, std::int64_t step) const {
  std::vector<std::int64_t> sizes;
  const int n = sampler.microbatches(step, role_.replica);
  for (int mb = 0; mb < n; ++mb) sizes.push_back(sampler.microbatchSize(step, role_.replica, mb));
  return sizes;
}

std::vector<double> Worker::microbatchSamples(const data::EpochSampler& sampler, std::int64_t step, int* rounds) const {
  std::vector<double> samples;
  for (int r = 0; r < role_.replicas; ++r) {
    const int n = sampler.microbatches(step, r);
    if (static_cast<int>(samples.size()) < n) samples.resize(static_cast<size_t>(n), 0);
    for (int mb = 0; mb < n; ++mb) samples[static_cast<size_t>(mb)] += static_cast<double>(sampler.microbatchSize(step, r, mb));
  }
  if (rounds) *rounds = static_cast<int>(samples.size());
  return samples;
}

void Worker::recordSamples(std::int64_t epoch, std::int64_t stepInEpoch, std::int64_t globalStep) {
  const data::EpochSampler& sampler = *trainSampler_;
  if (sampleEpoch_ != epoch) {
    samplePermutation_ = sampler.permutation(epoch);
    sampleEpoch_ = epoch;
  }
  *sampleLog_ << globalStep << ' ' << epoch << ' ' << role_.replica;
  for (int mb = 0; mb < sampler.microbatches(stepInEpoch, role_.replica); ++mb) {
    for (std::int64_t i : sampler.indicesIn(samplePermutation_, stepInEpoch, role_.replica, mb)) *sampleLog_ << ' ' << i;
  }
  *sampleLog_ << '\n';
  sampleLog_->flush();
}

void Worker::iteration(std::int64_t epoch, std::int64_t stepInEpoch, std::int64_t globalStep, bool nextStep,
                       bool drain) {
  const auto t0 = Clock::now();
  if (sampleLog_) recordSamples(epoch, stepInEpoch, globalStep);
  const data::EpochSampler& sampler = *trainSampler_;
  StepInput in;
  in.step = globalStep;
  in.sizes = microbatchSizes(sampler, stepInEpoch);
  in.stepSamples = static_cast<double>(sampler.stepSamples(stepInEpoch));
  const bool dealt = !role_.stage_replicas.empty();
  in.firstMicrobatch = dealt || idle() ? 0 : (role_.replica - role_.idle_replicas) * role_.microbatches;
  in.stepMicrobatches = sampler.stepMicrobatches(stepInEpoch);
  if (nextStep && schedule_->asynchronous()) {
    in.nextSizes = microbatchSizes(sampler, stepInEpoch + 1);
    in.nextStepSamples = static_cast<double>(sampler.stepSamples(stepInEpoch + 1));
    in.nextStepMicrobatches = sampler.stepMicrobatches(stepInEpoch + 1);
  }
  in.drain = drain;
  if (schedule_->updatePerMicrobatch()) {
    in.microbatchSamples = microbatchSamples(sampler, stepInEpoch, &in.updates);
    if (nextStep) in.nextMicrobatchSamples = microbatchSamples(sampler, stepInEpoch + 1, nullptr);
  }
  // NOTE [Tensor memory per step]: the counting allocator's peak over the
  // step (the stage's parameters, gradients and optimizer state, what the
  // schedule stashes, transfers' buffers), so schedules compare by what they
  // hold rather than by the resident size, which glibc's caching blurs; on
  // a GPU, its caching allocator's (NOTE [Tensor memory on a GPU]).
  profile::resetPeakOn(device_);
  const StepStats stats = reassigning_ ? reassignedIteration(in, epoch, stepInEpoch) : executor_->run(in);
  if (schedule_->updatePerMicrobatch() && !executor_->drained()) {
    std::lock_guard<std::mutex> lock(stateMu_);
    midStep_ = true;  // the next step is begun: no step's state
  }
  Json report = {{"type", "step"},
                 {"step", globalStep},
                 {"epoch", epoch},
                 {"compute_s", stats.compute},
                 {"wait_s", stats.wait},
                 {"allreduce_s", stats.allreduce},
                 {"iteration_s", since(t0)},
                 {"tensor_peak", profile::peakOn(device_)}};
  if (lastStage() && speaksForSlices()) {
    report["loss"] = stats.lossSum;
    report["samples"] = stats.samples;
  }
  if (reassigning_) report["reassigned"] = stats.reassigned;
  if (lossScale_) {
    report["loss_scale"] = lossScale_->value();
    if (skippedStep_) report["skipped"] = true;
  }
  post(std::move(report));
}

StepStats Worker::reassignedIteration(const StepInput& in, std::int64_t epoch, std::int64_t stepInEpoch) {
  const data::EpochSampler& sampler = *trainSampler_;
  std::vector<int> perReplica;
  for (int r = 0; r < role_.replicas; ++r) perReplica.push_back(sampler.microbatches(stepInEpoch, r));
  auto sizeOf = [&](int r, int k) { return sampler.microbatchSize(stepInEpoch, r, k); };
  auto load = [&](int r, int k) {
    if (helpEpoch_ != epoch) {
      helpPermutation_ = sampler.permutation(epoch);
      helpEpoch_ = epoch;
    }
    return trainData_->get(sampler.indicesIn(helpPermutation_, stepInEpoch, r, k));
  };
  Reassigner::Counts counts;
  StepStats stats = reassigning_->run(in, role_.replica, perReplica, static_cast<int>(role_.microbatches), sizeOf, load,
                                      &counts);
  tookMicrobatches_ += counts.took;
  gaveMicrobatches_ += counts.gave;
  stats.reassigned = counts.took;
  return stats;
}

// NOTE [Sleeping stragglers]: FlexRR's Slow Worker Pattern (seed 002
// §3.4.1): a pass of t seconds is followed by a sleep of (s − 1)·t, so the
// worker runs s times slower while its process stays responsive (its
// messages are answered at once), unlike a paused or throttled one.
void Worker::straggle(double seconds) {
  const cluster::StragglerSpec& x = *sleeper_;
  const double t = since(trainStart_);
  if (t < x.start || (x.duration > 0 && t >= x.start + x.duration)) return;
  std::this_thread::sleep_for(std::chrono::duration<double>((x.slowdown - 1) * seconds));
}

std::int64_t Worker::epochOf(std::int64_t globalStep) const {
  return role_.first_epoch + (globalStep - role_.epoch_start_step) / trainSampler_->stepsPerEpoch();
}

void Worker::applyUpdate(std::int64_t globalStep, int from, int to, bool last, double scale) {
  TraceSpan span(trace_, "optimizer step", "compute", TraceThread::kCompute, {{"step", globalStep}});
  const double lr = role_.lr_factor * scheduledLearningRate(role_.job.optimizer, role_.job.lr_schedule, globalStep,
                                                            epochOf(globalStep), role_.total_steps);
  setLearningRate(*optimizer_, lr);
  // The parameters whose gradients the step computed (its weight version's).
  auto stepParameters = [&] {
    return copies_.empty() ? stageParameters() : versionParameters(static_cast<size_t>(from));
  };
  // NOTE [Loss scaling]: unscaled, and skipped by every worker when one
  // found an inf or NaN (the agreement waits for all, so outside the lock).
  bool skip = false;
  if (lossScale_) {
    {
      std::lock_guard<std::mutex> lock(stateMu_);
      if (halted_) throw Halted();  // not into a vote the lost worker never joins
    }
    torch::NoGradGuard guard;
    skip = transport_->anyWorker(unscaleGradients(stepParameters(), scale / lossScale_->value()));
  }
  std::lock_guard<std::mutex> lock(stateMu_);
  if (halted_) throw Halted();
  if (keepSnapshots_) snapshot();
  if (!lossScale_ && scale != 1) {
    torch::NoGradGuard guard;
    for (const torch::Tensor& p : stepParameters()) {
      if (p.grad().defined()) p.grad().mul_(scale);
    }
  }
  skippedStep_ = skip;
  if (lossScale_) {
    lossScale_->update(skip);
    scaleLosses();
  }
  if (skip) {
    spdlog::warn("step {} skipped: an inf or NaN gradient in fp16; the loss scale is now {}", globalStep + 1,
                 lossScale_->value());
    optimizer_->zero_grad();
  } else if (copies_.empty()) {
    optimizer_->step();
    optimizer_->zero_grad();
  } else {
    // NOTE [Weight versions]: the step's gradients, of its working copy, to
    // the latest weights; their update; the new weights to that copy.
    const std::vector<torch::Tensor> latest = stageParameters();
    const std::vector<torch::Tensor> work = versionParameters(static_cast<size_t>(from));
    for (size_t i = 0; i < latest.size(); ++i) {
      latest[i].mutable_grad() = work[i].grad();
      work[i].mutable_grad() = torch::Tensor();
    }
    optimizer_->step();
    torch::NoGradGuard guard;
    const std::vector<torch::Tensor> next = versionParameters(static_cast<size_t>(to));
    for (size_t i = 0; i < latest.size(); ++i) {
      latest[i].mutable_grad() = torch::Tensor();
      next[i].copy_(latest[i]);
    }
  }
  if (last) completedStep_ = globalStep + 1;
  midStep_ = schedule_->updatePerMicrobatch() && !last;
}

void Worker::scaleLosses() {
  for (const auto& chunk : chunks_) chunk->setLossScale(lossScale_ ? lossScale_->value() : 1.0);
}

// The test set through the pipeline, chunk by chunk (every microbatch of a
// step through chunk 0, then chunk 1, ...): sends go ahead asynchronously,
// so a stage never waits on itself.
void Worker::evaluate(std::int64_t epoch) {
  if (!testSampler_) return;
  const data::EpochSampler& sampler = *testSampler_;
  const PipelineShape shape = pipelineShape();
  if (testLoader_) testLoader_->start(0, 0);
  double lossSum = 0, correct = 0, count = 0;
  TraceSpan span(trace_, fmt::format("evaluate epoch {}", epoch), "eval", TraceThread::kCompute);
  for (std::int64_t step = 0; step < sampler.stepsPerEpoch(); ++step) {
    const std::vector<std::int64_t> sizes = microbatchSizes(sampler, step);
    std::vector<data::Batch> batches(sizes.size());
    if (testLoader_) {
      for (data::Batch& batch : batches) {
        batch = testLoader_->next();
        batch.inputs = batch.inputs.to(device_);
        batch.labels = batch.labels.to(device_);
      }
    }
    for (int c = 0; c < numChunks(); ++c) {
      const int v = shape.virtualStage(c);
      const int prev = (v - 1) % role_.stages, next = (v + 1) % role_.stages;
      // Microbatch mb from / to the worker it is dealt to there, tagged
      // with its index on the receiver.
      auto fromPrev = [&](int mb) -> Inbound* {
        if (shape.firstVirtual(c)) return nullptr;
        return &channels_->in(prev, shape.onPeer(prev, mb).first, Payload::kActivation);
      };
      const int inChunk = edgeChunk(v - 1, role_.stages), outChunk = edgeChunk(v, role_.stages);
      for (size_t mb = 0; mb < sizes.size(); ++mb) {
        const int tag = evalTag(static_cast<int>(mb), inChunk);
        if (Inbound* in = fromPrev(static_cast<int>(mb))) {
          in->expect(tag, tag, inShapes_[static_cast<size_t>(c)].buffer(sizes[mb]), "eval");
        }
      }
      for (size_t mb = 0; mb < sizes.size(); ++mb) {
        Inbound* in = fromPrev(static_cast<int>(mb));
        const torch::Tensor input = in ? in->take(evalTag(static_cast<int>(mb), inChunk)) : batches[mb].inputs;
        const torch::Tensor out = chunks_[static_cast<size_t>(c)]->evaluate(input);
        if (!shape.lastVirtual(c)) {
          const auto [replica, there] = shape.onPeer(next, static_cast<int>(mb));
          channels_->out(next, replica, Payload::kActivation).send(evalTag(there, outChunk), out, "eval");
          continue;
        }
        const torch::Tensor logits = out.reshape({-1, out.size(-1)});
        const torch::Tensor labels = batches[mb].labels.reshape({-1});
        const model::Model& m = chunks_[static_cast<size_t>(c)]->model();
        const auto n = static_cast<double>(labels.numel());
        if (m.sharded_logits) {
          lossSum += model::modelLoss(m, logits, labels).item<double>() * n;
        } else {
          lossSum += torch::nn::functional::cross_entropy(
                         logits, labels, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
                         .item<double>();
        }
        correct += model::modelPredictions(m, logits).eq(labels).sum().item<double>();
        count += n;
      }
    }
    channels_->flush();
  }
  if (lastStage() && speaksForSlices()) {
    post({{"type", "eval"}, {"epoch", epoch}, {"loss_sum", lossSum}, {"correct", correct}, {"count", count}});
  }
}

// Replicas of a stage saw different microbatches, so their BatchNorm running
// statistics differ; average them before evaluating or saving. Idle
// replicas saw none: theirs are the working replicas' average.
void Worker::synchronizeBuffers() {
  if (role_.replicas <= 1) return;
  torch::NoGradGuard guard;
  for (torch::Tensor& b : stageBuffers()) {
    if (!b.is_floating_point()) continue;
    if (idle()) b.zero_();
    transport_->allreduceStage(b)->wait();
    b.div_(working());
  }
}

void Worker::logIdle() const {
  spdlog::info("replica {}: {} (of {}); {}", role_.replica,
               idle() ? "holds the state and computes nothing while the transient replicas take the steps"
                      : "computes again",
               role_.replicas, idle() ? "AgileML's third stage" : "the transient replicas are fewer");
}

void Worker::train() {
  const cluster::JobSpec& job = role_.job;
  const std::int64_t perEpoch = trainSampler_->stepsPerEpoch();
  // Global steps from the beginning of this generation's first epoch.
  auto sinceStart = [this](std::int64_t global) { return global - role_.epoch_start_step; };
  std::int64_t global = role_.start_step;
  trainStart_ = Clock::now();
  while (global < role_.stop_step && !stopRequested_) {
    const std::int64_t epoch = role_.first_epoch + sinceStart(global) / perEpoch;
    const std::int64_t first = sinceStart(global) % perEpoch;
    if (trainLoader_) trainLoader_->start(epoch, first);
    for (std::int64_t step = first; step < perEpoch && global < role_.stop_step; ++step) {
      currentStep_ = global;
      if (regroupAt_.load() == global && agreed(global, regroupAt_)) {
        regroup(global);
        if (trainLoader_) trainLoader_->start(epoch, step);
      }
      // An asynchronous pipeline that began this step runs it first (NOTE
      // [Draining an asynchronous pipeline]): a stop or checkpoint then
      // comes at the first step after which it drained, the same on all.
      if (!pollControl() && executor_->drained()) {
        stopRequested_ = true;
        if (stopCheckpoint_ && global > role_.start_step) checkpoint(global);
        return;
      }
      trace_.setEnabled(step - first < job.trace_steps || step < job.trace_steps);
      const bool nextStep = step + 1 < perEpoch && global + 1 < role_.stop_step;
      const std::int64_t stopAt = stopAt_.load(), checkpointAt = checkpointAt_.load();
      const bool drain = (stopAt >= 0 && stopAt <= global + 1) || (checkpointAt >= 0 && checkpointAt <= global);
      const std::int64_t reducedBefore = tensor_ ? tensor_->bytesReduced() : 0, sentBefore = channels_->bytesSent();
      iteration(epoch, step, global, nextStep, drain);
      if (tensor_) tensorBytes_ += tensor_->bytesReduced() - reducedBefore;
      pipelineBytes_ += channels_->bytesSent() - sentBefore;
      ++stepsRun_;
      ++global;
      const bool due = schedule_->asynchronous() ? checkpointAt >= 0 && global - 1 >= checkpointAt
                                                 : checkpointAt_.load() >= 0 && global - 1 == checkpointAt_.load();
      if (due && executor_->drained()) {
        checkpoint(global);
        checkpointAt_ = -1;
      }
    }
    trace_.setEnabled(true);
    const bool epochDone = sinceStart(global) % perEpoch == 0;
    if (epochDone) {
      synchronizeBuffers();
      if (job.eval) evaluate(epoch);
      const std::int64_t completed = epoch + 1;
      const bool hold = role_.hold_at_epoch_end && global < role_.stop_step;
      if ((job.checkpoint_every_epochs > 0 && completed % job.checkpoint_every_epochs == 0 && global < role_.stop_step) ||
          hold) {
        checkpoint(global);
      }
      if (hold && !holdAtEpochEnd(global)) stopRequested_ = true;
    } else if (global == role_.stop_step && job.eval) {
      synchronizeBuffers();
      evaluate(epoch);  // stopped mid-epoch (max_steps): still report accuracy
    }
    (void)trace_.flush(role_.trace_path);
  }
  if (!stopRequested_) checkpoint(global);  // the final weights
  // bench/tensor_parallel_bench.sh compares these with the cost model's volumes.
  if (tensor_ && stepsRun_ > 0) {
    spdlog::info("tensor-parallel traffic: {} bytes in {} steps, {} per step", tensorBytes_, stepsRun_,
                 tensorBytes_ / stepsRun_);
  }
  if (reassigning_ && stepsRun_ > 0) {
    spdlog::info("flexrr: computed {} microbatches of other replicas, {} of this one's computed by others, in {} steps",
                 tookMicrobatches_, gaveMicrobatches_, stepsRun_);
  }
  if (role_.stages > 1 && stepsRun_ > 0) {
    spdlog::info("pipeline traffic: {} bytes sent in {} steps, {} per step", pipelineBytes_, stepsRun_,
                 pipelineBytes_ / stepsRun_);
  }
}

}  // namespace hydrozoa::runtime
