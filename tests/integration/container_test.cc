// Workers as containers (issue 4 §1, §2): each in its own network namespace
// with its own address, egress shaped with tc, CPU and memory limits in
// cgroups, a start-up delay, per-second bills; a worker over its memory is
// reported as out of memory; nothing a job creates outlives it, and what a
// killed coordinator left is removed by `hydrozoa cleanup`. These need root;
// without it they skip, saying so.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>

#include "cluster/launch/container/container_launcher.h"
#include "integration/harness.h"

namespace hydrozoa {
namespace {

using testing::Outcome;
using testing::runHydrozoa;
using testing::ScratchDir;
using testing::spawnHydrozoa;
using testing::waitHydrozoa;

std::string smallJob(const std::string& cluster) {
  return "name: small\n"
         "model: {name: mlp, options: {hidden: 32, depth: 2}}\n"
         "data: {dataset: synthetic, synthetic_train: 96, synthetic_test: 48}\n"
         "training: {epochs: 2, global_batch: 24, seed: 5}\n"
         "cluster: {workers: 4, bandwidth: 1Gbit/s" + cluster + "}\n"
         "plan: {data_parallel: 2, stages: 2, microbatches: 3}\n";
}

// Whatever job `job` created that still exists: namespaces, its bridge, its
// cgroups, its record.
std::vector<std::string> leftovers(const std::string& job, const std::string& stateDir) {
  std::vector<std::string> left;
  namespace fs = std::filesystem;
  if (fs::exists("/run/netns")) {
    for (const auto& e : fs::directory_iterator("/run/netns")) {
      if (e.path().filename().string().rfind("hz-" + job + "-", 0) == 0) left.push_back(e.path().string());
    }
  }
  if (fs::exists("/sys/class/net/hzb" + job)) left.push_back("bridge hzb" + job);
  if (fs::exists(stateDir + "/" + job + ".json")) left.push_back(stateDir + "/" + job + ".json");
  const std::function<void(const fs::path&, int)> scan = [&](const fs::path& dir, int depth) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      if (!e.is_directory(ec) || e.is_symlink(ec)) continue;
      if (e.path().filename() == "hydrozoa-" + job) left.push_back(e.path().string());
      if (depth > 0) scan(e.path(), depth - 1);
    }
  };
  scan("/sys/fs/cgroup", 4);
  return left;
}

