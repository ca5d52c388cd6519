#include <gtest/gtest.h>

#include "runtime/schedule/gpipe.h"

namespace hydrozoa::runtime {
namespace {

TEST(GPipeSchedule, AllForwardsThenAllBackwardsInReverse) {
  const auto a = GPipeSchedule().actions(1, 3, 3);
  const std::vector<Action> want = {{ActionKind::kForward, 0},  {ActionKind::kForward, 1},  {ActionKind::kForward, 2},
                                    {ActionKind::kBackward, 2}, {ActionKind::kBackward, 1}, {ActionKind::kBackward, 0}};
  EXPECT_EQ(a, want);
  EXPECT_EQ(lastBackward(a), 5);
}

TEST(GPipeSchedule, LastStageStartsBackwardAfterAllForwards) {
  for (int M : {1, 2, 7}) {
    const auto a = GPipeSchedule().actions(2, 3, M);
    ASSERT_EQ(a.size(), 2u * M);
    for (int i = 0; i < M; ++i) EXPECT_EQ(a[i].kind, ActionKind::kForward);
    EXPECT_EQ(a[M].microbatch, M - 1);  // the freshest microbatch first
  }
}

TEST(Schedule, EveryMicrobatchOnceEachWayForwardFirst) {
  const auto a = GPipeSchedule().actions(0, 4, 5);
  for (int mb = 0; mb < 5; ++mb) {
    int forward = -1, backward = -1;
    for (size_t i = 0; i < a.size(); ++i) {
      if (a[i].microbatch != mb) continue;
      (a[i].kind == ActionKind::kForward ? forward : backward) = static_cast<int>(i);
    }
    EXPECT_GE(forward, 0);
    EXPECT_GT(backward, forward);
  }
}

TEST(Schedule, UnknownNameIsAnError) {
  EXPECT_TRUE(makeSchedule("gpipe").ok());
  EXPECT_FALSE(makeSchedule("zero-bubble").ok());
}

}  // namespace
}  // namespace hydrozoa::runtime
