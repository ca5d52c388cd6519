// Predicted against measured time per pipeline stage: the plan's per-stage
// compute and allreduce per step, and what the workers' spans in trace.json
// (docs/train.md "The run directory") took.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "core/files.h"
#include "core/status.h"
#include "plan/plan.h"
#include "report/run_report.h"

namespace hydrozoa::report {

// One StageTiming per stage of `plan` (null: none) or of the trace, whichever
// has more. `trace` is a parsed trace.json ({"traceEvents": [...]}); a
// worker's stage comes from its process name "worker N (replica R, stage S)",
// a span's step from its args.step ("forward mb0", "backward mb0"), and the
// allreduce a step waited for is from the end of its last backward to the end
// of its last "allreduce" bucket (the part the compute did not hide, as the
// plan predicts it), and the optimizer's update from its "optimizer step"
// spans. Events it does not recognise are ignored.
std::vector<StageTiming> stageTimingsFromTrace(const Json& trace, const plan::Plan* plan);

// Reads `path` and calls stageTimingsFromTrace. Errors: unreadable or not
// JSON (the message names the file).
Result<std::vector<StageTiming>> loadStageTimings(const std::string& path, const plan::Plan* plan);

}  // namespace hydrozoa::report
