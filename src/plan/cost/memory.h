// Memory a pipeline stage needs (docs/plan.md, "Memory (what a worker must hold)"; GPipe keeps the
// activations of all M microbatches until their backward pass):
//
//   memory(x..y) = runtime + Σ_{i=x..y} fixed_i
//                + M · (input_x + Σ_{i=x..y} stashed_i)
//                + max_{i=x..y} workspace_i
//                + data   (when x is the first layer or y the last)
//
// With recomputation (NOTE [Recomputation], runtime/stage.h) a stage keeps
// only each microbatch's input and rebuilds one microbatch's activations at
// a time in its backward pass: M · input_x + (input_x + Σ stashed_i) instead
// of the microbatch term (PipeDream-2BW's |A_input(b)| per microbatch plus
// one |A_total(b)|, seed 003 §3.3).
//
// fixed_i = parameters + gradients + optimizer state of layer i (plus, in
// replicated pipelines, recovery's copy of the parameters and state); input_x =
// one microbatch entering layer x (received activations, or the data batch
// for stage 0); stashed_i = what layer i keeps for backward per microbatch,
// its output included; data = the dataset a worker that reads inputs (the
// first stage) or labels (the last) holds in memory. Because stashed_{x−1} >=
// input_x, memory grows when a stage grows in either direction, which the
// partitioners rely on.
#pragma once

#include <cstdint>
#include <vector>

#include "core/units.h"

namespace hydrozoa::plan {

struct MemoryCosts {
  Bytes runtime = 0;              // per worker process
  std::vector<Bytes> fixed;       // per layer
  std::vector<Bytes> stashed;     // per layer, per microbatch
  std::vector<Bytes> workspace;   // per layer
  std::vector<Bytes> input;       // input[x]: one microbatch entering layer x
  Bytes data = 0;                 // per worker of the first or last stage
  bool recompute = false;         // activations recomputed in the backward pass (above)

  int numLayers() const { return static_cast<int>(fixed.size()); }
};

// memory(first..last) for `microbatches` microbatches (formula above).
// The microbatch term saturates: a stage too large for 64 bits is reported as
// INT64_MAX bytes, more than any limit. REQUIRES: memoryCostsFit(memory).
Bytes stageMemory(const MemoryCosts& memory, int first, int last, std::int64_t microbatches);

// The formula above from its parts (sums over the stage's layers), shared by
// stageMemory and the partitioners' memory window so that they agree.
Bytes stageMemoryFromSums(const MemoryCosts& memory, Bytes fixedSum, Bytes stashedSum, Bytes workspaceMax,
                          int first, int last, std::int64_t microbatches);

// True when every sum over layers of `memory` (one microbatch) fits in 64
// bits, which stageMemory needs; profiles from files are checked with it.
bool memoryCostsFit(const MemoryCosts& memory);

}  // namespace hydrozoa::plan
