// SHARP as a user runs it (issue 14 §2-§6; docs/select.md): `hydrozoa
// select --worker-memory` trains every model of a grid at once on worker
// processes whose budget is smaller than any model, and each model ends
// exactly as trained alone in one process (step by step); a worker killed
// mid-unit and a Ctrl-C lose nothing; mistakes are one line.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "integration/harness.h"
#include "runtime/checkpoint.h"
#include "runtime/reference.h"

namespace hydrozoa {
namespace {

namespace fs = std::filesystem;
using testing::Outcome;
using testing::runHydrozoa;
using testing::ScratchDir;

std::string gridYaml(const std::string& models, const std::string& optimizer, int steps) {
  return "job:\n  name: sharp\n  model: {name: mlp}\n  data: {dataset: fashion_mnist}\n"
         "  training: {epochs: 1, max_steps: " + std::to_string(steps) + ", global_batch: 24, seed: 7, eval: false,\n"
         "             optimizer: " + optimizer + "}\n"
         "  cluster: {workers: 2}\n"
         "grid:\n  model:\n" + models;
}

Json readJson(const fs::path& p) { return *readJsonFile(p.string()); }

// Task `t` of the selection in `run` equals its job trained alone in one
// process: the loss of every step, and every parameter at the end.
void expectAsIfAlone(const fs::path& run, int t, double tolerance = 1e-6) {
  SCOPED_TRACE(::testing::Message() << "task " << t);
  const fs::path dir = run / "tasks" / std::to_string(t);
  auto spec = cluster::loadJobSpec((dir / "job.json").string());
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  runtime::ReferenceOptions ro;
  ro.job = *spec;
  ro.replicas = 1;
  ro.microbatch_size = spec->global_batch;
  ro.steps = *spec->max_steps;
  auto ref = runtime::trainReference(ro);
  ASSERT_TRUE(ref.ok()) << ref.status().message();
  const Json summary = readJson(dir / "summary.json");
  const auto losses = summary["losses"].get<std::vector<double>>();
  ASSERT_EQ(losses.size(), ref->losses.size());
  for (size_t s = 0; s < losses.size(); ++s) {
    EXPECT_NEAR(losses[s], ref->losses[s], tolerance * std::fabs(ref->losses[s])) << "step " << s + 1;
  }
  for (size_t i = 0; i < ref->model.layers.size(); ++i) {
    torch::serialize::InputArchive archive;
    archive.load_from((dir / "model" / runtime::layerFileName(static_cast<int>(i))).string());
    const auto& module = *ref->model.layers[i].module;
    for (const auto& param : module.named_parameters()) {
      torch::Tensor saved;
      ASSERT_TRUE(archive.try_read("param/" + param.key(), saved)) << param.key();
      const double scale = std::max(1e-3, param.value().abs().max().item<double>());
      EXPECT_LT((saved - param.value()).abs().max().item<double>(), tolerance * scale) << "layer " << i << " "
                                                                                          << param.key();
    }
    for (const auto& buffer : module.named_buffers()) {  // BatchNorm's statistics
      torch::Tensor saved;
      ASSERT_TRUE(archive.try_read("buffer/" + buffer.key(), saved)) << buffer.key();
      EXPECT_TRUE(torch::allclose(saved.to(buffer.value().dtype()), buffer.value(), tolerance, tolerance))
          << "layer " << i << " " << buffer.key();
    }
  }
}

int shardsOf(const fs::path& run, int t) { return static_cast<int>(readJson(run / "sharp.json")["tasks"][t]["shards"].size()); }

// Issue 14 §4: three models (dropout, BatchNorm and residuals, momentum and
// weight decay) on 2 workers of 8 MB, each in at least 3 shards.
TEST(Sharp, ThreeModelsOnTwoWorkersEachEndAsIfTrainedAlone) {
  ScratchDir dir;
  std::ofstream(dir / "grid.yaml") << gridYaml(
      "    - {name: mlp, options: {hidden: 448, depth: 4, dropout: 0.2}}\n"
      "    - {name: mlp, options: {hidden: 384, depth: 6}}\n"
      "    - {name: resnet18, options: {image_size: 28, channels: 1, classes: 10, width: 0.125}}\n",
      "{name: sgd, lr: 0.1, momentum: 0.9, weight_decay: 0.0001}", 12);
  const Outcome r = runHydrozoa(dir.path().string(), {"select", "grid.yaml", "--workers", "2", "--worker-memory",
                                                      "8MB", "--out", "s", "--no-progress"});
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("SHARP: 3 models on 2 workers of 8.00 MB each, lrtf units, double buffering"),
            std::string::npos)
      << r.out;
  for (int t = 0; t < 3; ++t) {
    EXPECT_GE(shardsOf(dir / "s", t), 3) << r.out;
    expectAsIfAlone(dir / "s", t);
  }
  // The units of different models ran at once: on both workers, overlapping.
  std::ifstream csv(dir / "s/timeline.csv");
  std::string line;
  std::getline(csv, line);
  std::vector<std::array<double, 3>> units;  // worker, start, end
  while (std::getline(csv, line)) {
    std::vector<std::string> f;
    std::istringstream in(line);
    for (std::string x; std::getline(in, x, ',');) f.push_back(x);
    units.push_back({std::stod(f[0]), std::stod(f[7]), std::stod(f[8])});
  }
  bool overlap = false;
  for (const auto& a : units) {
    for (const auto& b : units) overlap = overlap || (a[0] != b[0] && a[1] < b[2] && b[1] < a[2]);
  }
  EXPECT_TRUE(overlap);
  EXPECT_NE(testing::slurp(dir / "s/timeline.svg").find("<svg"), std::string::npos);
  const std::string spill = readJson(dir / "s/sharp.json")["spill"].get<std::string>();
  EXPECT_EQ(spill.rfind("/dev/shm/hydrozoa-s-", 0), 0u) << spill;
  EXPECT_FALSE(fs::exists(spill));  // nothing more to train: the spilled state is gone
}

pid_t aWorkerOf(pid_t parent) {
  std::ifstream children("/proc/" + std::to_string(parent) + "/task/" + std::to_string(parent) + "/children");
  pid_t pid = -1;
  children >> pid;
  return pid;
}

// Live SHARP workers of the selection in `run` (their command line names it).
std::vector<pid_t> sharpWorkersOf(const fs::path& run) {
  std::vector<pid_t> left;
  const std::string mark = std::string("sharp-worker") + '\0' + "--run" + '\0' + fs::absolute(run).string() + '\0';
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream cmd("/proc/" + name + "/cmdline");
    const std::string args((std::istreambuf_iterator<char>(cmd)), std::istreambuf_iterator<char>());
    if (args.find(mark) != std::string::npos && testing::processAlive(std::stoi(name))) left.push_back(std::stoi(name));
  }
  return left;
}

