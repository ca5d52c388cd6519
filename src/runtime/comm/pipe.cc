#include "runtime/comm/pipe.h"

#include <chrono>
#include <deque>
#include <mutex>

namespace hydrozoa::runtime {
namespace {

double secondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Posts, in order, every entry of `pending` not posted yet, `post(entry)`
// starting its transfer with `lock` released (entries stay where they are:
// the caller only appends, and only the channel's thread pops the front).
// False when the channel stopped meanwhile (the destructor aborted the rest).
template <typename Entry, typename Post>
bool postInOrder(std::unique_lock<std::mutex>& lock, std::deque<Entry>& pending, const bool& stop, Post post) {
  for (size_t i = 0; i < pending.size(); ++i) {
    Entry& entry = pending[i];
    if (entry.work) continue;
    lock.unlock();
    c10::intrusive_ptr<c10d::Work> work = post(entry);
    lock.lock();
    if (stop) {
      work->abort();
      return false;
    }
    entry.work = std::move(work);
  }
  return true;
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
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !pending_.empty(); });
        if (stop_) return;
        auto post = [&](Pending& p) { return transport_.recv(p.buffer, peer_, p.tag); };
        if (!postInOrder(lock, pending_, stop_, post)) return;
        work = pending_.front().work;  // stays in pending_ so the destructor can abort it
      }
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
  bytes_ += static_cast<std::int64_t>(p.tensor.nbytes());
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
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !pending_.empty(); });
        if (stop_) return;
        auto post = [&](Pending& p) { return transport_.send(p.tensor, peer_, p.tag); };
        if (!postInOrder(lock, pending_, stop_, post)) return;
        work = pending_.front().work;
      }
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
