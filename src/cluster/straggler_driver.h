// Injects the slow workers of cluster.stragglers (cluster/stragglers.h) into
// a generation's running workers, from outside as users meet them: a
// container's CPU quota cut, or the process stopped and continued (SIGSTOP /
// SIGCONT). "sleep" stragglers slow themselves (the worker's compute thread,
// NOTE [Sleeping stragglers]) and are not driven from here.
//
// One thread per straggler, started by the constructor and ended by the
// destructor, which leaves every worker continued and its quota as it was:
// the coordinator holds one for each generation's training (Job::watch()).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cluster/launch/launcher.h"
#include "cluster/stragglers.h"

namespace hydrozoa::cluster {

class StragglerDriver {
 public:
  struct Target {
    StragglerSpec spec;
    WorkerHandle worker;
    std::string name;  // for the log: "worker 1 (replica 1, stage 0)"
  };
  // `elapsed`: seconds of training before this generation (specs' start
  // and for count from the job's training start).
  StragglerDriver(std::vector<Target> targets, double elapsed, std::uint64_t seed);
  ~StragglerDriver();
  StragglerDriver(const StragglerDriver&) = delete;
  StragglerDriver& operator=(const StragglerDriver&) = delete;

  // The mode a spec runs in: quota where the worker has a CPU quota to cut
  // (`quotas`), else pause ("auto"); or the one asked for. Fails for quota
  // without one.
  static Result<std::string> modeFor(const StragglerSpec& spec, bool quotas);

  // SIGSTOPs sent so far (all targets).
  std::int64_t pauses() const { return pauses_.load(); }

 private:
  void drive(const Target& t);
  // Sleeps up to `seconds`; false once stopping.
  bool sleepFor(double seconds);

  std::vector<Target> targets_;
  double elapsed_;
  std::uint64_t seed_;
  std::atomic<std::int64_t> pauses_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace hydrozoa::cluster
