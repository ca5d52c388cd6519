// Gavel's input formats (sched/gavel_formats.h): the throughputs file and
// the trace, every mistake named by file and line or key; Gavel's published
// files, allocated as Gavel's own code allocates them.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>

#include "sched/gavel_formats.h"
#include "sched/policy.h"

namespace hydrozoa::sched {
namespace {

const char* kThroughputs = R"js({
  "v100": {"('ResNet-18 (batch size 32)', 1)": {"null": 40.0, "('A3C', 1)": [30.0, 5.0]},
           "('A3C', 1)": {"null": 12.0}, "('LM (batch size 80)', 2)": {"null": 100.0}},
  "k80":  {"('ResNet-18 (batch size 32)', 1)": {"null": 10.0},
           "('A3C', 1)": {"null": 4.0}, "('LM (batch size 80)', 2)": {"null": 50.0}}
})js";

const char* kTrace =
    "ResNet-18 (batch size 32)\tpython3 main.py\timage_classification\t--num_steps\t1\t1000\t1\t1\t-1.000000\t0\n"
    "A3C\tpython3 main.py\trl\t--max-steps\t0\t500\t1\t2\t-1\t10\n"
    "LM (batch size 80)\tpython3 main.py\tlm\t--steps\t1\t3000\t2\t1\t1.2\t30.5\n";

TEST(GavelFormats, ThroughputsAndTraceMakeAProblem) {
  auto t = Throughputs::fromJson(Json::parse(kThroughputs), "t.json");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->isolated("v100", "ResNet-18 (batch size 32)", 1), 40.0);
  EXPECT_FALSE(t->isolated("v100", "ResNet-18 (batch size 32)", 2));
  auto jobs = parseTrace(kTrace, "j.trace");
  ASSERT_TRUE(jobs.ok()) << jobs.status().message();
  ASSERT_EQ(jobs->size(), 3u);
  EXPECT_EQ((*jobs)[1].type, "A3C");
  EXPECT_EQ((*jobs)[1].weight, 2);
  EXPECT_EQ((*jobs)[2].scale_factor, 2);
  EXPECT_EQ((*jobs)[2].slo, 1.2);
  EXPECT_EQ((*jobs)[2].arrival, 30.5);
  auto types = parseCluster("v100=2,k80=2", "--cluster");
  ASSERT_TRUE(types.ok());
  auto p = problemOf(*jobs, *types, *t);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->jobs[2].throughput, (std::vector<double>{100, 50}));
  auto a = (*makePolicy("max_min_fairness"))->allocate(*p);
  ASSERT_TRUE(a.ok()) << a.status().message();
  // A spot type runs at its base type's throughputs.
  types = parseCluster("v100:spot=2,k80=2", "--cluster");
  ASSERT_TRUE(types.ok()) << types.status().message();
  EXPECT_TRUE(isSpot((*types)[0].name));
  EXPECT_EQ(baseType((*types)[0].name), "v100");
  EXPECT_EQ(baseType("k80"), "k80");
  p = problemOf(*jobs, *types, *t);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->jobs[2].throughput, (std::vector<double>{100, 50}));
}

