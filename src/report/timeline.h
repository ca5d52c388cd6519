// A pipeline's timeline: what each worker computed during one training step,
// from a run's trace.json, drawn as an SVG (one row per worker, forward
// passes in blue, backward passes in green, chunks of an interleaved stage
// in alternating shades, the optimizer step in grey, each pass labelled with
// its microbatch). docs/schedules.md's pictures are these.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/files.h"
#include "core/status.h"

namespace hydrozoa::report {

struct TimelineSpan {
  int lane = 0;
  double start_ms = 0, end_ms = 0;  // from the step's first span
  enum class Kind { kForward, kBackward, kUpdate } kind = Kind::kForward;
  int microbatch = -1;
  int chunk = 0;
  std::int64_t step = 0;  // global
};

struct Timeline {
  std::int64_t step = 0, last_step = 0;  // the steps drawn: step..last_step
  std::vector<std::string> lanes;  // "worker 0 (replica 0, stage 0)"
  std::vector<TimelineSpan> spans;
  double end_ms = 0;
};

// The compute spans of global steps `step`..`lastStep` in `trace`
// ({"traceEvents": [...]}), one lane per worker (an asynchronous schedule's
// steps overlap: a pass belongs to the step of its microbatch); an error when
// the trace has none of them. Steps after the first are drawn paler in turn.
Result<Timeline> timelineFromTrace(const Json& trace, std::int64_t step, std::int64_t lastStep = -1);

// The timeline as a standalone SVG document.
std::string renderTimeline(const Timeline& timeline, const std::string& title);

}  // namespace hydrozoa::report
