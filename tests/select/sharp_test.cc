// SHARP's schedule (select/sharp.h): hand-worked makespans, Sharded-LRTF
// matching the MILP optimum where round-robin does not, double buffering
// hiding the loads, the K-worker bound, mistakes named.
#include <gtest/gtest.h>

#include <algorithm>

#include "select/sharp.h"

namespace hydrozoa::select {
namespace {

ModelWork model(const std::string& name, int units, Seconds compute, Seconds load = 0, std::int64_t minibatches = 1) {
  ModelWork m;
  m.name = name;
  m.units.assign(static_cast<size_t>(units), ShardUnit{load, compute});
  m.minibatches = minibatches;
  return m;
}

SharpResult simulate(const std::vector<ModelWork>& models, int workers, Order order, bool buffer = false) {
  SharpOptions o;
  o.workers = workers;
  o.order = order;
  o.double_buffer = buffer;
  o.timeline = true;
  auto r = simulateSharp(models, o);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : SharpResult{};
}

TEST(Sharp, OneModelRunsItsUnitsInOrderOnOneWorkerAtATime) {
  const SharpResult r = simulate({model("a", 3, 1.0)}, 2, Order::kLrtf);
  EXPECT_DOUBLE_EQ(r.makespan, 3);
  EXPECT_DOUBLE_EQ(r.utilisation, 0.5);
  ASSERT_EQ(r.timeline.size(), 3u);
  for (size_t k = 0; k < 3; ++k) {
    EXPECT_EQ(r.timeline[k].unit, static_cast<std::int64_t>(k));
    EXPECT_DOUBLE_EQ(r.timeline[k].start, static_cast<double>(k));
  }
  // Two alike on two workers: side by side, every worker busy.
  const SharpResult two = simulate({model("a", 3, 1.0), model("b", 3, 1.0)}, 2, Order::kLrtf);
  EXPECT_DOUBLE_EQ(two.makespan, 3);
  EXPECT_DOUBLE_EQ(two.utilisation, 1);
}

// A of 6 units and B, C of 3 on two workers: the best keeps A going on one
// worker (6 s). Sharded-LRTF does; round-robin gives A every other turn.
TEST(Sharp, ShardedLrtfMatchesTheMilpOptimumWhereRoundRobinDoesNot) {
  const std::vector<ModelWork> models = {model("a", 6, 1.0), model("b", 3, 1.0), model("c", 3, 1.0)};
  auto best = optimalSharp(models, 2);
  ASSERT_TRUE(best.ok()) << best.status().message();
  EXPECT_NEAR(best->makespan, 6, 1e-6);
  EXPECT_DOUBLE_EQ(simulate(models, 2, Order::kLrtf).makespan, 6);
  EXPECT_GT(simulate(models, 2, Order::kRoundRobin).makespan, 6);
  for (std::uint64_t seed = 0; seed < 5; ++seed) {
    SharpOptions o;
    o.workers = 2;
    o.order = Order::kRandom;
    o.seed = seed;
    EXPECT_GE(simulateSharp(models, o)->makespan, 6 - 1e-9);
  }
  // The optimum's timeline keeps each model in order and one unit per worker at a time.
  std::vector<std::vector<std::pair<Seconds, Seconds>>> perWorker(2);
  for (const UnitRun& u : best->timeline) perWorker[static_cast<size_t>(u.worker)].emplace_back(u.start, u.end);
  for (auto& runs : perWorker) {
    std::sort(runs.begin(), runs.end());
    for (size_t k = 1; k < runs.size(); ++k) EXPECT_GE(runs[k].first, runs[k - 1].second - 1e-6);
  }
}

// Two models of 2 units (1 s to load, 2 to compute) on one worker: 12 s
// loading and computing by turns; double buffered, each load but the first
// hides behind the compute before it: 1 + 4 × 2 = 9 s.
TEST(Sharp, DoubleBufferingHidesTheLoads) {
  const std::vector<ModelWork> models = {model("a", 2, 2.0, 1.0), model("b", 2, 2.0, 1.0)};
  EXPECT_DOUBLE_EQ(simulate(models, 1, Order::kLrtf, false).makespan, 12);
  EXPECT_DOUBLE_EQ(simulate(models, 1, Order::kLrtf, true).makespan, 9);
  EXPECT_DOUBLE_EQ(oneAfterAnother(models), 12);
  auto best = optimalSharp(models, 1);  // the MILP's units hold their worker for load + compute
  ASSERT_TRUE(best.ok()) << best.status().message();
  EXPECT_NEAR(best->makespan, 12, 1e-6);
}

// Eight alike models of 4 shards (forward and backward: 8 units of 0.1 s
// load and 0.5 s compute) over 10 minibatches: 384 s one after another. On
// K workers, double buffered, SHARP computes the 320 s of compute K at a
// time with the loads hidden: more than K× faster.
TEST(Sharp, ManyModelsReachTheKTimesBound) {
  std::vector<ModelWork> models;
  for (int m = 0; m < 8; ++m) models.push_back(model("m" + std::to_string(m), 8, 0.5, 0.1, 10));
  EXPECT_DOUBLE_EQ(oneAfterAnother(models), 384);
  for (int k : {2, 4}) {
    const SharpResult r = simulate(models, k, Order::kLrtf, true);
    EXPECT_LE(r.makespan, 320.0 / k * 1.01 + 0.1) << k;
    EXPECT_GT(oneAfterAnother(models) / r.makespan, k) << k;
    EXPECT_GT(r.utilisation, 0.98) << k;
  }
}

// A model's evaluation (its tail) runs once after its last minibatch, and
// counts in its remaining time; sequential runs one unit at a time.
TEST(Sharp, TailsSequentialAndLostUnits) {
  ModelWork a = model("a", 2, 1.0, 0, 2);
  a.tail = {{0, 3.0}};
  EXPECT_EQ(a.totalUnits(), 5);
  EXPECT_DOUBLE_EQ(a.unit(4).compute, 3.0);
  ShardScheduler s({a, model("b", 1, 1.0)}, Order::kLrtf);
  EXPECT_DOUBLE_EQ(s.remaining(0), 7);
  EXPECT_EQ(s.pick(), 0);
  s.started(0);
  s.abandoned(0);  // its worker died: the same unit is its next again
  EXPECT_EQ(s.nextUnit(0), 0);
  s.resumeAt(1, 1);  // b's one unit was done before a restart
  s.dropped(0);      // a failed
  EXPECT_TRUE(s.done());
  EXPECT_EQ(s.pick(), -1);
  EXPECT_DOUBLE_EQ(simulate({a, model("b", 1, 1.0)}, 2, Order::kLrtf).makespan, 7);
  EXPECT_DOUBLE_EQ(simulate({a, model("b", 1, 1.0)}, 2, Order::kSequential).makespan, 8);
  EXPECT_DOUBLE_EQ(oneAfterAnother({a, model("b", 1, 1.0)}), 8);
}

TEST(Sharp, MistakesAreNamed) {
  SharpOptions o;
  o.workers = 0;
  EXPECT_NE(simulateSharp({model("a", 1, 1)}, o).status().message().find("0 workers"), std::string::npos);
  o.workers = 1;
  EXPECT_NE(simulateSharp({model("a", 0, 1)}, o).status().message().find("model a has no units"), std::string::npos);
  EXPECT_NE(simulateSharp({model("a", 1, -1)}, o).status().message().find("must be times"), std::string::npos);
  EXPECT_NE(optimalSharp({model("a", 50, 1)}, 2).status().message().find("at most 40 units"), std::string::npos);
  EXPECT_FALSE(parseOrder("fastest").ok());
  EXPECT_EQ(*parseOrder("round_robin"), Order::kRoundRobin);
  EXPECT_EQ(*parseOrder("sequential"), Order::kSequential);
}

}  // namespace
}  // namespace hydrozoa::select
