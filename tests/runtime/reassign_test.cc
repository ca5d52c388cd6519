// FlexRR's rapid reassignment (runtime/comm/reassign.h) over the
// coordinator's real store: replicas as threads, each computing its
// microbatches with a sleep for a pass, one of them much slower; the
// allreduce a barrier. Every microbatch of every step is computed exactly
// once, the slow replica gets help, and nothing of a step stays in the store.
#include "runtime/comm/reassign.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/store_server.h"

namespace hydrozoa::runtime {
namespace {

using namespace std::chrono_literals;

TEST(Reassign, HelperGroupsFormARing) {
  EXPECT_EQ(helpersOf(1, 4, 4), (std::vector<int>{2, 3, 0}));
  EXPECT_EQ(helpeesOf(1, 4, 4), (std::vector<int>{0, 3, 2}));
  EXPECT_EQ(helpersOf(3, 8, 2), (std::vector<int>{4, 5}));
  EXPECT_EQ(helpeesOf(0, 8, 2), (std::vector<int>{7, 6}));
  EXPECT_TRUE(helpersOf(0, 1, 4).empty());
  // i helps j exactly when j is i's helpee.
  for (int r = 0; r < 6; ++r) {
    for (int h : helpersOf(r, 6, 3)) {
      const auto back = helpeesOf(h, 6, 3);
      EXPECT_NE(std::find(back.begin(), back.end(), r), back.end()) << r << " " << h;
    }
  }
}

// The replicas' allreduce: every thread waits for all.
class Barrier {
 public:
  explicit Barrier(int n) : n_(n) {}
  void arrive() {
    std::unique_lock<std::mutex> lock(mu_);
    const int gen = gen_;
    if (++count_ == n_) {
      count_ = 0;
      ++gen_;
      cv_.notify_all();
      return;
    }
    cv_.wait(lock, [&] { return gen_ != gen; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int n_, count_ = 0, gen_ = 0;
};

struct Outcome {
  std::vector<std::vector<std::vector<int>>> computed;  // [step][replica][microbatch]: times computed
  std::vector<Reassigner::Counts> counts;               // per replica, summed over the steps
};

// `passMs[r]`: how long replica r takes for a microbatch.
Outcome runReplicas(StoreServer& server, const std::vector<int>& passMs, int steps, int microbatches,
                    ReassignOptions o = {}) {
  const int R = static_cast<int>(passMs.size());
  Outcome out;
  out.computed.assign(static_cast<size_t>(steps),
                      std::vector<std::vector<int>>(static_cast<size_t>(R), std::vector<int>(microbatches, 0)));
  out.counts.assign(static_cast<size_t>(R), Reassigner::Counts());
  std::mutex mu;
  Barrier allreduce(R);
  std::vector<std::thread> threads;
  for (int r = 0; r < R; ++r) {
    threads.emplace_back([&, r] {
      Reassigner re(server.client(fmt::format("w{}.flexrr", r)), server.client(fmt::format("w{}.inbox", r), 1s),
                    "gen0/flexrr/", r, R, o);
      auto compute = [&](int step, int owner, int k) {
        std::this_thread::sleep_for(std::chrono::milliseconds(passMs[static_cast<size_t>(r)]));
        std::lock_guard<std::mutex> lock(mu);
        ++out.computed[static_cast<size_t>(step)][static_cast<size_t>(owner)][static_cast<size_t>(k)];
      };
      for (int step = 0; step < steps; ++step) {
        re.beginStep(step, std::vector<int>(static_cast<size_t>(R), microbatches));
        for (int k = 0; k < microbatches; ++k) {
          if (re.claimOwn(k)) compute(step, r, k);
          re.ownDone(k);
        }
        re.finishedOwn();
        while (auto a = re.nextAssignment()) {
          int n = 0;
          for (int k = a->last - 1; k >= a->first && re.claimHelp(*a, k); --k, ++n) compute(step, a->replica, k);
          re.completed(*a, n);
        }
        allreduce.arrive();
        const Reassigner::Counts c = re.endStep();
        std::lock_guard<std::mutex> lock(mu);
        out.counts[static_cast<size_t>(r)].took += c.took;
        out.counts[static_cast<size_t>(r)].gave += c.gave;
        out.counts[static_cast<size_t>(r)].offered += c.offered;
      }
      // As a generation's end: every send of the last step is in before any
      // reassigner erases its last steps' keys.
      re.flush();
      allreduce.arrive();
    });
  }
  for (std::thread& t : threads) t.join();
  return out;
}

TEST(Reassign, EveryMicrobatchOnceAndTheSlowReplicaGetsHelp) {
  StoreServer server;
  const int steps = 12, M = 8;
  const Outcome out = runReplicas(server, {2, 12, 2, 2}, steps, M);
  for (int s = 0; s < steps; ++s) {
    for (int r = 0; r < 4; ++r) {
      for (int k = 0; k < M; ++k) EXPECT_EQ(out.computed[s][r][k], 1) << "step " << s << " replica " << r << " mb " << k;
    }
  }
  int took = 0, gave = 0;
  for (const auto& c : out.counts) {
    took += c.took;
    gave += c.gave;
  }
  EXPECT_EQ(took, gave);  // what one computed for another is what that one skipped
  // 6× slower: its helpers finish their 8 while it has done 1 or 2.
  EXPECT_GT(out.counts[1].gave, steps * M / 4) << "replica 1 was helped with too little";
  EXPECT_LE(out.counts[1].gave, out.counts[1].offered);
  // Each replica erased its step's keys (NOTE [A step's FlexRR keys]).
  EXPECT_EQ(server.client("w9.store")->getNumKeys(), 0);
}

TEST(Reassign, NoStragglerNoHelpAndAThresholdOfOneNeverOffers) {
  StoreServer server;
  ReassignOptions never;
  never.threshold = 1.0;
  const Outcome out = runReplicas(server, {1, 10, 1}, 4, 6, never);
  for (const auto& c : out.counts) {
    EXPECT_EQ(c.offered, 0);
    EXPECT_EQ(c.took, 0);
  }
  EXPECT_EQ(server.client("w9.store")->getNumKeys(), 0);
}

}  // namespace
}  // namespace hydrozoa::runtime
