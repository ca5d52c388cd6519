// Counts the bytes libtorch allocates on the CPU, so the profiler measures
// what a layer keeps for backward and its transient peak exactly, instead of
// estimating from shapes.
//
// install() wraps libtorch's CPU allocator once for the rest of the process
// (c10::SetAllocator); every allocation is forwarded to the original
// allocator and counted. Thread-safe (atomics).
#pragma once

#include <c10/core/Device.h>

#include <cstdint>

namespace hydrozoa::profile {

class MemoryTracker {
 public:
  // The process-wide tracker, installed on first use.
  static MemoryTracker& instance();

  std::int64_t current() const;   // bytes allocated now
  std::int64_t peak() const;      // most bytes allocated since resetPeak()
  void resetPeak();               // peak := current

  // A budget, as a device's memory is one (SHARP's workers, docs/select.md):
  // an allocation that would take current() past it throws
  // c10::OutOfMemoryError instead. 0: none (the default).
  void setLimit(std::int64_t bytes);
  std::int64_t limit() const;
};

// NOTE [Tensor memory on a GPU]
// The peak of tensor memory on `device` since resetPeakOn(device): the
// tracker's on the CPU; on a GPU, its caching allocator's peak of allocated
// bytes (what tensors hold, not what the allocator reserved from the
// driver, which its caching rounds up as glibc's does on the CPU).
std::int64_t peakOn(const c10::Device& device);
void resetPeakOn(const c10::Device& device);
std::int64_t currentOn(const c10::Device& device);  // what tensors hold there now

// While one lives, the calling thread's allocations are host memory: not
// counted (nor limited), as a worker's dataset is not in its device budget.
class HostAllocations {
 public:
  HostAllocations();
  ~HostAllocations();
  HostAllocations(const HostAllocations&) = delete;
  HostAllocations& operator=(const HostAllocations&) = delete;

 private:
  bool was_;
};

}  // namespace hydrozoa::profile
