#include "plan/partition/exact.h"

#include <gtest/gtest.h>

#include "plan/partition/bounded_dp.h"
#include "plan/partition/brute_force.h"
#include "plan/partition/pareto.h"
#include "plan/random_chain.h"

namespace hydrozoa::plan {
namespace {

using testing::ChainShape;
using testing::randomProblem;

void expectSameOptimum(const std::vector<PartitionResult>& got, const std::vector<PartitionResult>& want,
                       const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < got.size(); ++k) {
    ASSERT_EQ(got[k].feasible, want[k].feasible) << what << " k=" << k + 1;
    if (!want[k].feasible) continue;
    EXPECT_NEAR(got[k].time.total, want[k].time.total, 1e-9 * want[k].time.total) << what << " k=" << k + 1;
    EXPECT_EQ(got[k].proven_gap, 0.0) << what;
  }
}

struct Case {
  int layers;
  std::int64_t microbatches;
  double commScale;
  bool memory;
};

class ExactVsBruteForce : public ::testing::TestWithParam<Case> {};

TEST_P(ExactVsBruteForce, EqualOptimumForEveryStageCount) {
  const Case c = GetParam();
  for (std::uint32_t seed = 1; seed <= 12; ++seed) {
    const PartitionProblem p = randomProblem(seed, {c.layers, c.microbatches, c.commScale, c.memory});
    const int K = c.layers;
    ExactPartitioner exact;
    BruteForcePartitioner brute;
    expectSameOptimum(exact.partitionAll(p, K), brute.partitionAll(p, K), "seed " + std::to_string(seed));
  }
}

INSTANTIATE_TEST_SUITE_P(RandomChains, ExactVsBruteForce,
                         ::testing::Values(Case{1, 4, 1, false}, Case{2, 1, 1, false}, Case{6, 1, 1, false},
                                           Case{8, 8, 1, false}, Case{10, 4, 0.01, false}, Case{12, 16, 5, false},
                                           Case{14, 32, 1, false}, Case{16, 4, 1, true}, Case{18, 8, 1, false},
                                           Case{18, 8, 0.3, true}, Case{12, 2, 20, true}));

TEST(ExactPartitioner, ReturnedTimeIsTheModelOfTheReturnedPartition) {
  const PartitionProblem p = randomProblem(7, {30, 8, 1, false});
  for (const auto& r : ExactPartitioner().partitionAll(p, 10)) {
    ASSERT_TRUE(r.feasible);
    EXPECT_EQ(r.partition.numStages(), r.stages);
    EXPECT_DOUBLE_EQ(r.time.total, pipelineTime(p.costs, r.partition, p.microbatches).total);
  }
}

TEST(ExactPartitioner, AgreesWithParetoOnLongerChains) {
  for (std::uint32_t seed = 100; seed < 104; ++seed) {
    const PartitionProblem p = randomProblem(seed, {40, 8, 1, seed % 2 == 0});
    expectSameOptimum(ExactPartitioner().partitionAll(p, 8), ParetoPartitioner().partitionAll(p, 8),
                      "seed " + std::to_string(seed));
  }
}

// Issue 8 §4: V bounds from lo to hi are Δ/(V−1) apart, and the reported ε
// says so (two bounds: the whole range Δ, not Δ/2).
TEST(BoundedDpPartitioner, ReportsTheBoundOfItsRealGridSpacing) {
  PartitionProblem p;
  p.costs.forward = {1.0, 3.0};
  p.costs.backward = {2.0, 2.0};
  p.costs.cut = {0.5};
  p.microbatches = 4;
  const auto r = BoundedDpPartitioner(2).partitionAll(p, 2);
  // Δ = max(Σf − min f, Σb − min b) = max(4 − 1, 4 − 2) = 3.
  ASSERT_TRUE(r[0].feasible);
  EXPECT_DOUBLE_EQ(r[0].proven_gap, 2.0 * 3 * 3.0 / 1);
}

TEST(ExactPartitioner, NeverWorseThanThePapersBoundedDp) {
  for (std::uint32_t seed = 200; seed < 203; ++seed) {
    const PartitionProblem p = randomProblem(seed, {30, 16, 1, false});
    const auto exact = ExactPartitioner().partitionAll(p, 8);
    const auto paper = BoundedDpPartitioner(40).partitionAll(p, 8);
    for (size_t k = 0; k < exact.size(); ++k) {
      EXPECT_LE(exact[k].time.total, paper[k].time.total * (1 + 1e-12)) << "k=" << k + 1;
      // Theorem 1: the bounded DP is within 2(M−1)Δ/(V−1) of the optimum.
      EXPECT_LE(paper[k].time.total - exact[k].time.total, paper[k].proven_gap + 1e-9) << "k=" << k + 1;
    }
  }
}

TEST(ChainIndex, PipelineTotalEqualsTheModel) {
  const PartitionProblem p = randomProblem(21, {12, 6, 1, false});
  const ChainIndex index(p);
  for (const auto& r : BruteForcePartitioner().partitionAll(p, 12)) {
    EXPECT_NEAR(index.pipelineTotal(r.partition, 6), r.time.total, 1e-9 * r.time.total);
  }
}

TEST(ExactPartitioner, MoreStagesThanLayersIsInfeasible) {
  const PartitionProblem p = randomProblem(3, {3, 4, 1, false});
  const auto r = ExactPartitioner().partitionAll(p, 5);
  EXPECT_TRUE(r[2].feasible);
  EXPECT_FALSE(r[3].feasible);
  EXPECT_FALSE(r[4].feasible);
}

TEST(ExactPartitioner, MemoryLimitNothingFits) {
  PartitionProblem p = randomProblem(5, {6, 4, 1, true});
  p.memory_limit = 1;  // below the runtime alone
  for (const auto& r : ExactPartitioner().partitionAll(p, 6)) EXPECT_FALSE(r.feasible);
}

TEST(ExactPartitioner, OneMicrobatchMinimisesCommunicationOnly) {
  PartitionProblem p = randomProblem(9, {10, 1, 1, false});
  const auto r = ExactPartitioner().partitionAll(p, 4);
  const auto b = BruteForcePartitioner().partitionAll(p, 4);
  for (int k = 0; k < 4; ++k) {
    EXPECT_NEAR(r[k].time.total, b[k].time.total, 1e-9);
    EXPECT_LE(r[k].evaluations, 2);  // the root bound is already tight
  }
}

TEST(ExactPartitioner, BudgetExhaustedReportsAGap) {
  const PartitionProblem p = randomProblem(11, {60, 32, 1, false});
  ExactPartitioner::Options o;
  o.max_evaluations = 3;
  const auto tight = ExactPartitioner().partitionInto(p, 6);
  const auto loose = ExactPartitioner(o).partitionInto(p, 6);
  ASSERT_TRUE(loose.feasible);
  EXPECT_EQ(tight.proven_gap, 0.0);
  EXPECT_GE(loose.time.total, tight.time.total - 1e-9);
  EXPECT_GE(loose.proven_gap, loose.time.total - tight.time.total - 1e-9);  // the gap is a true bound
}

}  // namespace
}  // namespace hydrozoa::plan
