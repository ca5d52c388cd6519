#include "core/cpus.h"

#include <sched.h>

#include <algorithm>
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

}  // namespace hydrozoa
