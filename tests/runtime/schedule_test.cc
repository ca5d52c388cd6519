// The pipeline schedules (runtime/schedule/): their order of passes, and
// that every stage's actions run against the others' without deadlock
// (verifySchedule plays every stage's receives against its peers' sends).
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <numeric>

#include "plan/cost/round_robin.h"
#include "runtime/schedule/gpipe.h"
#include "runtime/schedule/interleaved.h"
#include "runtime/schedule/one_f_one_b.h"
#include "runtime/schedule/pipedream.h"
#include "runtime/schedule/two_bw.h"

namespace hydrozoa::runtime {
namespace {

Action F(int mb) { return {ActionKind::kForward, mb}; }
Action B(int mb) { return {ActionKind::kBackward, mb}; }

TEST(GPipeSchedule, AllForwardsThenAllBackwardsInReverse) {
  const auto a = GPipeSchedule().computeOrder({1, 3, 1, 3});
  EXPECT_EQ(a, (std::vector<Action>{F(0), F(1), F(2), B(2), B(1), B(0)}));
}

TEST(GPipeSchedule, LoweredWithTransfersTheFinalBackwardAndTheFlush) {
  const auto a = GPipeSchedule().actions({1, 3, 1, 2});
  std::vector<std::string> got;
  for (const Action& x : a) got.push_back(toString(x));
  EXPECT_EQ(got, (std::vector<std::string>{"recv act mb0 c0 from 0", "F0", "send act mb0 c0 to 2",
                                           "recv act mb1 c0 from 0", "F1", "send act mb1 c0 to 2",
                                           "recv grad mb1 c0 from 2", "B1", "send grad mb1 c0 to 0",
                                           "recv grad mb0 c0 from 2", "B0*", "send grad mb0 c0 to 0", "sync", "step"}));
}

TEST(OneFOneBSchedule, WarmUpSteadyStateCoolDown) {
  // Stage 0 of 3, 5 microbatches: 2 warm-up forwards, then F/B pairs, then 2 backwards.
  EXPECT_EQ(OneFOneBSchedule().computeOrder({0, 3, 1, 5}),
            (std::vector<Action>{F(0), F(1), F(2), B(0), F(3), B(1), F(4), B(2), B(3), B(4)}));
  // The last stage alternates from the start.
  EXPECT_EQ(OneFOneBSchedule().computeOrder({2, 3, 1, 3}),
            (std::vector<Action>{F(0), B(0), F(1), B(1), F(2), B(2)}));
  // Fewer microbatches than stages: all forwards, then all backwards in order.
  EXPECT_EQ(OneFOneBSchedule().computeOrder({0, 4, 1, 2}), (std::vector<Action>{F(0), F(1), B(0), B(1)}));
}

// 1F1B's point (PipeDream-Flush, seed 003 §3.2): stage s stashes at most
// p − s microbatches' activations, where GPipe stashes all M.
TEST(OneFOneBSchedule, StashesAtMostStagesMinusStageMicrobatches) {
  for (int p : {1, 2, 4}) {
    for (int M : {1, 4, 8, 16}) {
      for (int s = 0; s < p; ++s) {
        EXPECT_EQ(peakStashed(OneFOneBSchedule().actions({s, p, 1, M})), std::min(p - s, M))
            << "p=" << p << " M=" << M << " s=" << s;
        EXPECT_EQ(peakStashed(GPipeSchedule().actions({s, p, 1, M})), M);
      }
    }
  }
}

TEST(Schedule, EveryStageRunsAgainstItsPeersWithoutDeadlock) {
  for (const std::string& name : scheduleNames()) {
    auto schedule = makeSchedule(name);
    ASSERT_TRUE(schedule.ok());
    const std::vector<int> chunks = name == "interleaved" ? std::vector<int>{2, 3, 4} : std::vector<int>{1};
    for (int v : chunks) {
      for (int p : {1, 2, 3, 4, 8}) {
        for (int M : {0, 1, 2, 3, 4, 5, 8, 12, 13, 32}) {
          const Status s = verifySchedule(**schedule, p, v, M);
          EXPECT_TRUE(s.ok()) << s.message();
        }
      }
    }
  }
}

// Interleaved (PTD-P §4.2.2, Figure 4): 2 stages, 2 chunks, 4 microbatches.
// Stage 0 warms up with (2 − 0 − 1)·2 + (2 − 1)·2 = 4 forwards: chunk 0's
// microbatches 0 and 1, then chunk 1's; its backwards start from the last
// chunk.
TEST(InterleavedSchedule, GroupsOfStagesMicrobatchesChunkByChunk) {
  const auto order = InterleavedSchedule().computeOrder({0, 2, 2, 4});
  std::vector<std::string> got;
  for (const Action& a : order) got.push_back(toString(a));
  EXPECT_EQ(got, (std::vector<std::string>{"F0", "F1", "F0c1", "F1c1", "F2", "B0c1", "F3", "B1c1", "F2c1", "B0",
                                           "F3c1", "B1", "B2c1", "B3c1", "B2", "B3"}));
  // Every (chunk, microbatch) once each way.
  EXPECT_EQ(order.size(), 16u);
}

TEST(InterleavedSchedule, ChecksItsConstraints) {
  const Status one = InterleavedSchedule().check({0, 2, 1, 4});
  ASSERT_FALSE(one.ok());
  EXPECT_NE(one.message().find("--chunks 2"), std::string::npos) << one.message();
  const Status odd = InterleavedSchedule().check({0, 4, 2, 6});
  ASSERT_FALSE(odd.ok());
  EXPECT_NE(odd.message().find("a multiple of the 4 stages, not 6: pass --microbatches 8 (or 4)"), std::string::npos)
      << odd.message();
  EXPECT_TRUE(InterleavedSchedule().check({0, 4, 2, 8}).ok());
}

// The checker itself catches what it is for: a two-stage pipeline whose
// stages run the given orders.
class Fixed final : public Schedule {
 public:
  Fixed(std::vector<Action> first, std::vector<Action> last) : first_(std::move(first)), last_(std::move(last)) {}
  const char* name() const override { return "fixed"; }
  std::vector<Action> computeOrder(const PipelineShape& shape) const override {
    return shape.stage == 0 ? first_ : last_;
  }

