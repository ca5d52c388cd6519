// Counts the bytes libtorch allocates on the CPU, so the profiler measures
// what a layer keeps for backward and its transient peak exactly, instead of
// estimating from shapes.
//
// install() wraps libtorch's CPU allocator once for the rest of the process
// (c10::SetAllocator); every allocation is forwarded to the original
// allocator and counted. Thread-safe (atomics).
#pragma once

#include <cstdint>

namespace hydrozoa::profile {

class MemoryTracker {
 public:
  // The process-wide tracker, installed on first use.
  static MemoryTracker& instance();

  std::int64_t current() const;   // bytes allocated now
  std::int64_t peak() const;      // most bytes allocated since resetPeak()
  void resetPeak();               // peak := current
};

}  // namespace hydrozoa::profile