// Space sharing's pairs: read both ways round, and kept only where sharing
// beats taking turns (ResNet-18 at 30 of 40 steps/s and A3C at 5 of 12: 1.17
// of the work alternating does).
TEST(GavelFormats, SharedThroughputsMakePairs) {
  auto t = Throughputs::fromJson(Json::parse(kThroughputs), "t.json");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->shared("v100", "ResNet-18 (batch size 32)", "A3C", 1), std::make_pair(30.0, 5.0));
  EXPECT_EQ(t->shared("v100", "A3C", "ResNet-18 (batch size 32)", 1), std::make_pair(5.0, 30.0));
  EXPECT_FALSE(t->shared("k80", "A3C", "ResNet-18 (batch size 32)", 1));
  EXPECT_FALSE(t->shared("v100", "A3C", "ResNet-18 (batch size 32)", 2));
  auto jobs = parseTrace(kTrace, "j.trace");
  ASSERT_TRUE(jobs.ok());
  auto p = problemOf(*jobs, {{"v100", 2}, {"k80", 2}}, *t);
  ASSERT_TRUE(p.ok()) << p.status().message();
  addSpaceSharing(&*p, *t);
  ASSERT_EQ(p->pairs.size(), 1u);
  EXPECT_EQ(p->pairs[0].a, 0);
  EXPECT_EQ(p->pairs[0].b, 1);
  EXPECT_EQ(p->pairs[0].throughput_a, (std::vector<double>{30, 0}));
  EXPECT_EQ(p->pairs[0].throughput_b, (std::vector<double>{5, 0}));
  addSpaceSharing(&*p, *t, /*limit=*/0);
  EXPECT_TRUE(p->pairs.empty());
  // Sharing that does less than taking turns is no pair.
  auto worse = Throughputs::fromJson(Json::parse(R"js({"v100": {"('R', 1)": {"null": 40.0, "('A', 1)": [10.0, 3.0]},
                                                               "('A', 1)": {"null": 12.0}}})js"),
                                     "w.json");
  ASSERT_TRUE(worse.ok()) << worse.status().message();
  TraceJob r, a;
  r.type = "R";
  a.type = "A";
  r.total_steps = a.total_steps = 100;
  auto q = problemOf({r, a}, {{"v100", 1}}, *worse);
  ASSERT_TRUE(q.ok());
  addSpaceSharing(&*q, *worse);
  EXPECT_TRUE(q->pairs.empty());
  for (const std::string bad : {R"js({"v100": {"('R', 1)": {"null": 1, "('A', 1)": [1]}}})js",
                                R"js({"v100": {"('R', 1)": {"null": 1, "('A', 2)": [1, 1]}}})js",
                                R"js({"v100": {"('R', 1)": {"null": 1, "('A', 1)": [-1, 1]}}})js",
                                R"js({"v100": {"('R', 1)": {"null": 1, "A": [1, 1]}}})js"}) {
    auto e = Throughputs::fromJson(Json::parse(bad), "t.json");
    ASSERT_FALSE(e.ok()) << bad;
    EXPECT_EQ(e.status().message().rfind("t.json: v100 ('R', 1)", 0), 0u) << e.status().message();
  }
}

TEST(GavelFormats, MistakesAreNamedByLineAndKey) {
  struct Case {
    std::string trace, message;
  };
  const std::vector<Case> traces = {
      {"A3C\tx\ty\tz\t1\t500\t1\t1\t-1\n", "j.trace:1: 9 tab-separated fields, expected 10"},
      {"A3C\tx\ty\tz\t1\tmany\t1\t1\t-1\t0\n", "j.trace:1: total_steps \"many\" is not a number"},
      {"A3C\tx\ty\tz\t1\t500\t1.5\t1\t-1\t0\n", "scale_factor 1.5 is not a whole number"},
      {"A3C\tx\ty\tz\t1\t500\t1\t0\t-1\t0\n", "priority_weight \"0\""},
      {"A3C\tx\ty\tz\t1\t500\t1\t1\t-1\t-5\n", "arrival_time \"-5\""},
      {"\n\n", "j.trace: no jobs"},
  };
  for (const Case& c : traces) {
    auto r = parseTrace(c.trace, "j.trace");
    ASSERT_FALSE(r.ok()) << c.trace;
    EXPECT_NE(r.status().message().find(c.message), std::string::npos) << r.status().message();
  }
  for (const std::string bad : {R"js({"v100": {"A3C": {"null": 1}}})js", R"js({"v100": {"('A3C', 0)": {"null": 1}}})js",
                                R"js({"v100": {"('A3C', 1)": {"null": -1}}})js", R"js({"v100": {"('A3C', 1)": 3}})js",
                                R"js([])js"}) {
    auto r = Throughputs::fromJson(Json::parse(bad), "t.json");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().message().rfind("t.json", 0), 0u) << r.status().message();
  }
  auto t = Throughputs::fromJson(Json::parse(kThroughputs), "t.json");
  auto jobs = parseTrace(kTrace, "j.trace");
  auto p = problemOf(*jobs, {{"v100", 1}, {"p100", 1}}, *t);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("worker type p100 has no throughputs (the file has k80, v100)"),
            std::string::npos)
      << p.status().message();
  p = problemOf(*jobs, {{"v100", 1}, {"k80", 1}}, *t);  // the LM needs 2 workers
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("job 2 (LM (batch size 80), 2 workers) has no throughput"), std::string::npos)
      << p.status().message();
  for (const std::string bad : {"v100", "v100=0", "v100=2,v100=1", "=3", "v100=1e3", "", "v100:ondemand=1", ":spot=1"}) {
    EXPECT_FALSE(parseCluster(bad, "--cluster").ok()) << bad;
  }
}

