// The scheduler service's pure parts: the pool's config, submitting,
// cancelling, the state kept across restarts, a policy's allocation of
// submitted jobs, and a job whose process cannot start. Real jobs:
// tests/integration/cluster_service_test.cc.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "sched/service/config.h"
#include "sched/service/scheduler.h"

namespace hydrozoa::sched {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  TempDir() {
    path = (fs::temp_directory_path() /
            ("hzsvc." + std::to_string(::getpid()) + "." +
             ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string path;
};

Result<ClusterConfig> config(const std::string& yaml) {
  HZ_ASSIGN_OR_RETURN(const Json j, parseYaml(yaml, "cluster.yaml"));
  return parseClusterConfig(j, "cluster.yaml");
}

std::string error(const std::string& yaml) {
  auto c = config(yaml);
  return c.ok() ? "" : c.status().message();
}

TEST(ClusterConfig, TheExampleParses) {
  auto c = loadClusterConfig(std::string(HYDROZOA_SOURCE_DIR) + "/examples/cluster.yaml");
  ASSERT_TRUE(c.ok()) << c.status().message();
  ASSERT_EQ(c->types.size(), 2u);
  EXPECT_EQ(c->types[0].name, "fast");
  EXPECT_EQ(c->types[1].cpu_limit, 0.5);
  EXPECT_EQ(c->round, 60);
  EXPECT_EQ(c->policy, "max_min_fairness");
  EXPECT_EQ(c->types[1].trainFlags(),
            (std::vector<std::string>{"--launcher", "container", "--cpu-limit", "0.5", "--memory-limit", "2000000000"}));
}

TEST(ClusterConfig, EveryMistakeIsNamed) {
  const std::string one = "worker_types: [{name: a, count: 1}]\n";
  EXPECT_NE(error("policy: fastest\n" + one).find("fastest"), std::string::npos);
  EXPECT_NE(error("worker_types: [{name: a, count: 0}]\n").find("worker_types[0].count"), std::string::npos);
  EXPECT_NE(error("worker_types: [{name: a, count: 1e30}]\n").find("count"), std::string::npos);
  EXPECT_NE(error("worker_types: []\n").find("worker_types"), std::string::npos);
  EXPECT_NE(error("fill_idle: sometimes\n" + one).find("fill_idle"), std::string::npos);
  EXPECT_NE(error("worker_types: [{name: a, count: 1}, {name: a, count: 1}]\n").find("given twice"), std::string::npos);
  EXPECT_NE(error("worker_types: [{name: a, count: 1, launcher: cloud}]\n").find("cloud"), std::string::npos);
  EXPECT_NE(error("worker_types: [{name: a, count: 1, cpu_limit: -1}]\n").find("cpu_limit"), std::string::npos);
  EXPECT_NE(error("worker_types: [{name: a, count: 1, memory_limit: 1KB}]\n").find("16MB"), std::string::npos);
  EXPECT_NE(error("worker_types: [{name: a, count: 1, gpus: 2}]\n").find("gpus"), std::string::npos);
  EXPECT_NE(error("round: 0.1s\n" + one).find("round"), std::string::npos);
  EXPECT_NE(error("port: 70000\n" + one).find("port"), std::string::npos);
  EXPECT_NE(error("policy: min_cost\n" + one).find("price"), std::string::npos);
  EXPECT_NE(error("policy: min_makespan_budget\nworker_types: [{name: a, count: 1, price: 1}]\n").find("budget"),
            std::string::npos);
  EXPECT_NE(error("policy: hierarchical\n" + one).find("needs entities: add entities:"), std::string::npos);
  EXPECT_NE(error("entities: [{name: a}]\n" + one).find("only policy hierarchical"), std::string::npos);
  const std::string h = "policy: hierarchical\n" + one;
  EXPECT_NE(error(h + "entities: []\n").find("entities: expected a list"), std::string::npos);
  EXPECT_NE(error(h + "entities: [{name: a, policy: lottery}]\n").find("\"lottery\" is not fairness or fifo"),
            std::string::npos);
  EXPECT_NE(error(h + "entities: [{name: a, weight: 0}]\n").find("weight"), std::string::npos);
  EXPECT_NE(error(h + "entities: [{name: a}, {name: a}]\n").find("given twice"), std::string::npos);
  EXPECT_NE(error(h + "entities: [{name: a, share: 2}]\n").find("share"), std::string::npos);
  EXPECT_EQ(error(h + "entities: [{name: a, weight: 2}, {name: b, policy: fifo}]\n"), "");
  EXPECT_EQ(error("policy: min_cost\nworker_types: [{name: a, count: 1, price: 1}]\n"), "");
}

Json spec(int workers = 4) {
  return {{"name", "small"},
          {"model", {{"name", "mlp"}}},
          {"data", {{"dataset", "synthetic"}}},
          {"training", {{"epochs", 1}, {"global_batch", 24}}},
          {"cluster", {{"workers", workers}}}};
}

std::unique_ptr<Scheduler> open(const std::string& dir, const std::string& binary = "/nonexistent/hydrozoa") {
  auto c = config("round: 1s\nworker_types: [{name: big, count: 4, launcher: local}, "
                  "{name: small, count: 2, launcher: local}]\nstate_dir: " + dir + "\n");
  EXPECT_TRUE(c.ok()) << c.status().message();
  auto s = Scheduler::open(*c, binary, 1000);
  EXPECT_TRUE(s.ok()) << s.status().message();
  return s.ok() ? std::move(*s) : nullptr;
}

TEST(Scheduler, SubmittedJobsAreCheckedKeptAcrossRestartsAndCancelled) {
  TempDir dir;
  {
    auto s = open(dir.path);
    ASSERT_TRUE(s);
    auto id = s->submit(spec(), 2, -1, -1, 1000);
    ASSERT_TRUE(id.ok()) << id.status().message();
    EXPECT_EQ(*id, 1);
    EXPECT_TRUE(fs::exists(dir.path + "/jobs/1/job.yaml"));
    EXPECT_EQ(*s->submit(spec(2), 1, 5, 3.5, 1001), 2);
    // Refused, with what to fix.
    auto bad = s->submit(spec(8), 1, -1, -1, 1002);
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.status().message().find("needs 8 workers"), std::string::npos) << bad.status().message();
    Json noModel = spec();
    noModel.erase("model");
    EXPECT_NE(s->submit(noModel, 1, -1, -1, 1002).status().message().find("model"), std::string::npos);
    EXPECT_NE(s->submit(spec(), 0, -1, -1, 1002).status().message().find("--weight"), std::string::npos);
    EXPECT_NE(s->submit(spec(), 1, std::nan(""), -1, 1002).status().message().find("--slo"), std::string::npos);
    EXPECT_NE(s->submit(spec(), 1, -1, -5, 1002).status().message().find("--budget"), std::string::npos);
    ASSERT_TRUE(s->cancel(2, 1003).ok());
    EXPECT_EQ(s->cancel(2, 1003).message(), "job 2 has ended already (cancelled)");
    EXPECT_EQ(s->cancel(7, 1003).code(), ErrorCode::kNotFound);
  }
  // A new scheduler on the same state has the same jobs, and the next id.
  auto s = open(dir.path);
  ASSERT_TRUE(s);
  const Json st = s->toJson(1010);
  ASSERT_EQ(st["jobs"].size(), 2u);
  EXPECT_EQ(st["jobs"][0]["status"], "queued");
  EXPECT_EQ(st["jobs"][0]["weight"], 2);
  EXPECT_EQ(st["jobs"][1]["status"], "cancelled");
  EXPECT_EQ(st["jobs"][1]["slo_hours"], 5);
  EXPECT_EQ(*s->submit(spec(), 1, -1, -1, 1011), 3);
}

TEST(Scheduler, AJobWhoseProcessCannotStartFailsWithItsReasonAndThePoolGoesOn) {
  TempDir dir;
  auto s = open(dir.path);  // a hydrozoa binary that does not exist
  ASSERT_TRUE(s);
  ASSERT_TRUE(s->submit(spec(), 1, -1, -1, 1000).ok());
  ASSERT_TRUE(s->submit(spec(2), 1, -1, -1, 1000).ok());
  s->tick(1000.5);  // a round: the policy's allocation, jobs placed and started
  Json st = s->toJson(1000.5);
  EXPECT_EQ(st["round"], 1);
  // Job 1 needs all 4 workers of big; job 2 fits on either type.
  EXPECT_EQ(st["jobs"][0]["allocation"]["small"].get<double>(), 0);
  EXPECT_GT(st["jobs"][0]["allocation"]["big"].get<double>(), 0.2);
  EXPECT_GT(st["jobs"][1]["allocation"]["big"].get<double>() + st["jobs"][1]["allocation"]["small"].get<double>(),
            0.2);
  for (int i = 0; i < 50; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    s->tick(1001 + i * 0.02);
  }
  st = s->toJson(1002);
  for (const Json& j : st["jobs"]) {
    EXPECT_EQ(j["status"], "failed") << j;
    EXPECT_NE(j["reason"].get<std::string>().find("ended without saying how"), std::string::npos) << j;
  }
  for (const Json& t : st["types"]) EXPECT_EQ(t["free"], t["count"]);
}

// NOTE [Throughput estimates]: a type measured is its figure; one not yet
// measured is scaled from the job's best measured type by the CPU quotas;
// a job measured nowhere gets the quotas.
TEST(Scheduler, ThroughputsNotMeasuredAreEstimatedFromTheQuotas) {
  auto c = config("worker_types: [{name: big, count: 2, cpu_limit: 1.0}, {name: small, count: 2, cpu_limit: 0.5},"
                  " {name: plain, count: 1}]\n");
  ASSERT_TRUE(c.ok()) << c.status().message();
  const std::vector<PoolType>& types = c->types;
  auto estimates = [&](std::vector<double> measured) {
    std::vector<double> e;
    for (size_t t = 0; t < types.size(); ++t) e.push_back(estimateThroughput(measured, types, t));
    return e;
  };
  EXPECT_EQ(estimates({0, 0, 0}), (std::vector<double>{1.0, 0.5, 1.0}));
  EXPECT_EQ(estimates({20, 0, 0}), (std::vector<double>{20, 10, 20}));
  EXPECT_EQ(estimates({0, 8, 0}), (std::vector<double>{16, 8, 16}));
  // Measured on two: each its own; the third from the faster measurement.
  EXPECT_EQ(estimates({20, 12, 0}), (std::vector<double>{20, 12, 20}));
  EXPECT_EQ(estimates({6, 8, 0}), (std::vector<double>{6, 8, 16}));
}

// Policy hierarchical in the service: jobs are submitted to an entity, and
// the allocation shares the pool among entities by weight, FIFO or
// fairness inside (the same water filling as allocate and simulate).
TEST(Scheduler, AHierarchicalPoolSharesByEntity) {
  TempDir dir;
  auto c = config("policy: hierarchical\nround: 1s\nworker_types: [{name: a, count: 3, launcher: local}]\n"
                  "entities: [{name: product, weight: 1}, {name: research, weight: 1, policy: fifo}]\n"
                  "state_dir: " + dir.path + "\n");
  ASSERT_TRUE(c.ok()) << c.status().message();
  auto s = Scheduler::open(*c, "/nonexistent/hydrozoa", 1000);
  ASSERT_TRUE(s.ok()) << s.status().message();
  auto refused = (*s)->submit(spec(1), 1, -1, -1, 1000);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("give the job one with --entity (known: product, research)"),
            std::string::npos)
      << refused.status().message();
  refused = (*s)->submit(spec(1), 1, -1, -1, 1000, "sales");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("--entity sales"), std::string::npos) << refused.status().message();
  // Figure 5.6's FIFO hand-over (as in Policies.WaterFillingAsTheThesisWalksIt):
  // research's first job can use one worker of its 1.5, its second takes the rest.
  for (const char* e : {"product", "product", "research", "research"}) {
    ASSERT_TRUE((*s)->submit(spec(1), 1, -1, -1, 1000, e).ok()) << e;
  }
  (*s)->tick(1000.1);
  const Json st = (*s)->toJson(1000.1);
  ASSERT_EQ(st["jobs"].size(), 4u);
  const std::vector<double> shares = {0.75, 0.75, 1, 0.5};
  for (size_t m = 0; m < 4; ++m) {
    EXPECT_NEAR(st["jobs"][m]["allocation"]["a"].get<double>(), shares[m], 1e-4) << st["jobs"][m];
    EXPECT_EQ(st["jobs"][m]["entity"], m < 2 ? "product" : "research");
  }
  EXPECT_EQ(st.value("error", ""), "");
  // A pool without entities takes no --entity.
  TempDir other;
  auto plain = open(other.path);
  ASSERT_TRUE(plain);
  refused = plain->submit(spec(1), 1, -1, -1, 1000, "product");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("submit without --entity"), std::string::npos);
}

