#include "runtime/worker/worker_impl.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "core/memory.h"

namespace hydrozoa::runtime {

void Worker::controlLoop() {
  const auto interval = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(role_.job.heartbeat_interval));
  auto nextBeat = Clock::now();
  auto flush = [this] {
    std::deque<Json> out;
    {
      std::lock_guard<std::mutex> lock(outMu_);
      out.swap(outbox_);
    }
    for (Json& m : out) control_->send(std::move(m));
  };
  while (!stopControl_) {
    flush();
    if (Clock::now() >= nextBeat) {
      control_->send({{"type", "heartbeat"}, {"step", currentStep_.load()}, {"peak_memory", peakResidentBytes()}});
      nextBeat = Clock::now() + interval;
    }
    // Sleeps until a message comes, post() or the end wakes it, or the next
    // heartbeat is due (at most 50 ms): polling every few milliseconds cost
    // two busy workers a wake-up each per 5 ms on cores they compute on.
    const auto untilBeat = std::chrono::duration_cast<std::chrono::milliseconds>(nextBeat - Clock::now()).count();
    Json m;
    if (control_->receive(&m, static_cast<int>(std::clamp<std::int64_t>(untilBeat, 0, 50)))) onControl(m);
    if (!orphaned_ && control_->secondsWithoutServer() > args_.coordinator_timeout) leaveWithoutCoordinator();
  }
  flush();
}

// NOTE [A worker without its coordinator]
// A worker's checkpoints, reports and next steps all go through its
// coordinator; without it the worker has nothing to do. Its connection
// tells it the coordinator is gone (a dead process at once, a lost host
// within about 10 s: ControlClient::secondsWithoutServer); after
// coordinator_timeout it stops as a "stop" message would (at once, no
// checkpoint: nobody would keep it), so its threads end and what it holds
// (shared memory, files) is released as on any stop. Its peers, orphaned too,
// stop as well; one stuck in a collective with a peer that never answers
// exits 30 s later regardless.
void Worker::leaveWithoutCoordinator() {
  orphaned_ = true;
  spdlog::error("the coordinator at {} is gone (no connection for {:.0f} s): stopping", args_.join,
                control_->secondsWithoutServer());
  onControl({{"type", "stop"}});
  std::thread([] {
    std::this_thread::sleep_for(std::chrono::seconds(30));
    spdlog::error("still running 30 s after the coordinator went: exiting");
    spdlog::default_logger()->flush();
    std::_Exit(1);
  }).detach();
}

// Tests cause a worker that hears of a stop or regroup late (NOTE [Agreeing
// on a step], cluster/recovery.cc): with HYDROZOA_TEST_LATE_STEP_MESSAGE set
// to "<replica>:<ms>", that replica handles its first such message that
// much later, as a control thread starved of CPU would.
void Worker::maybeHearLate(const std::string& type) {
  static bool used = false;
  const char* env = std::getenv("HYDROZOA_TEST_LATE_STEP_MESSAGE");
  if (used || env == nullptr || (type != "stop" && type != "regroup")) return;
  int replica = -1, ms = 0;
  if (std::sscanf(env, "%d:%d", &replica, &ms) != 2 || replica != role_.replica || ms <= 0) return;
  used = true;
  std::this_thread::sleep_for(std::chrono::milliseconds(std::min(ms, 10000)));
}

