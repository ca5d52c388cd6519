#include "runtime/comm/pipe.h"

#include <chrono>

namespace hydrozoa::runtime {
namespace {

double secondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

// ---------------------------------------------------------------- Inbound

Inbound::Inbound(Transport& transport, int peer, TraceRecorder& trace, std::string what, Posting posting)
    : transport_(transport),
      peer_(peer),
      trace_(trace),
      what_(std::move(what)),
      posting_(posting),
      thread_([this] { run(); }) {}

Inbound::~Inbound() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    for (auto& p : pending_) {
      if (p.work) p.work->abort();
    }
  }
  cv_.notify_all();
  thread_.join();
}

void Inbound::expect(int key, int tag, torch::Tensor buffer, const std::string& label) {
  Pending p{key, tag, buffer, {}, traceNowUs(), label};
  if (posting_ == Posting::kCaller) p.work = transport_.recv(p.buffer, peer_, tag);
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending_.push_back(std::move(p));
  }
  cv_.notify_all();
}

torch::Tensor Inbound::take(int key, double* waited) {
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return arrived_.count(key) || error_; });
  if (waited) *waited = secondsSince(t0);
  if (auto it = arrived_.find(key); it != arrived_.end()) {
    torch::Tensor t = std::move(it->second);
    arrived_.erase(it);
    return t;
  }
  std::rethrow_exception(error_);
}

void Inbound::run() {
  for (;;) {
    c10::intrusive_ptr<c10d::Work> work;
    try {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !pending_.empty(); });
      if (stop_) return;
      // Every receive expected so far, posted in order (only this thread
      // pops the front, so the indices hold while the lock is released).
      for (size_t i = 0; i < pending_.size(); ++i) {
        if (pending_[i].work) continue;
        torch::Tensor buffer = pending_[i].buffer;
        const int tag = pending_[i].tag;
        lock.unlock();
        auto posted = transport_.recv(buffer, peer_, tag);
        lock.lock();
        if (stop_) {  // the destructor aborted the others
          posted->abort();
          return;
        }
        pending_[i].work = std::move(posted);
      }
      work = pending_.front().work;  // stays in pending_ so the destructor can abort it
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu_);
      if (!stop_) error_ = std::current_exception();
      cv_.notify_all();
      return;
    }
    try {
      work->wait();
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu_);
      if (!stop_) error_ = std::current_exception();
      cv_.notify_all();
      return;
    }
    std::lock_guard<std::mutex> lock(mu_);
    Pending done = std::move(pending_.front());
    pending_.pop_front();
    // The span first, so the trace is complete once take() returns.
    trace_.record("recv " + done.label, what_.c_str(), TraceThread::kReceive, done.posted, traceNowUs(),
                  {{"bytes", done.buffer.numel() * done.buffer.element_size()}, {"peer", peer_}});
    arrived_[done.key] = done.buffer;
    cv_.notify_all();
  }
}

// --------------------------------------------------------------- Outbound

Outbound::Outbound(Transport& transport, int peer, TraceRecorder& trace, std::string what, Posting posting)
    : transport_(transport),
      peer_(peer),
      trace_(trace),
      what_(std::move(what)),
      posting_(posting),
      thread_([this] { run(); }) {}

Outbound::~Outbound() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    for (auto& p : pending_) {
      if (p.work) p.work->abort();
    }
  }
  cv_.notify_all();
  thread_.join();
}

void Outbound::send(int tag, torch::Tensor tensor, const std::string& label) {
  Pending p{tag, tensor.contiguous(), {}, traceNowUs(), label};
  if (posting_ == Posting::kCaller) p.work = transport_.send(p.tensor, peer_, tag);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (error_) std::rethrow_exception(error_);
    pending_.push_back(std::move(p));
    ++inFlight_;
  }
  cv_.notify_all();
}

void Outbound::flush() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return inFlight_ == 0 || error_; });
  if (error_) std::rethrow_exception(error_);
}

void Outbound::run() {
  for (;;) {
    c10::intrusive_ptr<c10d::Work> work;
    try {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !pending_.empty(); });
      if (stop_) return;
      for (size_t i = 0; i < pending_.size(); ++i) {  // as Inbound::run
        if (pending_[i].work) continue;
        torch::Tensor tensor = pending_[i].tensor;
        const int tag = pending_[i].tag;
        lock.unlock();
        auto posted = transport_.send(tensor, peer_, tag);
        lock.lock();
        if (stop_) {
          posted->abort();
          return;
        }
        pending_[i].work = std::move(posted);
      }
      work = pending_.front().work;
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu_);
      if (!stop_) error_ = std::current_exception();
      cv_.notify_all();
      return;
    }
    try {
      work->wait();
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu_);
      if (!stop_) error_ = std::current_exception();
      cv_.notify_all();
      return;
    }
    std::lock_guard<std::mutex> lock(mu_);
    Pending done = std::move(pending_.front());
    pending_.pop_front();
    trace_.record("send " + done.label, what_.c_str(), TraceThread::kSend, done.posted, traceNowUs(),
                  {{"bytes", done.tensor.numel() * done.tensor.element_size()}, {"peer", peer_}});
    --inFlight_;
    cv_.notify_all();
  }
}

}  // namespace hydrozoa::runtime
