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

}  // namespace
}  // namespace hydrozoa::plan
