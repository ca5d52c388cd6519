#include "core/cpus.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
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

// The slice the helper threads ask for (a worker's, the network probe's):
// 100 us, or a whole number of microseconds from the environment.
TEST(ThreadSlice, HelpersAskForAHundredMicrosecondsUnlessTheEnvironmentSays) {
  using std::chrono::microseconds;
  ::unsetenv("HYDROZOA_HELPER_SLICE_US");
  ASSERT_TRUE(helperThreadSlice().ok());
  EXPECT_EQ(*helperThreadSlice(), microseconds(100));
  ::setenv("HYDROZOA_HELPER_SLICE_US", "0", 1);
  EXPECT_EQ(*helperThreadSlice(), microseconds(0));
  ::setenv("HYDROZOA_HELPER_SLICE_US", "250", 1);
  EXPECT_EQ(*helperThreadSlice(), microseconds(250));
  for (const char* bad : {"fast", "200000", "-5"}) {
    ::setenv("HYDROZOA_HELPER_SLICE_US", bad, 1);
    const Result<microseconds> r = helperThreadSlice();
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("HYDROZOA_HELPER_SLICE_US"), std::string::npos) << r.status().message();
  }
  ::unsetenv("HYDROZOA_HELPER_SLICE_US");
}

}  // namespace
}  // namespace hydrozoa
