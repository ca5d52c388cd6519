// The multi-job policies (sched/policy.h): the thesis's worked example
// (seed 003 §5.4.1) to its printed digits, hand-checked small cases of each
// policy, and on random problems: every allocation valid, and each
// heterogeneity-aware policy at least as good by its own objective as its
// agnostic form's allocation (which the LP would have found otherwise).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "sched/policies/policies.h"
#include "sched/policy.h"

namespace hydrozoa::sched {
namespace {

Problem problem(std::vector<WorkerType> types, std::vector<std::vector<double>> throughputs,
                std::vector<double> steps = {}, std::vector<int> scale = {}) {
  Problem p;
  p.types = std::move(types);
  for (size_t m = 0; m < throughputs.size(); ++m) {
    JobDemand j;
    j.type = "job" + std::to_string(m);
    j.throughput = throughputs[m];
    j.steps_remaining = steps.empty() ? 1000 : steps[m];
    j.scale_factor = scale.empty() ? 1 : scale[m];
    p.jobs.push_back(j);
  }
  return p;
}

Allocation allocate(const std::string& policy, const Problem& p) {
  auto made = makePolicy(policy);
  EXPECT_TRUE(made.ok()) << made.status().message();
  auto a = (*made)->allocate(p);
  EXPECT_TRUE(a.ok()) << policy << ": " << a.status().message();
  return a.ok() ? *a : Allocation{};
}

void expectValid(const Problem& p, const Allocation& a, const std::string& policy) {
  ASSERT_EQ(a.x.size(), p.jobs.size()) << policy;
  std::vector<double> used(p.types.size(), 0);
  for (size_t m = 0; m < p.jobs.size(); ++m) {
    double time = 0;
    for (size_t j = 0; j < p.types.size(); ++j) {
      const double x = a.x[m][j];
      EXPECT_GE(x, 0) << policy;
      EXPECT_LE(x, 1) << policy;
      if (p.jobs[m].throughput[j] == 0 || p.jobs[m].scale_factor > p.types[j].count) {
        EXPECT_EQ(x, 0) << policy;
      }
      time += x;
      used[j] += x * p.jobs[m].scale_factor;
    }
    EXPECT_LE(time, 1 + 1e-6) << policy << " job " << m;
  }
  for (size_t j = 0; j < p.types.size(); ++j) EXPECT_LE(used[j], p.types[j].count + 1e-6) << policy;
}

// §5.4.1: T = [[40, 10], [12, 4], [100, 50]] on one V100 and one K80,
// weights 1: X_het = [[0.45, 0], [0.45, 0.09], [0.09, 0.91]], to two digits
// of the exact [[5/11, 0], [5/11, 1/11], [1/11, 10/11]] (the LP's only optimum).
TEST(Policies, TheThesisWorkedExampleOfMaxMinFairness) {
  const Problem p = problem({{"v100", 1}, {"k80", 1}}, {{40, 10}, {12, 4}, {100, 50}});
  const Allocation a = allocate("max_min_fairness", p);
  const std::vector<std::vector<double>> thesis = {{0.45, 0.0}, {0.45, 0.09}, {0.09, 0.91}};
  const std::vector<std::vector<double>> exact = {{5.0 / 11, 0.0}, {5.0 / 11, 1.0 / 11}, {1.0 / 11, 10.0 / 11}};
  for (size_t m = 0; m < 3; ++m) {
    for (size_t j = 0; j < 2; ++j) {
      EXPECT_NEAR(a.x[m][j], thesis[m][j], 0.005) << "job " << m << " type " << j;
      EXPECT_NEAR(a.x[m][j], exact[m][j], 1e-7) << "job " << m << " type " << j;
    }
  }
  // Every job gets the same 8/11 of what equal time on both would give it
  // (the thesis's X, rounded to two digits, gives 0.72 to 0.727): more than
  // the 2/3 of it that a third of each worker (an isolated allocation) gives.
  EXPECT_NEAR(a.objective, 8.0 / 11, 1e-9);
  for (size_t m = 0; m < 3; ++m) {
    const double equal = effectiveThroughput(p.jobs[m], {0.5, 0.5});
    EXPECT_NEAR(effectiveThroughput(p.jobs[m], a.x[m]) / equal, a.objective, 1e-6);
  }
  // Agnostic (LAS): equal time for all, the same on both types.
  const Allocation las = allocate("max_min_fairness_agnostic", p);
  for (size_t m = 0; m < 3; ++m) EXPECT_NEAR(las.x[m][0] + las.x[m][1], 2.0 / 3, 1e-6);
}

TEST(Policies, WeightsShareInProportion) {
  // One worker; job 1 weighs 3: its share is three times job 0's.
  Problem p = problem({{"v100", 1}}, {{10}, {10}});
  p.jobs[1].weight = 3;
  const Allocation b = allocate("max_min_fairness", p);
  EXPECT_NEAR(b.x[0][0], 0.25, 1e-6);
  EXPECT_NEAR(b.x[1][0], 0.75, 1e-6);
}

TEST(Policies, MakespanFifoAndFinishTimeFairnessOnHandCheckedCases) {
  // One worker, 100 steps at 10/s and 50 at 5/s: both finish at 20 s sharing it.
  Problem p = problem({{"v100", 1}}, {{10}, {5}}, {100, 50});
  Allocation a = allocate("min_makespan", p);
  EXPECT_NEAR(a.objective, 20, 1e-6);
  EXPECT_NEAR(a.x[0][0], 0.5, 1e-6);
  // Two types: the job that gains most from the V100 gets it.
  p = problem({{"v100", 1}, {"k80", 1}}, {{40, 10}, {20, 10}}, {400, 200});
  a = allocate("min_makespan", p);
  // Job 0 all on the V100 (10 s) and job 1 all on the K80 (20 s) is worse
  // than job 1 taking some of the V100 (e.g. 0.2 of it: 12.5 s and 14.3 s).
  EXPECT_LT(a.objective, 14.3);
  for (size_t m = 0; m < 2; ++m) {
    EXPECT_LE(p.jobs[m].steps_remaining / effectiveThroughput(p.jobs[m], a.x[m]), a.objective * (1 + 1e-6));
  }
  // FIFO: the first job gets the one worker; shortest first, the shorter.
  p = problem({{"v100", 1}}, {{10}, {10}}, {5000, 1000});
  a = allocate("fifo", p);
  EXPECT_NEAR(a.x[0][0], 1, 1e-6);
  EXPECT_NEAR(a.x[1][0], 0, 1e-6);
  a = allocate("shortest_job_first", p);
  EXPECT_NEAR(a.x[0][0], 0, 1e-6);
  EXPECT_NEAR(a.x[1][0], 1, 1e-6);
  p = problem({{"v100", 1}}, {{10}, {10}});
  // Finish-time fairness: two equal jobs on one worker finish as on half of it (ρ = 1).
  a = allocate("finish_time_fairness", p);
  EXPECT_NEAR(a.objective, 1, 1e-5);
  EXPECT_NEAR(a.x[0][0], 0.5, 1e-4);
  // A job that has already waited longer than its isolated run took gets more.
  p.jobs[0].elapsed = 50;
  a = allocate("finish_time_fairness", p);
  EXPECT_GT(a.x[0][0], a.x[1][0]);
}

// A job's throughputs on types a, b and c, 1 to 100 steps/s, each missing
// (0) one time in `missingOneIn`, never on c: every job runs somewhere.
std::vector<double> randomThroughputs(std::mt19937& rng, unsigned missingOneIn) {
  std::uniform_real_distribution<double> speed(1, 100);
  std::vector<double> t;
  for (int j = 0; j < 3; ++j) t.push_back(rng() % missingOneIn == 0 ? 0 : speed(rng));
  if (t[2] == 0) t[2] = speed(rng);
  return t;
}

TEST(Policies, RandomProblemsAreValidAndAwareBeatsAgnosticByItsOwnMeasure) {
  std::mt19937 rng(7);
  for (int round = 0; round < 20; ++round) {
    std::vector<WorkerType> types = {{"a", 1 + round % 4}, {"b", 1 + round % 3}, {"c", 2}};
    const int jobs = 2 + round % 7;
    std::vector<std::vector<double>> t(static_cast<size_t>(jobs));
    std::vector<double> steps;
    std::vector<int> scale;
    for (int m = 0; m < jobs; ++m) {
      t[static_cast<size_t>(m)] = randomThroughputs(rng, 5);
      steps.push_back(100 + rng() % 10000);
      scale.push_back(rng() % 4 == 0 ? 2 : 1);
    }
    Problem p = problem(types, t, steps, scale);
    p.price = {3.0, 1.5, 0.5};
    p.budget = 1e9;
    p.entities = {{"a", 2, false}, {"b", 1, true}};
    for (size_t m = 0; m < p.jobs.size(); ++m) p.jobs[m].entity = static_cast<int>(m % 2);
    for (const PolicyInfo& info : policyList()) expectValid(p, allocate(info.name, p), info.name);
    // Max-min: the aware allocation's least normalised share is at least the agnostic one's.
    auto least = [&](const Allocation& a) {
      double worst = 1e30;
      const std::vector<double> equal = equalShare(p);
      for (size_t m = 0; m < p.jobs.size(); ++m) {
        worst = std::min(worst, effectiveThroughput(p.jobs[m], a.x[m]) * p.jobs[m].scale_factor /
                                    effectiveThroughput(p.jobs[m], equal));
      }
      return worst;
    };
    const Allocation fair = allocate("max_min_fairness", p);
    EXPECT_NEAR(least(fair), fair.objective, 1e-6 * std::max(1.0, fair.objective));
    // Water filling starts from that optimum and only makes jobs faster.
    const Allocation filled = allocate("max_min_fairness_water_filling", p);
    for (size_t m = 0; m < p.jobs.size(); ++m) {
      EXPECT_GE(effectiveThroughput(p.jobs[m], filled.x[m]) * p.jobs[m].scale_factor /
                    effectiveThroughput(p.jobs[m], equalShare(p)),
                fair.objective * (1 - 1e-5));
    }
    EXPECT_GE(least(fair), least(allocate("max_min_fairness_agnostic", p)) - 1e-6);
    auto makespan = [&](const Allocation& a) {
      double last = 0;
      for (size_t m = 0; m < p.jobs.size(); ++m) {
        last = std::max(last, p.jobs[m].steps_remaining / effectiveThroughput(p.jobs[m], a.x[m]));
      }
      return last;
    };
    const Allocation quick = allocate("min_makespan", p);
    EXPECT_NEAR(makespan(quick), quick.objective, 1e-4 * quick.objective);
    EXPECT_LE(quick.objective, makespan(allocate("min_makespan_agnostic", p)) * (1 + 1e-6));
  }
}

// Gavel ch. 6: ResNet-50 is most cost-efficient on the V100 and A3C on the
// K80 (§5.7's example), so min_cost puts each there; an SLO that A3C can
// only meet with V100 time gets it that time; a makespan within a budget
// trades the fast expensive type against the slow cheap one exactly.
TEST(Policies, CostSlosAndBudgets) {
  Problem p = problem({{"v100", 1}, {"k80", 1}}, {{40, 10}, {12, 4}}, {36000, 36000});
  p.price = {3.0, 0.9};  // USD per hour: 13.3 vs 11.1 ResNet steps per dollar-second; A3C 4 vs 4.4
  Allocation a = allocate("min_cost", p);
  EXPECT_NEAR(a.x[0][0], 1, 1e-6);
  EXPECT_NEAR(a.x[1][1], 1, 1e-6);
  EXPECT_NEAR(a.objective, 2, 1e-6);
  p.jobs[1].slo_left = 4500;  // 36000 steps in 4500 s: 8 steps/s, more than the K80's 4
  a = allocate("min_cost_slo", p);
  expectValid(p, a, "min_cost_slo");
  EXPECT_GE(effectiveThroughput(p.jobs[1], a.x[1]), 8 - 1e-6);
  EXPECT_GT(a.x[1][0], 0.4);
  p.jobs[1].slo_left = 2000;  // 18 steps/s: more than even the V100's 12
  auto none = (*makePolicy("min_cost_slo"))->allocate(p);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("job 1 (job1) cannot meet its SLO: 36000 steps left in 2000 s need 18 "
                                         "steps/s, and it runs at most 12 steps/s"),
            std::string::npos)
      << none.status().message();
  // Each SLO alone can be met, not both: each job needs 0.6 of the one
  // V100 (6,000 steps in 1,000 s at 10/s). One line saying so (issue 13 §7).
  Problem both = problem({{"v100", 1}}, {{10}, {10}}, {6000, 6000});
  both.price = {3.0};
  for (auto& j : both.jobs) j.slo_left = 1000;
  for (size_t alone = 0; alone < 2; ++alone) {
    Problem one = both;
    one.jobs[1 - alone].slo_left = -1;
    EXPECT_TRUE((*makePolicy("min_cost_slo"))->allocate(one).ok()) << alone;
  }
  auto clash = (*makePolicy("min_cost_slo"))->allocate(both);
  ASSERT_FALSE(clash.ok());
  EXPECT_EQ(clash.status().code(), ErrorCode::kInfeasible);
  EXPECT_NE(clash.status().message().find("SLOs cannot all be met together on this cluster (each alone can)"),
            std::string::npos)
      << clash.status().message();
  // One job of 36,000 steps: 900 s on the V100 at $3.60/h ($0.90), 3600 s on
  // the K80 at $0.36/h ($0.36). Within $0.50: a V100 share a = 1.4/17.4 and
  // 36000 / (10 + 30a) = 2900 s.
  Problem one = problem({{"v100", 1}, {"k80", 1}}, {{40, 10}}, {36000});
  one.price = {3.6, 0.36};
  for (const auto& [budget, makespan] : std::vector<std::pair<double, double>>{{1.0, 900}, {0.5, 2900.0}, {0.36, 3600}}) {
    one.budget = budget;
    const Allocation b = allocate("min_makespan_budget", one);
    EXPECT_NEAR(b.objective, makespan, 1) << "$" << budget;
  }
  one.budget = 0.2;  // less than the cheapest way costs
  auto broke = (*makePolicy("min_makespan_budget"))->allocate(one);
  ASSERT_FALSE(broke.ok());
  EXPECT_NE(broke.status().message().find("within $0.2"), std::string::npos) << broke.status().message();
  one.price.clear();
  broke = (*makePolicy("min_cost"))->allocate(one);
  ASSERT_FALSE(broke.ok());
  EXPECT_NE(broke.status().message().find("needs a price per worker type (--prices"), std::string::npos);
}

// §5.4.3's example: four identical jobs, job 0 weighing 3, on four identical
// GPUs. The first iteration gives job 0 a whole GPU and the others a third;
// job 0 is the bottleneck; the second gives the others whole GPUs.
TEST(Policies, WaterFillingAsTheThesisWalksIt) {
  Problem p = problem({{"gpu", 4}}, {{10}, {10}, {10}, {10}});
  p.jobs[0].weight = 3;
  // The first iteration is weighted max-min fairness: 1 and 1/3 each.
  const Allocation first = allocate("max_min_fairness", p);
  EXPECT_NEAR(first.x[0][0], 1, 1e-6);
  for (size_t m = 1; m < 4; ++m) EXPECT_NEAR(first.x[m][0], 1.0 / 3, 1e-6) << m;
  const Allocation a = allocate("max_min_fairness_water_filling", p);
  for (size_t m = 0; m < 4; ++m) EXPECT_NEAR(a.x[m][0], 1, 1e-5) << m;
  // Hierarchical on two GPUs: product (weight 2, fairness: jobs 0, 1) and
  // research (weight 1, FIFO: jobs 2, 3): 2/3 of a GPU to each of jobs 0, 1
  // and 2 (product 4/3, research 2/3), none to job 3 until job 2 is done.
  p = problem({{"gpu", 2}}, {{10}, {10}, {10}, {10}});
  p.entities = {{"product", 2, false}, {"research", 1, true}};
  for (size_t m = 0; m < 4; ++m) p.jobs[m].entity = m < 2 ? 0 : 1;
  const Allocation h = allocate("hierarchical", p);
  for (size_t m = 0; m < 3; ++m) EXPECT_NEAR(h.x[m][0], 2.0 / 3, 1e-5) << m;
  EXPECT_NEAR(h.x[3][0], 0, 1e-5);
  // Figure 5.6's two ways a bottleneck's weight passes on, on three GPUs:
  // product (weight 1, fairness: jobs 0, 1), research (weight 1, FIFO: jobs
  // 2, 3). Each entity is due 1.5 GPUs; job 2 can use one at most (a job
  // runs on one GPU at a time), so it is the bottleneck of the first
  // iteration at 1, and research's weight passes to job 3 (FIFO), which
  // takes the half GPU job 2 could not: 0.75, 0.75, 1, 0.5. Jobs 0 and 1
  // are kept at the first iteration's fair 0.5 (not at whatever more the
  // LP's optimum happened to give them), so the rest is shared by weight.
  p = problem({{"gpu", 3}}, {{10}, {10}, {10}, {10}});
  p.entities = {{"product", 1, false}, {"research", 1, true}};
  for (size_t m = 0; m < 4; ++m) p.jobs[m].entity = m < 2 ? 0 : 1;
  const Allocation fifo = allocate("hierarchical", p);
  const std::vector<double> fifoShares = {0.75, 0.75, 1, 0.5};
  for (size_t m = 0; m < 4; ++m) EXPECT_NEAR(fifo.x[m][0], fifoShares[m], 1e-5) << m;
  // Fairness inside research instead: jobs 2 and 3 share its 1.5 GPUs from
  // the first iteration, no one is held back.
  p.entities[1].fifo = false;
  const Allocation fair = allocate("hierarchical", p);
  for (size_t m = 0; m < 4; ++m) EXPECT_NEAR(fair.x[m][0], 0.75, 1e-5) << m;
  p.entities.clear();
  auto none = (*makePolicy("hierarchical"))->allocate(p);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("needs entities (--entities"), std::string::npos);
}