TEST(Scheduler, APolicyThatCannotDecideIsNamedAndThePoolGoesOnByFairness) {
  TempDir dir;
  auto c = config("policy: min_cost_slo\nround: 1s\nworker_types: [{name: a, count: 4, launcher: local, price: 1}]\n"
                  "state_dir: " + dir.path + "\n");
  ASSERT_TRUE(c.ok()) << c.status().message();
  auto s = Scheduler::open(*c, "/nonexistent/hydrozoa", 1000);
  ASSERT_TRUE(s.ok());
  // An SLO of 0.36 s for a job of unknown length: no allocation meets it.
  ASSERT_TRUE((*s)->submit(spec(), 1, 0.0001, -1, 1000).ok());
  (*s)->tick(1000.1);
  const Json st = (*s)->toJson(1000.1);
  EXPECT_NE(st["error"].get<std::string>().find("min_cost_slo"), std::string::npos) << st["error"];
  EXPECT_NE(st["error"].get<std::string>().find("max_min_fairness meanwhile"), std::string::npos) << st["error"];
  EXPECT_GT(st["jobs"][0]["allocation"]["a"].get<double>(), 0.5);
}

// Work conservation, as the simulator (RoundMechanism.IdleWorkersTakeWaitingJobsWhenAskedTo):
// FIFO on 3 workers gives job 1 (2 workers) all its time, job 2 (2 workers)
// half, jobs 3 and 4 none. Job 2 does not fit beside job 1, so one worker is
// free: it takes job 4, the earliest waiting job that fits there; with
// fill_idle: false it stays idle.
TEST(Scheduler, IdleWorkersTakeWaitingJobs) {
  for (const bool fill : {true, false}) {
    TempDir dir;
    auto c = config(std::string("policy: fifo\nround: 1s\nfill_idle: ") + (fill ? "true" : "false") +
                    "\nworker_types: [{name: a, count: 3, launcher: local}]\nstate_dir: " + dir.path + "\n");
    ASSERT_TRUE(c.ok()) << c.status().message();
    EXPECT_EQ(c->fill_idle, fill);
    auto s = Scheduler::open(*c, "/nonexistent/hydrozoa", 1000);
    ASSERT_TRUE(s.ok()) << s.status().message();
    for (const int workers : {2, 2, 2, 1}) ASSERT_TRUE((*s)->submit(spec(workers), 1, -1, -1, 1000).ok());
    (*s)->tick(1000.1);
    const Json st = (*s)->toJson(1000.1);
    const std::vector<double> shares = {1, 0.5, 0, 0};
    for (size_t m = 0; m < 4; ++m) {
      EXPECT_NEAR(st["jobs"][m]["allocation"]["a"].get<double>(), shares[m], 1e-6) << st["jobs"][m];
    }
    ASSERT_EQ(st["rounds"].size(), 1u);
    const Json want = fill ? Json{{"1", "a"}, {"4", "a"}} : Json{{"1", "a"}};
    EXPECT_EQ(st["rounds"][0]["placed"], want) << "fill_idle: " << fill;
  }
}

