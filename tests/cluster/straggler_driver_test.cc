// The straggler driver (cluster/straggler_driver.h) on a real process: it
// pauses and continues it as a spec says, cuts and restores a CPU quota
// file, and leaves the process running when it ends.
#include "cluster/straggler_driver.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

namespace hydrozoa::cluster {
namespace {

// A child that spins until killed.
pid_t spinner() {
  const pid_t pid = ::fork();
  if (pid == 0) {
    for (;;) {
    }
  }
  return pid;
}

char processState(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string content;
  std::getline(stat, content);
  const auto close = content.rfind(')');
  return close == std::string::npos || close + 2 >= content.size() ? '?' : content[close + 2];
}

void reap(pid_t pid) {
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
}

TEST(StragglerDriver, PausesAsTheSpecSaysAndLeavesTheProcessRunning) {
  const pid_t pid = spinner();
  ASSERT_GT(pid, 0);
  std::int64_t pauses = 0;
  {
    StragglerSpec slow;
    slow.worker = 1;
    slow.slowdown = 4;  // stopped 15 ms of every 20 ms
    WorkerHandle w;
    w.pid = pid;
    StragglerDriver driver({{slow, w, "worker 1"}}, 0, 7);
    bool sawStopped = false;
    for (int i = 0; i < 100 && !sawStopped; ++i) {
      sawStopped = processState(pid) == 'T';
      std::this_thread::sleep_for(std::chrono::milliseconds(3));
    }
    EXPECT_TRUE(sawStopped);
    pauses = driver.pauses();
  }
  EXPECT_GT(pauses, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_NE(processState(pid), 'T');  // continued when the driver ended
  reap(pid);
}

TEST(StragglerDriver, RandomPausesAndATransientWindow) {
  const pid_t pid = spinner();
  StragglerSpec bursts;
  bursts.pause = 0.01;
  bursts.every = 0.02;
  bursts.start = 0.05;
  bursts.duration = 0.3;
  WorkerHandle w;
  w.pid = pid;
  StragglerDriver driver({{bursts, w, "worker 0"}}, 0, 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(40));
  EXPECT_EQ(driver.pauses(), 0);  // not yet started
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const std::int64_t inWindow = driver.pauses();
  EXPECT_GT(inWindow, 2);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(driver.pauses(), inWindow);  // the window is over
  EXPECT_NE(processState(pid), 'T');
  reap(pid);
}

TEST(StragglerDriver, CutsAndRestoresAQuota) {
  const std::string file = std::filesystem::temp_directory_path() / ("hz-quota-" + std::to_string(::getpid()));
  const pid_t pid = spinner();
  {
    StragglerSpec slow;
    slow.slowdown = 3;
    slow.mode = "quota";
    WorkerHandle w;
    w.pid = pid;
    w.quota_file = file;
    w.cgroup_v2 = true;
    w.cpus = 0.6;
    StragglerDriver driver({{slow, w, "worker 0"}}, 0, 1);
    std::string text;
    for (int i = 0; i < 100 && text.empty(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      std::ifstream in(file);
      std::getline(in, text);
    }
    EXPECT_EQ(text, "20000 100000");  // 0.6 / 3 vCPUs
  }
  std::ifstream in(file);
  std::string text;
  std::getline(in, text);
  EXPECT_EQ(text, "60000 100000");  // restored
  std::filesystem::remove(file);
  reap(pid);
  // A quota without a file to cut is refused, naming the fix.
  StragglerSpec q;
  q.mode = "quota";
  q.slowdown = 2;
  auto mode = StragglerDriver::modeFor(q, false);
  ASSERT_FALSE(mode.ok());
  EXPECT_NE(mode.status().message().find("use launcher container"), std::string::npos);
}

}  // namespace
}  // namespace hydrozoa::cluster