void Worker::onControl(const Json& m) {
  const std::string type = m.value("type", "");
  maybeHearLate(type);
  if (type == "stop") {
    // A stop at a given step lets every worker finish the same steps (a
    // clean, resumable stop); without one, stop now.
    stopCheckpoint_ = m.value("checkpoint", false);
    const std::int64_t at = m.value("at_step", std::int64_t{0});
    stopAt_ = at;
    if (at > 0) ackStep(at);
  } else if (type == "confirm") {
    confirmedAt_ = m.value("at_step", std::int64_t{-1});
  } else if (type == "regroup") {
    Result<Regroup> g = parseRegroup(m, role_);  // role_'s fields it reads do not change
    if (!g.ok()) {
      post({{"type", "error"}, {"kind", "fatal"}, {"message", g.status().message()}, {"stage", role_.stage}});
      return;
    }
    {
      std::lock_guard<std::mutex> lock(stateMu_);
      regroup_ = *g;
    }
    regroupAt_ = g->at_step;
    ackStep(g->at_step);
  } else if (type == "checkpoint") {
    checkpointAt_ = m.value("step", std::int64_t{-1});
  } else if (type == "continue") {
    continueAt_ = m.value("step", std::int64_t{-1});
  } else if (type == "done_ack") {
    doneAcked_ = true;
  } else if (type == "halt") {
    std::int64_t completed = 0;
    Json steps = Json::array();
    {
      std::lock_guard<std::mutex> lock(stateMu_);
      halted_ = true;
      completed = completedStep_;
      // Split layers are saved by gathering over their group (NOTE
      // [Checkpoints of split layers]), which a halted group, one of its
      // workers perhaps gone, cannot do: the last checkpoint restores them.
      if (role_.tensor_parallel == 1) {
        if (!midStep_) steps.push_back(completed);  // NOTE [Weight versions]
        if (before_.step >= 0 && before_.step == completed - 1) steps.push_back(before_.step);
      }
    }
    haltSeen_ = true;
    if (reassigner_) reassigner_->abort();  // a helper waiting for a helpee that is gone
    control_->send({{"type", "halted"}, {"completed", completed}, {"can_save", steps}, {"stage", role_.stage}});
  } else if (type == "save") {
    const std::int64_t step = m.value("step", std::int64_t{-1});
    std::string problem;
    {
      std::lock_guard<std::mutex> lock(stateMu_);
      if (!halted_ || (completedStep_ != step && before_.step != step)) {
        problem = fmt::format("asked to save step {} but this worker has done {}", step, completedStep_);
      } else if (auto dir = checkpointDir(step); !dir.ok()) {
        problem = dir.status().message();
      } else {
        Status s = completedStep_ == step ? saveState(*dir) : saveSnapshot(*dir);
        if (shipsCheckpoints()) s = shipCheckpoint(step, *dir, s);
        if (!s.ok()) problem = s.message();
      }
    }
    if (problem.empty()) {
      control_->send({{"type", "checkpoint"}, {"step", step}, {"stage", role_.stage}});
    } else {
      control_->send({{"type", "save_failed"}, {"step", step}, {"message", problem}});
    }
  }
}

void Worker::post(Json message) {
  if (!controlRunning_) {
    control_->send(std::move(message));
    return;
  }
  {
    std::lock_guard<std::mutex> lock(outMu_);
    outbox_.push_back(std::move(message));
  }
  control_->wake();
}

bool Worker::pollControl() {
  if (haltSeen_) throw Halted();
  const std::int64_t at = stopAt_.load();
  if (at < 0 || currentStep_.load() < at) return true;
  return at > 0 && !agreed(at, stopAt_);  // at 0: now
}

// Set before it is read here, and the compute thread sets currentStep_
// before it reads the proposal (both sequentially consistent): either that
// thread sees the proposal before it begins `step`, or this one sees that
// it has begun it.
void Worker::ackStep(std::int64_t step) {
  control_->send({{"type", "step_ack"}, {"at_step", step}, {"begun", currentStep_.load()}});
}

bool Worker::agreed(std::int64_t step, const std::atomic<std::int64_t>& proposal) {
  for (;;) {
    if (haltSeen_) throw Halted();
    if (confirmedAt_.load() == step) return true;
    if (proposal.load() != step) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
}

// NOTE [Holding at an epoch's end]
// A scaling rule reads the epoch's test accuracy, so its decision comes
// after the epoch's evaluation. With hold_at_epoch_end the workers say
// "boundary" once the epoch is evaluated and saved, and wait: "continue"
// (the same replicas) goes on at once; "stop" ends this generation there,
// and the coordinator starts the next one from that checkpoint.
bool Worker::holdAtEpochEnd(std::int64_t global) {
  post({{"type", "boundary"}, {"step", global}});
  for (;;) {
    if (haltSeen_) throw Halted();
    if (continueAt_.load() == global) return true;
    if (stopAt_.load() >= 0) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

}  // namespace hydrozoa::runtime
