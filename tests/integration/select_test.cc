// `hydrozoa select` as a user runs it (issue 14 §1): a grid's tasks trained
// to their ends and ranked, each the same training as `hydrozoa train` of
// its point; Ctrl-C and --resume going on where it stopped (a task that
// ended before select.json said so is not trained again); mistakes named.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "integration/harness.h"

namespace hydrozoa {
namespace {

using testing::Outcome;
using testing::runHydrozoa;
using testing::ScratchDir;

std::string job(int samples) {
  return "  name: mlps\n  model: {name: mlp, options: {hidden: 32, depth: 2}}\n"
         "  data: {dataset: synthetic, synthetic_train: " + std::to_string(samples) + ", synthetic_test: 96}\n"
         "  training: {epochs: 1, global_batch: 24, seed: 3, optimizer: {name: sgd, lr: 0.05}}\n"
         "  cluster: {workers: 1, launcher: local}\n";
}

Json selection(const std::filesystem::path& run) { return *readJsonFile((run / "select.json").string()); }

TEST(Select, AGridTrainsRanksAndResumes) {
  ScratchDir dir;
  const std::string d = dir.path().string();
  std::ofstream(dir / "grid.yaml") << "job:\n" << job(480)
                                   << "grid:\n  training.optimizer.lr: [0.05, 0.2]\n  model.options.hidden: [16, 32]\n";
  Outcome r = runHydrozoa(d, {"select", "grid.yaml", "--out", "s", "--no-progress"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("4 tasks of mlps in s, best first by test_accuracy"), std::string::npos) << r.out;
  Json s = selection(dir / "s");
  ASSERT_EQ(s["tasks"].size(), 4u);
  for (const Json& t : s["tasks"]) {
    EXPECT_EQ(t["status"], "completed") << t.dump();
    EXPECT_TRUE(t["test_accuracy"].is_number()) << t.dump();
  }
  EXPECT_EQ(s["tasks"][3]["label"], "hidden=32 lr=0.2");
  // Task 3 is `hydrozoa train` of its point.
  std::string alone;
  std::istringstream lines(job(480));
  for (std::string l; std::getline(lines, l);) alone += l.substr(2) + "\n";
  alone.replace(alone.find("lr: 0.05"), 8, "lr: 0.2");
  std::ofstream(dir / "alone.yaml") << alone;
  r = runHydrozoa(d, {"train", "alone.yaml", "--out", "alone", "--no-progress"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(testing::stepLosses(dir / "alone"), testing::stepLosses(dir / "s/tasks/3"));

  // --resume: task 1 as if never begun, task 2 as if the selection died
  // after it ended; only task 1 trains, to the same losses.
  const auto before = testing::stepLosses(dir / "s/tasks/1");
  s["tasks"][1]["status"] = "pending";
  s["tasks"][2]["status"] = "running";
  std::filesystem::remove_all(dir / "s/tasks/1");
  std::ofstream(dir / "s/select.json") << s.dump();
  r = runHydrozoa(d, {"select", "--resume", "s", "--no-progress"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("Task 2 of 4"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("Task 3 of 4"), std::string::npos) << r.out;
  EXPECT_EQ(testing::stepLosses(dir / "s/tasks/1"), before);
  const Json resumed = selection(dir / "s");
  for (const Json& t : resumed["tasks"]) EXPECT_EQ(t["status"], "completed");

  // Mistakes: one line each.
  r = runHydrozoa(d, {"select", "grid.yaml", "--out", "s"});
  EXPECT_NE(r.err.find("s holds a selection already: go on with hydrozoa select --resume s"), std::string::npos)
      << r.err;
  r = runHydrozoa(d, {"select"});
  EXPECT_NE(r.err.find("give a grid"), std::string::npos) << r.err;
  std::ofstream(dir / "empty.yaml") << "job:\n" << job(480) << "grid:\n  training.seed: []\n";
  r = runHydrozoa(d, {"select", "empty.yaml"});
  EXPECT_NE(r.err.find("empty.yaml: grid: training.seed has no values"), std::string::npos) << r.err;
  r = runHydrozoa(d, {"select", "--resume", "nowhere"});
  EXPECT_NE(r.err.find("nowhere is not a model-selection run"), std::string::npos) << r.err;
}

// Ctrl-C in a task: its workers checkpoint, the selection says how to go
// on, and --resume finishes every task with the losses of uninterrupted runs.
TEST(Select, CtrlCStopsATaskAndResumeFinishesItAsIfUninterrupted) {
  ScratchDir dir;
  const std::string d = dir.path().string();
  std::ofstream(dir / "grid.yaml") << "job:\n" << job(24000) << "grid:\n  training.seed: [1, 2]\n";
  const pid_t pid = testing::spawnHydrozoa(d, {"select", "grid.yaml", "--out", "s", "--no-progress"});
  testing::waitForSteps(dir / "s/tasks/0", 20);
  ::kill(pid, SIGINT);
  const Outcome stopped = testing::waitHydrozoa(d, pid);
  EXPECT_EQ(stopped.code, 130) << stopped.err;
  EXPECT_NE(stopped.err.find("go on with: hydrozoa select --resume s"), std::string::npos) << stopped.err;
  int interrupted = 0;  // task 0, or 1 if 0 ended first
  const Json after = selection(dir / "s");
  for (const Json& t : after["tasks"]) interrupted += t["status"] == "interrupted";
  EXPECT_EQ(interrupted, 1) << after.dump(1) << stopped.err;
  Outcome r = runHydrozoa(d, {"select", "--resume", "s", "--no-progress"});
  ASSERT_EQ(r.code, 0) << r.err;
  r = runHydrozoa(d, {"select", "grid.yaml", "--out", "whole", "--no-progress"});
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* task : {"tasks/0", "tasks/1"}) {
    const auto a = testing::stepLosses(dir / (std::string("whole/") + task)),
               b = testing::stepLosses(dir / (std::string("s/") + task));
    ASSERT_EQ(a.size(), 1000u) << task;
    EXPECT_EQ(a, b) << task;
  }
}

}  // namespace
}  // namespace hydrozoa
