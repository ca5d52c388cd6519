#include "plan/cost/pipeline.h"

#include <gtest/gtest.h>

#include <random>

#include "plan/cost/memory.h"
#include "plan/random_chain.h"

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

// NOTE [What a message costs the cores]: each boundary's message takes CPU
// from the pass that sends it and the pass that receives it.
TEST(PipelineTime, MessagesTakeTheirCpuFromThePassesOnEitherSide) {
  ChainCosts c = threeLayers();
  c.send = {0.1, 0.2};     // after layer 0, after layer 1
  c.receive = {0.3, 0.4};
  const MessagePasses middle = stageMessages(c, 1, 1);
  EXPECT_DOUBLE_EQ(middle.forward, 0.2 + 0.3);   // sends its output, received its input
  EXPECT_DOUBLE_EQ(middle.backward, 0.1 + 0.4);  // sends its input's gradient, received its output's
  EXPECT_DOUBLE_EQ(stageMessages(c, 0, 2).forward, 0);
  EXPECT_DOUBLE_EQ(stageMessages(c, 0, 0).forward, 0.1);
  EXPECT_DOUBLE_EQ(stageMessages(c, 2, 2).backward, 0.2);
  // Stages {0,1} and {2}: f = 3 + 0.2, 3 + 0.4; b = 6 + 0.4, 6 + 0.2; c = 1.5.
  const auto t = pipelineTime(c, Partition{{0, 2}}, 5);
  EXPECT_DOUBLE_EQ(t.compute, 18 + 1.2);
  EXPECT_DOUBLE_EQ(t.t_k, 3.4);
  EXPECT_DOUBLE_EQ(t.r_1, 6.4);
  EXPECT_DOUBLE_EQ(t.total, 19.2 + 3 + 4 * (3.4 + 6.4));
  // The same in the simulation (a core for every thread).
  EXPECT_NEAR(simulatedPipelineTime(c, Partition{{0, 2}}, 5, HostShare{}).total, t.total, 1e-9);
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
  EXPECT_NEAR(bubbleFraction(t, 2), 0.2, 1e-12);
}

// With a core for every thread the simulated schedule is the flow shop that
// R is the closed form of: the same total and the same drains, on random
// chains, splits and microbatch counts.
TEST(PipelineTime, TheSimulationOnOwnCoresIsTheClosedForm) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    const auto [c, p, M] = testing::randomPipeline(rng, trial, 9);
    const PipelineTime closed = pipelineTime(c, p, M);
    const PipelineTime sim = simulatedPipelineTime(c, p, M, HostShare{p.numStages(), 1, 1});
    ASSERT_FALSE(closed.shared);
    ASSERT_TRUE(sim.shared);
    ASSERT_NEAR(sim.total, closed.total, 1e-9) << "trial " << trial;
    ASSERT_NEAR(sim.busy, closed.busy, 1e-9) << "trial " << trial;
    ASSERT_EQ(sim.drain.size(), closed.drain.size());
    EXPECT_NEAR(sim.drain.front(), 0, 1e-9);
    // The closed form's drain follows the last microbatch's gradient back
    // (Σ b + c of the stages before): a lower bound, since a stage before
    // may still be busy with earlier microbatches when it arrives.
    for (size_t s = 0; s < sim.drain.size(); ++s) EXPECT_GE(sim.drain[s], closed.drain[s] - 1e-9);
  }
}

// Past 256 microbatches the simulation extends its steady state: exact on
// cores of their own (the flow shop's time is linear in M), and between the
// bounds on shared ones, without holding M arrival times per stage.
TEST(PipelineTime, ManyMicrobatchesExtendTheSteadyState) {
  const ChainCosts c = threeLayers();
  const Partition two{{0, 2}};
  for (std::int64_t M : {256, 257, 1000, 1000000}) {
    const PipelineTime closed = pipelineTime(c, two, M);
    const PipelineTime own = simulatedPipelineTime(c, two, M, HostShare{2, 1, 1});
    EXPECT_NEAR(own.total / closed.total, 1, 1e-9) << M;
    EXPECT_NEAR(own.busy / closed.busy, 1, 1e-9) << M;
    const double shared = pipelineTime(c, two, M, HostShare{1, 1, 1}).total;
    EXPECT_LE(shared, 2 * closed.total * (1 + 1e-9)) << M;
    EXPECT_GE(shared, 18.0 * M * (1 - 1e-9)) << M;  // one core does all the work: M·Σ(f+b)
  }
}

// Two stages on one core, by hand. f = b = 1, no transfer, 2 microbatches:
// [0,1) F0(0) alone; [1,3) F0(1) and F1(0) at half speed; [3,4) F1(1);
// [4,5) B1(1); [5,7) B1(0) and B0(1) at half speed; [7,8) B0(0). Scaling
// every time by 2 would give 12.
TEST(PipelineTime, StagesComputingAtOnceShareTheCores) {
  const ChainCosts c = {{1, 1}, {1, 1}, {0}};
  const PipelineTime t = pipelineTime(c, Partition{{0, 1}}, 2, HostShare{1, 1, 1});
  EXPECT_TRUE(t.shared);
  EXPECT_NEAR(t.total, 8, 1e-12);
  EXPECT_NEAR(t.busy, 6 + 6, 1e-12);  // each stage computes 6 s of wall time, 2 of them at half speed
  EXPECT_NEAR(t.drain[1], 1, 1e-12);   // B1(0) ends at 7, the pipeline at 8
  EXPECT_NEAR(bubbleFraction(t, 2), 0.25, 1e-12);
  // One microbatch: the stages never compute at once, so nothing slows.
  const ChainCosts cut = {{1, 1}, {2, 2}, {0.5}};
  EXPECT_NEAR(pipelineTime(cut, Partition{{0, 1}}, 1, HostShare{1, 1, 1}).total, 1 + 0.5 + 1 + 2 + 0.5 + 2, 1e-12);
}

