// The simulator (sim/simulator.h) and the round mechanism it drives
// (sched/rounds.h): hand-computed completion times, rounds shared in the
// proportions of the allocation, the heterogeneity-aware policies against
// their agnostic forms on the thesis's example jobs, and a thousand jobs.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

#include "sched/rounds.h"
#include "sim/generate.h"
#include "sim/simulator.h"

namespace hydrozoa::sim {
namespace {

using sched::TraceJob;

sched::Throughputs throughputs() {
  auto t = sched::Throughputs::fromJson(Json::parse(R"js({
    "v100": {"('R', 1)": {"null": 40.0}, "('A', 1)": {"null": 12.0}, "('T', 1)": {"null": 100.0},
             "('T', 2)": {"null": 180.0}},
    "k80":  {"('R', 1)": {"null": 10.0}, "('A', 1)": {"null": 4.0}, "('T', 1)": {"null": 50.0},
             "('T', 2)": {"null": 90.0}}})js"),
                                        "t");
  EXPECT_TRUE(t.ok()) << t.status().message();
  return *t;
}

TraceJob job(const std::string& type, double steps, double arrival = 0, int scale = 1) {
  TraceJob j;
  j.type = type;
  j.total_steps = steps;
  j.arrival = arrival;
  j.scale_factor = scale;
  return j;
}

SimResult run(const std::vector<TraceJob>& trace, const std::vector<sched::WorkerType>& types,
              const std::string& policy, Seconds round = 100) {
  auto p = sched::makePolicy(policy);
  EXPECT_TRUE(p.ok());
  SimOptions o;
  o.round = round;
  auto r = simulate(trace, types, throughputs(), **p, o);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : SimResult{};
}

TEST(Simulator, OneJobAloneFinishesAtItsStepsOverItsThroughput) {
  const SimResult r = run({job("R", 10000, 50)}, {{"v100", 1}}, "max_min_fairness");
  EXPECT_DOUBLE_EQ(r.jobs[0].finish, 50 + 10000 / 40.0);  // 250 s after it arrives, mid-round
  EXPECT_DOUBLE_EQ(r.average_jct, 250);
  EXPECT_DOUBLE_EQ(r.makespan, 250);
}

TEST(Simulator, TwoEqualJobsOnOneWorkerTakeTurnsByRound) {
  // Each needs 3 rounds of 100 s; fairness gives them alternate rounds:
  // the first runs rounds 0, 2, 4 (done at 500 s), the second 1, 3, 5 (600 s).
  const SimResult r = run({job("R", 12000), job("R", 12000)}, {{"v100", 1}}, "max_min_fairness");
  EXPECT_DOUBLE_EQ(r.jobs[0].finish, 500);
  EXPECT_DOUBLE_EQ(r.jobs[1].finish, 600);
  EXPECT_DOUBLE_EQ(r.average_jct, 550);
  EXPECT_NEAR(r.utilisation, 1.0, 1e-12);
  // FIFO runs the first to its end first.
  const SimResult f = run({job("R", 12000), job("R", 12000)}, {{"v100", 1}}, "fifo");
  EXPECT_DOUBLE_EQ(f.jobs[0].finish, 300);
  EXPECT_DOUBLE_EQ(f.jobs[1].finish, 600);
}

// Finish-time fairness, by hand: on 1/n of the one worker, a step takes n/40
// s. Fairness: the first job's 12,000 steps all ran beside the second (n =
// 2: 600 s isolated), done at 500 s: ρ = 5/6; the second ran 8,000 beside
// the first (400 s) and 4,000 alone (100 s), done at 600 s: ρ = 6/5. FIFO:
// the first is done at 300 s (ρ = 1/2), the second ran alone, 300 s
// isolated, done at 600 s (ρ = 2).
TEST(Simulator, FinishTimeFairnessIsTheTimeTakenOverTheTimeOnAnEqualShare) {
  const SimResult r = run({job("R", 12000), job("R", 12000)}, {{"v100", 1}}, "max_min_fairness");
  EXPECT_NEAR(r.jobs[0].rho, 5.0 / 6, 1e-12);
  EXPECT_NEAR(r.jobs[1].rho, 6.0 / 5, 1e-12);
  EXPECT_NEAR(r.rho_mean, (5.0 / 6 + 6.0 / 5) / 2, 1e-12);
  EXPECT_NEAR(r.rho_max, 1.2, 1e-12);
  const SimResult f = run({job("R", 12000), job("R", 12000)}, {{"v100", 1}}, "fifo");
  EXPECT_NEAR(f.jobs[0].rho, 0.5, 1e-12);
  EXPECT_NEAR(f.jobs[1].rho, 2.0, 1e-12);
  EXPECT_NEAR(f.rho_max, 2.0, 1e-12);
  // The policy that minimises the worst ρ does no worse on it than FIFO.
  const SimResult ftf = run({job("R", 12000), job("R", 12000)}, {{"v100", 1}}, "finish_time_fairness");
  EXPECT_LE(ftf.rho_max, f.rho_max + 1e-12);
}

// A preemption costs its seconds of the round it resumes in: once for a
// job alone (its first round), every round for two jobs taking turns.
// Gavel's own simulator decides the allocation again no sooner than 1920 s
// after the last time (reallocate_after). Job 0 needs 1000 s on the V100,
// job 1 100 s from 150 s. At once: decided again at 200 s, job 0 keeps the
// V100 a round (a tie: it ran there), job 1 runs 300-400. No sooner than
// 1920 s: job 1 waits for the decision at 2000 s, even though job 0 ended
// at 1000 s and left the V100 idle.
TEST(Simulator, AnAllocationDecidedAgainNoSoonerThanAskedFor) {
  auto policy = sched::makePolicy("max_min_fairness");
  SimOptions o;
  o.round = 100;
  auto now = simulate({job("R", 40000), job("R", 4000, 150)}, {{"v100", 1}}, throughputs(), **policy, o);
  o.reallocate_after = 1920;
  auto later = simulate({job("R", 40000), job("R", 4000, 150)}, {{"v100", 1}}, throughputs(), **policy, o);
  ASSERT_TRUE(now.ok() && later.ok());
  EXPECT_DOUBLE_EQ(now->jobs[1].finish, 400);
  EXPECT_DOUBLE_EQ(later->jobs[0].finish, 1000);
  EXPECT_DOUBLE_EQ(later->jobs[1].finish, 2100);
  EXPECT_EQ(later->allocations, 2);  // at 0 and at 2000 s
}

TEST(Simulator, PreemptionsCostTheirTime) {
  auto policy = sched::makePolicy("max_min_fairness");
  SimOptions o;
  o.round = 100;
  o.preemption = 50;
  auto alone = simulate({job("R", 10000)}, {{"v100", 1}}, throughputs(), **policy, o);
  ASSERT_TRUE(alone.ok()) << alone.status().message();
  EXPECT_DOUBLE_EQ(alone->jobs[0].finish, 300);  // 250 s of work, 50 s restoring
  // 4,000 steps each (100 s of work), 50 s of work in a round after a
  // restore. Round 1: the first job; round 2: the second (not run yet); round
  // 3: equal priorities, and the second keeps its worker (no restore: Gavel's
  // preference for where a job ran), ending 50 s in (250 s); round 4: the
  // first again, restored, ends at 400 s.
  auto turns = simulate({job("R", 4000), job("R", 4000)}, {{"v100", 1}}, throughputs(), **policy, o);
  ASSERT_TRUE(turns.ok()) << turns.status().message();
  EXPECT_DOUBLE_EQ(turns->jobs[0].finish, 400);
  EXPECT_DOUBLE_EQ(turns->jobs[1].finish, 250);
  o.preemption = 100;
  EXPECT_FALSE(simulate({job("R", 1)}, {{"v100", 1}}, throughputs(), **policy, o).ok());
}

TEST(Simulator, RoundsRealiseTheAllocationsProportions) {
  // Weighted 1 : 3 on one worker over 40 rounds: 10 and 30 rounds.
  sched::Problem p;
  p.types = {{"v100", 1}};
  for (int m = 0; m < 2; ++m) {
    sched::JobDemand d;
    d.type = "R";
    d.throughput = {40};
    d.steps_remaining = 1e9;
    p.jobs.push_back(d);
  }
  sched::Allocation a{{{0.25}, {0.75}}, 0};
  sched::RoundMechanism mech;
  mech.reset(2, 1);
  std::vector<int> rounds(2, 0);
  for (int r = 0; r < 40; ++r) {
    const std::vector<int> placed = mech.place(p, a);
    ASSERT_TRUE((placed[0] >= 0) != (placed[1] >= 0)) << "one worker, one job a round";
    const int m = placed[0] >= 0 ? 0 : 1;
    ++rounds[static_cast<size_t>(m)];
    mech.record(m, 0, 100);
  }
  EXPECT_EQ(rounds[0], 10);
  EXPECT_EQ(rounds[1], 30);
}

// §5.3's X_example on one V100, one P100 and one K80 (Figure 5.5): the
// rounds each job gets on each type, by priority X / share received,
// approach X (job 0 0.6 / 0.4 / 0, job 1 0.2 / 0.6 / 0.2, job 2 0.2 / 0 / 0.8):
// within 0.01 after 200 rounds (0.006 when written).
TEST(RoundMechanism, RoundsApproachTheThesisXExample) {
  sched::Problem p;
  p.types = {{"v100", 1}, {"p100", 1}, {"k80", 1}};
  for (int m = 0; m < 3; ++m) {
    sched::JobDemand d;
    d.type = "job" + std::to_string(m);
    d.throughput = {40, 20, 10};
    d.steps_remaining = 1e9;
    p.jobs.push_back(d);
  }
  const std::vector<std::vector<double>> x = {{0.6, 0.4, 0.0}, {0.2, 0.6, 0.2}, {0.2, 0.0, 0.8}};
  sched::Allocation a{x, 0};
  sched::RoundMechanism mech;
  mech.reset(3, 3);
  std::vector<std::vector<int>> rounds(3, std::vector<int>(3, 0));
  const int total = 200;
  for (int r = 0; r < total; ++r) {
    const std::vector<int> placed = mech.place(p, a);
    std::vector<int> used(3, 0);
    for (int m = 0; m < 3; ++m) {
      const int j = placed[static_cast<size_t>(m)];
      ASSERT_GE(j, 0) << "three workers, three jobs: every job runs every round";
      ASSERT_EQ(++used[static_cast<size_t>(j)], 1) << "one job a worker";
      ++rounds[static_cast<size_t>(m)][static_cast<size_t>(j)];
      mech.record(m, j, 100);
    }
  }
  for (size_t m = 0; m < 3; ++m) {
    for (size_t j = 0; j < 3; ++j) {
      EXPECT_NEAR(rounds[m][j] / static_cast<double>(total), x[m][j], 0.01) << "job " << m << " type " << j;
    }
  }
}

// Work conservation (fillIdle, as Gavel's implementation): two V100s and a
// K80; the allocation gives job 0 a V100 and nothing else. Without it the
// other workers idle; with it, job 1 (earlier) takes the free V100 and job
// 2 the K80, where it runs; a job that runs nowhere free waits, and a
// capped allocation (a budget) is never filled.
TEST(RoundMechanism, IdleWorkersTakeWaitingJobsWhenAskedTo) {
  sched::Problem p;
  p.types = {{"v100", 2}, {"k80", 1}};
  for (const std::vector<double>& t : std::vector<std::vector<double>>{{40, 10}, {40, 10}, {40, 10}, {40, 0}}) {
    sched::JobDemand d;
    d.type = "j";
    d.throughput = t;
    d.steps_remaining = 1e9;
    p.jobs.push_back(d);
  }
  sched::Allocation a{{{1, 0}, {0, 0}, {0, 0}, {0, 0}}, 0};
  sched::RoundMechanism mech;
  mech.reset(4, 2);
  EXPECT_EQ(mech.place(p, a), (std::vector<int>{0, -1, -1, -1}));
  mech.fillIdle(true);
  EXPECT_EQ(mech.place(p, a), (std::vector<int>{0, 0, 1, -1}));
  a.capped = true;
  EXPECT_EQ(mech.place(p, a)[1], -1);
}

// Gavel's mechanism prefers keeping a job where it ran: of pairs with the
// same priority and share, the one on the job's previous type is placed.
TEST(RoundMechanism, TiesKeepAJobWhereItRan) {
  sched::Problem p;
  p.types = {{"v100", 1}, {"k80", 1}};
  sched::JobDemand d;
  d.type = "R";
  d.throughput = {40, 10};
  p.jobs.push_back(d);
  const sched::Allocation a{{{0.5, 0.5}}, 0};
  sched::RoundMechanism mech;
  mech.reset(1, 2);
  EXPECT_EQ(mech.place(p, a), std::vector<int>{0});  // no history: the first type
  EXPECT_EQ(mech.place(p, a, {1}), std::vector<int>{1});
  EXPECT_EQ(mech.place(p, a, {0}), std::vector<int>{0});
}

TEST(Simulator, HeterogeneityAwarePoliciesBeatTheirAgnosticForms) {
  // The thesis's three job types, arriving over time, on one V100 and one K80.
  std::vector<TraceJob> trace;
  for (int i = 0; i < 12; ++i) {
    trace.push_back(job(i % 3 == 0 ? "R" : i % 3 == 1 ? "A" : "T", 20000 + 5000 * (i % 4), 400.0 * i));
  }
  const std::vector<sched::WorkerType> types = {{"v100", 1}, {"k80", 1}};
  const SimResult fair = run(trace, types, "max_min_fairness"), las = run(trace, types, "max_min_fairness_agnostic");
  EXPECT_LT(fair.average_jct, las.average_jct);
  const SimResult quick = run(trace, types, "min_makespan"), blind = run(trace, types, "min_makespan_agnostic");
  EXPECT_LT(quick.makespan, blind.makespan);
  for (const SimResult* r : {&fair, &las, &quick, &blind}) {
    for (const SimJob& j : r->jobs) EXPECT_GT(j.finish, j.arrival);
  }
}

TEST(Simulator, AThousandJobsAndDistributedOnes) {
  std::mt19937 rng(3);
  std::vector<TraceJob> trace;
  for (int i = 0; i < 1000; ++i) {
    const bool wide = rng() % 5 == 0;
    trace.push_back(job(wide ? "T" : (rng() % 2 ? "R" : "A"), 1000 + rng() % 20000, 120.0 * i, wide ? 2 : 1));
  }
  const SimResult r = run(trace, {{"v100", 4}, {"k80", 4}}, "max_min_fairness", 360);
  int finished = 0;
  for (const SimJob& j : r.jobs) finished += j.finish > j.arrival;
  EXPECT_EQ(finished, 1000);
  EXPECT_GT(r.utilisation, 0);
  EXPECT_LE(r.utilisation, 1 + 1e-9);
}

// Gavel's continuous traces: Poisson arrivals at the rate, its durations on
// the reference type (10^x minutes), its scale-factor mix; the same seed the
// same trace; written in Gavel's format and read back the same.
TEST(Simulator, GeneratedTracesFollowGavelsRecipe) {
  TraceOptions o;
  o.jobs = 4000;
  o.rate = 6;
  o.multiple = true;
  o.seed = 5;
  auto t = generateTrace(throughputs(), o);
  ASSERT_FALSE(t.ok()) << "no type of throughputs() is measured at scale 4 and 8";
  EXPECT_NE(t.status().message().find("no job type measured on v100 at scale factors 1, 2, 4 and 8"),
            std::string::npos)
      << t.status().message();
  o.multiple = false;
  t = generateTrace(throughputs(), o);
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_EQ(t->size(), 4000u);
  int longer = 0;
  for (size_t i = 0; i < t->size(); ++i) {
    const TraceJob& j = (*t)[i];
    EXPECT_EQ(j.scale_factor, 1);
    if (i > 0) {
      EXPECT_GE(j.arrival, (*t)[i - 1].arrival);
    }
    const double rate = j.type == "R" ? 40 : j.type == "A" ? 12 : 100;
    const double minutes = j.total_steps / rate / 60;
    EXPECT_GE(minutes, std::pow(10, 1.5) * 0.999);
    EXPECT_LE(minutes, 1e4 * 1.001);
    longer += minutes > 1000;
  }
  EXPECT_NEAR(longer / 4000.0, 0.2, 0.03);                      // x in [3, 4] a fifth of the time
  EXPECT_NEAR(t->back().arrival / 3600 / 3999, 1 / o.rate, 0.01);  // mean gap 10 min
  auto again = generateTrace(throughputs(), o);
  EXPECT_EQ(formatTrace(*again), formatTrace(*t));
  auto read = sched::parseTrace(formatTrace(*t), "generated");
  ASSERT_TRUE(read.ok()) << read.status().message();
  EXPECT_EQ(formatTrace(*read), formatTrace(*t));
  // continuous-multiple: 70% on one worker, 25% on two or four, 5% on eight
  // (only the type measured at all four here).
  const std::string wide = R"js({"v100": {"('T', 1)": {"null": 100.0}, "('T', 2)": {"null": 180.0},
      "('T', 4)": {"null": 300.0}, "('T', 8)": {"null": 500.0}, "('R', 1)": {"null": 40.0}}})js";
  o.multiple = true;
  t = generateTrace(*sched::Throughputs::fromJson(Json::parse(wide), "t"), o);
  ASSERT_TRUE(t.ok()) << t.status().message();
  std::map<int, int> scales;
  for (const TraceJob& j : *t) {
    EXPECT_EQ(j.type, "T");
    ++scales[j.scale_factor];
  }
  EXPECT_NEAR(scales[1] / 4000.0, 0.70, 0.03);
  EXPECT_NEAR((scales[2] + scales[4]) / 4000.0, 0.25, 0.03);
  EXPECT_NEAR(scales[8] / 4000.0, 0.05, 0.015);
}