// NOTE [Bottlenecks] (water_filling.cc): Gavel's MILP finds the same jobs
// stuck as asking each job's most with an LP, so both end with every job
// at the same normalised throughput, single-level and hierarchical, and
// every job at least at max-min fairness's optimum.
TEST(Policies, WaterFillingsBottleneckMilpAgreesWithAnLpPerJob) {
  std::mt19937 rng(11);
  int stuckJobsSeen = 0;
  for (int round = 0; round < 24; ++round) {
    const std::vector<WorkerType> types = {{"a", 1 + round % 3}, {"b", 1 + round % 2}, {"c", 2}};
    const int jobs = 3 + round % 6;
    std::vector<std::vector<double>> t(static_cast<size_t>(jobs));
    std::vector<int> scale;
    for (int m = 0; m < jobs; ++m) {
      t[static_cast<size_t>(m)] = randomThroughputs(rng, 3);
      scale.push_back(rng() % 4 == 0 ? 2 : 1);
    }
    Problem p = problem(types, t, {}, scale);
    for (size_t m = 0; m < p.jobs.size(); ++m) p.jobs[m].weight = 1 + rng() % 3;
    const bool hierarchical = round % 2 == 1;
    if (hierarchical) {
      p.entities = {{"x", 2, false}, {"y", 1, true}};
      for (size_t m = 0; m < p.jobs.size(); ++m) p.jobs[m].entity = static_cast<int>(m % 2);
    }
    auto milp = WaterFilling(hierarchical, WaterFilling::Bottlenecks::kMilp).allocate(p);
    auto lps = WaterFilling(hierarchical, WaterFilling::Bottlenecks::kLinearPrograms).allocate(p);
    ASSERT_TRUE(milp.ok()) << milp.status().message();
    ASSERT_TRUE(lps.ok()) << lps.status().message();
    expectValid(p, *milp, "water filling (MILP)");
    const std::vector<double> equal = equalShare(p);
    for (size_t m = 0; m < p.jobs.size(); ++m) {
      const double norm = p.jobs[m].scale_factor / effectiveThroughput(p.jobs[m], equal);
      const double a = effectiveThroughput(p.jobs[m], milp->x[m]) * norm;
      const double b = effectiveThroughput(p.jobs[m], lps->x[m]) * norm;
      EXPECT_NEAR(a, b, 1e-4 * std::max(1.0, b)) << "round " << round << " job " << m;
      stuckJobsSeen += a < 1 - 1e-6;  // held below an equal share by another's need
    }
    if (!hierarchical) {
      const Allocation fair = allocate("max_min_fairness", p);
      for (size_t m = 0; m < p.jobs.size(); ++m) {
        const double norm = p.jobs[m].scale_factor / effectiveThroughput(p.jobs[m], equal);
        EXPECT_GE(effectiveThroughput(p.jobs[m], milp->x[m]) * norm, fair.objective * p.jobs[m].weight * (1 - 1e-5));
      }
    }
  }
  EXPECT_GT(stuckJobsSeen, 0) << "the problems should have some jobs below an equal share";
}

