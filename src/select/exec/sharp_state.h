// A SHARP selection's state as <run>/sharp.json keeps it (docs/select.md):
// each task's shards, its next unit, each shard's spilled state, its losses
// so far; and what the scheduler knows of a task from it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/files.h"
#include "core/status.h"
#include "select/exec/pilot.h"
#include "select/sharp.h"

namespace hydrozoa::select {

// One task's progress, as sharp.json keeps it.
struct TaskState {
  int index = 0;
  std::string label;
  std::string job;                  // relative to the run
  std::string dir;                  // its run directory, relative
  std::vector<Shard> shards;
  std::int64_t steps = 0, test_batches = 0;  // test_batches 0: no evaluation
  Bytes batch_bytes = 0;
  std::int64_t next = 0;            // its first unit not done
  std::vector<std::string> states;  // each shard's state, relative
  std::vector<double> losses;
  double eval_loss = -1, eval_accuracy = -1;
  std::string status = "running";   // running | completed | failed
  std::string reason;
  double seconds = 0;               // from its first unit's start to its last's end (this run)

  int n() const { return static_cast<int>(shards.size()); }
  std::int64_t perStep() const { return 2 * n() - 1; }
  std::int64_t units() const { return steps * perStep() + (test_batches > 0 ? n() : 0); }
};

Json shardToJson(const Shard& s);
Json taskToJson(const TaskState& t);
Result<TaskState> taskFromJson(const Json& j, const std::string& origin);

// What the scheduler knows of a task: its units' load and compute times.
ModelWork workOf(const TaskState& t);

}  // namespace hydrozoa::select
