// The pipeline schedules as the planner models them (docs/schedules.md): the
// order of each stage's forward and backward passes in a step. The runtime's
// schedules (runtime/schedule/) run these orders as they are, so the
// pipeline the planner simulates is the one that runs.
//
// Each schedule's time and memory model is a file of its own here: gpipe in
// pipeline.h and memory.h (Hydrozoa's R and M microbatches stashed),
// one_f_one_b.h, interleaved.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace hydrozoa::plan {

enum class ScheduleKind { kGPipe, kOneFOneB, kInterleaved };

// One pass of one microbatch through one stage (of one model chunk).
struct Pass {
  bool backward = false;
  int microbatch = 0;
  int chunk = 0;
  bool operator==(const Pass& o) const {
    return backward == o.backward && microbatch == o.microbatch && chunk == o.chunk;
  }
};

const std::vector<ScheduleKind>& allSchedules();
const char* scheduleName(ScheduleKind kind);
// "gpipe", "1f1b", "interleaved"; anything else is an error naming `field`, the value and
// the schedules there are.
Result<ScheduleKind> parseSchedule(const std::string& name, const std::string& field);

// Model chunks per stage: `chunks` for the interleaved schedule, else 1.
int chunksOf(ScheduleKind kind, int chunks);

// The order of stage `stage`'s (of `stages`) passes over `microbatches`
// (and `chunks` model chunks, interleaved).
std::vector<Pass> passOrder(ScheduleKind kind, int stage, int stages, std::int64_t microbatches, int chunks = 1);

// GPipe's: all forwards in order, then all backwards in reverse.
std::vector<Pass> gpipeOrder(std::int64_t microbatches);

// Per chunk, the most microbatches whose activations an order holds at once.
std::vector<std::int64_t> stashPeaks(const std::vector<Pass>& order, int chunks);

// The most microbatches whose activations stage `stage` holds at once in
// any one chunk.
std::int64_t stashedMicrobatches(ScheduleKind kind, int stage, int stages, std::int64_t microbatches, int chunks = 1);

}  // namespace hydrozoa::plan
