// FuncPipe's model (plan/cost/funcpipe.h) and its co-optimiser, the MILP
// (plan/planners/funcpipe_milp.h), against exhaustive enumeration.
#include <gtest/gtest.h>

#include <random>

#include "plan/cost/funcpipe.h"
#include "plan/planners/funcpipe_milp.h"
#include "plan/solver/milp.h"

namespace hydrozoa::plan {
namespace {

TEST(Milp, SolvesAKnapsackExactly) {
  // max 5a + 4b + 3c s.t. 2a + 3b + c ≤ 4: a = c = 1 (8).
  Milp m;
  const int a = m.addVariable(0, 1, -5, true), b = m.addVariable(0, 1, -4, true), c = m.addVariable(0, 1, -3, true);
  m.addConstraint({{a, 2}, {b, 3}, {c, 1}}, Milp::kAtMost, 4);
  auto r = m.solve();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->values[a], 1);
  EXPECT_EQ(r->values[b], 0);
  EXPECT_EQ(r->values[c], 1);
  EXPECT_NEAR(r->objective, -8, 1e-9);
  Milp none;
  const int x = none.addVariable(0, 1, 1, true);
  none.addConstraint({{x, 1}}, Milp::kAtLeast, 2);
  auto infeasible = none.solve();
  ASSERT_FALSE(infeasible.ok());
  EXPECT_EQ(infeasible.status().code(), ErrorCode::kInfeasible);
}

// Two layers, two tiers, by hand: the formulas of the header.
TEST(FuncPipeCost, TwoStagesByHand) {
  FuncPipeProblem p;
  p.forward = {{0.010, 0.005}, {0.020, 0.010}};
  p.backward = {{0.020, 0.010}, {0.040, 0.020}};
  p.output = {1'000'000, 10};
  p.activation = {2'000'000, 1'000'000};
  p.parameters = {4'000'000, 8'000'000};
  p.tiers = {{1'000'000'000, 50e6}, {2'000'000'000, 100e6}};
  p.data_parallel = {1, 2};
  p.microbatches = 4;
  p.latency = 0.01;
  p.price_per_gb_second = 1e-5;
  p.worker_bytes = 100'000'000;
  ASSERT_TRUE(validateFuncPipeProblem(p).ok());
  FuncPipeConfig c{{0, 1}, {0, 1}, 2};  // layer 0 on 1 GB, layer 1 on 2 GB, 2 replicas: µ = 2
  ASSERT_TRUE(validateFuncPipeConfig(p, c).ok());
  const FuncPipeCost cost = funcPipeCost(p, c);
  // Up 1 MB at 50 MB/s and down at 100 MB/s, each + 10 ms: 30 ms and 20 ms.
  const double up = 0.03, down = 0.02;
  // Forward: 10 + 30 + 20 + 10 ms for the first microbatch, then 1 × the largest (30 ms).
  EXPECT_NEAR(cost.forward, 0.010 + up + down + 0.010 + 1 * 0.030, 1e-12);
  // Backward from layer 1: 20 ms + 1 × 20 ms, sync 2·8 MB/100 MB/s + (2+2)·10 ms = 0.2 s.
  // From layer 0: 20 + 20 + 30 + 20 ms + 1 × max(20, 20, 30, 20) ms, sync 2·4 MB/50 MB/s + 40 ms = 0.2 s.
  const double b1 = 0.020 + 0.020 + (2 * 8e6 / 100e6 + 4 * 0.01);
  const double b0 = 0.020 + 0.020 + up + down + 0.030 + (2 * 4e6 / 50e6 + 4 * 0.01);
  EXPECT_NEAR(cost.backward, std::max(b0, b1), 1e-12);
  EXPECT_NEAR(cost.iteration, cost.forward + cost.backward, 1e-12);
  EXPECT_EQ(cost.memory, 2 * 3'000'000'000LL);
  EXPECT_NEAR(cost.dollars, 1e-5 * cost.iteration * 6, 1e-15);
  // Stage 0: 2 microbatches of 2 MB, (2 + 2) × 4 MB, 100 MB.
  ASSERT_EQ(cost.needs.size(), 2u);
  EXPECT_EQ(cost.needs[0], 2 * 2'000'000 + 4 * 4'000'000 + 100'000'000);
  EXPECT_TRUE(cost.fits);
  // LambdaML's scatter-reduce: γ = 3 − 2/d = 2, δ = 4 at d = 2: the same here.
  p.sync = ScatterReduce::kLambdaML;
  EXPECT_NEAR(funcPipeCost(p, c).iteration, cost.iteration, 1e-12);
}

FuncPipeProblem randomProblem(int L, std::mt19937& rng) {
  std::uniform_real_distribution<double> ms(1, 20), mb(0.1, 40), frac(0, 1);
  FuncPipeProblem p;
  p.tiers = {{256'000'000, 30e6}, {512'000'000, 60e6}, {1'024'000'000, 90e6}};
  for (int i = 0; i < L; ++i) {
    const double f = ms(rng) * 1e-3, b = (1.5 + frac(rng)) * f;
    p.forward.push_back({f * 2, f * 1.2, f});  // smaller functions have less CPU
    p.backward.push_back({b * 2, b * 1.2, b});
    p.output.push_back(static_cast<Bytes>(mb(rng) * 1e6 / 10));
    p.activation.push_back(static_cast<Bytes>(mb(rng) * 1e6));
    p.parameters.push_back(static_cast<Bytes>(mb(rng) * 1e6));
  }
  p.data_parallel = {1, 2, 4};
  p.microbatches = 8;
  p.workers = 12;
  p.worker_bytes = 60'000'000;
  p.latency = 0.005 + 0.01 * frac(rng);
  p.price_per_gb_second = 1.6667e-5;
  p.slowdown = 1.1;
  return p;
}

// The issue's test: the MILP's optimum is enumeration's on small chains, for
// cost alone, time alone and weights between, with either scatter-reduce.
TEST(FuncPipeMilp, EqualsEnumerationOnSmallChains) {
  std::mt19937 rng(7);
  int compared = 0, infeasible = 0;
  for (int round = 0; round < 24; ++round) {
    FuncPipeProblem p = randomProblem(2 + round % 7, rng);  // L = 2..8
    if (round % 3 == 2) p.sync = ScatterReduce::kLambdaML;
    for (FuncPipeWeights w : {FuncPipeWeights{1, 0}, FuncPipeWeights{0, 1}, FuncPipeWeights{1, 1e-4}}) {
      const auto expected = bestByEnumeration(p, w);
      auto got = solveFuncPipe(p, w);
      if (!expected) {
        ASSERT_FALSE(got.ok());
        EXPECT_EQ(got.status().code(), ErrorCode::kInfeasible);
        ++infeasible;
        continue;
      }
      ASSERT_TRUE(got.ok()) << got.status().message();
      const double want = funcPipeObjective(funcPipeCost(p, *expected), w);
      EXPECT_NEAR(got->objective, want, 1e-7 * std::max(1e-9, want)) << "round " << round << " L " << p.numLayers();
      EXPECT_TRUE(validateFuncPipeConfig(p, got->config).ok());
      ++compared;
    }
  }
  EXPECT_GE(compared, 60);
}

// The frontier holds every weighted optimum (enumeration's), and no point
// of it is dominated by another.
TEST(FuncPipeMilp, TheFrontierHoldsEveryWeightedOptimum) {
  std::mt19937 rng(5);
  for (int round = 0; round < 6; ++round) {
    const FuncPipeProblem p = randomProblem(3 + round, rng);
    int programs = 0;
    auto frontier = funcPipeFrontier(p, 600, &programs);
    if (!frontier.ok()) {
      EXPECT_FALSE(bestByEnumeration(p, {1, 0}).has_value());
      continue;
    }
    EXPECT_GT(programs, 0);
    for (size_t i = 1; i < frontier->size(); ++i) {
      EXPECT_GT((*frontier)[i].cost.iteration, (*frontier)[i - 1].cost.iteration);
      EXPECT_LT((*frontier)[i].cost.dollars, (*frontier)[i - 1].cost.dollars);
    }
    for (FuncPipeWeights w : {FuncPipeWeights{1, 0}, FuncPipeWeights{0, 1}, FuncPipeWeights{1, 1e-5},
                              FuncPipeWeights{1, 1e-4}, FuncPipeWeights{1, 1e-3}}) {
      const auto expected = bestByEnumeration(p, w);
      ASSERT_TRUE(expected.has_value());
      double best = HUGE_VAL;
      for (const FuncPipeSolution& s : *frontier) best = std::min(best, funcPipeObjective(s.cost, w));
      const double want = funcPipeObjective(funcPipeCost(p, *expected), w);
      EXPECT_NEAR(best, want, 1e-7 * want) << "round " << round;
    }
  }
}

TEST(FuncPipeMilp, TwelveLayersThreeTiersAsTheIssueAsks) {
  std::mt19937 rng(11);
  FuncPipeProblem p = randomProblem(12, rng);
  for (FuncPipeWeights w : {FuncPipeWeights{1, 1e-4}}) {  // 3·4^11 configurations per degree to enumerate
    const auto expected = bestByEnumeration(p, w);
    auto got = solveFuncPipe(p, w);
    ASSERT_EQ(expected.has_value(), got.ok());
    if (!expected) continue;
    EXPECT_NEAR(got->objective, funcPipeObjective(funcPipeCost(p, *expected), w), 1e-7 * got->objective);
  }
}

TEST(FuncPipeMilp, NothingFitsSaysWhichLayerAndTheLargestFunction) {
  std::mt19937 rng(3);
  FuncPipeProblem p = randomProblem(4, rng);
  p.parameters[2] = 500'000'000;  // 2 × 500 MB + 60 MB: more than 1,024 MB on its own
  auto r = solveFuncPipe(p, {1, 0});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kInfeasible);
  EXPECT_NE(r.status().message().find("layer 2 alone needs"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("more than the largest function"), std::string::npos);
  // Bad weights and problems are refused, naming them.
  p = randomProblem(3, rng);
  EXPECT_FALSE(solveFuncPipe(p, {0, 0}).ok());
  p.tiers[1].bandwidth = 0;
  auto bad = solveFuncPipe(p, {1, 0});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("memory tier 1"), std::string::npos) << bad.status().message();
}

}  // namespace
}  // namespace hydrozoa::plan