 private:
  std::vector<Action> first_, last_;
};

TEST(Schedule, TheCheckerFindsDeadlocksAndInvalidSteps) {
  const std::vector<Action> gpipe = {F(0), F(1), B(1), B(0)};
  EXPECT_TRUE(verifySchedule(Fixed(gpipe, {F(0), B(0), F(1), B(1)}), 2, 1, 2).ok());
  // Stage 0 waits for the gradient of 0 before sending microbatch 1, which
  // stage 1 needs before it runs the backward of 0.
  const Status deadlock = verifySchedule(Fixed({F(0), B(0), F(1), B(1)}, gpipe), 2, 1, 2);
  ASSERT_FALSE(deadlock.ok());
  EXPECT_NE(deadlock.message().find("deadlocks: stage 0 waits at \"recv grad mb0 c0 from 1\"; stage 1 waits at "
                                    "\"recv act mb1 c0 from 0\""),
            std::string::npos)
      << deadlock.message();
  EXPECT_FALSE(verifySchedule(Fixed(gpipe, {F(0), B(0)}), 2, 1, 2).ok());              // a pass missing
  EXPECT_FALSE(verifySchedule(Fixed(gpipe, {B(0), F(0), F(1), B(1)}), 2, 1, 2).ok());  // backward first
  EXPECT_FALSE(verifySchedule(Fixed(gpipe, {F(0), F(0), B(0), B(1)}), 2, 1, 2).ok());  // twice
}

TEST(Schedule, UnknownNameIsAnError) {
  EXPECT_TRUE(makeSchedule("gpipe").ok());
  EXPECT_TRUE(makeSchedule("1f1b").ok());
  auto bad = makeSchedule("zero-bubble");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("available: gpipe, 1f1b, interleaved"), std::string::npos)
      << bad.status().message();
}

TEST(Schedule, OneChunkUnlessInterleaved) {
  const Status s = OneFOneBSchedule().check({0, 2, 2, 4});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("--schedule interleaved"), std::string::npos) << s.message();
}