// Within a budget the simulator spends no more than it, by leaving workers
// idle the allocation leaves idle; less money, a longer makespan; too little
// is named. Cost and SLO misses are reported.
TEST(Simulator, ABudgetIsKeptAndSlosCounted) {
  std::vector<TraceJob> trace;
  for (int i = 0; i < 8; ++i) trace.push_back(job(i % 2 ? "R" : "A", 20000 + 4000 * i));
  const std::vector<sched::WorkerType> types = {{"v100", 2}, {"k80", 2}};
  SimOptions o;
  o.round = 100;
  o.price = {3.06, 0.9};
  auto policy = sched::makePolicy("min_makespan_budget");
  double last = 0;
  // Each job on its cheapest type costs $11.06 in all, on its fastest $12.13.
  for (const double budget : {1000.0, 11.8, 11.3}) {
    o.budget = budget;
    auto r = simulate(trace, types, throughputs(), **policy, o);
    ASSERT_TRUE(r.ok()) << budget << ": " << r.status().message();
    EXPECT_LE(r->cost, budget * 1.001) << budget;
    EXPECT_GT(r->makespan, last) << "less money, longer";
    last = r->makespan;
  }
  o.budget = 5;
  auto r = simulate(trace, types, throughputs(), **policy, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no allocation finishes the jobs within $5"), std::string::npos)
      << r.status().message();
  // SLOs: 4x each job's duration on its fastest type; min_cost_slo meets
  // at least as many as min_cost.
  for (TraceJob& j : trace) j.slo = 4;
  o.budget = -1;
  auto cheap = simulate(trace, types, throughputs(), **sched::makePolicy("min_cost"), o);
  auto kept = simulate(trace, types, throughputs(), **sched::makePolicy("min_cost_slo"), o);
  ASSERT_TRUE(cheap.ok()) << cheap.status().message();
  ASSERT_TRUE(kept.ok()) << kept.status().message();
  EXPECT_EQ(cheap->slo_jobs, 8);
  EXPECT_LE(kept->slo_missed, cheap->slo_missed);
  EXPECT_GT(cheap->cost, 0);
}

TEST(Simulator, MistakesAreNamed) {
  auto p = sched::makePolicy("max_min_fairness");
  auto r = simulate({job("VGG", 100)}, {{"v100", 1}}, throughputs(), **p);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("job 0 (VGG, 1 worker) has no throughput"), std::string::npos)
      << r.status().message();
  SimOptions o;
  o.round = 0;
  r = simulate({job("R", 100)}, {{"v100", 1}}, throughputs(), **p, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("round"), std::string::npos);
}

}  // namespace
}  // namespace hydrozoa::sim