TEST(Policies, UnknownPoliciesAndJobsThatCannotRunAreNamed) {
  auto p = makePolicy("fastest_first");
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("unknown policy \"fastest_first\"; known: max_min_fairness"), std::string::npos)
      << p.status().message();
  const Problem none = problem({{"v100", 1}}, {{0}});
  auto a = (*makePolicy("max_min_fairness"))->allocate(none);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("job 0 (job0, 1 worker) has no throughput"), std::string::npos)
      << a.status().message();
  const Problem big = problem({{"v100", 2}}, {{10}}, {}, {4});
  a = (*makePolicy("min_makespan"))->allocate(big);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("4 workers"), std::string::npos) << a.status().message();
}

}  // namespace
}  // namespace hydrozoa::sched

namespace hydrozoa::sched {
namespace {

// Space sharing (§5.3.1): two jobs on one V100, 40 and 15 steps/s alone,
// 30 and 10 when they share it (0.75 + 2/3 of their speeds: more work than
// taking turns). Max-min fairness shares 12/13 of the time and gives job 1
// the rest alone: each gets 9/13 of its speed (without sharing, 1/2).
// Total throughput shares all the time: 3/4 + 2/3 = 17/12.
TEST(SpaceSharing, TheLpWeighsPairsByTheirMeasuredRates) {
  Problem p = problem({{"v100", 1}}, {{40}, {15}});
  const Allocation alone = allocate("max_min_fairness", p);
  EXPECT_NEAR(alone.objective, 0.5, 1e-9);
  EXPECT_TRUE(alone.pairs.empty());
  p.pairs.push_back({0, 1, {30}, {10}});
  const Allocation fair = allocate("max_min_fairness", p);
  EXPECT_NEAR(fair.objective, 9.0 / 13, 1e-9);
  ASSERT_EQ(fair.pairs.size(), 1u);
  EXPECT_NEAR(fair.pairs[0][0], 12.0 / 13, 1e-9);
  EXPECT_NEAR(fair.x[0][0], 0, 1e-9);
  EXPECT_NEAR(fair.x[1][0], 1.0 / 13, 1e-9);
  EXPECT_NEAR(effectiveThroughput(p, fair, 0) / 40, 9.0 / 13, 1e-9);
  EXPECT_NEAR(effectiveThroughput(p, fair, 1) / 15, 9.0 / 13, 1e-9);
  const Allocation total = allocate("max_total_throughput", p);
  EXPECT_NEAR(total.objective, 17.0 / 12, 1e-9);
  EXPECT_NEAR(total.pairs[0][0], 1, 1e-9);
  // Every policy that takes pairs keeps each job's time (alone and shared) within 1.
  for (const char* name : {"finish_time_fairness", "min_makespan", "fifo", "shortest_job_first"}) {
    const Allocation a = allocate(name, p);
    ASSERT_EQ(a.pairs.size(), 1u) << name;
    for (size_t m = 0; m < 2; ++m) EXPECT_LE(a.x[m][0] + a.pairs[0][0], 1 + 1e-6) << name;
    EXPECT_LE(a.x[0][0] + a.x[1][0] + a.pairs[0][0], 1 + 1e-6) << name;  // one worker
  }
  // FIFO: the pair beats running the first job alone (0.75·2 + 2/3·1 > 1·2).
  EXPECT_NEAR(allocate("fifo", p).pairs[0][0], 1, 1e-9);
  // The agnostic forms drop the pairs; the policies that do not weigh them say so.
  EXPECT_NEAR(allocate("max_min_fairness_agnostic", p).objective, 0.5, 1e-9);
  p.price = {3};
  auto cost = (*makePolicy("min_cost"))->allocate(p);
  ASSERT_FALSE(cost.ok());
  EXPECT_NE(cost.status().message().find("policy min_cost does not space-share; drop --space-sharing"),
            std::string::npos)
      << cost.status().message();
}

// A pair shares a type only where both run and there are workers enough.
TEST(SpaceSharing, PairsNeedBothRatesAndTheWorkers) {
  Problem p = problem({{"v100", 1}, {"k80", 2}}, {{40, 10}, {15, 5}}, {}, {2, 2});
  p.pairs.push_back({0, 1, {30, 8}, {10, 4}});
  const Allocation a = allocate("max_total_throughput", p);
  EXPECT_EQ(a.pairs[0][0], 0);  // one V100: the pair needs 2
  EXPECT_NEAR(a.pairs[0][1], 1, 1e-9);
  p.pairs[0].throughput_b[1] = 0;  // not measured together on the K80
  const Allocation b = allocate("max_total_throughput", p);
  EXPECT_EQ(b.pairs[0][1], 0);
}

}  // namespace
}  // namespace hydrozoa::sched
