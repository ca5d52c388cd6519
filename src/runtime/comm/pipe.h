// The pipeline's point-to-point traffic with one neighbour, each direction
// served by a thread of its own (Hydrozoa §3.2, §4.1: "separate threads on
// each worker handle the transfer of gradient and activation values
// asynchronously with forward and backward propagation").
//
// Inbound: the compute thread announces what it will need (expect()); the
// receives are posted at once (by the caller, or by the inbound thread: NOTE
// [Posting transfers on the channel's thread]), so the next microbatch's
// activations or gradients arrive while the current one computes; the
// inbound thread waits for them in order, records each as a "receive" span
// and hands it over; take() blocks only if it has not arrived yet.
//
// Outbound: send() starts a send (or has the outbound thread start it) and
// returns; the outbound thread waits for completions (recording "send"
// spans); flush() waits for all of them.
//
// A failed transfer (a peer died) is rethrown by take()/flush().
// Destructors abort what is still pending.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "runtime/comm/transport.h"
#include "runtime/trace.h"

namespace hydrozoa::runtime {

// NOTE [Posting transfers on the channel's thread]
// Gloo serialises every operation on a connection behind one lock, which its
// transport thread holds while it reads what arrives and completes it. When
// the compute threads keep every core busy, that thread can wait
// milliseconds for a core while holding it, and a compute thread that posts
// a send or a receive meanwhile waits as long: measured on 2 cores (CNN,
// 2 stages, 16 microbatches of 4, 1F1B), posts on the compute thread took
// 1 to 12 ms about once a step per worker, and both stages then stood idle
// with their inputs arrived (bench/README.md, schedule_bench). Posting from
// the channel's own thread instead keeps the compute thread out of Gloo:
// 1F1B's step 8% shorter, 2BW's 5%, interleaved's 22%, PipeDream's and the
// GPT's the same. GPipe posts every receive of a step at its start, before
// any traffic, and sends in bursts; there the extra wake-up per send cost
// 4%, so its channels post on the caller.
enum class Posting {
  kCaller,   // send()/expect() post to the transport themselves
  kChannel,  // the channel's thread posts, in order
};

class Inbound {
 public:
  Inbound(Transport& transport, int peer, TraceRecorder& trace, std::string what,
          Posting posting = Posting::kCaller);
  ~Inbound();
  Inbound(const Inbound&) = delete;
  Inbound& operator=(const Inbound&) = delete;

  // Posts a receive into `buffer` (its shape and type are the message's).
  // `key` names it for take(); keys are unique among pending receives.
  // Receives complete in the order they are expected: expect them in the
  // order the peer sends them.
  void expect(int key, int tag, torch::Tensor buffer, const std::string& label);
  // The tensor expected under `key`, once received. Seconds spent blocked go
  // to *waited when given.
  torch::Tensor take(int key, double* waited = nullptr);

 private:
  struct Pending {
    int key;
    int tag;
    torch::Tensor buffer;
    c10::intrusive_ptr<c10d::Work> work;
    std::int64_t posted;
    std::string label;
  };
  void run();

  Transport& transport_;
  int peer_;
  TraceRecorder& trace_;
  std::string what_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Pending> pending_;
  std::map<int, torch::Tensor> arrived_;
  std::exception_ptr error_;
  bool stop_ = false;
  const Posting posting_;
  std::thread thread_;
};

class Outbound {
 public:
  Outbound(Transport& transport, int peer, TraceRecorder& trace, std::string what,
           Posting posting = Posting::kCaller);
  ~Outbound();
  Outbound(const Outbound&) = delete;
  Outbound& operator=(const Outbound&) = delete;

  // Starts sending `tensor` (kept alive until sent).
  void send(int tag, torch::Tensor tensor, const std::string& label);
  // Waits until every send so far has completed; rethrows a failure.
  void flush();
  // Bytes of every tensor send() was given so far.
  std::int64_t bytesSent() const { return bytes_.load(); }

 private:
  struct Pending {
    int tag;
    torch::Tensor tensor;
    c10::intrusive_ptr<c10d::Work> work;
    std::int64_t posted;
    std::string label;
  };
  void run();

  Transport& transport_;
  int peer_;
  TraceRecorder& trace_;
  std::string what_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Pending> pending_;
  size_t inFlight_ = 0;
  std::atomic<std::int64_t> bytes_{0};
  std::exception_ptr error_;
  bool stop_ = false;
  const Posting posting_;
  std::thread thread_;
};

}  // namespace hydrozoa::runtime
