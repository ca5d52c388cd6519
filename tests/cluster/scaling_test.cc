// Scaling policies (issue 4 §3): what each decides at epoch boundaries.
#include "cluster/scaling/policy.h"

#include "cluster/scaling/epochs.h"

#include <gtest/gtest.h>

#include <set>

#include "data/sampler.h"

namespace hydrozoa::cluster {
namespace {

ScalingInputs at(std::int64_t epoch, int replicas = 1) {
  ScalingInputs in;
  in.epoch = epoch;
  in.replicas = replicas;
  return in;
}

std::unique_ptr<ScalingPolicy> make(const ScalingSpec& s, int planReplicas) {
  auto p = ScalingPolicy::make(s, planReplicas);
  EXPECT_TRUE(p.ok()) << p.status().message();
  return p.ok() ? std::move(*p) : nullptr;
}

TEST(Scaling, FixedKeepsThePlansReplicas) {
  auto p = make({}, 3);
  EXPECT_EQ(p->initialReplicas(), 3);
  for (int e = 1; e < 10; ++e) EXPECT_EQ(p->decide(at(e, 3)).replicas, 3);
  EXPECT_EQ(p->decide(at(5, 3)).lr_factor, 1.0);
}

// The paper's DP-(1-16): double every k epochs up to the maximum, the
// learning rate x 0.75 at each doubling and not after.
TEST(Scaling, AdaBatchDoublesEveryKEpochsUpToTheMaximum) {
  ScalingSpec s;
  s.policy = "adabatch";
  s.min_replicas = 1;
  s.max_replicas = 4;
  s.every_epochs = 2;
  auto p = make(s, 4);
  EXPECT_EQ(p->initialReplicas(), 1);
  const int expect[] = {1, 1, 2, 2, 4, 4, 4, 4};
  for (int e = 1; e <= 8; ++e) EXPECT_EQ(p->decide(at(e)).replicas, expect[e - 1]) << "epoch " << e;
  EXPECT_DOUBLE_EQ(p->decide(at(2)).lr_factor, 1.0);
  EXPECT_DOUBLE_EQ(p->decide(at(3)).lr_factor, 0.75);
  EXPECT_DOUBLE_EQ(p->decide(at(5)).lr_factor, 0.5625);
  EXPECT_DOUBLE_EQ(p->decide(at(8)).lr_factor, 0.5625);
  EXPECT_NE(p->decide(at(3)).why.find("adabatch: 2 replicas from epoch 3"), std::string::npos);
}

TEST(Scaling, AdaBatchNeverExceedsAMaximumThatIsNoPowerOfTwo) {
  ScalingSpec s;
  s.policy = "adabatch";
  s.min_replicas = 2;
  s.max_replicas = 6;
  auto p = make(s, 2);
  EXPECT_EQ(p->decide(at(2)).replicas, 4);
  EXPECT_EQ(p->decide(at(3)).replicas, 4);  // 8 would exceed 6
  EXPECT_EQ(p->decide(at(30)).replicas, 4);
}

TEST(Scaling, ScheduleFollowsItsTable) {
  ScalingSpec s;
  s.policy = "schedule";
  s.schedule = {{2, 2}, {4, 4}};
  auto p = make(s, 1);
  EXPECT_EQ(p->initialReplicas(), 1);  // before the first entry: the plan's
  EXPECT_EQ(p->decide(at(1)).replicas, 1);
  EXPECT_EQ(p->decide(at(2)).replicas, 2);
  EXPECT_EQ(p->decide(at(3)).replicas, 2);
  EXPECT_EQ(p->decide(at(4)).replicas, 4);
  EXPECT_EQ(p->decide(at(40)).replicas, 4);
}

TEST(Scaling, ARuleSeesTheJobsStateAndIsClamped) {
  ScalingSpec s;
  s.policy = "rule";
  s.min_replicas = 1;
  s.max_replicas = 8;
  s.rule = "test_accuracy < 0.85 ? replicas * 2 : replicas";
  auto p = make(s, 2);
  EXPECT_TRUE(p->usesMetrics());
  EXPECT_EQ(p->initialReplicas(), 2);
  ScalingInputs in = at(2, 2);
  in.test_accuracy = 0.6;
  EXPECT_EQ(p->decide(in).replicas, 4);
  in.test_accuracy = 0.9;
  EXPECT_EQ(p->decide(in).replicas, 2);
  in.replicas = 8;
  in.test_accuracy = 0.1;
  EXPECT_EQ(p->decide(in).replicas, 8);  // 16, clamped
  s.rule = "max(1, floor(epoch / 2))";
  p = make(s, 1);
  EXPECT_EQ(p->decide(at(5)).replicas, 2);
}

TEST(Scaling, BadSpecsNameTheFieldAndTheFix) {
  struct Case {
    ScalingSpec spec;
    std::string expect;
  };
  ScalingSpec unknown;
  unknown.policy = "elastic";
  ScalingSpec range;
  range.policy = "adabatch";
  range.min_replicas = 4;
  range.max_replicas = 2;
  ScalingSpec decay;
  decay.policy = "adabatch";
  decay.lr_decay = 1.5;
  ScalingSpec empty;
  empty.policy = "schedule";
  ScalingSpec noRule;
  noRule.policy = "rule";
  ScalingSpec typo;
  typo.policy = "rule";
  typo.rule = "replica * 2";
  ScalingSpec syntax;
  syntax.policy = "rule";
  syntax.rule = "replicas * (2";
  for (const Case& c : std::vector<Case>{
           {unknown, "job.yaml: scaling.policy: unknown policy \"elastic\"; use fixed, schedule, adabatch or rule"},
           {range, "job.yaml: scaling.max_replicas: must be at least min_replicas (4)"},
           {decay, "job.yaml: scaling.lr_decay: must be in (0, 1]"},
           {empty, "job.yaml: scaling.schedule: the schedule policy needs a table"},
           {noRule, "job.yaml: scaling.rule: the rule policy needs a rule"},
           {typo, "\"replica * 2\": Unexpected token \"replica\""},
           {syntax, "job.yaml: scaling.rule: \"replicas * (2\""},
       }) {
    const Status s = validateScalingSpec(c.spec, "job.yaml");
    ASSERT_FALSE(s.ok()) << c.expect;
    EXPECT_NE(s.message().find(c.expect), std::string::npos) << s.message();
  }
}


// With replan, a decision that changes the replicas asks for a re-plan;
// one that keeps them does not.
TEST(Scaling, ReplanIsAskedForWhenTheReplicasChange) {
  ScalingSpec s;
  s.policy = "adabatch";
  s.max_replicas = 4;
  s.replan = true;
  auto p = make(s, 4);
  EXPECT_TRUE(p->decide(at(2, 1)).replan);   // 1 -> 2
  EXPECT_FALSE(p->decide(at(1, 1)).replan);  // stays at 1
  s.replan = false;
  EXPECT_FALSE(make(s, 4)->decide(at(2, 1)).replan);
}

// Epochs keep their samples when the replicas change; steps count on.
TEST(EpochSchedule, StepsPerEpochFollowTheReplicasAndStepsCountOn) {
  EpochSchedule s(1000, 64, false);
  s.append(0, 1, 1.0, "");
  s.append(2, 2, 0.75, "double");
  s.append(3, 4, 0.5625, "double");
  EXPECT_EQ(s.stepsPerEpoch(1), 16);  // ceil(1000 / 64)
  EXPECT_EQ(s.stepsPerEpoch(2), 8);
  EXPECT_EQ(s.stepsPerEpoch(4), 4);
  EXPECT_EQ(s.epochStart(0), 0);
  EXPECT_EQ(s.epochStart(2), 32);
  EXPECT_EQ(s.epochStart(3), 40);
  EXPECT_EQ(s.epochStart(5), 48);
  EXPECT_EQ(s.epochOf(31), 1);
  EXPECT_EQ(s.epochOf(32), 2);
  EXPECT_EQ(s.epochOf(39), 2);
  EXPECT_EQ(s.epochOf(44), 4);
  EXPECT_EQ(s.stepInEpoch(45), 1);
  EXPECT_EQ(s.atStep(40).replicas, 4);
  EXPECT_EQ(s.atEpoch(1).replicas, 1);
  EXPECT_DOUBLE_EQ(s.atEpoch(9).lr_factor, 0.5625);
  EXPECT_TRUE(s.isEpochStart(40));
  EXPECT_FALSE(s.isEpochStart(41));
  // A decision taken again replaces the later ones.
  s.append(2, 3, 1.0, "rule");
  ASSERT_EQ(s.segments().size(), 2u);
  EXPECT_EQ(s.epochStart(3), 32 + s.stepsPerEpoch(3));
}

TEST(EpochSchedule, RoundTripsThroughJsonAndRefusesADamagedRecord) {
  EpochSchedule s(1000, 64, true);
  s.append(0, 1, 1.0, "");
  s.append(1, 4, 0.75, "adabatch");
  auto back = EpochSchedule::fromJson(s.toJson(), 1000, true);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->toJson(), s.toJson());
  Json bad = s.toJson();
  bad["segments"][1]["first_step"] = 3;
  auto refused = EpochSchedule::fromJson(bad, 1000, true);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("begins at step 3, not 15"), std::string::npos)
      << refused.status().message();
  EXPECT_FALSE(EpochSchedule::fromJson(Json::object(), 1000, true).ok());
}