// 2bw: a step carried into the next begins its first p − s − 1
// microbatches among its own last backward passes; consecutive steps of any
// sizes (an epoch's short last one too) run against each other without
// deadlock, every microbatch once each way, and a stage never holds more
// than p − s microbatches, across the step boundary.
TEST(TwoBwSchedule, StepsOverlapWithoutDeadlock) {
  const TwoBwSchedule schedule;
  std::vector<std::string> got;
  for (const Action& a : schedule.actions({0, 2, 1, 2}, 1, 2)) got.push_back(toString(a));
  EXPECT_EQ(got, (std::vector<std::string>{"F1", "send act mb1 c0 to 1", "recv grad mb0 c0 from 1", "B0", "F0@+1",
                                           "send act mb0 c0@+1 to 1", "recv grad mb1 c0 from 1", "B1*", "sync",
                                           "step"}))
      << "F0 of this step was carried in; F0 of the next runs before B1";
  for (int p = 1; p <= 6; ++p) {
    for (const std::vector<int>& steps :
         std::vector<std::vector<int>>{{p}, {p, p}, {p, p + 3, p, 1}, {p + 1, 2 * p, p, p + 2, 1}}) {
      const Status s = verifySteps(schedule, p, 1, steps);
      EXPECT_TRUE(s.ok()) << s.message();
    }
    for (int stage = 0; stage < p; ++stage) {
      std::vector<Action> all;
      int carried = 0;
      for (int k = 0; k < 4; ++k) {
        const PipelineShape shape{stage, p, 1, p + 1};
        for (const Action& a : schedule.actions(shape, carried, k < 3 ? p + 1 : 0)) all.push_back(a);
        carried = k < 3 ? schedule.carriedInto(shape, p + 1) : 0;
      }
      EXPECT_EQ(peakStashed(all), p - stage) << p << " " << stage;
    }
  }
}

// PipeDream: the same stream, every backward pass followed by the sync and
// the update of its microbatch (after its gradient has left); steps overlap
// without deadlock as 2bw's do; p − s weight versions on stage s.
TEST(PipeDreamSchedule, AnUpdatePerMicrobatch) {
  const PipeDreamSchedule schedule;
  std::vector<std::string> got;
  for (const Action& a : schedule.actions({1, 2, 1, 2}, 0, 2)) got.push_back(toString(a));
  EXPECT_EQ(got, (std::vector<std::string>{"recv act mb0 c0 from 0", "F0", "B0*", "send grad mb0 c0 to 0", "sync",
                                           "step", "recv act mb1 c0 from 0", "F1", "B1*", "send grad mb1 c0 to 0",
                                           "sync", "step"}))
      << "the last stage: one in flight";
  for (int p = 1; p <= 5; ++p) {
    EXPECT_EQ(schedule.weightVersions({0, p, 1, p}), p);
    EXPECT_EQ(schedule.weightVersions({p - 1, p, 1, p}), 1);
    for (const std::vector<int>& steps : std::vector<std::vector<int>>{{p}, {p, p + 3, 1}, {1, 2 * p, p}}) {
      const Status s = verifySteps(schedule, p, 1, steps);
      EXPECT_TRUE(s.ok()) << s.message();
    }
  }
}

