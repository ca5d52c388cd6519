// Continuous job traces as Gavel's simulated experiments make them (seed 003
// §5.7): Poisson arrivals at `rate` jobs per hour; job types drawn uniformly
// from those the throughputs file measures on the reference type;
// durations on it of 10^x minutes, x uniform in [1.5, 3] with probability
// 0.8 and in [3, 4] otherwise, and steps = that duration × the job's
// throughput there; one worker each ("continuous-single"), or 70% one,
// 25% two or four, 5% eight ("continuous-multiple").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "sched/gavel_formats.h"

namespace hydrozoa::sim {

struct TraceOptions {
  int jobs = 1000;
  double rate = 4;                    // jobs per hour
  bool multiple = false;              // continuous-multiple's scale factors
  std::uint64_t seed = 0;
  std::string reference = "v100";     // the type durations are drawn on
};

Result<std::vector<sched::TraceJob>> generateTrace(const sched::Throughputs& throughputs, const TraceOptions& options);

// The trace as Gavel's 10 tab-separated fields a line (command and the
// like as "-").
std::string formatTrace(const std::vector<sched::TraceJob>& jobs);

}  // namespace hydrozoa::sim
