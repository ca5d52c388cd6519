#include "cluster/job_handle.h"

#include <fmt/format.h>

#include <chrono>
#include <utility>

#include "core/limits.h"

namespace hydrozoa::cluster {

std::unique_ptr<JobHandle> JobHandle::start(TrainOptions o) {
  std::unique_ptr<JobHandle> h(new JobHandle());
  JobHandle* self = h.get();
  o.interrupt = &self->interrupt_;
  o.checkpoint_request = &self->checkpoint_;
  o.preempt_request = &self->preempt_;
  o.resize_request = &self->resize_;
  std::function<void(const Json&)> also = std::move(o.on_event);
  o.on_event = [self, also](const Json& e) {
    if (also) also(e);
    if (e.value("event", "") == "finished") self->finishedSeen_ = true;
    self->push(e);
  };
  self->thread_ = std::thread([self, o = std::move(o)] {
    Result<TrainResult> r = runTraining(o);
    if (!self->finishedSeen_) {
      // Stopped while planning (profiling) or failed before it trained.
      const bool ok = r.ok();
      const char* stopped = self->preempt_ ? "preempted" : "interrupted";
      self->push({{"event", "finished"},
                  {"status", ok ? (r->interrupted ? stopped : "completed") : self->interrupt_ ? stopped : "failed"},
                  {"reason", ok ? "" : r.status().message()},
                  {"run_dir", ok ? r->run_dir : ""}});
    }
    std::lock_guard<std::mutex> lock(self->mu_);
    self->result_ = std::move(r);
    self->done_ = true;
    self->cv_.notify_all();
  });
  return h;
}

JobHandle::~JobHandle() {
  if (thread_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!done_) stop();
    }
    thread_.join();
  }
}

void JobHandle::push(Json event) {
  std::lock_guard<std::mutex> lock(mu_);
  events_.push_back(std::move(event));
  cv_.notify_all();
}

std::optional<Json> JobHandle::nextEvent(double timeoutSeconds) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, std::chrono::duration<double>(timeoutSeconds), [this] { return !events_.empty() || done_; });
  if (events_.empty()) return std::nullopt;
  Json e = std::move(events_.front());
  events_.pop_front();
  return e;
}

bool JobHandle::ended() const {
  std::lock_guard<std::mutex> lock(mu_);
  return done_ && events_.empty();
}

void JobHandle::preempt() {
  preempt_ = true;
  int none = 0;
  interrupt_.compare_exchange_strong(none, 1);
}

void JobHandle::stop(bool now) {
  if (now) {
    interrupt_.store(2);
    return;
  }
  int none = 0;
  interrupt_.compare_exchange_strong(none, 1);
}

void JobHandle::checkpoint() { checkpoint_.fetch_add(1); }

Status JobHandle::resize(int replicas) {
  if (!inRange(replicas, kWorkersRange)) {
    return invalidArgument(fmt::format("resize: {} replicas is outside {}..{}", replicas, kWorkersRange.min,
                                       kWorkersRange.max));
  }
  resize_ = replicas;
  return Status();
}

const Result<TrainResult>& JobHandle::wait() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return done_; });
  return *result_;  // set once, before done_; the thread is joined by the destructor
}

Result<TrainOptions> resumeOptions(const std::string& runDir) {
  TrainOptions o;
  HZ_ASSIGN_OR_RETURN(o.spec, loadJobSpec(runDir + "/job.yaml"));
  o.resume_dir = runDir;
  return o;
}

}  // namespace hydrozoa::cluster
