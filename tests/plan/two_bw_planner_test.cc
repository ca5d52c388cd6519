// PipeDream-2BW's planner (plan/planners/two_bw_planner.h): its closed-form
// throughput and memory by hand, the stage split against brute force, and
// the choice: fastest that fits, 2BW only with m ≥ p.
#include "plan/planners/two_bw_planner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "plan/toy_profile.h"

namespace hydrozoa::plan {
namespace {

// Two layers of 1 ms + 2 ms each at b = 1 (twice at b = 2), 1 MB of
// weights each, 1 kB out, 2 kB stashed; input 1 kB.
profile::Profile twoLayers() {
  profile::Profile p;
  p.model = "two";
  for (int i = 0; i < 2; ++i) p.layers.push_back({"l" + std::to_string(i), "linear", 1000000, 1000000});
  for (std::int64_t b : {1, 2}) {
    profile::Measurement m;
    m.microbatch_size = b;
    m.input_bytes = 1000 * b;
    for (int i = 0; i < 2; ++i) m.layers.push_back({1.0 * b, 2.0 * b, 1000 * b, 2000 * b, 0});
    p.measurements.push_back(m);
  }
  return p;
}

TEST(TwoBwPlanner, ClosedFormsByHand) {
  const profile::Profile prof = twoLayers();
  TwoBwPlannerOptions o;
  o.workers = 2;
  o.global_batch = 8;
  o.in_pipeline = 1e6;     // 1 MB/s: 2·(1 kB) = 2 ms per microbatch across the cut
  o.cross_pipeline = 1e6;  // 2·(1/2)·2 MB / 1 MB/s = 2 s of allreduce at d = 2
  TwoBwConfig c;
  c.stages = 2;
  c.microbatch_size = 1;
  c.microbatches = 8;
  c = evaluateTwoBw(prof, prof.measurements[0], o, c);
  EXPECT_EQ(c.first_layer, (std::vector<int>{0, 1}));
  // Per stage T = 3 ms, C = 2·1 kB / 1 MB/s = 2 ms: t = 5 ms per microbatch.
  EXPECT_NEAR(c.batch_seconds, 8 * 0.005, 1e-12);
  EXPECT_NEAR(c.samples_per_second, 8 / 0.04, 1e-9);
  // 2|W| + p|A| + p|A_in| on stage 1 (its input is layer 0's output).
  EXPECT_EQ(c.memory, 2 * 1000000 + 2 * 2000 + 2 * 1000);
  c.recompute = true;
  c = evaluateTwoBw(prof, prof.measurements[0], o, c);
  EXPECT_NEAR(c.batch_seconds, 8 * (4.0 / 3.0 * 0.003 + 0.002), 1e-12);
  EXPECT_EQ(c.memory, 2 * 1000000 + 2000 + 2 * 1000);
  // PipeDream-Flush: (m + p − 1) per-microbatch times, one weight version.
  c.schedule = ScheduleKind::kOneFOneB;
  c.recompute = false;
  c = evaluateTwoBw(prof, prof.measurements[0], o, c);
  EXPECT_NEAR(c.batch_seconds, 9 * 0.005, 1e-12);
  EXPECT_EQ(c.memory, 1000000 + 2 * 2000 + 2 * 1000);
  // Data parallel (d = 2, p = 1): the allreduce, every m = 4 microbatches of b = 1.
  TwoBwConfig dp;
  dp.data_parallel = 2;
  dp.microbatches = 4;
  dp = evaluateTwoBw(prof, prof.measurements[0], o, dp);
  EXPECT_NEAR(dp.batch_seconds, 4 * std::max(0.006, 2.0 / 4), 1e-12);
}

// The stages split the chain where the slowest is least (brute force over
// every split of 7 layers into 3).
TEST(TwoBwPlanner, StagesAreTheBalancedSplit) {
  const profile::Profile prof = testing::toyProfile(7, 3);
  const profile::Measurement& m = prof.measurements[0];
  std::vector<double> cost;
  for (const auto& l : m.layers) cost.push_back(l.forward_ms + l.backward_ms);
  double best = 1e300;
  for (int a = 1; a < 7; ++a) {
    for (int b = a + 1; b < 7; ++b) {
      auto sum = [&](int i, int j) { return std::accumulate(cost.begin() + i, cost.begin() + j, 0.0); };
      best = std::min(best, std::max({sum(0, a), sum(a, b), sum(b, 7)}));
    }
  }
  TwoBwPlannerOptions o;
  o.workers = 3;
  o.global_batch = 24;
  TwoBwConfig c;
  c.stages = 3;
  c.microbatches = 24;
  c = evaluateTwoBw(prof, m, o, c);
  ASSERT_EQ(c.first_layer.size(), 3u);
  double slowest = 0;
  for (int s = 0; s < 3; ++s) {
    const int last = s + 1 < 3 ? c.first_layer[s + 1] : 7;
    slowest = std::max(slowest, std::accumulate(cost.begin() + c.first_layer[s], cost.begin() + last, 0.0));
  }
  EXPECT_NEAR(slowest, best, 1e-9);
}

// The choice: 2BW never with m < p; the fastest that fits; with a limit only
// recomputation meets, recomputation.
TEST(TwoBwPlanner, ChoosesTheFastestThatFits) {
  const profile::Profile prof = testing::toyProfile(8);
  TwoBwPlannerOptions o;
  o.workers = 4;
  o.global_batch = 16;
  o.in_pipeline = o.cross_pipeline = 1e9;
  auto r = planTwoBw(prof, o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_TRUE(r->best);
  for (const TwoBwConfig& c : r->considered) {
    if (c.schedule == ScheduleKind::kTwoBW) {
      EXPECT_GE(c.microbatches, c.stages);
      EXPECT_GT(c.stages, 1);
    }
    EXPECT_EQ(c.data_parallel * c.stages, 4);
    EXPECT_LE(c.samples_per_second, r->best->samples_per_second + 1e-9);
  }
  // A limit between the least memory with recomputation and without.
  Bytes with = INT64_MAX, without = INT64_MAX;
  for (const TwoBwConfig& c : r->considered) (c.recompute ? with : without) = std::min(c.recompute ? with : without, c.memory);
  ASSERT_LT(with, without);
  o.memory_limit = (with + without) / 2;
  r = planTwoBw(prof, o);
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r->best);
  EXPECT_TRUE(r->best->recompute);
  EXPECT_LE(r->best->memory, *o.memory_limit);
  EXPECT_NE(renderTwoBw(*r, o).find("does not fit"), std::string::npos);
  o.memory_limit = 1;
  r = planTwoBw(prof, o);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->best);
  o.global_batch = 7;  // no measured size divides it among any replicas but d = 1, and b = 1 gives 7 < p for 2bw
  EXPECT_TRUE(planTwoBw(prof, o).ok());
}

}  // namespace
}  // namespace hydrozoa::plan