// Across a change of replicas every sample is used exactly once per epoch:
// the sampler at each segment's replicas covers the dataset.
TEST(EpochSchedule, EverySampleOncePerEpochAcrossAChange) {
  EpochSchedule s(203, 8, false);
  s.append(0, 1, 1.0, "");
  s.append(1, 3, 1.0, "");
  for (std::int64_t epoch = 0; epoch < 3; ++epoch) {
    const Segment& seg = s.atEpoch(epoch);
    data::SamplerOptions o;
    o.dataset_size = 203;
    o.replicas = seg.replicas;
    o.microbatch_size = 4;
    o.global_batch = seg.replicas * 8;
    o.seed = 7;
    data::EpochSampler sampler(o);
    ASSERT_EQ(sampler.stepsPerEpoch(), s.stepsPerEpoch(seg.replicas));
    std::multiset<std::int64_t> seen;
    for (std::int64_t k = s.epochStart(epoch); k < s.epochStart(epoch + 1); ++k) {
      for (int r = 0; r < seg.replicas; ++r) {
        for (int mb = 0; mb < 2; ++mb) {
          for (std::int64_t i : sampler.indices(epoch, s.stepInEpoch(k), r, mb)) seen.insert(i);
        }
      }
    }
    ASSERT_EQ(seen.size(), 203u) << "epoch " << epoch;
    EXPECT_EQ(std::set<std::int64_t>(seen.begin(), seen.end()).size(), 203u);
  }
}

}  // namespace
}  // namespace hydrozoa::cluster