namespace hydrozoa::sim {
namespace {

// Space sharing: R (40 steps/s alone) and A (12 alone) share the V100 at 30
// and 10 steps/s. Each starts by paying 10 s; R's 3,000 steps take 100 s
// more (done at 110 s), A has done 1,000 of its 1,500 by then and runs
// alone at 12/s: 500 / 12 s more (done at 151.67 s). Taking turns instead,
// one job per round of 200 s: R at 85 s, A at 335 s.
TEST(SpaceSharingSimulation, APairRunsAtItsSharedRatesThenTheOneLeftAlone) {
  auto t = sched::Throughputs::fromJson(Json::parse(R"js({"v100": {"('R', 1)": {"null": 40.0, "('A', 1)": [30.0, 10.0]},
                                                                  "('A', 1)": {"null": 12.0}}})js"),
                                        "t");
  ASSERT_TRUE(t.ok()) << t.status().message();
  auto policy = sched::makePolicy("max_total_throughput");
  ASSERT_TRUE(policy.ok());
  SimOptions o;
  o.round = 200;
  o.preemption = 10;
  o.space_sharing = true;
  const std::vector<TraceJob> trace = {job("R", 3000), job("A", 1500)};
  auto shared = simulate(trace, {{"v100", 1}}, *t, **policy, o);
  ASSERT_TRUE(shared.ok()) << shared.status().message();
  EXPECT_DOUBLE_EQ(shared->jobs[0].finish, 110);
  EXPECT_NEAR(shared->jobs[1].finish, 110 + 500.0 / 12, 1e-9);
  EXPECT_EQ(shared->rounds, 1);
  EXPECT_NEAR(shared->utilisation, 1.0, 1e-12);  // busy until the last one ends
  o.space_sharing = false;
  auto turns = simulate(trace, {{"v100", 1}}, *t, **policy, o);
  ASSERT_TRUE(turns.ok()) << turns.status().message();
  EXPECT_DOUBLE_EQ(std::min(turns->jobs[0].finish, turns->jobs[1].finish), 85);  // R first: 10 + 75
  EXPECT_DOUBLE_EQ(std::max(turns->jobs[0].finish, turns->jobs[1].finish), 335);  // A: 200 + 10 + 125
}

}  // namespace
}  // namespace hydrozoa::sim