// NOTE [Round-robin over a stage's replicas]: every replica of every stage
// runs against the others without deadlock, every microbatch once each way
// per stage, over consecutive steps (a short last one too).
TEST(RoundRobin, EveryScheduleRunsOverStagesReplicatedUnevenly) {
  const std::vector<std::vector<int>> layouts = {{2, 1}, {3, 1}, {1, 2}, {2, 1, 1}, {1, 3, 2}, {3, 1, 2}, {12, 3, 1},
                                                 {2, 2, 2}};
  for (const std::string name : {"gpipe", "1f1b", "2bw", "pipedream"}) {
    auto schedule = makeSchedule(name);
    ASSERT_TRUE(schedule.ok());
    for (const std::vector<int>& r : layouts) {
      int K = 1, workers = 0;
      for (int x : r) K = std::lcm(K, x), workers += x;
      while (K < workers) K *= 2;  // 2bw: a step holds stage 0's microbatches in flight
      const std::vector<std::vector<int>> runs = {{K}, {K, 2 * K}, {K, K, K - 1}, {K, 2 * K, 1}};
      for (const std::vector<int>& steps : runs) {
        const Status st = verifySteps(**schedule, static_cast<int>(r.size()), 1, steps, r);
        EXPECT_TRUE(st.ok()) << name << " " << fmt::format("{}", fmt::join(r, ",")) << ": " << st.message();
      }
    }
  }
}

// Every stage replicated alike, the dealt order of replica j is the order
// each copy of the pipeline runs on its own: round-robin generalises it.
TEST(RoundRobin, EvenReplicasDealTheOrderOfEachCopy) {
  for (const std::string name : {"gpipe", "1f1b", "2bw", "pipedream"}) {
    auto schedule = makeSchedule(name);
    ASSERT_TRUE(schedule.ok());
    for (int p = 1; p <= 4; ++p) {
      for (int d : {2, 3}) {
        for (int stage = 0; stage < p; ++stage) {
          for (int j = 0; j < d; ++j) {
            const int M = p + 2;
            const PipelineShape copy{stage, p, 1, M};
            PipelineShape dealt{stage, p, 1, M, std::vector<int>(static_cast<size_t>(p), d), j, M * d};
            EXPECT_EQ((*schedule)->actions(copy, 0, M), (*schedule)->actions(dealt, 0, M * d))
                << name << " p " << p << " d " << d << " stage " << stage << " replica " << j;
            EXPECT_EQ((*schedule)->carriedInto(copy, M) * d, (*schedule)->carriedInto(dealt, M * d));
            EXPECT_EQ((*schedule)->weightVersions(copy), (*schedule)->weightVersions(dealt));
          }
        }
      }
    }
  }
}

// Each copy of stage s holds h_s = ⌈(r_s + Σ_{t>s} r_t) / r_s⌉ microbatches
// of its own at once, the planner's memory term (plan/cost/round_robin.h):
// 4 copies before a single stage hold 2 each, so that a copy forwards its
// next microbatch before its last one's gradient is back.
TEST(RoundRobin, EachCopyHoldsPipeDreamsNoamOfItsOwn) {
  for (const std::vector<int>& r : std::vector<std::vector<int>>{{4, 1}, {2, 1}, {3, 1, 2}, {2, 2, 1}, {1, 4, 1}}) {
    const int p = static_cast<int>(r.size());
    const std::vector<std::int64_t> held = plan::roundRobinInFlight(r);
    const int K = 12 * std::accumulate(r.begin(), r.end(), 0);
    for (int s = 0; s < p; ++s) {
      for (int j = 0; j < r[static_cast<size_t>(s)]; ++j) {
        const PipelineShape shape = PipelineShape{s, p, 1, 0, r, j}.forStep(K);
        EXPECT_EQ(peakStashed(OneFOneBSchedule().actions(shape)), held[static_cast<size_t>(s)])
            << fmt::format("{}", fmt::join(r, ",")) << " stage " << s << " replica " << j;
      }
    }
  }
  const std::vector<Action> copy = OneFOneBSchedule().computeOrder(PipelineShape{0, 2, 1, 0, {4, 1}, 0}.forStep(12));
  EXPECT_EQ(std::vector<Action>(copy.begin(), copy.begin() + 4), (std::vector<Action>{F(0), F(1), B(0), F(2)}))
      << "microbatches 0 and 4 of the step before 0's backward pass";
}

