#include "data/sampler.h"

#include <gtest/gtest.h>

#include <set>

#include "core/status.h"

namespace hydrozoa::data {
namespace {

struct Shape {
  std::int64_t n, G;
  int A;
  std::int64_t m;
  bool roundRobin = false;
};

void PrintTo(const Shape& c, std::ostream* os) {
  *os << "n" << c.n << "_G" << c.G << "_A" << c.A << "_m" << c.m << (c.roundRobin ? "_rr" : "");
}

class EverySampleOnce : public ::testing::TestWithParam<Shape> {};

TEST_P(EverySampleOnce, AcrossStepsReplicasAndMicrobatches) {
  const Shape c = GetParam();
  SamplerOptions o{c.n, c.G, c.A, c.m, 11, true, false, c.roundRobin};
  EpochSampler s(o);
  const std::int64_t M = c.G / (c.A * c.m);
  EXPECT_EQ(s.microbatchesPerStep(), M);
  for (std::int64_t epoch : {0, 3}) {
    std::multiset<std::int64_t> seen;
    for (std::int64_t step = 0; step < s.stepsPerEpoch(); ++step) {
      std::int64_t stepTotal = 0;
      for (int r = 0; r < c.A; ++r) {
        EXPECT_LE(s.microbatches(step, r), M);
        for (int mb = 0; mb < s.microbatches(step, r); ++mb) {
          const auto idx = s.indices(epoch, step, r, mb);
          EXPECT_EQ(static_cast<std::int64_t>(idx.size()), s.microbatchSize(step, r, mb));
          EXPECT_GE(idx.size(), 1u);
          EXPECT_LE(static_cast<std::int64_t>(idx.size()), c.m);
          seen.insert(idx.begin(), idx.end());
          stepTotal += static_cast<std::int64_t>(idx.size());
        }
        EXPECT_EQ(s.microbatchSize(step, r, s.microbatches(step, r)), 0);
      }
      EXPECT_EQ(stepTotal, s.stepSamples(step));
      int microbatches = 0;
      for (int r = 0; r < c.A; ++r) microbatches += s.microbatches(step, r);
      EXPECT_EQ(s.stepMicrobatches(step), microbatches);
    }
    ASSERT_EQ(static_cast<std::int64_t>(seen.size()), c.n) << "epoch " << epoch;
    for (std::int64_t i = 0; i < c.n; ++i) EXPECT_EQ(seen.count(i), 1u) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, EverySampleOnce,
                         ::testing::Values(Shape{100, 20, 2, 5}, Shape{101, 20, 2, 5}, Shape{7, 24, 3, 4},
                                           Shape{60, 24, 4, 2}, Shape{1, 8, 2, 4}, Shape{1000, 64, 1, 64},
                                           Shape{997, 36, 3, 3}, Shape{50, 6, 3, 1}));
INSTANTIATE_TEST_SUITE_P(RoundRobin, EverySampleOnce,
                         ::testing::Values(Shape{100, 20, 2, 5, true}, Shape{101, 20, 2, 5, true},
                                           Shape{7, 24, 3, 4, true}, Shape{60, 24, 4, 2, true},
                                           Shape{1, 8, 2, 4, true}, Shape{997, 36, 3, 3, true},
                                           Shape{50, 6, 3, 1, true}));

// Round-robin: microbatch k of a step holds the same samples whatever the
// replicas it is dealt over (each stage of an unevenly replicated pipeline
// has its own), as replica k mod A's microbatch k div A; a short step's
// microbatches are full but its last.
TEST(EpochSampler, RoundRobinDealsTheSameMicrobatchesOverAnyReplicas) {
  const EpochSampler one({50, 12, 1, 2, 5, true, false, true});
  for (int A : {2, 3, 6}) {
    const EpochSampler s({50, 12, A, 2, 5, true, false, true});
    ASSERT_EQ(s.stepsPerEpoch(), 5);
    for (std::int64_t step = 0; step < s.stepsPerEpoch(); ++step) {
      const int K = one.stepMicrobatches(step);
      EXPECT_EQ(s.stepMicrobatches(step), K);
      for (int k = 0; k < K; ++k) {
        EXPECT_EQ(s.indices(1, step, k % A, k / A), one.indices(1, step, 0, k)) << A << " " << step << " " << k;
        EXPECT_EQ(s.microbatchSize(step, k % A, k / A), k + 1 < K ? 2 : one.microbatchSize(step, 0, k));
      }
    }
  }
  EXPECT_EQ(one.stepMicrobatches(4), 1);  // 50 = 4·12 + 2
}

TEST(EpochSampler, ReplicasHoldDisjointShards) {
  EpochSampler s({200, 40, 4, 5, 1, true, false});
  for (std::int64_t step = 0; step < s.stepsPerEpoch(); ++step) {
    std::set<std::int64_t> all;
    size_t total = 0;
    for (int r = 0; r < 4; ++r) {
      for (int mb = 0; mb < s.microbatches(step, r); ++mb) {
        for (auto i : s.indices(0, step, r, mb)) all.insert(i), ++total;
      }
    }
    EXPECT_EQ(all.size(), total);
  }
}

TEST(EpochSampler, DeterministicPerSeedAndEpoch) {
  EpochSampler a({500, 50, 2, 5, 7, true, false}), b({500, 50, 2, 5, 7, true, false}), c({500, 50, 2, 5, 8, true, false});
  EXPECT_EQ(a.permutation(2), b.permutation(2));
  EXPECT_NE(a.permutation(2), a.permutation(3));
  EXPECT_NE(a.permutation(2), c.permutation(2));
  EXPECT_EQ(a.indices(1, 3, 1, 2), b.indicesIn(b.permutation(1), 3, 1, 2));
}

TEST(EpochSampler, NoShuffleIsTheIdentity) {
  EpochSampler s({30, 10, 2, 5, 3, false, false});
  EXPECT_EQ(s.indices(4, 1, 1, 0), (std::vector<std::int64_t>{15, 16, 17, 18, 19}));
}

TEST(EpochSampler, DropLastSkipsTheShortStep) {
  EpochSampler keep({105, 20, 2, 5, 0, true, false}), drop({105, 20, 2, 5, 0, true, true});
  EXPECT_EQ(keep.stepsPerEpoch(), 6);
  EXPECT_EQ(drop.stepsPerEpoch(), 5);
  EXPECT_EQ(keep.stepSamples(5), 5);
  // 5 samples over 2 replicas: 3 and 2, one microbatch each.
  EXPECT_EQ(keep.microbatchSize(5, 0, 0), 3);
  EXPECT_EQ(keep.microbatchSize(5, 1, 0), 2);
  EXPECT_EQ(keep.microbatches(5, 0), 1);
}

TEST(EpochSampler, ReplicasWithoutSamplesInAShortStep) {
  EpochSampler s({9, 8, 4, 2, 0, false, false});  // the last step has 1 sample
  EXPECT_EQ(s.microbatches(1, 0), 1);
  EXPECT_EQ(s.microbatches(1, 3), 0);
  EXPECT_TRUE(s.indices(0, 1, 3, 0).empty());
}

// AgileML's third stage: the first I replicas hold the state and compute
// nothing. The others take the step's samples in the same microbatches as
// a sampler of A − I replicas without idle ones (the same training), and
// the idle ones none, in full and short steps alike.
TEST(EpochSampler, IdleReplicasGetNothingAndTheOthersTheSameMicrobatches) {
  for (bool shuffle : {true, false}) {
    const EpochSampler working({103, 24, 3, 4, 5, shuffle, false});  // 5 steps, the last of 7 samples
    SamplerOptions o{103, 24, 4, 4, 5, shuffle, false};
    o.idle_replicas = 1;
    const EpochSampler s(o);
    ASSERT_EQ(s.stepsPerEpoch(), working.stepsPerEpoch());
    EXPECT_EQ(s.microbatchesPerStep(), 2);
    for (std::int64_t step = 0; step < s.stepsPerEpoch(); ++step) {
      EXPECT_EQ(s.microbatches(step, 0), 0);
      EXPECT_EQ(s.microbatchSize(step, 0, 0), 0);
      EXPECT_TRUE(s.indices(1, step, 0, 0).empty());
      EXPECT_EQ(s.stepSamples(step), working.stepSamples(step));
      EXPECT_EQ(s.stepMicrobatches(step), working.stepMicrobatches(step));
      for (int r = 1; r < 4; ++r) {
        ASSERT_EQ(s.microbatches(step, r), working.microbatches(step, r - 1)) << step << " " << r;
        for (int mb = 0; mb < s.microbatches(step, r); ++mb) {
          EXPECT_EQ(s.indices(1, step, r, mb), working.indices(1, step, r - 1, mb)) << step << " " << r << " " << mb;
        }
      }
    }
  }
}

TEST(EpochSampler, InconsistentSizesAreABug) {
  EXPECT_THROW(EpochSampler({10, 20, 3, 4, 0, true, false}), hydrozoa::InternalError);
  EXPECT_THROW(EpochSampler({0, 20, 2, 5, 0, true, false}), hydrozoa::InternalError);
  SamplerOptions allIdle{10, 20, 2, 5, 0, true, false};
  allIdle.idle_replicas = 2;
  EXPECT_THROW(EpochSampler{allIdle}, hydrozoa::InternalError);
  SamplerOptions uneven{10, 20, 3, 5, 0, true, false};  // 20 over 2 working replicas: 10 each, 2 of 5
  uneven.idle_replicas = 1;
  EXPECT_EQ(EpochSampler(uneven).microbatchesPerStep(), 2);
  uneven.idle_replicas = 2;  // 20 on one: 4 of 5
  EXPECT_EQ(EpochSampler(uneven).microbatchesPerStep(), 4);
  uneven.global_batch = 15;  // 15 over 2
  uneven.idle_replicas = 1;
  EXPECT_THROW(EpochSampler{uneven}, hydrozoa::InternalError);
  uneven.idle_replicas = 0;
  uneven.round_robin = true;
  EXPECT_NO_THROW(EpochSampler{uneven});
  uneven.idle_replicas = 2;
  EXPECT_THROW(EpochSampler{uneven}, hydrozoa::InternalError);
}

}  // namespace
}  // namespace hydrozoa::data
