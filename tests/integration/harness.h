// Helpers for the multi-process tests: run the real `hydrozoa` binary in a
// scratch directory, read what it left behind, and check that no process of
// a run is left over.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cluster/launch/container/container_launcher.h"
#include "core/files.h"

// Skips a test where containers (and so functions) cannot be made: not root, no iproute2, no cgroups.
#define REQUIRE_CONTAINERS()                                                          \
  if (std::string why = ::hydrozoa::cluster::containerSupport(); !why.empty()) {                  \
    GTEST_SKIP() << "skipped: the container launcher cannot run here: " << why;       \
  }

namespace hydrozoa::testing {

namespace fs = std::filesystem;

struct Outcome {
  int code = -1;
  std::string out, err;
};

inline std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class ScratchDir {
 public:
  ScratchDir() {
    // A parameterised test's name has a '/' ("Name/0"): one directory, not
    // an empty parent left behind in /tmp by every run.
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::replace(name.begin(), name.end(), '/', '.');
    path_ = fs::temp_directory_path() / ("hzit." + std::to_string(::getpid()) + "." + name);
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  // A failed test's directory stays, its path and its logs' warnings and
  // errors printed (what a CI log needs to tell why).
  ~ScratchDir() {
    if (!::testing::Test::HasFailure()) {
      fs::remove_all(path_);
      return;
    }
    std::cerr << "kept " << path_.string() << "; its logs' warnings and errors:\n";
    std::error_code ec;
    int shown = 0;
    for (auto it = fs::recursive_directory_iterator(path_, ec); it != fs::recursive_directory_iterator(); ++it) {
      if (it->path().extension() != ".log") continue;
      std::ifstream in(it->path());
      for (std::string line; std::getline(in, line) && shown < 80;) {
        if (line.find("[error]") == std::string::npos && line.find("[warning]") == std::string::npos) continue;
        std::cerr << it->path().filename().string() << ": " << line.substr(0, 300) << "\n";
        ++shown;
      }
    }
  }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// In a forked child: becomes `hydrozoa args` (exit 127 when it cannot).
[[noreturn]] inline void execHydrozoa(std::vector<std::string> args) {
  args.insert(args.begin(), HYDROZOA_BINARY);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  ::execv(HYDROZOA_BINARY, argv.data());
  ::_exit(127);
}

// Starts the binary with `args` in `dir`; returns its pid (stdout and stderr
// go to dir/.stdout and dir/.stderr).
inline pid_t spawnHydrozoa(const std::string& dir, std::vector<std::string> args) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (::chdir(dir.c_str()) != 0) ::_exit(127);
    const int out = ::open((dir + "/.stdout").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err = ::open((dir + "/.stderr").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(out, 1);
    ::dup2(err, 2);
    execHydrozoa(std::move(args));
  }
  return pid;
}

inline Outcome waitHydrozoa(const std::string& dir, pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  Outcome r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = slurp(dir + "/.stdout");
  r.err = slurp(dir + "/.stderr");
  return r;
}

inline Outcome runHydrozoa(const std::string& dir, std::vector<std::string> args) {
  return waitHydrozoa(dir, spawnHydrozoa(dir, std::move(args)));
}

// True while a process with this pid exists (and is not a zombie of ours).
inline bool processAlive(pid_t pid) {
  if (pid <= 0) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string content;
  std::getline(stat, content);
  if (content.empty()) return false;
  const auto close = content.rfind(')');
  return close != std::string::npos && close + 2 < content.size() && content[close + 2] != 'Z';
}

// Worker processes still alive: of the run in `runDir` (those that joined
// the control endpoint in its coordinator.json; none if it never launched
// any), or of any run when `runDir` is empty. Tests run in parallel, so a
// test asks about its own run.
inline std::vector<pid_t> leftoverWorkers(const std::string& runDir = "") {
  std::vector<pid_t> left;
  std::string endpoint;
  if (!runDir.empty()) {
    auto c = readJsonFile(runDir + "/coordinator.json");
    if (!c.ok()) return left;
    endpoint = (*c)["control"].get<std::string>();
  }
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = std::stoi(name);
    std::ifstream cmd("/proc/" + name + "/cmdline");
    std::string args((std::istreambuf_iterator<char>(cmd)), std::istreambuf_iterator<char>());
    if (args.find(std::string("worker") + '\0' + "--join") != std::string::npos &&
        args.find(endpoint) != std::string::npos && processAlive(pid)) {
      left.push_back(pid);
    }
  }
  return left;
}

// Waits up to `seconds` for the worker processes of `runDir` (see
// leftoverWorkers) to be gone.
inline bool noWorkersLeft(const std::string& runDir, double seconds = 5) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < until) {
    if (leftoverWorkers(runDir).empty()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return leftoverWorkers(runDir).empty();
}

// The lines of a run's metrics.jsonl. Read while the run appends to it, its
// last line can be half written: a line that does not parse is left out
// (seen once in CI: "unexpected end of input" at column 131).
inline std::vector<Json> metrics(const std::string& runDir) {
  std::vector<Json> lines;
  std::ifstream in(runDir + "/metrics.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_discarded()) lines.push_back(std::move(j));
  }
  return lines;
}

// The forward and backward passes worker `pid` ran in global step `step`,
// in the order they ran, from the run's trace.json: "F0", "B3", ...
inline std::vector<std::string> tracedPasses(const std::string& runDir, int pid, std::int64_t step) {
  std::ifstream in(runDir + "/trace.json");
  const Json trace = Json::parse(in, nullptr, /*allow_exceptions=*/false);
  const Json& events = trace.is_object() ? trace["traceEvents"] : trace;
  std::vector<std::pair<double, std::string>> passes;
  for (const Json& e : events) {
    const std::string name = e.value("name", "");
    if (e.value("pid", -1) != pid || e.value("ph", "") != "X" || !e.contains("args") ||
        e["args"].value("step", std::int64_t{-1}) != step) {
      continue;
    }
    for (const char* kind : {"forward mb", "backward mb"}) {
      if (name.rfind(kind, 0) == 0) {
        passes.emplace_back(e.value("ts", 0.0), std::string(1, kind[0] == 'f' ? 'F' : 'B') + name.substr(std::strlen(kind)));
      }
    }
  }
  std::sort(passes.begin(), passes.end());
  std::vector<std::string> out;
  for (auto& p : passes) out.push_back(p.second);
  return out;
}

inline std::vector<double> stepLosses(const std::string& runDir) {
  std::vector<double> losses;
  for (const Json& l : metrics(runDir)) {
    if (l.contains("loss")) losses.push_back(l["loss"].get<double>());
  }
  return losses;
}

// What the workers of the run in `run` recorded with
// $HYDROZOA_RECORD_SAMPLES set: a line "global_step epoch replica id..." for
// each step each worker took part in, over every generation.
struct SampleRecord {
  std::int64_t step = 0, epoch = 0, replica = 0;
  std::vector<std::int64_t> ids;
};
inline std::vector<SampleRecord> recordedSamples(const std::filesystem::path& run) {
  std::vector<SampleRecord> out;
  for (const auto& f : std::filesystem::directory_iterator(run / "workers")) {
    if (f.path().extension() != ".samples") continue;
    std::ifstream in(f.path());
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream words(line);
      SampleRecord r;
      words >> r.step >> r.epoch >> r.replica;
      for (std::int64_t id = 0; words >> id;) r.ids.push_back(id);
      out.push_back(std::move(r));
    }
  }
  return out;
}

// Writes dir/plan.json for the MLP of 3 layers (hidden 32, depth 2) on
// replicas.size() stages (at most 3) with `replicas` copies each (stages
// replicated unevenly: NOTE [Unevenly replicated stages] in plan/plan.cc),
// a global batch of 24 in `microbatches` microbatches of 24 / microbatches
// a step, and `schedule`: the hydrozoa planner's split, its replicas then
// changed. Empty on success, else what failed.
inline std::string writeRoundRobinPlan(const std::string& dir, const std::vector<int>& replicas, int microbatches,
                                       const std::string& schedule) {
  const std::string stages = std::to_string(replicas.size());
  const Outcome r = runHydrozoa(dir, {"plan", "--model", "mlp", "-O", "hidden=32", "-O", "depth=2", "--device", "k80",
                                      "--workers", stages, "--stages", stages, "--data-parallel", "1", "--microbatches",
                                      std::to_string(microbatches), "--global-batch", "24", "--microbatch-sizes",
                                      std::to_string(24 / microbatches), "-o", "plan.json"});
  if (r.code != 0) return r.err;
  auto plan = readJsonFile(dir + "/plan.json");
  if (!plan.ok()) return plan.status().message();
  Json& j = *plan;
  j["strategy"]["data_parallel"] = replicas[0];
  j["num_microbatches"] = microbatches / replicas[0];
  for (size_t s = 0; s < replicas.size(); ++s) j["stages"][s]["replicas"] = replicas[s];
  j["schedule"] = schedule;
  std::ofstream(dir + "/plan.json") << j.dump(1);
  return "";
}

// The live processes of a run's workers: those whose command line holds its
// control endpoint.
inline std::vector<pid_t> workersOf(const std::string& endpoint) {
  std::vector<pid_t> pids;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string args = slurp("/proc/" + name + "/cmdline");
    if (args.find(endpoint) != std::string::npos && processAlive(std::stoi(name))) pids.push_back(std::stoi(name));
  }
  return pids;
}

// Waits until the run in `runDir` has reported `steps` steps; returns its
// coordinator's control endpoint ("" and a test failure if it never does).
inline std::string waitForSteps(const std::string& runDir, size_t steps, double seconds = 120) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < until) {
    if (std::filesystem::exists(runDir + "/metrics.jsonl") && stepLosses(runDir).size() >= steps) {
      auto c = readJsonFile(runDir + "/coordinator.json");
      if (c.ok()) return (*c)["control"].get<std::string>();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ADD_FAILURE() << "the run did not reach step " << steps;
  return "";
}

}  // namespace hydrozoa::testing
