// A SHARP worker process (`hydrozoa sharp-worker`, started by `hydrozoa
// select`; docs/select.md): reads units as JSON lines on standard input,
// runs each within its memory budget (the counting allocator refuses what
// would exceed it, as a GPU would), and writes each result as a JSON line
// on standard output. With double buffering a loader thread loads the next
// unit (its shard's state and inputs) while the current one computes, when
// the current unit's peak (the Pilot's measure) and the load fit in the
// budget together; otherwise after.
// Ends at end of input.
#pragma once

#include <string>

#include "core/units.h"

namespace hydrozoa::select {

struct WorkerOptions {
  std::string run;  // the selection's run directory: names the process only
  Bytes budget = 0;
  bool double_buffer = true;
};

// The process's exit status.
int runSharpWorker(const WorkerOptions& options);

}  // namespace hydrozoa::select
