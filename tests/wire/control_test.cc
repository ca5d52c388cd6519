// The control plane's guarantees, in one process over loopback: a route is
// bound to a worker's name only by a message with the token, so a peer
// without it receives nothing; frames past the size bound are never read;
// authenticated messages are checked field by field.
#include "wire/control.h"

#include <gtest/gtest.h>

#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <zmq.hpp>

namespace hydrozoa::wire {
namespace {

// Polls `socket` for up to `ms`; the message or "" when none came.
std::string receiveWithin(zmq::socket_t& socket, int ms) {
  zmq::pollitem_t item{static_cast<void*>(socket), 0, ZMQ_POLLIN, 0};
  if (zmq::poll(&item, 1, std::chrono::milliseconds(ms)) <= 0) return "";
  zmq::message_t m;
  if (!socket.recv(m, zmq::recv_flags::dontwait)) return "";
  return m.to_string();
}

TEST(ControlServer, ARouteIsBoundOnlyByAMessageWithTheToken) {
  auto server = ControlServer::bind("127.0.0.1", 0, "the-token");
  ASSERT_TRUE(server.ok()) << server.status().message();
  auto worker = ControlClient::connect((*server)->endpoint(), "w0", "the-token");
  ASSERT_TRUE(worker.ok());
  (*worker)->send({{"type", "register"}});
  std::string from;
  Json m;
  ASSERT_TRUE((*server)->receive(&from, &m, 5000));
  EXPECT_EQ(from, "w0");
  EXPECT_FALSE(m.contains("token"));
  EXPECT_FALSE(m.contains("sender"));

  // A rogue with the worker's name as its identity, and without the token.
  zmq::context_t ctx(1);
  zmq::socket_t rogue(ctx, zmq::socket_type::dealer);
  rogue.set(zmq::sockopt::routing_id, "w0");
  rogue.set(zmq::sockopt::linger, 0);
  rogue.connect((*server)->endpoint());
  const std::string claim = R"({"type": "heartbeat", "step": 3, "sender": "w0", "token": "a-guess"})";
  rogue.send(zmq::buffer(claim), zmq::send_flags::none);
  EXPECT_FALSE((*server)->receive(&from, &m, 500));
  EXPECT_EQ((*server)->refused(), 1);

  // What the coordinator sends to "w0" goes to the worker, never the rogue.
  EXPECT_TRUE((*server)->send("w0", {{"type", "go"}}));
  Json got;
  ASSERT_TRUE((*worker)->receive(&got, 5000));
  EXPECT_EQ(got["type"], "go");
  EXPECT_EQ(receiveWithin(rogue, 300), "");
  // Nobody authenticated as "w5": nothing is sent at all.
  EXPECT_FALSE((*server)->send("w5", {{"type", "go"}}));
}

TEST(ControlServer, FramesPastTheBoundAreNeverRead) {
  auto server = ControlServer::bind("127.0.0.1", 0, "the-token");
  ASSERT_TRUE(server.ok());
  zmq::context_t ctx(1);
  zmq::socket_t big(ctx, zmq::socket_type::dealer);
  big.set(zmq::sockopt::linger, 0);
  big.connect((*server)->endpoint());
  const std::string frame(static_cast<size_t>(kMaxWorkerMessage) + 1, 'x');
  big.send(zmq::buffer(frame), zmq::send_flags::none);
  std::string from;
  Json m;
  EXPECT_FALSE((*server)->receive(&from, &m, 500));
  EXPECT_EQ((*server)->refused(), 0);  // dropped by ZeroMQ before any parsing
  // A legitimate worker still gets through.
  auto worker = ControlClient::connect((*server)->endpoint(), "w1", "the-token");
  (*worker)->send({{"type", "ready"}});
  ASSERT_TRUE((*server)->receive(&from, &m, 5000));
  EXPECT_EQ(from, "w1");
}

TEST(ControlServer, AWorkersStoreConnectionHasItsOwnNameAndNoOther) {
  auto server = ControlServer::bind("127.0.0.1", 0, "the-token");
  ASSERT_TRUE(server.ok());
  std::string from;
  Json m;
  auto store = ControlClient::connect((*server)->endpoint(), "w2.store", "the-token");
  (*store)->send({{"type", "store"}});
  ASSERT_TRUE((*server)->receive(&from, &m, 5000));
  EXPECT_EQ(from, "w2.store");
  for (const char* name : {"w2.stor", "x2.store", ".store", "w.store", "w2.store.store"}) {
    auto other = ControlClient::connect((*server)->endpoint(), name, "the-token");
    (*other)->send({{"type", "store"}});
    EXPECT_FALSE((*server)->receive(&from, &m, 300)) << name;
  }
  EXPECT_EQ((*server)->refused(), 5);
}

TEST(ControlClient, WakeEndsAWaitingReceiveAtOnce) {
  auto server = ControlServer::bind("127.0.0.1", 0, "the-token");
  ASSERT_TRUE(server.ok());
  auto worker = ControlClient::connect((*server)->endpoint(), "w0", "the-token");
  ASSERT_TRUE(worker.ok());
  const auto t0 = std::chrono::steady_clock::now();
  std::thread waker([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    (*worker)->wake();
  });
  Json m;
  EXPECT_FALSE((*worker)->receive(&m, 10000));
  waker.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  // A message still arrives after a wake-up.
  (*worker)->send({{"type", "register"}});
  std::string from;
  ASSERT_TRUE((*server)->receive(&from, &m, 5000));
  EXPECT_TRUE((*server)->send("w0", {{"type", "go"}}));
  ASSERT_TRUE((*worker)->receive(&m, 5000));
  EXPECT_EQ(m["type"], "go");
}

// A worker's control thread receives in a loop (runtime/worker/control.cc)
// while its compute thread sends directly (a checkpoint's files, 24 KB a
// message), both on one core: every send gets through at once, never
// starved by the loop taking the socket again before the sender runs. (The
// final checkpoint of a GPT's stage, 1,600 messages, took a worker 40 to
// 90 s so in bench/tensor_parallel_bench.sh, before sends woke the receive
// and it stood aside for them.)
TEST(ControlClient, SendsFromAnotherThreadAreNotStarvedByAReceiveLoop) {
  auto server = ControlServer::bind("127.0.0.1", 0, "the-token");
  ASSERT_TRUE(server.ok());
  auto worker = ControlClient::connect((*server)->endpoint(), "w0", "the-token");
  ASSERT_TRUE(worker.ok());
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(0, &one);
  cpu_set_t before;
  ASSERT_EQ(pthread_getaffinity_np(pthread_self(), sizeof(before), &before), 0);
  ASSERT_EQ(pthread_setaffinity_np(pthread_self(), sizeof(one), &one), 0);
  std::atomic<bool> stop{false};
  std::thread loop([&] {  // inherits the core
    Json m;
    while (!stop) (void)(*worker)->receive(&m, 50);
  });
  constexpr int kSends = 200;
  const auto t0 = std::chrono::steady_clock::now();
  const std::string chunk(48 * 1024, 'a');  // 24 KB in hex, as sendFile ships it
  for (int i = 0; i < kSends; ++i) (*worker)->send({{"type", "file_chunk"}, {"offset", i}, {"data", chunk}});
  const auto took = std::chrono::steady_clock::now() - t0;
  stop = true;
  loop.join();
  pthread_setaffinity_np(pthread_self(), sizeof(before), &before);
  // On the 2-core machine: about 2 s while the loop took the lock back
  // first (10 ms a message), about 60 ms since.
  EXPECT_LT(took, std::chrono::seconds(1)) << std::chrono::duration<double>(took).count() << " s";
  std::string from;
  Json m;
  for (int i = 0; i < kSends; ++i) {
    ASSERT_TRUE((*server)->receive(&from, &m, 5000)) << i;
    EXPECT_EQ(m["offset"], i);
  }
}

TEST(CheckWorkerMessage, NamesTheFieldAndWhatWasExpected) {
  EXPECT_TRUE(checkWorkerMessage({{"type", "step"}, {"step", 3}, {"loss", 0.5}, {"future_field", "x"}}).ok());
  struct Case {
    Json message;
    std::string expect;
  };
  for (const Case& c : std::vector<Case>{
           {{{"type", "step"}, {"step", "x"}}, "field \"step\" of a \"step\" message is a string \"x\", expected a whole number"},
           {{{"type", "step"}, {"step", -1}}, "field \"step\""},
           {{{"type", "step"}, {"step", 1}, {"loss", "nan"}}, "field \"loss\""},
           {{{"type", "halted"}, {"can_save", {1, "two"}}}, "field \"can_save\""},
           {{{"type", "done"}, {"stopped", 1}}, "field \"stopped\""},
           {{{"type", 7}}, "field \"type\""},
           {Json::array(), "not a JSON object"},
       }) {
    const Status s = checkWorkerMessage(c.message);
    ASSERT_FALSE(s.ok()) << c.message.dump();
    EXPECT_NE(s.message().find(c.expect), std::string::npos) << s.message();
  }
}

}  // namespace
}  // namespace hydrozoa::wire
