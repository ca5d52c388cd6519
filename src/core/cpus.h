// The cores this process may run on: its CPU affinity, which taskset, a
// cgroup cpuset, Slurm's task binding or a container runtime may have narrowed
// to fewer than the machine has (and not necessarily 0..n-1).
#pragma once

#include <chrono>
#include <vector>

#include "core/status.h"

namespace hydrozoa {

// Ascending CPU ids from sched_getaffinity of the calling thread; when that
// fails, 0..hardware_concurrency-1 (at least one).
std::vector<int> usableCpus();

// Lets the calling thread run on `cpus` (sched_setaffinity); false if the
// kernel refuses (errno says why) or `cpus` is empty. A thread starts with its creator's affinity, so a helper
// thread started by a pinned thread calls this to run elsewhere
// (NOTE [Cores for compute threads], runtime/worker.cc).
bool runThreadOn(const std::vector<int>& cpus);

// Asks the kernel to give the calling thread `slice` of CPU at a time
// (sched_setattr's sched_runtime for a SCHED_OTHER thread, Linux ≥ 6.12; the
// kernel clamps it to 0.1–100 ms), so that when it wakes on a core another
// thread keeps busy it runs at once instead of after that thread's slice
// (NOTE [Helper threads wake at once], cpus.cc). Zero
// gives the kernel's default back. Threads started afterwards inherit it.
// False if the kernel refuses (errno says why); older kernels ignore it.
bool setThreadSlice(std::chrono::microseconds slice);

// The slice a worker's helper threads ask for (NOTE [Helper threads wake at
// once], cpus.cc): 100 us, or $HYDROZOA_HELPER_SLICE_US (0–100000; 0: the
// kernel's) for comparisons; an error names a value that is not such a number.
Result<std::chrono::microseconds> helperThreadSlice();

// The calling thread's slice as the kernel reports it (sched_getattr's
// sched_runtime): what setThreadSlice asked for, clamped; the kernel's
// default when none was asked for; zero where the kernel does not say.
std::chrono::microseconds threadSlice();

}  // namespace hydrozoa
