// A training job as something to hold (issue 13 §1; docs/train.md, "A job's
// handle"): started on a thread of its own, its events read as they come,
// and preempted, resized, checkpointed or stopped from outside. `hydrozoa
// train` drives its job through one; the cluster scheduler drives many.
//
//   cluster::TrainOptions o;
//   o.spec = *cluster::loadJobSpec("job.yaml");
//   auto job = cluster::JobHandle::start(std::move(o));
//   while (auto e = job->nextEvent(1.0)) {
//     if ((*e)["event"] == "step" && (*e)["step"] == 100) job->preempt();
//   }
//   const auto& result = job->wait();   // preempted: result->preempted
//   // ... later, on other workers (another launcher, CPU quota, platform):
//   o = cluster::resumeOptions(result->run_dir).value();
//   o.spec.cpu_limit = 2;
//   job = cluster::JobHandle::start(std::move(o));
//
// NOTE [A job's events]
// Every line the job adds to metrics.jsonl is an event, with "event" set:
// "step" (a global step completed: step, loss, samples_per_s, cost_usd),
// "epoch" (an evaluation: test_accuracy, test_loss), "worker_lost",
// "recovered", "scaled", "reinvoked"; and the job's own: "running" (a
// generation of workers told to go: step, stop_step, replicas, stages,
// workers, launcher), "checkpoint" (step, dir) and, last, "finished"
// (status: completed, stopped, interrupted, preempted or failed; reason,
// step, total_steps, cost_usd, run_dir). A job that fails before it
// trains (a bad spec, missing data) has only "finished".
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "cluster/coordinator.h"

namespace hydrozoa::cluster {

class JobHandle {
 public:
  // Starts the job. `o`'s interrupt, checkpoint, preempt and resize requests
  // become the handle's; its on_event, when set, sees each event too (on the
  // job's thread, before nextEvent() does). Errors (a bad spec, a worker
  // that fails) come from wait() and the "finished" event.
  static std::unique_ptr<JobHandle> start(TrainOptions o);
  // Stops the job (as stop()) if it still runs, and waits for it.
  ~JobHandle();
  JobHandle(const JobHandle&) = delete;
  JobHandle& operator=(const JobHandle&) = delete;

  // The next event, waiting up to `timeoutSeconds`; none when none came or
  // when the job has ended and every event was read (see ended()).
  std::optional<Json> nextEvent(double timeoutSeconds);
  // Whether the job has ended and its every event has been read.
  bool ended() const;

  // Every worker finishes the same step, checkpoints it and exits; the
  // summary says "preempted" and the run resumes from that checkpoint
  // (resumeOptions), on the same workers or others.
  void preempt();
  // The same, as Ctrl-C does ("interrupted"); stop(true): at once, without
  // a checkpoint of the steps since the last one (a second Ctrl-C).
  void stop(bool now = false);
  // A checkpoint after the step the workers agree on; the run goes on.
  void checkpoint();
  // `replicas` data-parallel replicas from the next epoch boundary on (NOTE
  // [Resizing from the handle], scaling_driver.cc). Refused: outside
  // 1..kMaxWorkers.
  Status resize(int replicas);

  // Waits for the job to end; its result (the run directory, or what failed).
  const Result<TrainResult>& wait();

 private:
  JobHandle() = default;
  void push(Json event);

  std::atomic<int> interrupt_{0}, checkpoint_{0}, resize_{0};
  std::atomic<bool> preempt_{false};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Json> events_;  // guarded by mu_
  bool done_ = false;        // guarded by mu_: the job's thread has returned
  bool finishedSeen_ = false;  // the job's thread only: a "finished" event was pushed
  std::optional<Result<TrainResult>> result_;  // set before done_
  std::thread thread_;
};

// The options that resume the run in `runDir` from its latest checkpoint:
// its job.yaml, the run directory to resume. Change the spec's launcher,
// platform, cpu_limit, memory_limit or workers to resume elsewhere.
Result<TrainOptions> resumeOptions(const std::string& runDir);

}  // namespace hydrozoa::cluster
