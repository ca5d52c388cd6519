#include "plan/cost/pipeline.h"

#include <gtest/gtest.h>

#include "plan/cost/memory.h"

namespace hydrozoa::plan {
namespace {

// Three layers: f = 1,2,3; b = 2,4,6; cuts 0.5 and 1.5.
ChainCosts threeLayers() { return {{1, 2, 3}, {2, 4, 6}, {0.5, 1.5}}; }

TEST(PipelineTime, SingleStageIsComputeTimesMicrobatchesInTheLimit) {
  const auto t = pipelineTime(threeLayers(), Partition{{0}}, 4);
  // R = 18 + 0 + 3 * (6 + 12)
  EXPECT_DOUBLE_EQ(t.total, 18 + 3 * 18);
  EXPECT_DOUBLE_EQ(t.t_k, 6);
  EXPECT_DOUBLE_EQ(t.r_1, 12);
}

TEST(PipelineTime, HandComputedTwoStages) {
  // Stages {0,1} and {2}: f = 3, 3; b = 6, 6; c = 1.5.
  const auto t = pipelineTime(threeLayers(), Partition{{0, 2}}, 5);
  EXPECT_DOUBLE_EQ(t.compute, 18);
  EXPECT_DOUBLE_EQ(t.communication, 3);
  EXPECT_DOUBLE_EQ(t.t_k, 3);
  EXPECT_DOUBLE_EQ(t.r_1, 6);
  EXPECT_DOUBLE_EQ(t.total, 18 + 3 + 4 * (3 + 6));
}

TEST(PipelineTime, CommunicationCanBeTheBottleneck) {
  ChainCosts c = {{1, 1}, {1, 1}, {5}};
  const auto t = pipelineTime(c, Partition{{0, 1}}, 3);
  EXPECT_DOUBLE_EQ(t.t_k, 5);
  EXPECT_DOUBLE_EQ(t.r_1, 5);
  EXPECT_DOUBLE_EQ(t.total, 4 + 10 + 2 * 10);
}

TEST(PipelineTime, BubbleFraction) {
  const auto t = pipelineTime({{1, 1}, {1, 1}, {0}}, Partition{{0, 1}}, 4);
  // R = 4 + 3 * 2 = 10; busy per stage 4 * 2 = 8 of 10.
  EXPECT_NEAR(bubbleFraction(t, 2, 4), 0.2, 1e-12);
}

TEST(Partition, ToString) { EXPECT_EQ((Partition{{0, 4, 10}}).toString(18), "0-3,4-9,10-17"); }

TEST(StageMemory, Formula) {
  MemoryCosts m{100, {10, 20, 30}, {5, 6, 7}, {1, 9, 2}, {3, 5, 6}};
  // layers 1..2: 100 + 50 + 4 * (5 + 13) + 9
  EXPECT_EQ(stageMemory(m, 1, 2, 4), 100 + 50 + 4 * 18 + 9);
}

// The dataset is held by the workers that read it: the first stage (inputs)
// and the last (labels), once by a stage that is both.
TEST(StageMemory, TheFirstAndLastStagesHoldTheDataset) {
  MemoryCosts m{100, {10, 20, 30}, {5, 6, 7}, {1, 9, 2}, {3, 5, 6}, 1000};
  EXPECT_EQ(stageMemory(m, 1, 1, 1), 100 + 20 + 11 + 9);
  EXPECT_EQ(stageMemory(m, 0, 0, 1), 100 + 10 + 8 + 1 + 1000);
  EXPECT_EQ(stageMemory(m, 2, 2, 1), 100 + 30 + 13 + 2 + 1000);
  EXPECT_EQ(stageMemory(m, 0, 2, 1), 100 + 60 + 21 + 9 + 1000);
}

}  // namespace
}  // namespace hydrozoa::plan