// Replicas and threads count as computing threads: one stage on 4 replicas
// with 2 cores is data parallelism at half speed, the uniform scaling.
TEST(PipelineTime, DataParallelReplicasOnTooFewCoresScaleUniformly) {
  const ChainCosts c = threeLayers();
  const PipelineTime own = pipelineTime(c, Partition{{0}}, 3);
  EXPECT_FALSE(pipelineTime(c, Partition{{0}}, 3, HostShare{4, 4, 1}).shared);  // a core each
  EXPECT_NEAR(pipelineTime(c, Partition{{0}}, 3, HostShare{2, 4, 1}).total, 2 * own.total, 1e-9);
  EXPECT_NEAR(pipelineTime(c, Partition{{0}}, 3, HostShare{4, 2, 4}).total, 2 * own.total, 1e-9);
}

// NOTE [Compute beside busy cores]: s with every core busy, 1 alone, linear
// in the cores in use between, and the sharing on top past the cores.
TEST(HostShare, BusyCoresSlowEachOtherDown) {
  const HostShare two{2, 1, 1, 1.5};
  EXPECT_DOUBLE_EQ(two.rate(1), 1);
  EXPECT_DOUBLE_EQ(two.rate(2), 1 / 1.5);
  EXPECT_DOUBLE_EQ(two.rate(4), 0.5 / 1.5);
  const HostShare five{5, 1, 1, 2};
  EXPECT_DOUBLE_EQ(five.rate(3), 1 / 1.5);  // half the way from one core in use to five
  EXPECT_DOUBLE_EQ(HostShare{}.rate(8), 1);  // a core for every thread, wherever
  EXPECT_FALSE((HostShare{2, 1, 1, 1}).contended(2));
  EXPECT_FALSE(two.contended(1));  // one thread alone
  EXPECT_TRUE(two.contended(2));
  EXPECT_TRUE((HostShare{2, 2, 1, 1.5}).contended(1));  // two replicas of one stage
  EXPECT_DOUBLE_EQ(two.scale(2), 1.5);
  EXPECT_DOUBLE_EQ((HostShare{2, 2, 1, 1.5}).scale(2), 3);
}

// Two stages on two cores that slow each other 1.5×: only the passes that
// overlap slow down. f = b = 1, no transfer, 2 microbatches: [0,1) F0(0);
// [1,2.5) F0(1) and F1(0) at 1/1.5; [2.5,3.5) F1(1); [3.5,4.5) B1(1);
// [4.5,6) B1(0) and B0(1); [6,7) B0(0). Replicas of one stage always
// overlap: data parallelism is 1.5× its time on cores of its own.
TEST(PipelineTime, StagesComputingAtOnceSlowEachOtherOnABusyHost) {
  const ChainCosts c = {{1, 1}, {1, 1}, {0}};
  const HostShare host{2, 1, 1, 1.5};
  const PipelineTime t = pipelineTime(c, Partition{{0, 1}}, 2, host);
  EXPECT_TRUE(t.shared);
  EXPECT_NEAR(t.total, 7, 1e-12);
  EXPECT_NEAR(pipelineTime(c, Partition{{0, 1}}, 2, HostShare{2, 1, 1, 1}).total, 6, 1e-12);  // the closed form
  EXPECT_NEAR(pipelineTime(c, Partition{{0, 1}}, 1, host).total, 4, 1e-12);  // never at once
  const ChainCosts one = threeLayers();
  const PipelineTime own = pipelineTime(one, Partition{{0}}, 3);
  EXPECT_NEAR(pipelineTime(one, Partition{{0}}, 3, HostShare{2, 2, 1, 1.5}).total, 1.5 * own.total, 1e-9);
  EXPECT_NEAR(pipelineTime(one, Partition{{0}}, 3, HostShare{2, 1, 1, 1.5}).total, own.total, 1e-9);
}

// A long balanced pipeline keeps every stage busy: its time tends to the
// uniformly scaled one from below; with few microbatches it is far under it.
TEST(PipelineTime, ABalancedPipelineOnTooFewCoresTendsToTheUniformScaling) {
  const ChainCosts c = {{1, 1, 1, 1}, {2, 2, 2, 2}, {0, 0, 0}};
  const Partition four{{0, 1, 2, 3}};
  const HostShare twoCores{2, 1, 1};
  for (std::int64_t M : {1, 4, 64}) {
    const double uniform = 2 * pipelineTime(c, four, M).total;
    const double shared = pipelineTime(c, four, M, twoCores).total;
    EXPECT_LE(shared, uniform + 1e-9) << M;
    EXPECT_GE(shared, M * 12 / 2.0 - 1e-9) << M;  // 2 cores can do no better than all work / 2
    if (M == 1) {
      EXPECT_NEAR(shared, 12, 1e-9);  // one stage at a time
    }
    if (M == 64) {
      EXPECT_GT(shared / uniform, 0.95);
    }
  }
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

// Recomputation keeps each microbatch's input and one microbatch's
// activations: layers 1..2 with 4 microbatches, 100 + 50 + 4 · 5 + (5 + 13) + 9.
TEST(StageMemory, RecomputationKeepsTheInputsAndOneMicrobatch) {
  MemoryCosts m{100, {10, 20, 30}, {5, 6, 7}, {1, 9, 2}, {3, 5, 6}};
  m.recompute = true;
  EXPECT_EQ(stageMemory(m, 1, 2, 4), 100 + 50 + 4 * 5 + 18 + 9);
}

}  // namespace
}  // namespace hydrozoa::plan