// Gavel's published traces, and a subset of its throughputs file (the job
// types they use), shipped in tests/fixtures/gavel with the allocations
// Gavel's own code gives on them (make_fixture.py there). Max-min fairness
// has many optimal allocations; its objective, the least weighted
// throughput over each job's proportional share, is unique: ours must
// reach Gavel's on each trace.
//
// The agnostic form: Gavel's sets every throughput to 1, also where the
// job's is 0 (it cannot run there: ResNet-50 at batch 128 on two K80s, in
// max_min_fairness.trace), and so gives such a job time on workers where
// it makes no progress; ours sets 1 where the job runs and 0 where it
// cannot, as a scheduler that knows nothing of speeds but knows what fits
// would. On the problem with every throughput 1, our LP reaches Gavel's
// objective; our agnostic form gives no time where a job cannot run.
double maxMinObjective(const Problem& p, const Allocation& a, const std::vector<double>& proportional) {
  double objective = std::numeric_limits<double>::infinity();
  for (size_t j = 0; j < p.jobs.size(); ++j) {
    double rate = 0;
    for (size_t k = 0; k < p.types.size(); ++k) rate += p.jobs[j].throughput[k] * a.x[j][k];
    objective = std::min(objective, rate * p.jobs[j].scale_factor / (p.jobs[j].weight * proportional[j]));
  }
  return objective;
}

TEST(GavelFormats, GavelsPublishedFilesAllocateAsGavelsOwnCode) {
  const std::string dir = std::string(HYDROZOA_TEST_DATA_DIR) + "/gavel/";
  auto t = Throughputs::load(dir + "throughputs.json");
  ASSERT_TRUE(t.ok()) << t.status().message();
  auto fixture = readJsonFile(dir + "allocations.json");
  ASSERT_TRUE(fixture.ok()) << fixture.status().message();
  int checked = 0, cannotRun = 0;
  for (const auto& [trace, byPolicy] : fixture->items()) {
    auto jobs = loadTrace(dir + trace);
    ASSERT_TRUE(jobs.ok()) << jobs.status().message();
    auto p = problemOf(*jobs, {{"v100", 4}, {"p100", 4}, {"k80", 4}}, *t);
    ASSERT_TRUE(p.ok()) << trace << ": " << p.status().message();
    ASSERT_EQ(p->types.size(), 3u);
    for (const auto& [gavelPolicy, g] : byPolicy.items()) {
      const auto types = g["worker_types"].get<std::vector<std::string>>();
      std::vector<size_t> gk;  // our type k is the fixture's gk[k]
      for (const WorkerType& w : p->types) {
        gk.push_back(static_cast<size_t>(std::find(types.begin(), types.end(), w.name) - types.begin()));
        ASSERT_LT(gk.back(), types.size()) << w.name;
      }
      const auto proportional = g["proportional"].get<std::vector<double>>();
      const auto gavelX = g["allocation"].get<std::vector<std::vector<double>>>();
      ASSERT_EQ(proportional.size(), p->jobs.size()) << trace;
      const double want = g["objective"].get<double>();
      const std::string at = trace + " " + gavelPolicy;
      if (gavelPolicy == "max_min_fairness_perf") {
        auto a = (*makePolicy("max_min_fairness"))->allocate(*p);
        ASSERT_TRUE(a.ok()) << at << ": " << a.status().message();
        EXPECT_NEAR(maxMinObjective(*p, *a, proportional), want, 1e-3 * want) << at;
      } else {
        Problem ones = *p;  // Gavel's agnostic problem
        for (JobDemand& job : ones.jobs) std::fill(job.throughput.begin(), job.throughput.end(), 1.0);
        auto a = (*makePolicy("max_min_fairness"))->allocate(ones);
        ASSERT_TRUE(a.ok()) << at << ": " << a.status().message();
        EXPECT_NEAR(maxMinObjective(ones, *a, proportional), want, 1e-3 * want) << at;
        auto ours = (*makePolicy("max_min_fairness_agnostic"))->allocate(*p);
        ASSERT_TRUE(ours.ok()) << at;
        bool zero = false;
        for (size_t j = 0; j < p->jobs.size(); ++j) {
          for (size_t k = 0; k < p->types.size(); ++k) {
            if (p->jobs[j].throughput[k] > 0) continue;
            zero = true;
            EXPECT_LT(ours->x[j][k], 1e-9) << at << ": job " << j << " on " << p->types[k].name;
            cannotRun += gavelX[j][gk[k]] > 1e-3;  // Gavel's gives it time there
          }
        }
        // Where every job runs on every type, the two forms are one.
        if (!zero) {
          EXPECT_NEAR(maxMinObjective(ones, *ours, proportional), want, 1e-3 * want) << at;
        }
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, 8);
  EXPECT_GT(cannotRun, 0);  // the evidence above: Gavel's agnostic LAS gives time where a job cannot run
}

}  // namespace
}  // namespace hydrozoa::sched
