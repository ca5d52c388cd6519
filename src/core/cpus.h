// The cores this process may run on: its CPU affinity, which taskset, a
// cgroup cpuset, Slurm's task binding or a container runtime may have narrowed
// to fewer than the machine has (and not necessarily 0..n-1).
#pragma once

#include <vector>

namespace hydrozoa {

// Ascending CPU ids from sched_getaffinity of the calling thread; when that
// fails, 0..hardware_concurrency-1 (at least one).
std::vector<int> usableCpus();

}  // namespace hydrozoa
