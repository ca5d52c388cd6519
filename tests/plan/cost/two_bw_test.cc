// PipeDream-2BW's order and cost model (plan/cost/two_bw.h): its steps,
// joined, are one long 1F1B pipeline without a flush; its steady-state step
// takes the bottleneck stage's M·(f + b); the planner charges it two
// working copies of the weights and refuses M < p.
#include "plan/cost/two_bw.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "plan/cost/one_f_one_b.h"
#include "plan/cost/pipeline.h"
#include "plan/plan.h"
#include "plan/search.h"
#include "plan/random_chain.h"
#include "plan/toy_profile.h"

namespace hydrozoa::plan {
namespace {

// Stage 1 of 3 (two in flight), M = 4, a step carried in and carrying out.
TEST(TwoBW, AStepInTheSteadyState) {
  EXPECT_EQ(carriedForwards(1, 3, 4), 1);
  const std::vector<Pass> want = {{false, 1}, {true, 0}, {false, 2}, {true, 1}, {false, 3},
                                  {true, 2},  {false, 0, 0, 1}, {true, 3}};
  EXPECT_EQ(twoBwOrder(1, 3, 4), want);
  // Fresh and draining: 1F1B with a flush.
  for (int p = 1; p <= 5; ++p) {
    for (int s = 0; s < p; ++s) {
      for (int M = p; M <= p + 4; ++M) EXPECT_EQ(asyncOneFOneBOrder(s, p, M, 0, 0), oneFOneBOrder(s, p, M));
    }
  }
}

// Consecutive steps of at least p − 1 microbatches (the last, which drains,
// of any size), each carrying into the next, are 1F1B's order over all
// their microbatches at once: the pipeline never flushes between them. (A
// shorter step, an epoch's last, begins only the step after it.)
TEST(TwoBW, StepsJoinIntoOneLongPipeline) {
  for (int p = 1; p <= 6; ++p) {
    for (int s = 0; s < p; ++s) {
      const std::vector<int> steps = {p, p + 2, std::max(1, p - 1), p + 3, 1};
      int total = 0, carried = 0;
      std::vector<int> offset;
      for (int m : steps) {
        offset.push_back(total);
        total += m;
      }
      std::vector<Pass> joined;
      for (size_t k = 0; k < steps.size(); ++k) {
        const int next = k + 1 < steps.size() ? steps[k + 1] : 0;
        for (const Pass& pass : asyncOneFOneBOrder(s, p, steps[k], carried, next)) {
          joined.push_back({pass.backward, offset[k + pass.step] + pass.microbatch});
        }
        carried = next > 0 ? carriedForwards(s, p, next) : 0;
      }
      EXPECT_EQ(joined, oneFOneBOrder(s, p, total)) << p << " " << s;
    }
  }
}

// Balanced stages without transfers: a steady step is M(f + b), with no
// bubble, where 1F1B's flushed step is (M + p − 1)(f + b).
TEST(TwoBW, ASteadyStepHasNoBubble) {
  for (int p : {1, 2, 4}) {
    for (std::int64_t M : {4, 8, 300}) {
      const auto [c, part] = testing::balancedChain(p);
      const PipelineTime t = pipelineTime(c, part, M, {}, ScheduleKind::kTwoBW);
      EXPECT_NEAR(t.total, static_cast<double>(M) * 3, 1e-9) << p << " " << M;
      EXPECT_NEAR(bubbleFraction(t, p), 0, 1e-9);
      for (Seconds d : t.drain) EXPECT_EQ(d, 0);
    }
  }
}

// The planner: 2bw's plan is faster than 1F1B's at the same M, holds two
// more copies of its weights, and is refused with fewer microbatches than
// stages.
TEST(TwoBW, ThePlannerChargesItsWeightCopiesAndNeedsMAtLeastP) {
  const auto prof = testing::toyProfile(8);
  SearchOptions o = testing::twoStagePipeline();
  o.microbatch_size = 2;  // M = 8
  o.schedule = ScheduleKind::kOneFOneB;
  const Plan f = makePlan(*searchPlan(prof, *loadCatalog("aci"), o), prof, o, "aci");
  o.schedule = ScheduleKind::kTwoBW;
  auto r = searchPlan(prof, *loadCatalog("aci"), o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const Plan t = makePlan(*r, prof, o, "aci");
  EXPECT_EQ(t.schedule, ScheduleKind::kTwoBW);
  EXPECT_LT(t.pipeline_seconds, f.pipeline_seconds);
  for (size_t s = 0; s < t.stages.size(); ++s) {
    Bytes params = 0;
    for (int i = t.stages[s].first_layer; i <= t.stages[s].last_layer; ++i) params += prof.layers[i].parameter_bytes;
    if (t.stages[s].first_layer == f.stages[s].first_layer && t.stages[s].last_layer == f.stages[s].last_layer) {
      EXPECT_EQ(t.stages[s].memory_bytes - f.stages[s].memory_bytes, 2 * params) << s;
    }
  }
  {  // Without a global batch the search for M starts at p.
    SearchOptions free = testing::twoStagePipeline();
    free.global_batch.reset();
    free.stages = 4;
    free.workers = 4;
    free.schedule = ScheduleKind::kTwoBW;
    free.max_microbatches = 6;
    auto found = searchPlan(prof, *loadCatalog("aci"), free);
    ASSERT_TRUE(found.ok()) << found.status().message();
    EXPECT_GE(found->best().microbatches, 4);
  }
  o.microbatch_size = 8;  // M = 2 = p: still allowed
  EXPECT_TRUE(searchPlan(prof, *loadCatalog("aci"), o).ok());
  o.stages = 3;
  o.workers = 3;
  o.microbatch_size = 8;  // M = 2 < 3
  auto refused = searchPlan(prof, *loadCatalog("aci"), o);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("at least as many microbatches (2) as stages (3)"), std::string::npos)
      << refused.status().message();
}

}  // namespace
}  // namespace hydrozoa::plan