// The container job recorded in the private `stateDir`, once the run in
// `runDir` has done `steps` steps ("" after 60 s without).
std::string jobOnceTraining(const std::string& stateDir, const std::string& runDir, size_t steps) {
  std::string job;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < until && (job.empty() || testing::stepLosses(runDir).size() < steps)) {
    if (std::filesystem::exists(stateDir)) {
      for (const auto& e : std::filesystem::directory_iterator(stateDir)) {
        if (e.path().extension() == ".json") job = e.path().stem().string();
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return testing::stepLosses(runDir).size() >= steps ? job : "";
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += x + " ";
  return s;
}

TEST(Containers, TheIssueCommandTrainsInShapedContainersAndLeavesNothing) {
  REQUIRE_CONTAINERS();
  ScratchDir dir;
  Outcome r = runHydrozoa(dir.path().string(),
                          {"train", std::string(HYDROZOA_SOURCE_DIR) + "/examples/fashion_mnist_cnn.yaml", "--launcher",
                           "container", "--bandwidth", "50MB/s", "--start-delay", "1s", "--max-steps", "8",
                           "--no-progress", "--out", "run"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("container workers"), std::string::npos) << r.err;
  auto summary = readJsonFile(dir / "run/summary.json");
  ASSERT_TRUE(summary.ok());
  const Json& s = *summary;
  EXPECT_EQ(s["launcher"]["kind"], "container");
  EXPECT_DOUBLE_EQ(s["launcher"]["bandwidth_per_worker"].get<double>(), 50e6);
  const std::string job = s["launcher"]["job"];
  ASSERT_FALSE(job.empty());
  // Every worker ran at its own address in the job's subnet.
  const int workers = s["plan"]["data_parallel"].get<int>() * s["plan"]["pipeline_stages"].get<int>();
  for (int id = 0; id < workers; ++id) {
    const std::string log = testing::slurp(dir / ("run/workers/worker-" + std::to_string(id) + ".log"));
    EXPECT_NE(log.find(", at 10.213."), std::string::npos) << log;
  }
  // Billed per second, from start-up (after the 1 s delay) to the end.
  const Json& bill = s["billing"];
  EXPECT_EQ(bill["unit"], "per_second");
  ASSERT_EQ(bill["workers"].size(), static_cast<size_t>(workers));
  const double wall = s["wall_seconds"];
  double usd = 0;
  for (const Json& w : bill["workers"]) {
    const double seconds = w["seconds"];
    EXPECT_GE(seconds, 1);
    EXPECT_EQ(seconds, std::ceil(seconds));
    EXPECT_LE(seconds, std::ceil(wall - 1.0)) << "the start-up delay is not billed";
    usd += w["usd"].get<double>();
  }
  EXPECT_NEAR(usd, s["cost_usd"].get<double>(), 1e-12);
  EXPECT_GT(s["samples_per_dollar"].get<double>(), 0);
  EXPECT_TRUE(leftovers(job, cluster::launcherStateDir()).empty()) << join(leftovers(job, cluster::launcherStateDir()));
  EXPECT_TRUE(testing::noWorkersLeft(dir / "run"));
}

// tc really holds each worker to its bandwidth: one container streams 6 MB to
// another at 3 MB/s.
TEST(Containers, EachWorkersEgressIsShapedToItsBandwidth) {
  REQUIRE_CONTAINERS();
  if (!std::filesystem::exists("/usr/bin/python3")) GTEST_SKIP() << "skipped: needs /usr/bin/python3";
  ScratchDir dir;
  cluster::ContainerOptions o;
  o.executable = "/usr/bin/python3";
  o.bandwidth = 3e6;
  auto made = cluster::ContainerLauncher::create(o);
  ASSERT_TRUE(made.ok()) << made.status().message();
  auto& launcher = **made;
  const std::string receiverIp = launcher.workerHost(1);
  cluster::WorkerLaunch receiver;
  receiver.id = 1;
  receiver.log_path = dir / "receiver.log";
  receiver.args = {"-c",
                   "import socket, sys, time\n"
                   "s = socket.socket(); s.bind((sys.argv[1], 7777)); s.listen(1)\n"
                   "c, _ = s.accept(); n = 0; t0 = None\n"
                   "while True:\n"
                   "    b = c.recv(1 << 16)\n"
                   "    if not b: break\n"
                   "    if t0 is None: t0 = time.monotonic()\n"
                   "    n += len(b)\n"
                   "print(n, time.monotonic() - t0, flush=True)\n",
                   receiverIp};
  ASSERT_TRUE(launcher.launch(receiver).ok());
  cluster::WorkerLaunch sender;
  sender.id = 0;
  sender.log_path = dir / "sender.log";
  sender.args = {"-c",
                 "import socket, sys, time\n"
                 "for _ in range(100):\n"
                 "    try:\n"
                 "        c = socket.create_connection((sys.argv[1], 7777)); break\n"
                 "    except OSError: time.sleep(0.05)\n"
                 "c.sendall(b'x' * 6000000); c.close()\n",
                 receiverIp};
  ASSERT_TRUE(launcher.launch(sender).ok());
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  int ended = 0;
  while (ended < 2 && std::chrono::steady_clock::now() < until) {
    for (const auto& e : launcher.poll()) {
      EXPECT_TRUE(e.success) << e.id << " " << e.how;
      ++ended;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(ended, 2);
  std::istringstream in(testing::slurp(dir / "receiver.log"));
  double bytes = 0, seconds = 0;
  in >> bytes >> seconds;
  ASSERT_EQ(bytes, 6e6) << testing::slurp(dir / "sender.log");
  const double rate = bytes / seconds;
  EXPECT_GT(rate, 0.8 * 3e6) << rate;
  EXPECT_LT(rate, 1.2 * 3e6) << rate;
}

// Containers that end do not cut off the ones still running: the bridge
// keeps its address as ports leave (NOTE [The bridge's own address]); before,
// a worker's last "done" was now and then lost this way.
TEST(Containers, WorkersThatEndDoNotCutOffTheOthers) {
  REQUIRE_CONTAINERS();
  if (!std::filesystem::exists("/usr/bin/python3")) GTEST_SKIP() << "skipped: needs /usr/bin/python3";
  ScratchDir dir;
  cluster::ContainerOptions o;
  o.executable = "/usr/bin/python3";
  auto made = cluster::ContainerLauncher::create(o);
  ASSERT_TRUE(made.ok()) << made.status().message();
  auto& launcher = **made;
  const std::string macFile = "/sys/class/net/" + launcher.bridge() + "/address";
  const std::string mac = testing::slurp(macFile);

  // The coordinator's side: a listener on the bridge.
  const int server = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(server, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  ::inet_pton(AF_INET, launcher.coordinatorHost().c_str(), &addr.sin_addr);
  ASSERT_EQ(::bind(server, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0) << std::strerror(errno);
  ASSERT_EQ(::listen(server, 1), 0);
  socklen_t len = sizeof addr;
  ::getsockname(server, reinterpret_cast<sockaddr*>(&addr), &len);
  const std::string port = std::to_string(ntohs(addr.sin_port));

  // The survivor talks to it before and after its peers' containers go.
  cluster::WorkerLaunch survivor;
  survivor.id = 0;
  survivor.log_path = dir / "survivor.log";
  survivor.args = {"-c",
                   "import socket, sys, time\n"
                   "c = socket.create_connection((sys.argv[1], int(sys.argv[2])))\n"
                   "c.sendall(b'a'); time.sleep(2.5); c.sendall(b'b'); c.close()\n",
                   launcher.coordinatorHost(), port};
  ASSERT_TRUE(launcher.launch(survivor).ok());
  for (int id = 1; id <= 6; ++id) {
    cluster::WorkerLaunch peer;
    peer.id = id;
    peer.log_path = dir / ("peer" + std::to_string(id) + ".log");
    peer.args = {"-c", "import time, sys; time.sleep(float(sys.argv[1]))", std::to_string(0.2 * id)};
    ASSERT_TRUE(launcher.launch(peer).ok());
  }
  const int conn = ::accept(server, nullptr, nullptr);
  ASSERT_GE(conn, 0);
  timeval tv{8, 0};
  ::setsockopt(conn, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string got;
  char buf[16];
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (got.size() < 2 && std::chrono::steady_clock::now() < until) {
    for (const auto& e : launcher.poll()) EXPECT_TRUE(e.success) << e.id << " " << e.how;  // removes their containers
    pollfd p{conn, POLLIN, 0};
    if (::poll(&p, 1, 20) == 1) {
      const ssize_t n = ::recv(conn, buf, sizeof buf, 0);
      if (n <= 0) break;
      got.append(buf, static_cast<size_t>(n));
    }
  }
  ::close(conn);
  ::close(server);
  EXPECT_EQ(got, "ab") << "the survivor was cut off when its peers' containers were removed";
  EXPECT_EQ(testing::slurp(macFile), mac) << "the bridge's address changed";
}

TEST(Containers, AWorkerOverItsMemoryIsReportedAsOutOfMemory) {
  REQUIRE_CONTAINERS();
  ScratchDir dir;
  std::ofstream(dir / "job.yaml") << smallJob(", launcher: container, memory_limit: 40MB");
  Outcome r = runHydrozoa(dir.path().string(), {"train", "job.yaml", "--no-progress", "--out", "run"});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("out of memory: needs more than its container's 40.0 MB limit"), std::string::npos) << r.err;
  auto summary = readJsonFile(dir / "run/summary.json");
  ASSERT_TRUE(summary.ok());
  EXPECT_EQ((*summary)["status"], "failed");
  const std::string job = (*summary)["launcher"]["job"];
  EXPECT_TRUE(leftovers(job, cluster::launcherStateDir()).empty());
  EXPECT_TRUE(testing::noWorkersLeft(dir / "run"));
}

// kill -9 of the coordinator: the kernel ends the workers, the namespaces,
// bridge and cgroups stay until `hydrozoa cleanup` (or the next container
// job) removes them.
TEST(Containers, CleanupRemovesWhatAKilledCoordinatorLeft) {
  REQUIRE_CONTAINERS();
  ScratchDir dir;
  const std::string state = dir / "state";  // this test's own records, so no other job cleans them first
  ::setenv("HYDROZOA_STATE_DIR", state.c_str(), 1);
  std::ofstream(dir / "job.yaml") << smallJob(", launcher: container")
                                  << "output: {checkpoint_every_epochs: 100}\n";
  // A long run: 2000 epochs of 4 steps.
  {
    std::ifstream in(dir / "job.yaml");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    text.replace(text.find("epochs: 2"), 9, "epochs: 2000");
    std::ofstream(dir / "job.yaml") << text;
  }
  const pid_t pid = spawnHydrozoa(dir.path().string(), {"train", "job.yaml", "--no-progress", "--out", "run"});
  const std::string job = jobOnceTraining(state, dir / "run", 2);
  ASSERT_FALSE(job.empty());
  ::kill(pid, SIGKILL);
  (void)waitHydrozoa(dir.path().string(), pid);
  EXPECT_TRUE(testing::noWorkersLeft(dir / "run"));
  EXPECT_GE(leftovers(job, state).size(), 3u) << join(leftovers(job, state));
  Outcome r = runHydrozoa(dir.path().string(), {"cleanup"});
  Outcome again = runHydrozoa(dir.path().string(), {"cleanup"});  // still this test's records only
  ::unsetenv("HYDROZOA_STATE_DIR");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("Removed job " + job), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("bridge hzb" + job), std::string::npos) << r.out;
  EXPECT_TRUE(leftovers(job, state).empty()) << join(leftovers(job, state));
  EXPECT_NE(again.out.find("Nothing to clean up"), std::string::npos) << again.out;
}

// --- teardown (issue 8 §6): nothing is left however the coordinator is told to stop --

// A long container job recorded in this test's own state directory.
std::string longContainerJob() {
  std::string text = smallJob(", launcher: container") + "output: {checkpoint_every_epochs: 100}\n";
  text.replace(text.find("epochs: 2"), 9, "epochs: 2000");
  return text;
}

// Starts `hydrozoa args` in `dir` with stdout and stderr into a pipe; returns
// its pid and the pipe's read end.
std::pair<pid_t, int> spawnIntoPipe(const std::string& dir, std::vector<std::string> args) {
  int fds[2];
  if (::pipe(fds) != 0) return {-1, -1};
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (::chdir(dir.c_str()) != 0) ::_exit(127);
    ::dup2(fds[1], 1);
    ::dup2(fds[1], 2);
    ::close(fds[0]);
    ::close(fds[1]);
    testing::execHydrozoa(std::move(args));
  }
  ::close(fds[1]);
  return {pid, fds[0]};
}

int exitCode(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// `hydrozoa train ... 2>&1 | head -2`: the reader goes away; the coordinator
// does not die of SIGPIPE but stops cleanly, removes its containers and
// writes its summary.
TEST(Teardown, AClosedPipeStopsCleanlyAndLeavesNothing) {
  REQUIRE_CONTAINERS();
  ScratchDir dir;
  const std::string state = dir / "state";
  ::setenv("HYDROZOA_STATE_DIR", state.c_str(), 1);
  std::ofstream(dir / "job.yaml") << longContainerJob();
  auto [pid, out] = spawnIntoPipe(dir.path().string(), {"train", "job.yaml", "--out", "run"});
  const std::string job = jobOnceTraining(state, dir / "run", 2);
  ::close(out);  // like `head` exiting: every later write gets EPIPE
  const int code = exitCode(pid);
  ::unsetenv("HYDROZOA_STATE_DIR");
  ASSERT_FALSE(job.empty());
  EXPECT_EQ(code, 130) << "a clean, resumable stop (128 + SIGPIPE = 141 would be a death by SIGPIPE)";
  auto summary = readJsonFile(dir / "run/summary.json");
  ASSERT_TRUE(summary.ok()) << summary.status().message();
  EXPECT_EQ((*summary)["status"], "interrupted");
  EXPECT_TRUE(leftovers(job, state).empty()) << join(leftovers(job, state));
  EXPECT_TRUE(testing::noWorkersLeft(dir / "run"));
}

// Ctrl-C three times in a row (and a closed terminal): the second stops at
// once, the third only says teardown is under way; still nothing is left and
// the summary is written.
TEST(Teardown, RepeatedInterruptsAndAClosedTerminalLeaveNothing) {
  REQUIRE_CONTAINERS();
  for (const std::vector<int>& signals : {std::vector<int>{SIGINT, SIGINT, SIGINT}, std::vector<int>{SIGHUP}}) {
    ScratchDir dir;
    const std::string state = dir / "state";
    ::setenv("HYDROZOA_STATE_DIR", state.c_str(), 1);
    std::ofstream(dir / "job.yaml") << longContainerJob();
    const pid_t pid = spawnHydrozoa(dir.path().string(), {"train", "job.yaml", "--no-progress", "--out", "run"});
    const std::string job = jobOnceTraining(state, dir / "run", 2);
    for (int sig : signals) {
      ::kill(pid, sig);
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
    }
    Outcome r = waitHydrozoa(dir.path().string(), pid);
    ::unsetenv("HYDROZOA_STATE_DIR");
    ASSERT_FALSE(job.empty());
    EXPECT_EQ(r.code, 130) << r.err;
    if (signals.size() > 1) {
      EXPECT_NE(r.err.find("stopping now: removing the workers"), std::string::npos) << r.err;
      EXPECT_NE(r.err.find("still removing the workers"), std::string::npos) << r.err;
    }
    auto summary = readJsonFile(dir / "run/summary.json");
    ASSERT_TRUE(summary.ok()) << summary.status().message();
    EXPECT_EQ((*summary)["status"], "interrupted");
    EXPECT_TRUE(leftovers(job, state).empty()) << join(leftovers(job, state));
    EXPECT_TRUE(testing::noWorkersLeft(dir / "run"));
  }
}

// A container whose link is cut: its heartbeats stop, the coordinator
// replaces it within the heartbeat timeout from its live replica, the run
// completes and nothing of either generation is left.
TEST(Containers, AWorkerWhoseLinkIsCutIsReplacedAndTheRunCompletes) {
  REQUIRE_CONTAINERS();
  ScratchDir dir;
  const std::string state = dir / "state";
  ::setenv("HYDROZOA_STATE_DIR", state.c_str(), 1);
  std::ofstream(dir / "job.yaml") << "name: cut\n"
                                     "model: {name: mlp, options: {hidden: 32, depth: 2}}\n"
                                     "data: {dataset: synthetic, synthetic_train: 2400, synthetic_test: 48}\n"
                                     "training: {epochs: 3, global_batch: 24, seed: 5, eval: false}\n"
                                     "cluster: {workers: 4, bandwidth: 1Gbit/s, launcher: container,\n"
                                     "          heartbeat_interval: 200ms, heartbeat_timeout: 2s}\n"
                                     "plan: {data_parallel: 2, stages: 2, microbatches: 3}\n";
  const pid_t pid = spawnHydrozoa(dir.path().string(), {"train", "job.yaml", "--no-progress", "--out", "run"});
  const std::string job = jobOnceTraining(state, dir / "run", 40);
  ASSERT_FALSE(job.empty());
  const int cut = std::system(("ip -n hz-" + job + "-w1 link set eth0 down").c_str());
  ASSERT_EQ(cut, 0);
  Outcome r = waitHydrozoa(dir.path().string(), pid);
  ::unsetenv("HYDROZOA_STATE_DIR");
  ASSERT_EQ(r.code, 0) << r.err;
  auto summary = readJsonFile(dir / "run/summary.json");
  ASSERT_TRUE(summary.ok());
  EXPECT_EQ((*summary)["steps"]["done"], 300);
  ASSERT_EQ((*summary)["recoveries"].size(), 1u) << r.err;
  const Json& event = (*summary)["recoveries"][0];
  EXPECT_EQ(event["worker"], 1);
  EXPECT_NE(event["why"].get<std::string>().find("sent nothing for 2.00 s"), std::string::npos) << event.dump();
  EXPECT_EQ(event["restored_from"], "live replicas") << r.err;
  EXPECT_TRUE(testing::noWorkersLeft(dir / "run"));
  EXPECT_TRUE(leftovers(job, state).empty()) << join(leftovers(job, state));
}

// A worker out of the memory its plan gave it (not a limit the user set) is
// replaced by one with twice the memory (at least 500 MB), and the run goes on.
TEST(Containers, AWorkerOutOfItsPlannedMemoryIsReplacedWithMore) {
  REQUIRE_CONTAINERS();
  ScratchDir dir;
  ASSERT_EQ(runHydrozoa(dir.path().string(), {"plan", "--model", "mlp", "-O", "hidden=32", "-O", "depth=2", "--device",
                                              "k80", "--data-parallel", "2", "--stages", "2", "--microbatches", "3",
                                              "--global-batch", "24", "-o", "plan.json"})
                .code,
            0);
  auto plan = readJsonFile(dir / "plan.json");
  ASSERT_TRUE(plan.ok());
  (*plan)["stages"][1]["worker"]["memory_bytes"] = 60000000;  // too small for any worker
  std::ofstream(dir / "plan.json") << plan->dump(1);
  std::ofstream(dir / "job.yaml") << "model: {name: mlp, options: {hidden: 32, depth: 2}}\n"
                                     "data: {dataset: synthetic, synthetic_train: 96, synthetic_test: 48}\n"
                                     "training: {epochs: 2, global_batch: 24}\n"
                                     "cluster: {workers: 4, launcher: container, bandwidth: 1Gbit/s}\n"
                                     "plan: plan.json\n";
  Outcome r = runHydrozoa(dir.path().string(), {"train", "job.yaml", "--no-progress", "--out", "run"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("Stage 1's workers get 500 MB of memory from now on"), std::string::npos) << r.err;
  auto summary = readJsonFile(dir / "run/summary.json");
  ASSERT_TRUE(summary.ok());
  ASSERT_GE((*summary)["recoveries"].size(), 1u);
  EXPECT_NE((*summary)["recoveries"][0]["why"].get<std::string>().find("ran out of memory"), std::string::npos)
      << (*summary)["recoveries"][0].dump();
  EXPECT_EQ((*summary)["steps"]["done"], 8);
  EXPECT_TRUE(testing::noWorkersLeft(dir / "run"));
}

// Not root: `auto` says why and runs plain processes; `container` is an error.
TEST(Containers, WithoutRootAutoRunsPlainProcessesAndSaysWhy) {
  if (::geteuid() != 0 || !std::filesystem::exists("/usr/bin/setpriv")) {
    GTEST_SKIP() << "skipped: needs root (to drop it) and setpriv";
  }
  ScratchDir dir;
  ::chmod(dir.path().c_str(), 0777);
  std::ofstream(dir / "job.yaml") << smallJob("");
  ::chmod((dir / "job.yaml").c_str(), 0644);
  auto asNobody = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"--reuid=65534", "--regid=65534", "--clear-groups", "env",
                               "HYDROZOA_CACHE_DIR=" + dir / "cache", HYDROZOA_BINARY});
    const pid_t pid = ::fork();
    if (pid == 0) {
      if (::chdir(dir.path().c_str()) != 0) ::_exit(127);
      const int out = ::open((dir / ".stdout").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0666);
      const int err = ::open((dir / ".stderr").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0666);
      ::dup2(out, 1);
      ::dup2(err, 2);
      args.insert(args.begin(), "/usr/bin/setpriv");
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv("/usr/bin/setpriv", argv.data());
      ::_exit(127);
    }
    return waitHydrozoa(dir.path().string(), pid);
  };
  Outcome r = asNobody({"train", "job.yaml", "--no-progress", "--out", "run", "--launcher", "auto"});
  if (r.err.find("Permission denied") != std::string::npos && r.code != 0) {
    GTEST_SKIP() << "skipped: the build is not readable by nobody: " << r.err;
  }
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("Workers run as plain processes: containers need root"), std::string::npos) << r.err;
  Outcome c = asNobody({"train", "job.yaml", "--no-progress", "--out", "run2", "--launcher", "container"});
  EXPECT_NE(c.code, 0);
  EXPECT_NE(c.err.find("cannot run the workers as containers: containers need root"), std::string::npos) << c.err;
  EXPECT_NE(c.err.find("--launcher local"), std::string::npos) << c.err;
}

}  // namespace
}  // namespace hydrozoa