// A stop sent while a job's process starts waits (blocked) until `hydrozoa
// train` has its handlers: here `sleep`, which never unblocks it, lives on.
TEST(JobProcess, AStopSentWhileItStartsIsHeldUntilItsHandlersAreThere) {
  TempDir dir;
  auto p = JobProcess::spawn({"/bin/sleep", "30"}, dir.path, dir.path + "/log", dir.path + "/events.jsonl");
  ASSERT_TRUE(p.ok()) << p.status().message();
  p->signal(SIGUSR2);
  p->signal(SIGINT);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_TRUE(p->running());
  p->signal(SIGKILL);
  for (int i = 0; i < 100 && p->running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_FALSE(p->running());
  // Events: whole lines only, from where it began.
  std::ofstream(dir.path + "/events.jsonl") << "{\"event\": \"running\"}\n{\"event\": \"st";
  auto q = JobProcess::attach(-1, "x", dir.path + "/events.jsonl", 0);
  auto events = q.newEvents();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["event"], "running");
  std::ofstream(dir.path + "/events.jsonl", std::ios::app) << "ep\"}\n";
  events = q.newEvents();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["event"], "step");
}

TEST(Scheduler, ACorruptStateIsRefusedByName) {
  TempDir dir;
  std::ofstream(dir.path + "/state.json") << "{\"version\": 1, \"jobs\": [";
  auto c = config("worker_types: [{name: a, count: 1}]\nstate_dir: " + dir.path + "\n");
  ASSERT_TRUE(c.ok());
  auto s = Scheduler::open(*c, "hydrozoa", 0);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("state.json"), std::string::npos) << s.status().message();
}

}  // namespace
}  // namespace hydrozoa::sched
