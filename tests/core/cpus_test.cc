#include "core/cpus.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <algorithm>
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

}  // namespace
}  // namespace hydrozoa
