#include "core/cpus.h"

#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstdint>
#include <thread>

#include "core/units.h"

namespace hydrozoa {

std::vector<int> usableCpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
    }
  }
  if (cpus.empty()) {
    const int n = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
    for (int c = 0; c < n; ++c) cpus.push_back(c);
  }
  return cpus;
}

bool runThreadOn(const std::vector<int>& cpus) {
  if (cpus.empty()) return false;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) {
    if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &set);
  }
  return ::sched_setaffinity(0, sizeof(set), &set) == 0;
}

namespace {

// The kernel's struct sched_attr (include/uapi/linux/sched/types.h, whose
// header clashes with glibc's <sched.h>); glibc 2.36 wraps neither call.
struct SchedAttr {
  std::uint32_t size;
  std::uint32_t sched_policy;
  std::uint64_t sched_flags;
  std::int32_t sched_nice;
  std::uint32_t sched_priority;
  std::uint64_t sched_runtime;
  std::uint64_t sched_deadline;
  std::uint64_t sched_period;
  std::uint32_t sched_util_min;
  std::uint32_t sched_util_max;
};

bool getAttr(SchedAttr* attr) { return ::syscall(SYS_sched_getattr, 0, attr, sizeof(*attr), 0) == 0; }

}  // namespace

bool setThreadSlice(std::chrono::microseconds slice) {
  // The policy and nice value stay as they are: only a SCHED_OTHER or
  // SCHED_BATCH thread's slice is asked for.
  SchedAttr attr{};
  if (!getAttr(&attr)) return false;
  if (attr.sched_policy != SCHED_OTHER && attr.sched_policy != SCHED_BATCH) return true;
  attr.size = sizeof(attr);
  attr.sched_flags = 0;
  attr.sched_runtime = static_cast<std::uint64_t>(std::clamp<std::int64_t>(slice.count(), 0, 100000)) * 1000;
  return ::syscall(SYS_sched_setattr, 0, &attr, 0) == 0;
}

std::chrono::microseconds threadSlice() {
  SchedAttr attr{};
  if (!getAttr(&attr)) return std::chrono::microseconds(0);
  return std::chrono::microseconds(attr.sched_runtime / 1000);
}

// NOTE [Helper threads wake at once]: a worker's helper threads (Gloo's
// transport loop and its collective threads, the channels' threads) wake
// for a message while the compute threads keep every core busy. Linux's
// EEVDF scheduler (6.6 and after) lets the running thread finish its slice
// (1.4 ms here) before a woken thread of equal weight runs, unless the woken
// one asked for a shorter slice (6.12 and after). Measured here with a
// thread spinning on a core and another woken on it every ~4 ms: 99th
// percentile wake-up 2.7 ms with the default slice, 0.2 ms with a 100 us
// one. A pipeline step waits on such wake-ups hundreds of times (interleaved
// 1F1B's CNN at 16 microbatches: 96 messages, each woken on both sides).
// So a worker asks for a short slice before it starts any thread and gives
// the compute thread the default back once the helpers are running
// (Worker::run, the end of Worker::build; the network probe's workers do the
// same): helpers run at once and briefly, the compute thread
// keeps long slices. The CPU each thread gets is unchanged (same weights).
// bench/README.md (schedule_bench, session 6) has the A/B;
// $HYDROZOA_HELPER_SLICE_US sets it for such comparisons (0: the kernel's).
Result<std::chrono::microseconds> helperThreadSlice() {
  const char* env = std::getenv("HYDROZOA_HELPER_SLICE_US");
  if (env == nullptr || *env == '\0') return std::chrono::microseconds(100);
  HZ_ASSIGN_OR_RETURN(const std::int64_t us, parseCount(env, "HYDROZOA_HELPER_SLICE_US", Range{0, 100000}));
  return std::chrono::microseconds(us);
}

}  // namespace hydrozoa
