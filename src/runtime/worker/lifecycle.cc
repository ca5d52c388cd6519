#include "runtime/worker/worker_impl.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/allocator.h"
#include "core/memory.h"
#include "core/units.h"
#include "profile/memory_tracker.h"

namespace hydrozoa::runtime {

Status Worker::coordinatorGone() const {
  return unavailable(fmt::format("the coordinator at {} is gone (no connection for {:.0f} s): exiting", args_.join,
                                 control_->secondsWithoutServer()));
}

Status Worker::join() {
  HZ_ASSIGN_OR_RETURN(control_, wire::ControlClient::connect(args_.join, fmt::format("w{}", args_.id), args_.token));
  control_->send({{"type", "register"}, {"worker", args_.id}, {"pid", ::getpid()}});
  Json assign;
  const auto t0 = Clock::now();
  while (true) {
    if (control_->receive(&assign, 1000)) {
      if (assign.value("type", "") == "assign") break;
      if (assign.value("type", "") == "stop") return unavailable("stopped before being assigned a role");
    }
    if (since(t0) > 300) return unavailable("no role from the coordinator within 300 s");
    if (control_->secondsWithoutServer() > args_.coordinator_timeout) return coordinatorGone();
  }
  HZ_ASSIGN_OR_RETURN(role_, parseRole(assign));
  if (role_.listen_host.empty()) {
    // Started where the coordinator could not know this host's address
    // (a Slurm step): listen where the route to the coordinator leaves.
    HZ_ASSIGN_OR_RETURN(role_.listen_host, wire::localAddressToward(args_.join));
  }
  spdlog::info("replica {} stage {} of {}x{}, at {}", role_.replica, role_.stage, role_.replicas, role_.stages,
               role_.listen_host);
  if (idle()) logIdle();
  return Status();
}

void Worker::report(const std::string& kind, const std::string& message) {
  if (!control_) return;
  std::int64_t completed = 0;
  {
    std::lock_guard<std::mutex> lock(stateMu_);
    completed = completedStep_;
  }
  post({{"type", "error"}, {"kind", kind}, {"message", message}, {"completed", completed}, {"stage", role_.stage}});
}

int Worker::run() {
  configureAllocatorForTraining();  // NOTE [glibc malloc and tensor-sized allocations]
  profile::MemoryTracker::instance();  // counts every tensor from here (NOTE [Tensor memory per step])
  if (Status s = join(); !s.ok()) {
    spdlog::error("{}", s.message());
    report("fatal", s.message());
    return 1;
  }
  // Before build() starts the transport's and the channels' threads.
  // NOTE [Helper threads wake at once] (core/cpus.cc)
  if (const Result<std::chrono::microseconds> slice = helperThreadSlice(); !slice.ok()) {
    spdlog::error("{}", slice.status().message());
    report("fatal", slice.status().message());
    return 1;
  } else if (slice->count() > 0) {
    helperSlice_ = *slice;
    if (setThreadSlice(*slice)) {
      spdlog::info("helper threads ask for {} us time slices", slice->count());
    } else {
      spdlog::warn("could not ask for {} us time slices for the helper threads: {}", slice->count(), std::strerror(errno));
    }
  }
  if (Status s = build(); !s.ok()) {
    spdlog::error("{}", s.message());
    report("fatal", s.message());
    return 1;
  }
  control_->send({{"type", "ready"}});
  // Every worker waits here until the last is ready, which can be seconds
  // (a function's cold start): a wait without a message is no message.
  for (Json m;;) {
    if (control_->secondsWithoutServer() > args_.coordinator_timeout) {
      spdlog::error("{}", coordinatorGone().message());
      return 1;
    }
    if (!control_->receive(&m, 1000) || !m.is_object()) continue;
    const std::string type = m.value("type", "");
    if (type == "go") break;
    if (type == "stop") return 0;
  }
  {
    std::lock_guard<std::mutex> lock(stateMu_);
    completedStep_ = role_.start_step;
    // (Not with 2bw: the step before needs the version before that too; where
    // stages are a step apart its recovery falls back to the last checkpoint.
    // Nor with pipedream, whose state mid-step is no step's.)
    // Nor with split layers: a halted group cannot gather them (control.cc).
    keepSnapshots_ = role_.replicas > 1 && role_.stages > 1 && role_.job.max_recoveries > 0 &&
                     !schedule_->asynchronous() && role_.tensor_parallel == 1;
  }
  controlRunning_ = true;
  controlThread_ = std::thread([this] {
    runThreadOn(helperCpus_);  // NOTE [Cores for compute threads]
    controlLoop();
  });
  int code = 0;
  try {
    train();
    // Done, until the coordinator says it heard (a lost "done" would make
    // this clean exit look like a death).
    const Json done = {{"type", "done"}, {"stopped", stopRequested_}, {"peak_memory", peakResidentBytes()}};
    for (int tries = 0; tries < 10 && !doneAcked_ && stopAt_.load() != 0; ++tries) {
      post(done);
      const auto until = Clock::now() + std::chrono::seconds(1);
      while (!doneAcked_ && stopAt_.load() != 0 && Clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    }
  } catch (const std::exception& e) {
    std::string what = e.what();
    what = what.substr(0, what.find('\n'));
    const bool halted = dynamic_cast<const Halted*>(&e) != nullptr;
    const bool lost = halted || isPeerLost(e);
    if (!halted) {
      spdlog::error("{}: {}", lost ? "lost a peer" : "failed", what);
      report(lost ? "peer_lost" : "fatal", what);
    } else {
      spdlog::info("{}", what);
    }
    code = lost ? 3 : 1;
    // A survivor may hold what the next generation needs: it stays until the
    // coordinator has asked (save) and says stop, or a minute has passed.
    if (lost) {
      const auto until = Clock::now() + std::chrono::seconds(60);
      while (stopAt_.load() != 0 && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  (void)trace_.flush(role_.trace_path);
  stopControl_ = true;
  control_->wake();
  controlThread_.join();
  // Give the last messages a moment to leave before the sockets close.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  return code;
}

int runWorker(const WorkerArgs& args) {
  Worker w(args);
  return w.run();
}

}  // namespace hydrozoa::runtime
