// The data plane in one process: a TCPStore and one thread per rank, each
// joining through connectTransport() as a worker does.
#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <atomic>
#include <thread>

#include "runtime/comm/pipe.h"
#include "runtime/grad_sync.h"

namespace hydrozoa::runtime {
namespace {

// Runs `body(rank, transport)` on `world` threads, rank r as stage r % stages
// of replica r / stages.
void runRanks(int world, int stages, const std::function<void(int, Transport&)>& body) {
  c10d::TCPStoreOptions so;
  so.port = 0;
  so.isServer = true;
  so.waitWorkers = false;
  auto server = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", so);
  std::vector<std::thread> threads;
  std::vector<std::string> errors(world);
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      TransportOptions o;
      o.store_port = server->getPort();
      o.rank = r;
      o.world_size = world;
      o.stage = r % stages;
      o.stages = stages;
      o.replica = r / stages;
      o.replicas = world / stages;
      o.timeout = std::chrono::seconds(20);
      auto t = connectTransport(o);
      if (!t.ok()) {
        errors[r] = t.status().message();
        return;
      }
      try {
        body(r, **t);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < world; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

// NOTE [Posting transfers on the channel's thread]: the same behaviour
// whoever posts.
class Pipe : public ::testing::TestWithParam<Posting> {};

TEST_P(Pipe, TensorsArriveInOrderAndCanBeTakenInAnyOrder) {
  runRanks(2, 2, [posting = GetParam()](int rank, Transport& t) {
    TraceRecorder trace;
    if (rank == 0) {
      Outbound out(t, 1, trace, "activation", posting);
      for (int i = 0; i < 5; ++i) out.send(i, torch::full({3, 4}, static_cast<float>(i)), "mb");
      out.flush();
    } else {
      Inbound in(t, 0, trace, "activation", posting);
      for (int i = 0; i < 5; ++i) in.expect(i, i, torch::empty({3, 4}), "mb");
      for (int i : {3, 0, 4, 1, 2}) {
        const torch::Tensor x = in.take(i);
        EXPECT_TRUE(torch::equal(x, torch::full({3, 4}, static_cast<float>(i)))) << i;
      }
      EXPECT_EQ(trace.pending(), 5u);  // a "recv" span each
    }
  });
}

TEST_P(Pipe, BothDirectionsAtOnce) {
  runRanks(2, 2, [posting = GetParam()](int rank, Transport& t) {
    TraceRecorder trace(false);
    const int peer = 1 - rank;
    Outbound out(t, peer, trace, "x", posting);
    Inbound in(t, peer, trace, "x", posting);
    for (int i = 0; i < 20; ++i) in.expect(i, 100 + i, torch::empty({1000}), "m");
    for (int i = 0; i < 20; ++i) out.send(100 + i, torch::full({1000}, static_cast<float>(rank * 100 + i)), "m");
    for (int i = 0; i < 20; ++i) EXPECT_EQ(in.take(i)[0].item<float>(), static_cast<float>(peer * 100 + i));
    out.flush();
  });
}

TEST_P(Pipe, APeerThatGoesAwayIsAnErrorNotAHang) {
  std::string caught;
  bool lost = false;
  // Rank 0 leaves only once both have joined: connectTransport() returning on
  // one rank does not mean its peer's connections are all made, and a peer
  // gone during the join is a failed join, not this test's lost peer.
  std::atomic<int> joined{0};
  runRanks(2, 2, [&, posting = GetParam()](int rank, Transport& t) {
    TraceRecorder trace(false);
    ++joined;
    while (joined.load() < 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (rank == 1) {
      // The peer may be gone before the receive is posted (expect() posts it
      // at once when the caller posts) or while it waits (take()): either way
      // an error that says the peer was lost.
      try {
        Inbound in(t, 0, trace, "activation", posting);
        in.expect(0, 0, torch::empty({4}), "mb");
        (void)in.take(0);
      } catch (const std::exception& e) {
        caught = e.what();
        lost = isPeerLost(e);
      }
    }
    // rank 0 returns at once: its transport (and connections) close.
  });
  EXPECT_FALSE(caught.empty());
  EXPECT_TRUE(lost) << caught;
}

INSTANTIATE_TEST_SUITE_P(Postings, Pipe, ::testing::Values(Posting::kCaller, Posting::kChannel),
                         [](const auto& info) { return info.param == Posting::kCaller ? "Caller" : "Channel"; });

TEST(GradientSync, SumsEachStagesGradientsOverItsReplicas) {
  // 2 replicas x 1 stage; three layers, buckets small enough for one layer each.
  runRanks(2, 1, [](int rank, Transport& t) {
    TraceRecorder trace;
    std::vector<std::vector<torch::Tensor>> layers;
    for (int l = 0; l < 3; ++l) {
      torch::Tensor w = torch::zeros({64}, torch::requires_grad());
      w.mutable_grad() = torch::full({64}, static_cast<float>(10 * l + rank + 1));
      layers.push_back({w});
    }
    layers.push_back({});  // a layer without parameters
    GradientSync sync(&t, layers, /*firstBucketBytes=*/64 * 4, /*bucketBytes=*/64 * 4, trace);
    EXPECT_EQ(sync.numBuckets(), 3);
    // A small first bucket (the last layer alone) and large ones after it.
    EXPECT_EQ(GradientSync(&t, layers, 64 * 4, 1 << 20, trace).numBuckets(), 2);
    {
      // A first layer smaller than the rest of its bucket goes alone.
      auto smallFirst = layers;
      smallFirst[0] = {torch::zeros({16}, torch::requires_grad())};
      EXPECT_EQ(GradientSync(&t, smallFirst, 64 * 4, 1 << 20, trace).numBuckets(), 3);
    }
    for (int l = 3; l >= 0; --l) sync.layerReady(l);
    sync.finish();
    for (int l = 0; l < 3; ++l) {
      EXPECT_TRUE(torch::allclose(layers[l][0].grad(), torch::full({64}, static_cast<float>(2 * 10 * l + 3)))) << l;
    }
    // Again, with one layer never reported: finish() starts it.
    for (int l = 0; l < 3; ++l) layers[l][0].mutable_grad().fill_(1);
    sync.layerReady(2);
    sync.finish();
    EXPECT_TRUE(torch::allclose(layers[0][0].grad(), torch::full({64}, 2.0f)));
  });
}

// NOTE [Loss scaling]: every worker learns whether any voted yes, over
// the whole job (2 stages x 2 replicas), round after round.
TEST(Transport, AnyWorkerTellsEveryWorkerTheSame) {
  runRanks(4, 2, [](int rank, Transport& t) {
    for (int round = 0; round < 6; ++round) {
      const bool yes = round < 4 && rank == round;  // each rank once, then nobody
      EXPECT_EQ(t.anyWorker(yes), round < 4) << "rank " << rank << ", round " << round;
    }
  });
}

TEST(GradientSync, OneReplicaIsANoOp) {
  TraceRecorder trace;
  torch::Tensor w = torch::zeros({4}, torch::requires_grad());
  w.mutable_grad() = torch::ones({4});
  GradientSync sync(nullptr, {{w}}, 1024, 1024, trace);
  EXPECT_FALSE(sync.active());
  sync.layerReady(0);
  sync.finish();
  EXPECT_TRUE(torch::equal(w.grad(), torch::ones({4})));
}

}  // namespace
}  // namespace hydrozoa::runtime
