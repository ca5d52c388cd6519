// A model-selection run's state (docs/select.md): the grid it expands, each
// task's status, run directory and results, kept in <run>/select.json
// (written atomically after every change) so that `hydrozoa select
// --resume` goes on where it stopped; and the table that ranks the tasks.
#pragma once

#include <string>
#include <vector>

#include "core/files.h"
#include "core/status.h"
#include "select/grid.h"

namespace hydrozoa::select {

struct TaskRecord {
  int index = 0;
  std::string label;
  Json point;
  std::string status = "pending";  // pending | running | completed | interrupted | failed
  std::string reason;              // failed: why
  double test_accuracy = -1;       // its last evaluation's; < 0: none
  double loss = -1;                // its last step's; < 0: none
  double seconds = 0, cost = 0;    // wall time and USD, over its runs
  std::string dir() const { return "tasks/" + std::to_string(index); }
};

struct Selection {
  Json grid;  // {"job": base, "grid": {path: values}, "metric": ..., "name": ...}: parseGrid reads it again
  std::string metric = "test_accuracy";
  std::vector<TaskRecord> tasks;
  // Trained by SHARP (docs/select.md): {"worker_memory": bytes, "scheduler":
  // name, "double_buffer": bool}; null: one task after another.
  Json sharp;
};

// A new selection of the grid's tasks, every one pending.
Selection newSelection(const Grid& grid, const std::vector<GridTask>& tasks);
Status saveSelection(const std::string& runDir, const Selection& s);
Result<Selection> loadSelection(const std::string& runDir);

// The results of a task's run from its summary.json.
void readTaskSummary(TaskRecord* task, const Json& summary);

// The tasks best first by the metric (higher accuracy, or lower loss; tasks
// without it last), as a table.
std::string rankedTable(const Selection& s);

}  // namespace hydrozoa::select
