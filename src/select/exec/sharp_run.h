// SHARP's executor (Hydra, seed 004; docs/select.md): the tasks of a
// selection, each partitioned into shards by the Pilot, trained at once on
// K worker processes whose memory budget is smaller than any one model.
// Every model's state is spilled to host memory (/dev/shm, or --spill DIR)
// between units; a
// ShardScheduler (select/sharp.h) hands each worker the next unit of the
// model it picks, two at a time with double buffering (one computing, one
// loading). <run>/sharp.json (written after every unit) holds each model's
// shards, its next unit and the directory of each shard's state, so a stop
// (Ctrl-C: the units running end first) or a coordinator killed outright
// goes on with --resume; a worker lost mid-unit is replaced and its units
// run again from their spilled inputs, nothing else redone.
//
// Each task ends with <task dir>/summary.json (losses of every step, test
// loss and accuracy), <task dir>/model/ (the final weights and optimizer
// state, one file per layer as checkpoints hold them: runtime/checkpoint.h)
// and its units in <run>/timeline.csv (and timeline.svg).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "cluster/job_spec.h"
#include "core/status.h"
#include "core/units.h"
#include "select/sharp.h"

namespace hydrozoa::select {

struct SharpTask {
  int index = 0;
  std::string label;
  cluster::JobSpec spec;
  std::string dir;  // its run directory (absolute)
};

struct SharpRunOptions {
  std::string run;          // the selection's run directory (absolute)
  std::string self;         // the hydrozoa binary the workers run
  std::string spill;        // where models' state lives between units ("": /dev/shm/hydrozoa-<run>-<hash>)
  int workers = 1;
  Bytes budget = 0;         // each worker's memory
  Order order = Order::kLrtf;
  bool double_buffer = true;
  std::uint64_t seed = 0;   // the random order's
  bool progress = true;
  bool resume = false;      // go on from <run>/sharp.json
  std::function<int()> stops;  // stop requests so far (Ctrl-C)
  // A task's status changed: "running", "completed", "failed" (reason).
  std::function<void(int task, const std::string& status, const std::string& reason)> on_task;
};

struct SharpRunResult {
  bool interrupted = false;
  Seconds seconds = 0;         // this invocation's wall time
  double utilisation = 0;      // compute-busy worker-seconds / (workers · seconds)
  std::int64_t units = 0;      // run by this invocation
  int lost_workers = 0;
};

Result<SharpRunResult> runSharp(const std::vector<SharpTask>& tasks, const SharpRunOptions& options);

}  // namespace hydrozoa::select
