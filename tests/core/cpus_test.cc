#include "core/cpus.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

namespace hydrozoa {
namespace {

TEST(UsableCpus, AllOfTheMachineWhenNothingNarrowsIt) {
  const std::vector<int> cpus = usableCpus();
  ASSERT_FALSE(cpus.empty());
  EXPECT_TRUE(std::is_sorted(cpus.begin(), cpus.end()));
  EXPECT_LE(cpus.size(), std::max(1u, std::thread::hardware_concurrency()));
}

TEST(UsableCpus, FollowsTheAffinityTasksetWouldSet) {
  const std::vector<int> all = usableCpus();
  cpu_set_t saved;
  ASSERT_EQ(::sched_getaffinity(0, sizeof(saved), &saved), 0);
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(all.back(), &one);
  ASSERT_EQ(::sched_setaffinity(0, sizeof(one), &one), 0);
  const std::vector<int> narrowed = usableCpus();
  ::sched_setaffinity(0, sizeof(saved), &saved);
  EXPECT_EQ(narrowed, std::vector<int>{all.back()});
}

TEST(ThreadSlice, AskedForByAThreadAndInheritedByTheThreadsItStarts) {
  using std::chrono::microseconds;
  const microseconds kernels = threadSlice();
  ASSERT_TRUE(setThreadSlice(microseconds(100))) << std::strerror(errno);
  const microseconds asked = threadSlice();
  microseconds inherited{-1};
  std::thread([&] { inherited = threadSlice(); }).join();
  // Outside the kernel's range: clamped to 0.1–100 ms, never refused.
  ASSERT_TRUE(setThreadSlice(microseconds(1)));
  const microseconds shortest = threadSlice();
  ASSERT_TRUE(setThreadSlice(microseconds(0)));
  const microseconds restored = threadSlice();
  if (asked != microseconds(100)) GTEST_SKIP() << "this kernel keeps no slice per thread (Linux < 6.12)";
  EXPECT_EQ(inherited, microseconds(100));
  EXPECT_EQ(shortest, microseconds(100));
  EXPECT_EQ(restored, kernels);
}

}  // namespace
}  // namespace hydrozoa
