// The profiler's clock and its median of repeated timings (measure.cc,
// corun.cc).
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

namespace hydrozoa::profile {

using Clock = std::chrono::steady_clock;

inline double msSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// The middle of `v`; the mean of the two middle ones for an even count.
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace hydrozoa::profile