TEST(RoundRobin, RoutesEachMicrobatchToTheReplicaItIsDealtTo) {
  const PipelineShape shape{0, 2, 1, 2, {3, 2}, 1, 6};  // replica 1 of 3: microbatches 1 and 4
  EXPECT_EQ(shape.stepMicrobatch(0), 1);
  EXPECT_EQ(shape.stepMicrobatch(1), 4);
  EXPECT_EQ(shape.onPeer(1, 0), std::make_pair(1, 0));  // 1 on stage 1: replica 1, its 0
  EXPECT_EQ(shape.onPeer(1, 1), std::make_pair(0, 2));  // 4: replica 0, its 2
  EXPECT_EQ(shape.dealt(6), 2);
  EXPECT_EQ(shape.dealt(5), 2);
  EXPECT_EQ(shape.dealt(4), 1);
  EXPECT_EQ(shape.downstreamWorkers(), 2);
  const PipelineShape copy{0, 2, 1, 2, {}, 1};
  EXPECT_EQ(copy.onPeer(1, 1), std::make_pair(1, 1));
  EXPECT_FALSE(InterleavedSchedule().check({0, 2, 2, 4, {2, 1}, 0, 4}).ok());
}

// Vertical sync: the same stream as pipedream, p weight versions on every
// stage (a microbatch's version is stage 0's, up to p − 1 updates behind
// the stage's latest); not over stages replicated unevenly.
TEST(PipeDreamSchedule, VerticalSyncKeepsAVersionPerStage) {
  auto vs = makeSchedule("pipedream-vs");
  ASSERT_TRUE(vs.ok());
  EXPECT_STREQ((*vs)->name(), "pipedream-vs");
  EXPECT_TRUE((*vs)->verticalSync());
  EXPECT_FALSE(PipeDreamSchedule().verticalSync());
  for (int p = 1; p <= 4; ++p) {
    for (int s = 0; s < p; ++s) {
      const PipelineShape shape{s, p, 1, p + 1};
      EXPECT_EQ((*vs)->weightVersions(shape), p);
      EXPECT_EQ((*vs)->actions(shape, 0, p + 1), PipeDreamSchedule().actions(shape, 0, p + 1));
    }
    EXPECT_TRUE(verifySteps(**vs, p, 1, {p, p + 3, 1}).ok());
  }
  const Status s = (*vs)->check({0, 2, 1, 2, {2, 1}, 0, 4});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("needs every stage replicated alike"), std::string::npos) << s.message();
}

TEST(TwoBwSchedule, NeedsAtLeastAsManyMicrobatchesAsStages) {
  const Status s = TwoBwSchedule().check({0, 4, 1, 3});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("at least as many microbatches per step as stages (3 < 4)"), std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("--microbatches 4"), std::string::npos);
  EXPECT_TRUE(TwoBwSchedule().check({0, 4, 1, 4}).ok());
  // Round-robin: a step holds what the first stage's order does, 5 for 4
  // copies before 1 (NOTE [Round-robin over a stage's replicas]).
  const Status rr = TwoBwSchedule().check({1, 2, 1, 1, {4, 1}, 0, 4});
  ASSERT_FALSE(rr.ok());
  EXPECT_NE(rr.message().find("(4 < 5)"), std::string::npos) << rr.message();
  EXPECT_TRUE(TwoBwSchedule().check({1, 2, 1, 1, {4, 1}, 0, 8}).ok());
  EXPECT_FALSE(TwoBwSchedule().check({0, 4, 2, 8}).ok());  // one chunk only
}

}  // namespace
}  // namespace hydrozoa::runtime
