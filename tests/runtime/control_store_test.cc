// The c10d Store served by the coordinator over the control plane
// (runtime/comm/control_store.h, wire/store.h), as c10d uses it: the Store
// contract from several clients at once, waits across clients, timeouts, a
// wrong token, and a real ProcessGroupGloo that meets through it.
#include "runtime/comm/control_store.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include <atomic>
#include <thread>

#include "runtime/store_server.h"
#include "wire/control.h"

namespace hydrozoa::runtime {
namespace {

using namespace std::chrono_literals;

std::vector<uint8_t> bytes(const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); }

TEST(ControlStore, TheStoreContract) {
  StoreServer server;
  auto a = server.client("w0.store"), b = server.client("w1.store");
  a->set("k", bytes("v1"));
  EXPECT_EQ(b->get("k"), bytes("v1"));
  EXPECT_EQ(a->add("n", 3), 3);
  EXPECT_EQ(b->add("n", 4), 7);
  EXPECT_EQ(a->compareSet("k", bytes("v1"), bytes("v2")), bytes("v2"));
  EXPECT_EQ(b->compareSet("k", bytes("v1"), bytes("v3")), bytes("v2"));
  EXPECT_TRUE(a->check({"k", "n"}));
  EXPECT_FALSE(a->check({"k", "missing"}));
  EXPECT_EQ(b->getNumKeys(), 2);
  EXPECT_TRUE(a->deleteKey("k"));
  EXPECT_FALSE(a->deleteKey("k"));
  EXPECT_EQ(b->getNumKeys(), 1);
  a->set("empty", {});
  EXPECT_TRUE(b->get("empty").empty());
}

TEST(ControlStore, ConcurrentWaitersAndAdders) {
  StoreServer server;
  // Four clients wait for a key a fifth sets later; eight add at once.
  std::vector<std::thread> threads;
  std::atomic<int> got{0};
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      try {
        auto c = server.client(fmt::format("w{}.store", 10 + i));
        if (c->get("late") == bytes("here")) ++got;
        c->wait({"late", "counter"});
      } catch (const std::exception& e) {
        ADD_FAILURE() << e.what();
      }
    });
  }
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      try {
        auto c = server.client(fmt::format("w{}.store", 20 + i));
        for (int k = 0; k < 25; ++k) c->add("counter", 1);
      } catch (const std::exception& e) {
        ADD_FAILURE() << e.what();
      }
    });
  }
  std::this_thread::sleep_for(100ms);
  server.client("w30.store")->set("late", bytes("here"));
  for (auto& t : threads) t.join();
  EXPECT_EQ(got, 4);
  EXPECT_EQ(server.client("w31.store")->add("counter", 0), 200);
}

TEST(ControlStore, AWaitThatTimesOutThrowsNamingTheKeys) {
  StoreServer server;
  auto c = server.client("w0.store", 200ms);
  const auto t0 = std::chrono::steady_clock::now();
  try {
    c->wait({"never"}, 150ms);
    FAIL() << "wait returned";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("store: timed out waiting for never"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s);
  EXPECT_THROW(c->get("never"), c10::Error);  // the store's own timeout: 200 ms
}

TEST(ControlStore, AWrongTokenGetsNothingAndIsCounted) {
  StoreServer server;
  auto intruder = server.client("w0.store", 300ms, "0123456789abcdef0123456789abcdef");
  try {
    intruder->set("k", bytes("v"));
    FAIL() << "a set with a wrong token returned";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("no reply to \"set\""), std::string::npos) << e.what();
  }
  // Its key is not the job's: the handshake is refused (NOTE [Connections
  // authenticate first]) and no message of it is read.
  EXPECT_EQ(server.refused(), 0);
  EXPECT_GE(server.refusedConnections(), 1);
  EXPECT_FALSE(server.client("w1.store")->check({"k"}));  // nothing was stored
}

TEST(ControlStore, GlooProcessGroupsMeetThroughIt) {
  StoreServer server;
  constexpr int kRanks = 2;
  std::vector<float> sums(kRanks, 0);
  std::vector<std::thread> ranks;
  for (int r = 0; r < kRanks; ++r) {
    ranks.emplace_back([&, r] {
      try {
        auto store = c10::make_intrusive<c10d::PrefixStore>("gen1", server.client(fmt::format("w{}.store", r)));
        auto options = c10d::ProcessGroupGloo::Options::create(std::chrono::seconds(20));
        options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
        c10d::ProcessGroupGloo group(store, r, kRanks, options);
        std::vector<at::Tensor> t = {torch::full({4}, static_cast<float>(r + 1))};
        group.allreduce(t)->wait();
        sums[r] = t[0][0].item<float>();
      } catch (const std::exception& e) {
        ADD_FAILURE() << e.what();
      }
    });
  }
  for (auto& t : ranks) t.join();
  EXPECT_EQ(sums, std::vector<float>(kRanks, 3.0f));
}

}  // namespace
}  // namespace hydrozoa::runtime
