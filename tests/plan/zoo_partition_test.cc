// The exact partitioner against exhaustive references on every zoo model's
// (predicted) profile: brute force over all partitions where L <= 18, the
// exhaustive Pareto DP beyond.
#include <gtest/gtest.h>

#include "model/zoo.h"
#include "plan/partition/brute_force.h"
#include "plan/partition/exact.h"
#include "plan/partition/pareto.h"
#include "plan/search.h"
#include "profile/predict.h"

namespace hydrozoa::plan {
namespace {

class ZooPartition : public ::testing::TestWithParam<std::string> {};

TEST_P(ZooPartition, ExactEqualsExhaustiveSearch) {
  auto arch = model::buildArch({GetParam(), {}});
  ASSERT_TRUE(arch.ok());
  auto prof = profile::predictProfile(*arch, *profile::loadDevice("v100"), {1, 8}, "sgd_momentum");
  ASSERT_TRUE(prof.ok());
  const int L = static_cast<int>(prof->numLayers());
  for (std::int64_t m : {1, 8}) {
    for (std::int64_t M : {1, 4, 32}) {
      for (double bandwidth : {1.25e9, 70e6}) {
        for (bool limited : {false, true}) {
          PartitionProblem p;
          p.costs = chainCosts(*prof, *prof->at(m), bandwidth);
          p.microbatches = M;
          p.memory = memoryCosts(*prof, *prof->at(m));
          if (limited) p.memory_limit = stageMemory(*p.memory, 0, L - 1, M) / 3;  // needs >= 3 stages
          const int K = std::min(L, L <= 18 ? L : 10);
          const auto exact = ExactPartitioner().partitionAll(p, K);
          std::vector<PartitionResult> reference;
          if (L <= 18) {
            reference = BruteForcePartitioner().partitionAll(p, K);
          } else {
            reference = ParetoPartitioner().partitionAll(p, K);
          }
          for (int k = 0; k < K; ++k) {
            ASSERT_EQ(exact[k].feasible, reference[k].feasible) << "k=" << k + 1;
            if (!exact[k].feasible) continue;
            EXPECT_NEAR(exact[k].time.total, reference[k].time.total, 1e-9 * reference[k].time.total)
                << GetParam() << " m=" << m << " M=" << M << " D=" << bandwidth << " limited=" << limited
                << " k=" << k + 1;
            EXPECT_EQ(exact[k].proven_gap, 0);
          }
        }
      }
    }
  }
}

std::vector<std::string> zooNames() {
  std::vector<std::string> names;
  for (const auto& e : model::zoo()) names.push_back(e.name);
  return names;
}

INSTANTIATE_TEST_SUITE_P(EveryModel, ZooPartition, ::testing::ValuesIn(zooNames()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace hydrozoa::plan
