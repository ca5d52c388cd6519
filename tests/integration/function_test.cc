// Function workers (docs/functions.md, "Function workers"): the launcher's
// rules checked on real namespaces and cgroups (no route but the store's,
// CPU by memory, the time limit), a run across several invocations that
// ends exactly as one that was never interrupted, and the user's mistakes.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "cluster/launch/function/function_launcher.h"
#include "integration/harness.h"
#include "runtime/checkpoint.h"

namespace hydrozoa {
namespace {

using testing::Outcome;
using testing::runHydrozoa;
using testing::ScratchDir;

std::string readAll(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

TEST(FunctionWorkers, NoRouteButTheStoreCpuByMemoryAndATimeLimit) {
  REQUIRE_CONTAINERS();
  ScratchDir dir;
  cluster::FunctionOptions o;
  o.executable = "/bin/bash";
  auto catalog = plan::loadCatalog("lambda");
  ASSERT_TRUE(catalog.ok());
  o.catalog = *catalog;
  o.max_duration = 3;
  o.state_dir = dir / "state";
  auto made = cluster::FunctionLauncher::create(o);
  ASSERT_TRUE(made.ok()) << made.status().message();
  cluster::FunctionLauncher& l = **made;
  cluster::WorkerLaunch a;
  a.id = 0;
  a.args = {"-c", "sleep 30"};
  a.log_path = dir / "a.log";
  a.memory = 1769 * kMB;  // AWS: one vCPU
  ASSERT_TRUE(l.launch(a).ok());
  cluster::WorkerLaunch b;
  b.id = 1;
  b.memory = 200 * kMB;
  b.log_path = dir / "b.log";
  b.args = {"-c", "ip -4 route; (exec 3<>/dev/tcp/" + l.workerHost(0) + "/9) 2>&1; echo reached=$?"};
  ASSERT_TRUE(l.launch(b).ok());
  // The CPU quota follows the memory: 1.769 GB × the catalog's 0.6 vCPU per GB.
  const std::string cpu = readAll(l.containers().cgroupDirs(0).front() + "/cpu.max");
  if (!cpu.empty()) {
    EXPECT_EQ(cpu.substr(0, cpu.find(' ')), "106140") << cpu;
  }
  // The time limit: the platform ends an invocation that runs past it.
  std::vector<cluster::WorkerExit> exits;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (exits.size() < 2 && std::chrono::steady_clock::now() < until) {
    for (auto& e : l.poll()) exits.push_back(e);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(exits.size(), 2u);
  for (const auto& e : exits) {
    if (e.id == 0) {
      EXPECT_NE(e.how.find("at its time limit (3.00 s)"), std::string::npos) << e.how;
    }
  }
  // Its only route is the bridge's address; another worker is unreachable.
  const std::string log = readAll(dir / "b.log");
  EXPECT_NE(log.find(l.coordinatorHost() + " dev eth0"), std::string::npos) << log;
  EXPECT_EQ(log.find("default"), std::string::npos) << log;
  EXPECT_NE(log.find("Network is unreachable"), std::string::npos) << log;
  EXPECT_NE(log.find("reached=1"), std::string::npos) << log;
}

std::string functionJob(const std::string& cluster) {
  return "name: functions\n"
         "model: {name: mlp, options: {hidden: 32, depth: 2}}\n"
         "data: {dataset: synthetic, synthetic_train: 2400, synthetic_test: 48}\n"
         "training: {epochs: 100, max_steps: 10000, global_batch: 24, seed: 11, eval: false,\n"
         "           optimizer: {name: sgd, lr: 0.05, momentum: 0.9}}\n"
         "cluster: {workers: 4, platform: lambda, memory_limit: 1769MB" + cluster + "}\n"
         "plan: {data_parallel: 2, stages: 2, microbatches: 3}\n"
         "output: {checkpoint_every_epochs: 0}\n";
}

// The parameters of checkpoint `a` equal `b`'s, exactly.
void expectSameCheckpoints(const std::string& a, const std::string& b, int layers) {
  for (int i = 0; i < layers; ++i) {
    torch::serialize::InputArchive x, y;
    x.load_from(a + "/" + runtime::layerFileName(i));
    y.load_from(b + "/" + runtime::layerFileName(i));
    for (const std::string& key : x.keys()) {
      if (key.rfind("param/", 0) != 0) continue;
      torch::Tensor tx, ty;
      ASSERT_TRUE(x.try_read(key, tx));
      ASSERT_TRUE(y.try_read(key, ty)) << key;
      EXPECT_TRUE(torch::equal(tx, ty)) << "layer " << i << " " << key;
    }
  }
}

// With a 12 s time limit (each generation saves at 9 s; 20 s took 80 s of
// CI time for the same test) the run crosses several invocations: each
// generation saves at a step and the next continues it, so it ends with
// the same losses and weights as one run through the same channel without
// a limit. The run is stopped (SIGINT: a checkpoint at a step) once it has
// crossed two, however fast this machine is; the other run stops there too.
TEST(FunctionWorkers, AcrossSeveralInvocationsTheRunEqualsAnUninterruptedOne) {
  REQUIRE_CONTAINERS();
  ScratchDir dir;
  std::ofstream(dir / "job.yaml") << functionJob("");
  const pid_t pid = testing::spawnHydrozoa(dir.path().string(),
                                           {"train", "job.yaml", "--no-progress", "--out", "functions", "--launcher",
                                            "function", "--function-timeout", "12s"});
  bool crossed = false;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(240);
  while (!crossed && std::chrono::steady_clock::now() < until) {
    std::vector<std::int64_t> at;  // the reinvocations' steps
    std::int64_t last = 0;
    for (const Json& l : testing::metrics(dir / "functions")) {
      if (l.value("event", "") == "reinvoked") at.push_back(l.value("step", std::int64_t{0}));
      if (l.contains("loss")) last = std::max(last, l.value("step", std::int64_t{0}));
    }
    crossed = at.size() >= 2 && last > at[1] + 20;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(crossed) << "the run did not cross two invocations within 240 s";
  ::kill(pid, SIGINT);
  Outcome f = testing::waitHydrozoa(dir.path().string(), pid);
  ASSERT_EQ(f.code, 130) << f.err;
  EXPECT_NE(f.err.find("the functions near their time limit"), std::string::npos) << f.err;
  auto summary = readJsonFile(dir / "functions/summary.json");
  ASSERT_TRUE(summary.ok());
  EXPECT_GE((*summary)["reinvocations"].size(), 2u) << (*summary)["reinvocations"].dump();
  // On a loaded machine an invocation may still reach its limit before it
  // has saved (killed, as the platform does): that is a lost worker,
  // recovered, and the training stays the same. Said, not failed.
  for (const Json& r : (*summary)["recoveries"]) std::cout << "recovered: " << r.value("why", "") << "\n";
  EXPECT_EQ((*summary)["launcher"]["kind"], "function");
  EXPECT_EQ((*summary)["billing"]["unit"], "per_millisecond");
  // Every invocation billed its fee: 4 per generation.
  EXPECT_EQ((*summary)["billing"]["requests"], 4 * (*summary)["generations"].get<int>());
  const std::int64_t steps = (*summary)["steps"]["done"];
  // NOTE [State through the store]: the invocations stored their state in
  // the channel and the fresh ones read it back from there.
  int stored = 0, restored = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir / "functions/workers")) {
    if (e.path().extension() != ".log") continue;
    auto log = readTextFile(e.path().string());
    ASSERT_TRUE(log.ok());
    stored += log->find("state in the Redis channel") != std::string::npos;
    restored += log->find("from the Redis channel") != std::string::npos;
  }
  EXPECT_GE(stored, 2) << "workers that stored their stage's state in the store";
  EXPECT_GE(restored, 4) << "workers that read their stage's state from the store";
  EXPECT_EQ((*summary)["channel"]["keys_left"], 0);
  EXPECT_EQ((*summary)["launcher"]["start_delay"], "uniform 1s 3s");  // lambda's cold start

  Outcome whole = runHydrozoa(dir.path().string(), {"train", "job.yaml", "--no-progress", "--out", "whole",
                                                    "--launcher", "local", "--channel", "redis", "--max-steps",
                                                    std::to_string(steps)});
  ASSERT_EQ(whole.code, 0) << whole.err;
  const auto a = testing::stepLosses(dir / "functions"), b = testing::stepLosses(dir / "whole");
  ASSERT_EQ(a.size(), static_cast<size_t>(steps));
  ASSERT_EQ(b.size(), a.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << "step " << i + 1;
  char name[32];
  std::snprintf(name, sizeof(name), "step-%08lld", static_cast<long long>(steps));
  expectSameCheckpoints(dir / (std::string("functions/checkpoints/") + name), dir / (std::string("whole/checkpoints/") + name), 3);
}

// A function frozen before its generation's save (its time limit 20 s, the
// save asked at 15 s) keeps the others from saving too: the platform ends
// every invocation at the limit, and the job recovers them as lost workers,
// from the last checkpoint, with nothing lost (issue 12 §6).
TEST(FunctionWorkers, AFunctionFrozenPastItsLimitIsEndedThereAndRecovered) {
  REQUIRE_CONTAINERS();
  ScratchDir dir;
  // The heartbeat waits longer than the limit: the limit ends it first.
  std::ofstream(dir / "job.yaml") << functionJob(", start_delay: 0s, heartbeat_timeout: 60s");
  const pid_t pid = testing::spawnHydrozoa(dir.path().string(),
                                           {"train", "job.yaml", "--no-progress", "--out", "run", "--launcher",
                                            "function", "--function-timeout", "20s"});
  const std::string endpoint = testing::waitForSteps(dir / "run", 20);
  pid_t frozen = -1;
  for (pid_t w : testing::workersOf(endpoint)) {
    if (testing::slurp("/proc/" + std::to_string(w) + "/comm") == "hydrozoa-worker\n") frozen = w;
  }
  ASSERT_GT(frozen, 0) << "no worker of " << endpoint;
  ::kill(frozen, SIGSTOP);
  // Ended at the limit, recovered, and the next generation trains on.
  bool recovered = false;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(90);
  while (!recovered && std::chrono::steady_clock::now() < until) {
    for (const Json& l : testing::metrics(dir / "run")) recovered |= l.value("event", "") == "recovered";
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(recovered) << "no recovery within 90 s of a frozen function";
  testing::waitForSteps(dir / "run", testing::stepLosses(dir / "run").size() + 20);
  ::kill(pid, SIGINT);
  Outcome f = testing::waitHydrozoa(dir.path().string(), pid);
  ASSERT_EQ(f.code, 130) << f.err;
  EXPECT_NE(f.err.find("at its time limit (20.0 s)"), std::string::npos) << f.err;
  auto summary = readJsonFile(dir / "run/summary.json");
  ASSERT_TRUE(summary.ok());
  ASSERT_GE((*summary)["recoveries"].size(), 1u);
  EXPECT_NE((*summary)["recoveries"][0].value("why", "").find("time limit"), std::string::npos)
      << (*summary)["recoveries"].dump();
  EXPECT_EQ((*summary)["channel"]["keys_left"], 0);
  const std::int64_t steps = (*summary)["steps"]["done"];
  Outcome whole = runHydrozoa(dir.path().string(), {"train", "job.yaml", "--no-progress", "--out", "whole",
                                                    "--launcher", "local", "--channel", "redis", "--max-steps",
                                                    std::to_string(steps)});
  ASSERT_EQ(whole.code, 0) << whole.err;
  const auto a = testing::stepLosses(dir / "run"), b = testing::stepLosses(dir / "whole");
  ASSERT_EQ(a.size(), static_cast<size_t>(steps));
  ASSERT_EQ(b.size(), a.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << "step " << i + 1;
}

// FuncPipe's recommendation written as a plan (plan --planner funcpipe -o)
// trains on function workers of the sizes it chose, billed at their size.
TEST(FunctionWorkers, FuncPipesRecommendationTrains) {
  REQUIRE_CONTAINERS();
  ScratchDir dir;
  Outcome p = runHydrozoa(dir.path().string(), {"plan", "--platform", "lambda", "--planner", "funcpipe", "--model",
                                                "mlp", "--device", "cpu", "--workers", "4", "--global-batch", "24",
                                                "-o", "plan.json"});
  ASSERT_EQ(p.code, 0) << p.err;
  auto plan = readJsonFile(dir / "plan.json");
  ASSERT_TRUE(plan.ok());
  const double size = (*plan)["stages"][0]["worker"]["memory_bytes"].get<double>();
  std::ofstream(dir / "job.yaml") << "name: funcpipe\n"
                                     "model: {name: mlp}\n"
                                     "data: {dataset: synthetic, synthetic_train: 240, synthetic_test: 24}\n"
                                     "training: {epochs: 1, global_batch: 24, seed: 2, eval: false}\n"
                                     "cluster: {workers: 4, platform: lambda}\n";
  Outcome r = runHydrozoa(dir.path().string(), {"train", "job.yaml", "--plan", "plan.json", "--launcher", "function",
                                                "--max-steps", "5", "--no-progress", "--out", "run"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto summary = readJsonFile(dir / "run/summary.json");
  ASSERT_TRUE(summary.ok());
  EXPECT_EQ((*summary)["launcher"]["kind"], "function");
  EXPECT_EQ((*summary)["plan"]["data_parallel"], (*plan)["strategy"]["data_parallel"]);
  // Billed at its size: lambda's $0.06 per GB-hour.
  EXPECT_NEAR((*summary)["billing"]["workers"][0]["usd_per_hour"].get<double>(), size / 1e9 * 0.06, 1e-9);
}

TEST(FunctionWorkers, MistakesAreNamed) {
  ScratchDir dir;
  std::ofstream(dir / "job.yaml") << functionJob("");
  {
    std::ifstream in(std::string(HYDROZOA_SOURCE_DIR) + "/data/pricing/lambda.yaml");
    std::stringstream catalog;
    catalog << in.rdbuf();
    std::ofstream(dir / "slow.yaml") << catalog.str() << "cold_start: sometimes\n";
  }
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--launcher", "function", "--platform", "aci"}, "aci is not a function platform"},
      {{"--launcher", "function", "--memory-limit", "20GB"}, "lambda's functions have 128 MB to 10.0 GB"},
      {{"--launcher", "function", "--function-timeout", "2s"}, "cluster.function_timeout: must be from 10s"},
      {{"--launcher", "function", "--platform", "slow.yaml"},
       "lambda's cold_start: \"sometimes\" is not a start-up delay"},
  };
  for (const Case& c : cases) {
    if (c.message.find("function platform") != std::string::npos || c.message.find("128 MB") != std::string::npos ||
        c.message.find("cold_start") != std::string::npos) {
      if (!cluster::containerSupport().empty()) continue;  // checked where functions can be made
    }
    std::vector<std::string> args = {"train", "job.yaml", "--no-progress", "--out", "bad"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    Outcome r = runHydrozoa(dir.path().string(), args);
    EXPECT_NE(r.code, 0) << c.message;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << r.err;
    std::filesystem::remove_all(dir / "bad");
  }
}

}  // namespace
}  // namespace hydrozoa
