// Process-wide malloc settings for training workloads.
#pragma once

#include "core/units.h"

namespace hydrozoa {

// Allocations above this come from fresh mmap()s (configureAllocatorForTraining).
constexpr Bytes kMmapThreshold = 32 * kMiB;

// NOTE [glibc malloc and tensor-sized allocations]
// glibc serves allocations above a *dynamic* threshold (128 KB, raised each
// time such a block is freed) with fresh mmap()s, which page-fault on first
// touch and are unmapped again on free. Training allocates and frees the
// same few-MB activation tensors every microbatch, so whether a layer pays
// those faults depends on allocation history: measured here, a conv layer's
// backward took 0.8 ms or 3.6 ms from one run to the next. Pinning the
// thresholds (mmap only above 32 MB, never trim the heap) makes the steady
// state the only state: faster, and profiles that agree with each other.
// Idempotent; call early.
void configureAllocatorForTraining();

}  // namespace hydrozoa
