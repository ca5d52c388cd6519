// Prefetching loader: a background thread gathers the next microbatches of
// one replica into a bounded queue while the worker computes.
//
//   PrefetchLoader loader(dataset, sampler, replica, /*depth=*/4);
//   loader.start(epoch, firstStep);
//   for each step, for mb in 0..sampler.microbatches(step, replica)-1:
//     Batch b = loader.next();      // blocks until ready; in (step, mb) order
//
// start() may be called again (a new epoch, or evaluation over another
// dataset's sampler); it discards what was prefetched. The destructor stops
// the thread. Errors in the background thread are rethrown by next().
// The thread runs on the cores that the constructing thread could run on
// when it built the loader, not on those of whoever calls start(): a worker
// pins its compute thread after building its loaders, and its loader must
// not take that core from it (NOTE [Cores for compute threads]).
//
// Thread-safety: next() and start() from one thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "data/dataset.h"
#include "data/sampler.h"

namespace hydrozoa::data {

class PrefetchLoader {
 public:
  PrefetchLoader(std::shared_ptr<const Dataset> dataset, EpochSampler sampler, int replica, int depth);
  ~PrefetchLoader();
  PrefetchLoader(const PrefetchLoader&) = delete;
  PrefetchLoader& operator=(const PrefetchLoader&) = delete;

  // Begins producing the microbatches of `epoch` from step `firstStep` to the
  // epoch's end.
  void start(std::int64_t epoch, std::int64_t firstStep);
  // The next microbatch in (step, microbatch) order. Blocks; rethrows a
  // producer error; throws std::logic_error past the end of the epoch.
  Batch next();
  // Seconds next() spent waiting for data since the last call (for traces).
  double lastWaitSeconds() const { return lastWait_; }

  const EpochSampler& sampler() const { return sampler_; }

 private:
  void produce(std::uint64_t generation, std::int64_t epoch, std::int64_t firstStep);
  void stopThread();

  std::shared_ptr<const Dataset> dataset_;
  EpochSampler sampler_;
  int replica_;
  size_t depth_;
  std::vector<int> cpus_;  // where the producer thread runs

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Batch> queue_;
  std::int64_t remaining_ = 0;  // microbatches not yet returned by next()
  std::exception_ptr error_;
  bool stop_ = false;
  std::uint64_t generation_ = 0;
  std::thread thread_;
  double lastWait_ = 0;
};

}  // namespace hydrozoa::data
