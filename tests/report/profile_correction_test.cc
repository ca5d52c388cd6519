#include "report/profile_correction.h"

#include <gtest/gtest.h>

#include "plan/toy_profile.h"

namespace hydrozoa::report {
namespace {

// A run of the toy profile's 6 layers as 2 stages (0-2 | 3-5), stage 0
// traced at 2x its prediction and stage 1 at half of it; workers 0 and 1
// (stage 0 and 1) peaked 30 MB and 50 MB above their plans.
RunReport twoStageRun() {
  RunReport run;
  run.dir = "runs/toy";
  plan::Plan p;
  p.model = "toy";
  p.pipeline_stages = 2;
  p.stages.resize(2);
  p.stages[0].first_layer = 0;
  p.stages[0].last_layer = 2;
  p.stages[0].memory_bytes = 300 * kMB;
  p.stages[1].first_layer = 3;
  p.stages[1].last_layer = 5;
  p.stages[1].memory_bytes = 200 * kMB;
  run.plan = p;
  StageTiming a, b;
  a.stage = 0;
  a.predicted_compute = 0.010;
  a.measured_compute = 0.020;
  a.predicted_update = 0.004;  // stage 0's optimizer step took 3x its prediction; stage 1's was not traced
  a.measured_update = 0.012;
  b.stage = 1;
  b.predicted_compute = 0.030;
  b.measured_compute = 0.015;
  run.stages = {a, b};
  RunOutcome o;
  o.workers = {{0, 0, 0, 330 * kMB}, {1, 0, 1, 250 * kMB}};
  run.outcome = o;
  return run;
}

TEST(CorrectProfile, EachStagesLayersTakeItsMeasuredOverPredictedFactorAtEverySize) {
  profile::Profile before = plan::testing::toyProfile(6);
  for (profile::Measurement& m : before.measurements) {  // NOTE [Passes after another chunk's]: scaled alike
    for (profile::LayerCost& l : m.layers) {
      l.cold_forward_ms = 1.25 * l.forward_ms;
      l.cold_backward_ms = 1.5 * l.backward_ms;
    }
  }
  auto c = correctProfile(before, twoStageRun());
  ASSERT_TRUE(c.ok()) << c.status().message();
  ASSERT_EQ(c->stages.size(), 2u);
  EXPECT_DOUBLE_EQ(c->stages[0].factor, 2.0);
  EXPECT_DOUBLE_EQ(c->stages[1].factor, 0.5);
  for (size_t m = 0; m < before.measurements.size(); ++m) {
    for (size_t i = 0; i < 6; ++i) {
      const double f = i <= 2 ? 2.0 : 0.5;
      const auto& was = before.measurements[m].layers[i];
      const auto& now = c->profile.measurements[m].layers[i];
      EXPECT_DOUBLE_EQ(now.forward_ms, f * was.forward_ms);
      EXPECT_DOUBLE_EQ(now.backward_ms, f * was.backward_ms);
      EXPECT_DOUBLE_EQ(now.cold_forward_ms, f * was.cold_forward_ms);
      EXPECT_DOUBLE_EQ(now.cold_backward_ms, f * was.cold_backward_ms);
      EXPECT_EQ(now.output_bytes, was.output_bytes);  // only times change
      EXPECT_EQ(now.stashed_bytes, was.stashed_bytes);
    }
  }
}

// Interleaved, 2 chunks per stage: the model's pieces 0-1 | 2 | 3 | 4-5,
// stage 0 holding 0-1 and 3, stage 1 holding 2 and 4-5; each stage's
// factor goes to every layer it ran.
TEST(CorrectProfile, AnInterleavedStagesFactorGoesToEveryChunk) {
  const profile::Profile before = plan::testing::toyProfile(6);
  RunReport run = twoStageRun();
  run.plan->schedule = plan::ScheduleKind::kInterleaved;
  run.plan->chunks = 2;
  run.plan->stages[0].chunks = {{0, 1}, {3, 3}};
  run.plan->stages[0].first_layer = 0;
  run.plan->stages[0].last_layer = 1;
  run.plan->stages[1].chunks = {{2, 2}, {4, 5}};
  run.plan->stages[1].first_layer = 2;
  run.plan->stages[1].last_layer = 2;
  auto c = correctProfile(before, run);
  ASSERT_TRUE(c.ok()) << c.status().message();
  for (size_t i = 0; i < 6; ++i) {
    const double f = (i <= 1 || i == 3) ? 2.0 : 0.5;
    EXPECT_DOUBLE_EQ(c->profile.measurements[0].layers[i].forward_ms, f * before.measurements[0].layers[i].forward_ms)
        << "layer " << i;
  }
  ASSERT_EQ(c->stages.size(), 2u);
  EXPECT_EQ(c->stages[0].layers, "0-1 + 3-3");  // every chunk, as `hydrozoa profile --from-run` prints them
  EXPECT_EQ(c->stages[1].layers, "2-2 + 4-5");
  EXPECT_EQ(twoStageRun().plan->stages[1].layersText(), "3-5");
}

TEST(CorrectProfile, TheUpdateTakesItsOwnFactorWhereTheRunTracedIt) {
  profile::Profile before = plan::testing::toyProfile(6);
  for (auto& l : before.layers) l.optimizer_ms = 1.5;
  auto c = correctProfile(before, twoStageRun());
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_DOUBLE_EQ(c->stages[0].update_factor, 3.0);
  EXPECT_FALSE(c->stages[1].update_measured);
  for (size_t i = 0; i < 6; ++i) EXPECT_DOUBLE_EQ(c->profile.layers[i].optimizer_ms, i <= 2 ? 4.5 : 1.5);

  RunReport far = twoStageRun();
  far.stages[0].measured_update = 1.0;  // 250x
  auto refused = correctProfile(before, far);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("stage 0's optimizer update took"), std::string::npos)
      << refused.status().message();
}

TEST(CorrectProfile, TheWorkerFurthestAboveItsPlanSetsTheProcessMemory) {
  const profile::Profile before = plan::testing::toyProfile(6);
  auto c = correctProfile(before, twoStageRun());
  ASSERT_TRUE(c.ok()) << c.status().message();
  ASSERT_TRUE(c->memory_worker.has_value());
  EXPECT_EQ(*c->memory_worker, 1);
  EXPECT_EQ(c->runtime_before, 100 * kMB);
  EXPECT_EQ(c->runtime_after, 150 * kMB);
  EXPECT_EQ(c->profile.runtime_bytes, 150 * kMB);
  // Every worker below its plan: the runtime shrinks by the least shortfall.
  RunReport run = twoStageRun();
  run.outcome->workers = {{0, 0, 0, 280 * kMB}, {1, 0, 1, 190 * kMB}};
  c = correctProfile(before, run);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->runtime_after, 90 * kMB);
}

