// The coordinator (`hydrozoa train`; Hydrozoa §4.3; docs/train.md): runs one
// training job from its spec to its summary.
//
// It creates (or, resuming, reopens) the run directory, checks the model and
// the data, plans when needed, hosts the control plane (ZeroMQ, with a fresh
// job token) and the data plane's rendezvous (a c10d Store served on the
// control socket, NOTE [The rendezvous]), launches one
// worker per (replica, stage) through a Launcher, assigns roles, and watches
// the run: per-step reports become metrics.jsonl and the progress line,
// evaluations are gathered from the replicas' last stages, checkpoints are
// completed once every stage has written its part, heartbeats are checked.
//
// It stops every worker, in every case: when training completes; on Ctrl-C
// (all workers stop after the same step and checkpoint it, so the run can
// be resumed); and when a worker dies or falls silent (the message names the
// worker and why). Then it merges the timeline (trace.json) and writes
// summary.json. No worker process outlives it.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "cluster/job_spec.h"
#include "core/files.h"
#include "core/status.h"

namespace hydrozoa::cluster {

struct TrainOptions {
  JobSpec spec;             // with the command line's overrides applied
  std::string resume_dir;   // non-empty: continue this run from its latest checkpoint
  bool replan = false;      // resuming: plan again (the strategy was pinned anew; NOTE [Re-planned resume])
  std::string executable;   // the hydrozoa binary for workers; "" : this one
  // Stop this invocation after this many global steps (checkpointing there),
  // leaving the job's own length (and its LR schedule) as it is: a resumed
  // run continues to the job's end.
  std::optional<std::int64_t> stop_after;
  bool progress = true;     // the live progress line
  bool refresh_profile = false;  // profile the model again even when a cached profile matches
  // Set asynchronously (signal handlers, a job's handle: cluster/job_handle.h):
  // stop cleanly (1) or at once (2) / checkpoint now / the stop is a
  // preemption (summary status "preempted") / replicas from the next epoch
  // boundary on (taken: set back to 0).
  const std::atomic<int>* interrupt = nullptr;
  std::atomic<int>* checkpoint_request = nullptr;
  const std::atomic<bool>* preempt_request = nullptr;
  std::atomic<int>* resize_request = nullptr;
  // Each event of the job, as it happens (NOTE [A job's events], job_handle.h).
  // Called on the job's thread; must not block.
  std::function<void(const Json&)> on_event;
};

struct TrainResult {
  std::string run_dir;
  bool interrupted = false;  // stopped by Ctrl-C or preempted, resumable
  bool preempted = false;    // stopped by its handle's preempt()
};

// Runs the job. An error names what failed (a worker and how it ended, a
// bad input); the run directory still receives summary.json when it exists.
Result<TrainResult> runTraining(const TrainOptions& options);

}  // namespace hydrozoa::cluster
