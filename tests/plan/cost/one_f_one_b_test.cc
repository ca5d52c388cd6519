// 1F1B's time and memory model (plan/cost/one_f_one_b.h) and the planner
// with it: the same flow shop as GPipe's R with 1F1B's order of passes, and
// at most p − s microbatches stashed on stage s.
#include "plan/cost/one_f_one_b.h"

#include <gtest/gtest.h>

#include <random>

#include "plan/cost/pipeline.h"
#include "plan/plan.h"
#include "plan/search.h"
#include "plan/random_chain.h"
#include "plan/toy_profile.h"

namespace hydrozoa::plan {
namespace {

TEST(OneFOneB, OrderAndStash) {
  const std::vector<Pass> order = oneFOneBOrder(0, 3, 4);
  const std::vector<Pass> want = {{false, 0}, {false, 1}, {false, 2}, {true, 0}, {false, 3},
                                  {true, 1},  {true, 2},  {true, 3}};
  EXPECT_EQ(order, want);
  EXPECT_EQ(stashedMicrobatches(ScheduleKind::kOneFOneB, 0, 4, 16), 4);
  EXPECT_EQ(stashedMicrobatches(ScheduleKind::kOneFOneB, 3, 4, 16), 1);
  EXPECT_EQ(stashedMicrobatches(ScheduleKind::kOneFOneB, 0, 4, 2), 2);
  EXPECT_EQ(stashedMicrobatches(ScheduleKind::kGPipe, 3, 4, 16), 16);
}

// Balanced stages without transfers: (M + p − 1)(f + b), GPipe's R.
TEST(OneFOneB, BalancedStagesTakeGPipesTime) {
  for (int p : {1, 2, 4}) {
    for (std::int64_t M : {1, 3, 8, 300}) {
      const auto [c, part] = testing::balancedChain(p);
      const PipelineTime t = pipelineTime(c, part, M, {}, ScheduleKind::kOneFOneB);
      EXPECT_NEAR(t.total, static_cast<double>(M + p - 1) * 3, 1e-9) << p << " " << M;
      EXPECT_NEAR(t.total, pipelineTime(c, part, M).total, 1e-9);
    }
  }
}

// f = (3, 1), b = (1, 3), M = 2, by hand. GPipe: stage 1 backs up behind
// stage 0's forwards, 8 + (M − 1)(3 + 3) = 14. 1F1B: S0 F0 [0,3) F1 [3,6);
// S1 F0 [3,4) B0 [4,7); S0 B0 [7,8); S1 F1 [7,8) B1 [8,11); S0 B1 [11,12).
TEST(OneFOneB, HandComputedUnbalancedStages) {
  const ChainCosts c = {{3, 1}, {1, 3}, {0}};
  const Partition two{{0, 1}};
  EXPECT_DOUBLE_EQ(pipelineTime(c, two, 2).total, 14);
  EXPECT_DOUBLE_EQ(pipelineTime(c, two, 2, {}, ScheduleKind::kOneFOneB).total, 12);
}

// On random chains, splits and microbatch counts, 1F1B's pipeline does the
// same work as GPipe's and takes at least as long as its busiest stage and
// as one microbatch's way there and back. It is not always faster: with
// unbalanced stages and slow links its forced alternation can idle a stage
// that GPipe's order keeps busy (up to 22% in these trials), which is why
// `hydrozoa plan --schedule auto` prices each schedule.
TEST(OneFOneB, TheSameWorkWithinTheFlowShopsBounds) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 300; ++trial) {
    const auto [c, p, M] = testing::randomPipeline(rng, trial, 12);
    const int L = c.numLayers();
    const PipelineTime gpipe = pipelineTime(c, p, M);
    const PipelineTime oneF = pipelineTime(c, p, M, {}, ScheduleKind::kOneFOneB);
    EXPECT_NEAR(oneF.busy, gpipe.busy, 1e-9) << "trial " << trial;
    Seconds busiest = 0;
    for (int s = 0; s < p.numStages(); ++s) {
      Seconds work = 0;
      for (int i = p.first[s]; i <= p.lastLayer(s, L); ++i) work += c.forward[i] + c.backward[i];
      busiest = std::max(busiest, static_cast<double>(M) * work);
    }
    EXPECT_GE(oneF.total, busiest - 1e-9) << "trial " << trial;
    EXPECT_GE(oneF.total, gpipe.compute + gpipe.communication - 1e-9) << "trial " << trial;
    EXPECT_LE(oneF.total, 1.25 * gpipe.total) << "trial " << trial;
  }
}