TEST(CorrectProfile, ARunWithoutTraceOrPeaksOrOfAnotherModelIsRefused) {
  const profile::Profile before = plan::testing::toyProfile(6);
  RunReport run = twoStageRun();
  run.stages.clear();
  run.outcome->workers.clear();
  auto c = correctProfile(before, run);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("nothing to correct"), std::string::npos) << c.status().message();

  run = twoStageRun();
  run.plan->model = "cnn";
  c = correctProfile(before, run);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("plan is for cnn"), std::string::npos) << c.status().message();

  run = twoStageRun();
  run.plan->stages[1].last_layer = 9;  // the profile has 6 layers
  c = correctProfile(before, run);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("6 layers"), std::string::npos) << c.status().message();

  run = twoStageRun();
  run.plan.reset();
  EXPECT_FALSE(correctProfile(before, run).ok());
}

TEST(CorrectProfile, AFactorPastTheLimitIsRefusedNotApplied) {
  const profile::Profile before = plan::testing::toyProfile(6);
  RunReport run = twoStageRun();
  run.stages[1].measured_compute = 0.030 * (kMaxCorrection + 1);
  auto c = correctProfile(before, run);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("stage 1"), std::string::npos) << c.status().message();
  // Stages without both figures are left alone.
  run = twoStageRun();
  run.stages[1].measured_compute.reset();
  c = correctProfile(before, run);
  ASSERT_TRUE(c.ok());
  ASSERT_EQ(c->stages.size(), 1u);
  EXPECT_DOUBLE_EQ(c->profile.measurements[0].layers[4].forward_ms, before.measurements[0].layers[4].forward_ms);
}

}  // namespace
}  // namespace hydrozoa::report
