// The shared-memory allreduce (runtime/comm/shared_memory.h): one thread per
// rank, each with its own open segment, as processes on one host have.
#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <thread>

#include "runtime/comm/pipe.h"
#include "runtime/comm/shared_memory.h"
#include "runtime/comm/transport.h"
#include "runtime/grad_sync.h"

namespace hydrozoa::runtime {
namespace {

c10::intrusive_ptr<c10d::TCPStore> serveStore() {
  c10d::TCPStoreOptions so;
  so.port = 0;
  so.isServer = true;
  so.waitWorkers = false;
  return c10::make_intrusive<c10d::TCPStore>("127.0.0.1", so);
}

c10::intrusive_ptr<c10d::Store> joinStore(int port) {
  c10d::TCPStoreOptions so;
  so.port = static_cast<std::uint16_t>(port);
  so.isServer = false;
  so.timeout = std::chrono::seconds(20);
  return c10::make_intrusive<c10d::TCPStore>("127.0.0.1", so);
}

// Runs `body(rank, group)` on `size` threads, each joining the group through
// a store client of its own. Returns each rank's error ("" when none).
std::vector<std::string> runGroup(int size, SharedMemoryOptions options,
                                  const std::function<void(int, SharedMemoryGroup*, const std::string&)>& body) {
  auto server = serveStore();
  std::vector<std::thread> threads;
  std::vector<std::string> errors(size);
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      try {
        auto store = joinStore(server->getPort());
        SharedMemoryOptions o = options;
        o.rank = r;
        o.size = size;
        std::string why;
        auto group = SharedMemoryGroup::connect(*store, o, &why);
        body(r, group.get(), why);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

// The group segments left in /dev/shm: those this process still has open,
// and those no process holds (unheldSegments). A segment is in /dev/shm only
// while its group connects, locked by its creator throughout, so the groups
// of tests that CTest runs beside this one are not counted; a segment seen
// unheld is counted only if it is still there, and still unheld, a moment
// later.
int hydrozoaSegments() {
  const std::string shm = "/dev/shm/";
  std::set<std::string> left;
  for (const auto& fd : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code error;
    const std::string target = std::filesystem::read_symlink(fd.path(), error).string();
    if (!error && target.rfind(shm + "hydrozoa-", 0) == 0 && target.find(' ') == std::string::npos) {
      left.insert(target.substr(shm.size()));
    }
  }
  const std::vector<std::string> first = unheldSegments();
  if (!first.empty()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    const std::vector<std::string> second = unheldSegments();
    for (const std::string& n : first) {
      if (std::find(second.begin(), second.end(), n) != second.end()) left.insert(n);
    }
  }
  return static_cast<int>(left.size());
}

// Rank r's tensors: sizes that do not divide by the group (down to fewer
// elements than ranks), floats and doubles, values that round when summed.
std::vector<torch::Tensor> inputs(int r) {
  auto wave = [&](std::int64_t n, torch::Dtype type) { return torch::sin(torch::arange(n, type) * (r + 1.37)); };
  return {wave(1001, torch::kFloat), wave(2, torch::kFloat), wave(64 * 33, torch::kDouble).view({64, 33}),
          wave(1, torch::kFloat)};
}

TEST(SharedMemoryAllreduce, SumsInPlaceWithTheSameBitsOnEveryRank) {
  for (bool spin : {true, false}) {
    SharedMemoryOptions o;
    o.capacity = 4 * kMB;
    o.spin = spin;
    std::vector<std::vector<torch::Tensor>> results(3);
    const auto errors = runGroup(3, o, [&](int rank, SharedMemoryGroup* g, const std::string& why) {
      ASSERT_NE(g, nullptr) << why;
      // Several in flight at once.
      std::vector<torch::Tensor> xs = inputs(rank);
      std::vector<c10::intrusive_ptr<c10d::Work>> works;
      for (auto& x : xs) works.push_back(g->allreduce(x));
      for (auto& w : works) w->wait();
      results[rank] = xs;
    });
    for (const auto& e : errors) ASSERT_EQ(e, "") << "spin " << spin;
    for (size_t i = 0; i < results[0].size(); ++i) {
      torch::Tensor expect = torch::zeros_like(results[0][i]);
      for (int r = 0; r < 3; ++r) {
        expect += inputs(r)[i];
      }
      EXPECT_TRUE(torch::allclose(results[0][i], expect)) << i;
      for (int r = 1; r < 3; ++r) EXPECT_TRUE(torch::equal(results[r][i], results[0][i])) << "rank " << r << " " << i;
    }
  }
  EXPECT_EQ(hydrozoaSegments(), 0) << "a segment was left in /dev/shm";
}

TEST(SharedMemoryAllreduce, ReusesItsSlotsAndSplitsWhatDoesNotFit) {
  SharedMemoryOptions o;
  o.capacity = Bytes{1} << 20;  // 262,144 floats a slot
  const auto errors = runGroup(2, o, [&](int rank, SharedMemoryGroup* g, const std::string& why) {
    ASSERT_NE(g, nullptr) << why;
    EXPECT_EQ(g->capacity(), Bytes{1} << 20);
    for (int step = 0; step < 5; ++step) {
      // 3 x 100,000 floats in flight: the third wraps to the slots' start.
      std::vector<torch::Tensor> xs;
      std::vector<c10::intrusive_ptr<c10d::Work>> works;
      for (int i = 0; i < 3; ++i) {
        xs.push_back(torch::full({100000}, static_cast<float>(rank + i + step)));
        works.push_back(g->allreduce(xs.back()));
      }
      // Larger than a slot: goes through in pieces.
      torch::Tensor big = torch::arange(700000, torch::kFloat) * (rank + 1);
      g->allreduce(big)->wait();
      for (auto& w : works) w->wait();
      for (int i = 0; i < 3; ++i) EXPECT_TRUE(torch::equal(xs[i], torch::full({100000}, 1.0f + 2 * (i + step))));
      EXPECT_TRUE(torch::equal(big, torch::arange(700000, torch::kFloat) * 3));
    }
  });
  for (const auto& e : errors) EXPECT_EQ(e, "");
}

TEST(SharedMemoryAllreduce, PartsAreSummedEachInPlaceAsOneTensor) {
  SharedMemoryOptions o;
  o.capacity = Bytes{1} << 20;  // 262,144 floats a slot
  const auto errors = runGroup(3, o, [&](int rank, SharedMemoryGroup* g, const std::string& why) {
    ASSERT_NE(g, nullptr) << why;
    for (const std::int64_t big : {1000, 300000}) {  // fits a slot; does not, and goes in pieces
      // Parts whose ends do not fall on the ranks' shares (n / 3).
      std::vector<torch::Tensor> parts = {torch::full({7}, 1.0f * (rank + 1)), torch::full({big}, 10.0f * (rank + 1)),
                                          torch::full({2, 5}, 100.0f * (rank + 1)), torch::full({1}, -1.0f)};
      const void* before = parts[1].data_ptr();
      g->allreduce(parts)->wait();
      EXPECT_EQ(parts[1].data_ptr(), before);  // in place
      EXPECT_TRUE(torch::equal(parts[0], torch::full({7}, 6.0f))) << big;
      EXPECT_TRUE(torch::equal(parts[1], torch::full({big}, 60.0f))) << big;
      EXPECT_TRUE(torch::equal(parts[2], torch::full({2, 5}, 600.0f))) << big;
      EXPECT_TRUE(torch::equal(parts[3], torch::full({1}, -3.0f))) << big;
    }
  });
  for (const auto& e : errors) EXPECT_EQ(e, "");
}

TEST(SharedMemoryAllreduce, APeerThatGoesAwayIsAPeerLostErrorSoon) {
  SharedMemoryOptions o;
  o.capacity = kMB;
  o.timeout = std::chrono::seconds(60);
  std::chrono::steady_clock::duration waited{};
  const auto errors = runGroup(2, o, [&](int rank, SharedMemoryGroup* g, const std::string& why) {
    ASSERT_NE(g, nullptr) << why;
    torch::Tensor x = torch::ones({1000});
    g->allreduce(x)->wait();  // both there once
    if (rank == 1) return;    // then rank 1's group closes: its process is gone
    auto work = g->allreduce(x);
    const auto start = std::chrono::steady_clock::now();
    try {
      work->wait();
      ADD_FAILURE() << "the wait returned with its peer gone";
    } catch (const PeerLostError& e) {
      waited = std::chrono::steady_clock::now() - start;
      EXPECT_NE(std::string(e.what()).find("replica 1 of this stage is gone"), std::string::npos) << e.what();
      EXPECT_TRUE(isPeerLost(e));
    }
  });
  for (const auto& e : errors) EXPECT_EQ(e, "");
  EXPECT_LT(waited, std::chrono::seconds(5));
}

TEST(SharedMemoryAllreduce, APeerThatNeverComesTimesOut) {
  SharedMemoryOptions o;
  o.capacity = kMB;
  o.timeout = std::chrono::milliseconds(300);
  o.spin = false;
  std::atomic<bool> released{false};
  const auto errors = runGroup(2, o, [&](int rank, SharedMemoryGroup* g, const std::string& why) {
    ASSERT_NE(g, nullptr) << why;
    if (rank == 1) {  // alive, holding its lock, but never posting
      while (!released) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      return;
    }
    torch::Tensor x = torch::ones({10});
    try {
      g->allreduce(x)->wait();
      ADD_FAILURE() << "the wait returned without its peer";
    } catch (const PeerLostError& e) {
      EXPECT_NE(std::string(e.what()).find("timed out"), std::string::npos) << e.what();
    }
    released = true;
  });
  for (const auto& e : errors) EXPECT_EQ(e, "");
}

TEST(SharedMemoryAllreduce, EveryRankGetsTheSameNoWhenTheSegmentCannotBeMade) {
  SharedMemoryOptions o;
  o.capacity = Bytes{1} << 50;  // a petabyte per rank: /dev/shm cannot hold it
  std::vector<std::string> whys(2);
  const auto errors = runGroup(2, o, [&](int rank, SharedMemoryGroup* g, const std::string& why) {
    EXPECT_EQ(g, nullptr);
    whys[rank] = why;
  });
  for (const auto& e : errors) EXPECT_EQ(e, "");
  EXPECT_FALSE(whys[0].empty());
  EXPECT_EQ(whys[0], whys[1]);
  EXPECT_EQ(hydrozoaSegments(), 0) << "a segment was left in /dev/shm";
}

TEST(SharedMemoryAllreduce, APeerThatNeverJoinsLeavesNothingInDevShm) {
  auto server = serveStore();
  c10d::TCPStoreOptions so;
  so.port = static_cast<std::uint16_t>(server->getPort());
  so.isServer = false;
  so.timeout = std::chrono::seconds(1);
  auto store = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", so);
  SharedMemoryOptions o;
  o.rank = 0;
  o.size = 2;  // rank 1 never comes: the store's wait for it times out
  o.capacity = kMB;
  std::string why;
  EXPECT_THROW(SharedMemoryGroup::connect(*store, o, &why), std::exception);
  EXPECT_EQ(hydrozoaSegments(), 0) << "a segment was left in /dev/shm";
}

TEST(SharedMemoryAllreduce, CleanupRemovesOnlyOldSegmentsThatNoProcessHolds) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("hzshm." + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto make = [&](const std::string& name, bool old) {
    const std::string path = (dir / name).string();
    std::ofstream(path) << "x";
    if (old) {
      const timespec past[2] = {{::time(nullptr) - 120, 0}, {::time(nullptr) - 120, 0}};
      ::utimensat(AT_FDCWD, path.c_str(), past, 0);
    }
    return path;
  };
  const std::string hex(32, 'a');
  const std::string abandoned = make("hydrozoa-" + hex, true);
  const std::string young = make("hydrozoa-" + std::string(32, 'b'), false);
  const std::string held = make("hydrozoa-" + std::string(32, 'c'), true);
  const std::string other = make("not-ours-" + hex, true);
  const int fd = ::open(held.c_str(), O_RDWR);
  struct flock l {};
  l.l_type = F_WRLCK;
  l.l_whence = SEEK_SET;
  l.l_start = 3;  // a rank's byte
  l.l_len = 1;
  ASSERT_EQ(::fcntl(fd, F_OFD_SETLK, &l), 0);
  EXPECT_EQ(removeAbandonedSegments(dir.string()), std::vector<std::string>{abandoned});
  EXPECT_FALSE(std::filesystem::exists(abandoned));
  for (const auto& kept : {young, held, other}) EXPECT_TRUE(std::filesystem::exists(kept)) << kept;
  ::close(fd);
  std::filesystem::remove_all(dir);
}

TEST(SharedMemoryAllreduce, GradientSyncThroughTheTransportEqualsGloo) {
  // The same gradients summed by replicas through shared memory and through
  // Gloo: equal, bucket by bucket (two ranks: a sum of two is exact either way).
  auto run = [](Bytes sharedBytes) {
    auto server = serveStore();
    std::vector<std::vector<torch::Tensor>> grads(2);
    std::vector<std::thread> threads;
    std::vector<std::string> errors(2);
    for (int r = 0; r < 2; ++r) {
      threads.emplace_back([&, r] {
        TransportOptions o;
        o.store_port = server->getPort();
        o.rank = r;
        o.world_size = 2;
        o.replica = r;
        o.replicas = 2;
        o.shared_memory_bytes = sharedBytes;
        o.timeout = std::chrono::seconds(20);
        auto t = connectTransport(o);
        if (!t.ok()) {
          errors[r] = t.status().message();
          return;
        }
        TraceRecorder trace(false);
        std::vector<std::vector<torch::Tensor>> layers;
        for (int l = 0; l < 4; ++l) {
          torch::Tensor w = torch::zeros({300 * (l + 1)}, torch::requires_grad());
          w.mutable_grad() = torch::sin(torch::arange(300 * (l + 1), torch::kFloat) * (r + l + 0.5));
          layers.push_back({w});
        }
        // A layer whose parameter got no gradient this step (unused): its
        // bucket goes through the concatenated copy, with zeros for it.
        torch::Tensor unused = torch::zeros({50}, torch::requires_grad());
        layers[1].push_back(unused);
        GradientSync sync(t->get(), layers, 1200 * 4, 4000 * 4, trace);
        for (int step = 0; step < 3; ++step) {
          for (int l = 3; l >= 0; --l) sync.layerReady(l);
          sync.finish();
        }
        for (auto& l : layers) grads[r].push_back(l[0].grad().clone());
        grads[r].push_back(unused.grad().clone());
      });
    }
    for (auto& t : threads) t.join();
    for (const auto& e : errors) EXPECT_EQ(e, "");
    return grads;
  };
  const auto shared = run(kMB);
  const auto gloo = run(0);
  ASSERT_EQ(shared[0].size(), 5u);
  ASSERT_EQ(gloo[0].size(), 5u);
  for (int r = 0; r < 2; ++r) {
    for (size_t l = 0; l < 5; ++l) EXPECT_TRUE(torch::equal(shared[r][l], gloo[r][l])) << r << " " << l;
  }
  EXPECT_TRUE(torch::equal(shared[0][4], torch::zeros({50})));
}

}  // namespace
}  // namespace hydrozoa::runtime