// The planner: 1F1B's stage 0 holds min(p, M) microbatches, so where GPipe's
// M = 16 does not fit the memory, 1F1B's does.
TEST(OneFOneB, ThePlannerFitsMoreMicrobatchesInTheSameMemory) {
  const auto prof = testing::toyProfile(8);
  SearchOptions o = testing::twoStagePipeline();
  o.microbatch_size = 1;
  auto gpipe = searchPlan(prof, *loadCatalog("aci"), o);
  ASSERT_TRUE(gpipe.ok()) << gpipe.status().message();
  o.schedule = ScheduleKind::kOneFOneB;
  auto oneF = searchPlan(prof, *loadCatalog("aci"), o);
  ASSERT_TRUE(oneF.ok()) << oneF.status().message();
  const Plan g = makePlan(*gpipe, prof, o, "aci"), f = makePlan(*oneF, prof, o, "aci");
  EXPECT_EQ(f.schedule, ScheduleKind::kOneFOneB);
  EXPECT_LT(f.stages[0].memory_bytes, g.stages[0].memory_bytes);
  EXPECT_LE(f.pipeline_seconds, g.pipeline_seconds + 1e-12);
  // A limit between the two: GPipe finds nothing, 1F1B its plan.
  o.memory_limit = (f.stages[0].memory_bytes + g.stages[0].memory_bytes) / 2;
  o.memory_limit = std::max(*o.memory_limit, f.stages[1].memory_bytes);
  EXPECT_TRUE(searchPlan(prof, *loadCatalog("aci"), o).ok());
  o.schedule = ScheduleKind::kGPipe;
  EXPECT_FALSE(searchPlan(prof, *loadCatalog("aci"), o).ok());
}

// Recomputation in the planner: less memory per stage, a forward pass more
// per microbatch in the backward pass, recorded in plan.json.
TEST(Recompute, ThePlannerTradesTimeForMemory) {
  const auto prof = testing::toyProfile(8);
  SearchOptions o = testing::twoStagePipeline();
  o.microbatch_size = 1;
  const Plan plain = makePlan(*searchPlan(prof, *loadCatalog("aci"), o), prof, o, "aci");
  o.recompute = true;
  auto r = searchPlan(prof, *loadCatalog("aci"), o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const Plan recomputed = makePlan(*r, prof, o, "aci");
  EXPECT_TRUE(recomputed.recompute);
  EXPECT_LT(recomputed.stages[0].memory_bytes, plain.stages[0].memory_bytes);
  EXPECT_GT(recomputed.pipeline_seconds, plain.pipeline_seconds);
  EXPECT_TRUE(planFromJson(planToJson(recomputed), "plan.json")->recompute);
  EXPECT_NE(renderPlanTable(recomputed).find("activations recomputed"), std::string::npos);
}

TEST(Schedules, NamesParseAndUnknownOnesAreErrors) {
  for (ScheduleKind k : allSchedules()) EXPECT_EQ(*parseSchedule(scheduleName(k), "x"), k);
  auto bad = parseSchedule("zb-h1", "--schedule");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "--schedule: unknown pipeline schedule \"zb-h1\"; available: gpipe, 1f1b, interleaved, 2bw, pipedream, "
            "pipedream-vs");
}

}  // namespace
}  // namespace hydrozoa::plan
