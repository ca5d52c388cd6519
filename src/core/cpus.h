// The cores this process may run on: its CPU affinity, which taskset, a
// cgroup cpuset, Slurm's task binding or a container runtime may have narrowed
// to fewer than the machine has (and not necessarily 0..n-1).
#pragma once

#include <vector>

namespace hydrozoa {

// Ascending CPU ids from sched_getaffinity of the calling thread; when that
// fails, 0..hardware_concurrency-1 (at least one).
std::vector<int> usableCpus();

// Lets the calling thread run on `cpus` (sched_setaffinity); false if the
// kernel refuses (errno says why) or `cpus` is empty. A thread starts with its creator's affinity, so a helper
// thread started by a pinned thread calls this to run elsewhere
// (NOTE [Cores for compute threads], runtime/worker.cc).
bool runThreadOn(const std::vector<int>& cpus);

}  // namespace hydrozoa
