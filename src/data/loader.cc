#include "data/loader.h"

#include <chrono>
#include <stdexcept>

#include "core/cpus.h"

namespace hydrozoa::data {

PrefetchLoader::PrefetchLoader(std::shared_ptr<const Dataset> dataset, EpochSampler sampler, int replica, int depth)
    : dataset_(std::move(dataset)), sampler_(std::move(sampler)), replica_(replica),
      depth_(static_cast<size_t>(std::max(1, depth))), cpus_(usableCpus()) {}

PrefetchLoader::~PrefetchLoader() { stopThread(); }

void PrefetchLoader::stopThread() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    ++generation_;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void PrefetchLoader::start(std::int64_t epoch, std::int64_t firstStep) {
  stopThread();
  std::int64_t total = 0;
  for (std::int64_t step = firstStep; step < sampler_.stepsPerEpoch(); ++step) {
    total += sampler_.microbatches(step, replica_);
  }
  std::uint64_t generation;
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.clear();
    error_ = nullptr;
    stop_ = false;
    remaining_ = total;
    generation = ++generation_;
  }
  thread_ = std::thread([this, generation, epoch, firstStep] {
    runThreadOn(cpus_);  // best effort: a refused affinity leaves the creator's
    produce(generation, epoch, firstStep);
  });
}

void PrefetchLoader::produce(std::uint64_t generation, std::int64_t epoch, std::int64_t firstStep) {
  try {
    const std::vector<std::int64_t> permutation = sampler_.permutation(epoch);
    for (std::int64_t step = firstStep; step < sampler_.stepsPerEpoch(); ++step) {
      for (int mb = 0; mb < sampler_.microbatches(step, replica_); ++mb) {
        Batch b = dataset_->get(sampler_.indicesIn(permutation, step, replica_, mb));
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || generation_ != generation || queue_.size() < depth_; });
        if (stop_ || generation_ != generation) return;
        queue_.push_back(std::move(b));
        cv_.notify_all();
      }
    }
  } catch (...) {
    std::lock_guard<std::mutex> lock(mu_);
    if (generation_ == generation) error_ = std::current_exception();
    cv_.notify_all();
  }
}

Batch PrefetchLoader::next() {
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  if (remaining_ <= 0 && queue_.empty()) throw std::logic_error("PrefetchLoader::next() past the end of the epoch");
  cv_.wait(lock, [&] { return !queue_.empty() || error_; });
  lastWait_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (queue_.empty()) std::rethrow_exception(error_);
  Batch b = std::move(queue_.front());
  queue_.pop_front();
  --remaining_;
  cv_.notify_all();
  return b;
}

}  // namespace hydrozoa::data