size_t unitsDone(const fs::path& run) {
  std::ifstream csv(run / "timeline.csv");
  size_t n = 0;
  for (std::string line; std::getline(csv, line);) ++n;
  return n > 0 ? n - 1 : 0;
}

// §6: a worker killed mid-unit is replaced and its units run again from
// their spilled state; a Ctrl-C stops at the units' ends and --resume goes
// on; both end as if trained alone (Adam's state spilled too).
TEST(Sharp, AKilledWorkerAndACtrlCLoseNothing) {
  ScratchDir dir;
  const std::string d = dir.path().string();
  std::ofstream(dir / "grid.yaml") << gridYaml(
      "    - {name: mlp, options: {hidden: 448, depth: 4, dropout: 0.2}}\n"
      "    - {name: cnn, options: {width: 0.5, hidden: 64}}\n",
      "{name: adam, lr: 0.001, weight_decay: 0.0001}", 40);
  const pid_t pid = testing::spawnHydrozoa(
      d, {"select", "grid.yaml", "--workers", "2", "--worker-memory", "12MB", "--out", "s", "--no-progress"});
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (unitsDone(dir / "s") < 20 && std::chrono::steady_clock::now() < deadline && testing::processAlive(pid)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const pid_t worker = aWorkerOf(pid);
  if (worker <= 0) {
    const Outcome r = testing::waitHydrozoa(d, pid);
    FAIL() << r.err << r.out;
  }
  ::kill(worker, SIGKILL);
  while (unitsDone(dir / "s") < 60 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(pid, SIGINT);
  const Outcome stopped = testing::waitHydrozoa(d, pid);
  EXPECT_NE(stopped.err.find("was lost"), std::string::npos) << stopped.err;
  EXPECT_EQ(stopped.code, 130) << stopped.err;  // 60 units of 240
  EXPECT_NE(stopped.err.find("go on with: hydrozoa select --resume s"), std::string::npos) << stopped.err;
  EXPECT_TRUE(sharpWorkersOf(dir / "s").empty());
  // The spilled models stay for --resume, and `hydrozoa cleanup` keeps them.
  const std::string spill = readJson(dir / "s/sharp.json")["spill"].get<std::string>();
  Outcome r = runHydrozoa(d, {"cleanup"});
  EXPECT_NE(r.out.find("Kept " + spill + " (the spilled models of " + fs::absolute(dir / "s").string()),
            std::string::npos)
      << r.out << r.err;
  EXPECT_TRUE(fs::exists(spill));
  r = runHydrozoa(d, {"select", "--resume", "s", "--no-progress"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_FALSE(fs::exists(spill));
  EXPECT_TRUE(sharpWorkersOf(dir / "s").empty());
  for (int t = 0; t < 2; ++t) expectAsIfAlone(dir / "s", t, 1e-5);
  const Json s = readJson(dir / "s/select.json");
  for (const Json& t : s["tasks"]) EXPECT_EQ(t["status"], "completed") << t.dump();
}

// The issue's command as written, on the example's eight models cut to 3
// steps: every model in shards at 64 MB, Ctrl-C, --resume, ranked by the
// test accuracy of its evaluation units.
TEST(Sharp, TheIssueCommandAsWritten) {
  ScratchDir dir;
  const std::string d = dir.path().string();
  {
    std::ifstream in(std::string(HYDROZOA_SOURCE_DIR) + "/examples/fashion_mnist_grid.yaml");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t at = text.find("max_steps: 150");
    ASSERT_NE(at, std::string::npos);
    text.replace(at, 14, "max_steps: 3");
    std::ofstream(dir / "grid.yaml") << text;
  }
  const pid_t pid = testing::spawnHydrozoa(
      d, {"select", "grid.yaml", "--workers", "4", "--worker-memory", "64MB", "--out", "s", "--no-progress"});
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(180);
  while (unitsDone(dir / "s") < 10 && std::chrono::steady_clock::now() < deadline && testing::processAlive(pid)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(pid, SIGINT);
  const Outcome stopped = testing::waitHydrozoa(d, pid);
  EXPECT_EQ(stopped.code, 130) << stopped.err << stopped.out;
  for (int t = 0; t < 8; ++t) EXPECT_GE(shardsOf(dir / "s", t), 2) << stopped.out;
  const Outcome r = runHydrozoa(d, {"select", "--resume", "s", "--no-progress"});
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("8 tasks of fashion-grid in s, best first by test_accuracy"), std::string::npos) << r.out;
  const Json s = readJson(dir / "s/select.json");
  for (const Json& t : s["tasks"]) {
    EXPECT_EQ(t["status"], "completed") << t.dump();
    EXPECT_GT(t["test_accuracy"].get<double>(), 0.15) << t.dump();  // 3 steps of 128: past chance (10%)
  }
  EXPECT_TRUE(sharpWorkersOf(dir / "s").empty());
}

// A stopped selection whose run directory was deleted: cleanup frees its spill.
TEST(Sharp, CleanupRemovesTheSpillOfARunThatIsGone) {
  ScratchDir dir;
  const std::string d = dir.path().string();
  std::ofstream(dir / "grid.yaml") << gridYaml("    - {name: mlp, options: {hidden: 448, depth: 4}}\n",
                                               "{name: sgd, lr: 0.1}", 200);
  const pid_t pid = testing::spawnHydrozoa(
      d, {"select", "grid.yaml", "--worker-memory", "8MB", "--out", "s", "--no-progress"});
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (unitsDone(dir / "s") < 5 && std::chrono::steady_clock::now() < deadline && testing::processAlive(pid)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(pid, SIGINT);
  EXPECT_EQ(testing::waitHydrozoa(d, pid).code, 130);
  const std::string spill = readJson(dir / "s/sharp.json")["spill"].get<std::string>();
  ASSERT_TRUE(fs::exists(spill));
  fs::remove_all(dir / "s");
  const Outcome r = runHydrozoa(d, {"cleanup"});
  EXPECT_NE(r.out.find("Removed " + spill + " (the spilled models of"), std::string::npos) << r.out << r.err;
  EXPECT_FALSE(fs::exists(spill));
}

TEST(Sharp, MistakesAreOneLine) {
  ScratchDir dir;
  const std::string d = dir.path().string();
  std::ofstream(dir / "grid.yaml") << gridYaml("    - {name: mlp, options: {hidden: 448, depth: 4}}\n",
                                               "{name: sgd, lr: 0.1}", 2);
  Outcome r = runHydrozoa(d, {"select", "grid.yaml", "--worker-memory", "1MB", "--out", "s"});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("layer 0 (\"fc1\") needs"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("give --worker-memory"), std::string::npos) << r.err;
  r = runHydrozoa(d, {"select", "grid.yaml", "--scheduler", "lrtf", "--out", "t"});
  EXPECT_NE(r.err.find("give each worker's memory with --worker-memory"), std::string::npos) << r.err;
  r = runHydrozoa(d, {"select", "grid.yaml", "--worker-memory", "8MB", "--scheduler", "fastest", "--out", "u"});
  EXPECT_NE(r.err.find("unknown shard scheduler \"fastest\""), std::string::npos) << r.err;
  r = runHydrozoa(d, {"select", "grid.yaml", "--worker-memory", "lots", "--out", "v"});
  EXPECT_NE(r.err.find("--worker-memory"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace hydrozoa
