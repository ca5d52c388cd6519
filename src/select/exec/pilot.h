// The Pilot partitioner (Hydra, seed 004 §4.1; docs/select.md): a model
// becomes a sequence of shards, each grown layer by layer until a trial of
// its heaviest unit at the task's batch size — the very unit a worker runs:
// its state loaded from files, forward again, backward, optimizer step,
// spilled back — would take more of the budget than is left after the
// reserve (15%: what double buffering prefetches into). Memory is what the
// counting allocator (profile/memory_tracker.h) sees; each trial runs twice
// so the optimizer's state exists in the second.
//
// Runs in the calling process, one trial at a time (nothing else may
// allocate tensors meanwhile).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/units.h"
#include "select/exec/unit.h"

namespace hydrozoa::select {

constexpr double kPrefetchReserve = 0.15;

struct Shard {
  int first = 0, last = 0;  // layers
  Bytes need = 0;           // its heaviest unit's peak
  Seconds load = 0;         // loading it (state and inputs) for one unit
  Seconds forward = 0;      // its forward unit's compute (the last shard: forward, loss and backward)
  Seconds backward = 0;     // its backward unit's (0 for the last shard)
};

struct Partition {
  std::vector<Shard> shards;
  Bytes batch_bytes = 0;  // a minibatch's inputs and labels
  std::vector<std::string> layer_names;
};

// `jobPath` is the task's job spec (JSON, as workers read it); `scratch` a
// directory the trials may fill and empty. Errors: a layer that does not
// fit by itself (one line: the layer, what it needs, the budget that fits).
Result<Partition> partitionModel(const std::string& jobPath, Bytes budget, const std::string& scratch,
                                 DataCache& cache);

}  // namespace hydrozoa::select
