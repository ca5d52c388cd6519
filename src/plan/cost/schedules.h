// The pipeline schedules as the planner models them (docs/schedules.md): the
// order of each stage's forward and backward passes in a step. The runtime's
// schedules (runtime/schedule/) run these orders as they are, so the
// pipeline the planner simulates is the one that runs.
//
// Each schedule's time and memory model is a file of its own here: gpipe in
// pipeline.h and memory.h (Hydrozoa's R and M microbatches stashed),
// one_f_one_b.h, interleaved.h, two_bw.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace hydrozoa::plan {

// kPipeDreamVerticalSync: PipeDream with vertical sync ("pipedream-vs").
enum class ScheduleKind { kGPipe, kOneFOneB, kInterleaved, kTwoBW, kPipeDream, kPipeDreamVerticalSync };

// One pass of one microbatch through one stage (of one model chunk).
struct Pass {
  bool backward = false;
  int microbatch = 0;
  int chunk = 0;
  // The step it belongs to, relative to the one its order is of (1: an
  // asynchronous schedule begins the next step's microbatches early).
  int step = 0;
  bool operator==(const Pass& o) const {
    return backward == o.backward && microbatch == o.microbatch && chunk == o.chunk && step == o.step;
  }
};

const std::vector<ScheduleKind>& allSchedules();
const char* scheduleName(ScheduleKind kind);
// "gpipe", "1f1b", "interleaved", "2bw", "pipedream", "pipedream-vs"; anything else is an error naming
// `field`, the value and the schedules there are.
Result<ScheduleKind> parseSchedule(const std::string& name, const std::string& field);

// Whether consecutive steps overlap (no flush between them): 2bw, pipedream(-vs).
bool asynchronous(ScheduleKind kind);

// Whether every microbatch's gradient is an update of its own (pipedream(-vs)).
bool updatePerMicrobatch(ScheduleKind kind);

// Weight versions stage `stage` of `stages` keeps live (1; 2bw: 2;
// pipedream: stages − stage; with vertical sync: stages), and how many
// updates stale the weights a microbatch's gradient is computed on are (0;
// 2bw: 1; pipedream: stages − stage − 1, kPerStage; with vertical sync:
// stages − 1 on every stage, kStagesLess1).
int weightVersions(ScheduleKind kind, int stage = 0, int stages = 1);
inline constexpr int kPerStage = -1;
inline constexpr int kStagesLess1 = -2;
int staleness(ScheduleKind kind);

// Model chunks per stage: `chunks` for the interleaved schedule, else 1.
int chunksOf(ScheduleKind kind, int chunks);

// The order of stage `stage`'s (of `stages`) passes over `microbatches`
// (and `chunks` model chunks, interleaved). An asynchronous schedule's is a
// step in its steady state (two_bw.h).
std::vector<Pass> passOrder(ScheduleKind kind, int stage, int stages, std::int64_t microbatches, int chunks = 1);

// GPipe's: all forwards in order, then all backwards in reverse.
std::vector<Pass> gpipeOrder(std::int64_t microbatches);

// Per chunk, the most microbatches whose activations an order holds at once
// (from an empty stash).
std::vector<std::int64_t> stashPeaks(const std::vector<Pass>& order, int chunks);

// The most microbatches whose activations stage `stage` holds at once in
// any one chunk.
std::int64_t stashedMicrobatches(ScheduleKind kind, int stage, int stages, std::int64_t microbatches, int chunks = 1);

// Per chunk, the most microbatches whose activations stage `stage` holds at
// once (an asynchronous schedule's counting those carried between steps).
std::vector<std::int64_t> chunkStashPeaks(ScheduleKind kind, int stage, int stages, std::int64_t microbatches,
                                          int chunks = 1);

}  // namespace hydrozoa::plan
