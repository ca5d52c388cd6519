#include "plan/cost/round_robin.h"

#include <gtest/gtest.h>

namespace hydrozoa::plan {
namespace {

// A heavy first stage on 3 copies, a light one on 1: each copy of stage 0
// takes one microbatch in three (3 s each), stage 1 every one (1 s).
TEST(RoundRobin, TheSlowestCopiesLinkOrHostSetThePace) {
  std::vector<RoundRobinStage> stages = {{3, 0, 0, 3}, {1, 0, 0, 1}};
  EXPECT_DOUBLE_EQ(roundRobinSecondsPerMicrobatch(stages, {}), 1);
  stages[1].update = 0.5;  // stage 1's update per microbatch now dominates
  EXPECT_DOUBLE_EQ(roundRobinSecondsPerMicrobatch(stages, {}), 1.5);
  stages[1].update = 0;
  stages[1].cut_in = 0.6;  // activation and gradient over one link: 1.2 s per microbatch
  EXPECT_DOUBLE_EQ(roundRobinSecondsPerMicrobatch(stages, {}), 1.2);
  stages[1].cut_in = 0;
  // 4 workers on 2 cores: 4 s of work per microbatch over 2 cores.
  EXPECT_DOUBLE_EQ(roundRobinSecondsPerMicrobatch(stages, HostShare{2, 1, 1}), 2);
  // On 4 cores that slow each other 1.5× when all busy.
  EXPECT_DOUBLE_EQ(roundRobinSecondsPerMicrobatch(stages, HostShare{4, 1, 1, 1.5}), 1.5);
  // Replicated alike it is the bottleneck stage's time over its copies.
  EXPECT_DOUBLE_EQ(roundRobinSecondsPerMicrobatch({{4, 0, 0, 2}, {2, 0, 0, 2}}, {}), 2);
}

// PipeDream's NOAM over a stage's copies: the workers of it and after it.
TEST(RoundRobin, InFlightIsTheWorkersFromTheStageOnOverItsCopies) {
  EXPECT_EQ(roundRobinInFlight({3, 1}), (std::vector<std::int64_t>{2, 1}));
  EXPECT_EQ(roundRobinInFlight({1, 1, 1}), (std::vector<std::int64_t>{3, 2, 1}));
  EXPECT_EQ(roundRobinInFlight({2, 1, 1}), (std::vector<std::int64_t>{2, 2, 1}));
}

// The window of a stage's order over the step's microbatches that leaves
// each copy that many of its own: r_s·(h_s − 1) + 1, the unreplicated
// 1F1B's p − s and, every stage replicated alike, Σ_{t>s} r_t + 1.
TEST(RoundRobin, TheOrdersWindowLeavesEachCopyItsShare) {
  EXPECT_EQ(roundRobinWindow({4, 1}, 0), 5);  // 2 of its own each: 0 and 4 before 0's gradient
  EXPECT_EQ(roundRobinWindow({4, 1}, 1), 1);
  EXPECT_EQ(roundRobinWindow({1, 1, 1}, 0), 3);
  EXPECT_EQ(roundRobinWindow({2, 2, 2}, 0), 5);
  EXPECT_EQ(roundRobinWindow({2, 2, 2}, 1), 3);
  EXPECT_EQ(roundRobinStepInFlight({1, 4, 1}), 6);
  EXPECT_EQ(roundRobinStepInFlight({4, 1}), 5);
}

// A step deals its microbatches evenly over every stage's copies: the lcm,
// which stops once past the bound rather than overflowing; NOAM raised to it.
TEST(RoundRobin, AStepIsAMultipleOfEveryStagesCopies) {
  EXPECT_EQ(roundRobinUnit({3, 1}, 1 << 20), 3);
  EXPECT_EQ(roundRobinUnit({2, 3, 4}, 1 << 20), 12);
  EXPECT_GT(roundRobinUnit({1009, 1013, 1019, 1021, 1031}, 1 << 20), 1 << 20);
  EXPECT_EQ(roundRobinNoam({3, 1}, 3), 2);        // ⌈4 / 3⌉, and 3·2 is a multiple of 3
  EXPECT_EQ(roundRobinNoam({2, 3}, 6), 3);        // ⌈5 / 2⌉ = 3: 2·3 = 6
  EXPECT_EQ(roundRobinNoam({4, 3, 1}, 12), 3);    // ⌈8 / 4⌉ = 2, raised: 4·3 = 12
  EXPECT_EQ(roundRobinNoam({1, 1, 1}, 1), 3);     // 1F1B's p in flight
}

}  // namespace
}  // namespace hydrozoa::plan
