// The interleaved schedule's model (plan/cost/interleaved.h) and the
// planner with it.
#include "plan/cost/interleaved.h"

#include <gtest/gtest.h>

#include "plan/cost/pipeline.h"
#include "plan/plan.h"
#include "plan/search.h"
#include "plan/toy_profile.h"

namespace hydrozoa::plan {
namespace {

// p stages of v balanced chunks (f, b per chunk) and no transfers: the
// ideal time is M·v·(f + b) per stage, and PTD-P's bubble (1/v)(p − 1)/M of
// it, i.e. (p − 1)(f + b) in all: v times less than 1F1B's (p − 1)·v(f + b).
TEST(Interleaved, TheBubbleShrinksWithTheChunks) {
  for (int p : {2, 4}) {
    for (int v : {1, 2, 4}) {
      for (std::int64_t M : {p, 2 * p, 8 * p}) {
        ChainCosts c;
        Partition part;
        for (int i = 0; i < p * v; ++i) {
          c.forward.push_back(1);
          c.backward.push_back(2);
          if (i + 1 < p * v) c.cut.push_back(0);
          part.first.push_back(i);
        }
        const ScheduleKind kind = v > 1 ? ScheduleKind::kInterleaved : ScheduleKind::kOneFOneB;
        const PipelineTime t = pipelineTime(c, part, M, {}, kind, v);
        const double ideal = static_cast<double>(M) * v * 3;
        EXPECT_NEAR(t.total, ideal * (1 + (p - 1.0) / (v * M)), 1e-9) << "p=" << p << " v=" << v << " M=" << M;
      }
    }
  }
}

TEST(Interleaved, EveryPassOnceAndTheChunksStash) {
  const auto order = interleavedOrder(0, 4, 2, 8);
  EXPECT_EQ(order.size(), 32u);
  const auto peaks = stashPeaks(order, 2);
  // Stage 0 warms up with (4 − 1)·2 + 4 = 10 forwards (chunk 0's
  // microbatches 0-3, chunk 1's 0-3, chunk 0's 4-5); its first 4 backwards
  // are chunk 1's, while chunk 0's 6 and 7 go forward: all 8 of chunk 0 are
  // held at once, at most 4 of chunk 1 (PTD-P §4.2.2: interleaving holds
  // more activations than 1F1B's p).
  EXPECT_EQ(peaks[0], 8);
  EXPECT_EQ(peaks[1], 4);
  EXPECT_EQ(stashedMicrobatches(ScheduleKind::kInterleaved, 0, 4, 8, 2), peaks[0]);
}

Result<SearchResult> planInterleaved(int layers, std::optional<std::int64_t> microbatches, int chunks = 2) {
  SearchOptions o = testing::twoStagePipeline();
  o.microbatches = microbatches;
  o.schedule = ScheduleKind::kInterleaved;
  o.chunks = chunks;
  return searchPlan(testing::toyProfile(layers), *loadCatalog("aci"), o);
}

// The plan cuts B·v pieces, gives stage s pieces s, s + B, ..., and writes
// them to plan.json, which reads back.
TEST(Interleaved, ThePlanHoldsEachStagesChunks) {
  auto r = planInterleaved(8, 4);
  ASSERT_TRUE(r.ok()) << r.status().message();
  SearchOptions o;
  o.schedule = ScheduleKind::kInterleaved;
  const Plan p = makePlan(*r, testing::toyProfile(8), o, "aci");
  EXPECT_EQ(p.chunks, 2);
  ASSERT_EQ(p.stages.size(), 2u);
  ASSERT_EQ(p.stages[0].chunks.size(), 2u);
  const std::vector<LayerRange> pieces = p.pieces();
  ASSERT_EQ(pieces.size(), 4u);
  EXPECT_EQ(pieces.front().first, 0);
  EXPECT_EQ(pieces.back().last, 7);
  EXPECT_EQ(pieces[1], p.stages[1].chunks[0]);
  EXPECT_EQ(pieces[2], p.stages[0].chunks[1]);
  auto back = planFromJson(planToJson(p), "plan.json");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(planToJson(*back), planToJson(p));
  EXPECT_NE(renderPlanTable(p).find(" + "), std::string::npos);

  // Chunks that do not tile the model, or a count that disagrees, are errors.
  Json bad = planToJson(p);
  bad["stages"][1]["chunks"][1][0] = bad["stages"][1]["chunks"][1][0].get<int>() + 1;
  auto rejected = planFromJson(bad, "plan.json");
  ASSERT_FALSE(rejected.ok());
  EXPECT_NE(rejected.status().message().find("stages[1].chunks[1]"), std::string::npos)
      << rejected.status().message();
  bad = planToJson(p);
  bad["chunks"] = 1;
  EXPECT_FALSE(planFromJson(bad, "plan.json").ok());
  bad = planToJson(p);
  bad["stages"][0]["chunks"].erase(1);
  EXPECT_FALSE(planFromJson(bad, "plan.json").ok());
}

// NOTE [Passes after another chunk's] (profile/measure.cc): an interleaved
// stage's passes each follow another chunk's, so the planner charges the
// layers' cold times where the profile has them; 1F1B's passes follow the
// same layers' and keep the warm ones.
TEST(Interleaved, EachPassIsChargedItsColdTime) {
  profile::Profile cold = testing::toyProfile(8);
  for (profile::Measurement& m : cold.measurements) {
    for (profile::LayerCost& c : m.layers) {
      c.cold_forward_ms = 1.5 * c.forward_ms;
      c.cold_backward_ms = 2 * c.backward_ms;
    }
  }
  SearchOptions o = testing::twoStagePipeline();
  o.microbatches = 4;
  o.schedule = ScheduleKind::kInterleaved;
  o.chunks = 2;
  auto warmPlan = searchPlan(testing::toyProfile(8), *loadCatalog("aci"), o);
  auto coldPlan = searchPlan(cold, *loadCatalog("aci"), o);
  ASSERT_TRUE(warmPlan.ok() && coldPlan.ok());
  const Candidate& w = warmPlan->best();
  const Candidate& c = coldPlan->best();
  ASSERT_EQ(c.microbatch_size, w.microbatch_size);
  const profile::Measurement& meas = *cold.at(c.microbatch_size);
  for (size_t s = 0; s < c.stage_details.size(); ++s) {
    double forward = 0, backward = 0;
    for (const LayerRange& r : c.stage_details[s].chunks) {
      for (int i = r.first; i <= r.last; ++i) {
        forward += meas.layers[static_cast<size_t>(i)].cold_forward_ms / 1e3;
        backward += meas.layers[static_cast<size_t>(i)].cold_backward_ms / 1e3;
      }
    }
    EXPECT_NEAR(c.stage_details[s].forward, forward, 1e-9);
    EXPECT_NEAR(c.stage_details[s].backward, backward, 1e-9);
  }
  EXPECT_GT(c.pipeline.total, 1.4 * w.pipeline.total);
  o.schedule = ScheduleKind::kOneFOneB;
  auto warm1f1b = searchPlan(testing::toyProfile(8), *loadCatalog("aci"), o);
  auto cold1f1b = searchPlan(cold, *loadCatalog("aci"), o);
  ASSERT_TRUE(warm1f1b.ok() && cold1f1b.ok());
  EXPECT_EQ(cold1f1b->best().pipeline.total, warm1f1b->best().pipeline.total);
}

TEST(Interleaved, ThePlannerSaysWhatCannotBeInterleaved) {
  // 3 layers cannot make 2 stages × 2 chunks.
  auto few = planInterleaved(3, 4);
  ASSERT_FALSE(few.ok());
  EXPECT_NE(few.status().message().find("3 layers cannot be cut into 2 stages × 2 chunks"), std::string::npos)
      << few.status().message();
  // M = 3 is not a multiple of the 2 stages.
  auto odd = planInterleaved(8, std::nullopt);
  ASSERT_TRUE(odd.ok());
  EXPECT_EQ(odd->best().microbatches % 2, 0);
}

}  // namespace
}  // namespace hydrozoa::plan
