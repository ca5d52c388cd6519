#include "core/cpus.h"

#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <thread>

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

}  // namespace hydrozoa
