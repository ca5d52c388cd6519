#include "profile/memory_tracker.h"

#include <ATen/DeviceAccelerator.h>
#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <unordered_map>

#include <fmt/format.h>

#include "core/status.h"

namespace hydrozoa::profile {
namespace {

std::atomic<std::int64_t> gCurrent{0};
std::atomic<std::int64_t> gPeak{0};
std::atomic<std::int64_t> gLimit{0};
thread_local bool tHost = false;

// Sizes of live allocations by address. libtorch's raw_allocate() requires a
// DataPtr whose context is its data pointer, so the size cannot ride in the
// context: it is looked up here when the memory is freed.
std::mutex gMutex;
std::unordered_map<void*, std::int64_t>* gSizes = new std::unordered_map<void*, std::int64_t>();  // never destroyed
c10::DeleterFnPtr gBaseDeleter = nullptr;

void release(void* ptr) {
  std::int64_t bytes = 0;
  {
    std::lock_guard<std::mutex> lock(gMutex);
    auto it = gSizes->find(ptr);
    if (it != gSizes->end()) {
      bytes = it->second;
      gSizes->erase(it);
    }
  }
  gCurrent.fetch_sub(bytes, std::memory_order_relaxed);
  gBaseDeleter(ptr);
}

class CountingAllocator final : public c10::Allocator {
 public:
  explicit CountingAllocator(c10::Allocator* base) : base_(base) {}

  c10::DataPtr allocate(size_t n) override {
    const auto bytes = tHost ? 0 : static_cast<std::int64_t>(n);
    const std::int64_t now = gCurrent.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    const std::int64_t limit = gLimit.load(std::memory_order_relaxed);
    if (limit > 0 && bytes > 0 && now > limit) {
      gCurrent.fetch_sub(bytes, std::memory_order_relaxed);
      C10_THROW_ERROR(OutOfMemoryError, fmt::format("out of the worker's memory budget: {} bytes asked for, {} of {} "
                                                    "in use",
                                                    bytes, now - bytes, limit));
    }
    void* data = base_->raw_allocate(n);
    if (data) {
      std::lock_guard<std::mutex> lock(gMutex);
      (*gSizes)[data] = bytes;
    }
    std::int64_t peak = gPeak.load(std::memory_order_relaxed);
    while (now > peak && !gPeak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
    }
    return {data, data, &release, c10::Device(c10::DeviceType::CPU)};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &release; }
  void copy_data(void* dest, const void* src, std::size_t count) const override { base_->copy_data(dest, src, count); }

 private:
  c10::Allocator* base_;
};

}  // namespace

MemoryTracker& MemoryTracker::instance() {
  static MemoryTracker tracker;
  static const bool installed = [] {
    c10::Allocator* base = c10::GetAllocator(c10::DeviceType::CPU);
    gBaseDeleter = base->raw_deleter();
    HZ_CHECK_MSG(gBaseDeleter != nullptr, "libtorch's CPU allocator has no raw deleter");
    static CountingAllocator counting(base);
    // Priority above the default registration so ours is the one used.
    c10::SetAllocator(c10::DeviceType::CPU, &counting, /*priority=*/100);
    return true;
  }();
  (void)installed;
  return tracker;
}

std::int64_t MemoryTracker::current() const { return gCurrent.load(std::memory_order_relaxed); }
std::int64_t MemoryTracker::peak() const { return gPeak.load(std::memory_order_relaxed); }
void MemoryTracker::resetPeak() { gPeak.store(gCurrent.load(std::memory_order_relaxed), std::memory_order_relaxed); }
void MemoryTracker::setLimit(std::int64_t bytes) { gLimit.store(std::max<std::int64_t>(0, bytes)); }
std::int64_t MemoryTracker::limit() const { return gLimit.load(); }

namespace {
c10::CachingAllocator::Stat allocatedOn(const c10::Device& device) {
  const auto stats = at::accelerator::getDeviceStats(device.index());
  return stats.allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)];
}
}  // namespace

std::int64_t peakOn(const c10::Device& device) {
  return device.is_cuda() ? allocatedOn(device).peak : MemoryTracker::instance().peak();
}

std::int64_t currentOn(const c10::Device& device) {
  return device.is_cuda() ? allocatedOn(device).current : MemoryTracker::instance().current();
}

void resetPeakOn(const c10::Device& device) {
  if (!device.is_cuda()) return MemoryTracker::instance().resetPeak();
  at::accelerator::resetPeakStats(device.index());
}

HostAllocations::HostAllocations() : was_(tHost) { tHost = true; }
HostAllocations::~HostAllocations() { tHost = was_; }

}  // namespace hydrozoa::profile
