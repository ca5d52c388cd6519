#include "data/sampler.h"

#include <algorithm>
#include <numeric>
#include <random>

#include "core/status.h"

namespace hydrozoa::data {

EpochSampler::EpochSampler(const SamplerOptions& o) : o_(o) {
  HZ_CHECK(o.dataset_size >= 1 && o.global_batch >= 1 && o.replicas >= 1 && o.microbatch_size >= 1);
  HZ_CHECK_MSG(o.idle_replicas >= 0 && o.idle_replicas < o.replicas && (o.idle_replicas == 0 || !o.round_robin),
               "idle_replicas must leave a working replica, and none are idle round-robin");
  const std::int64_t working = o.replicas - o.idle_replicas;
  const std::int64_t perReplica = o.global_batch / working;
  HZ_CHECK_MSG(perReplica * working == o.global_batch && perReplica % o.microbatch_size == 0,
               "global_batch must be working replicas x microbatch_size x microbatches");
  microbatches_ = perReplica / o.microbatch_size;
}

std::int64_t EpochSampler::stepsPerEpoch() const {
  const std::int64_t full = o_.dataset_size / o_.global_batch;
  const bool partial = o_.dataset_size % o_.global_batch != 0;
  return std::max<std::int64_t>(1, full + (partial && !o_.drop_last ? 1 : 0));
}

std::int64_t EpochSampler::microbatchesPerStep() const { return microbatches_; }

std::int64_t EpochSampler::stepSamples(std::int64_t step) const {
  const std::int64_t begin = step * o_.global_batch;
  return std::max<std::int64_t>(0, std::min(o_.global_batch, o_.dataset_size - begin));
}

void EpochSampler::share(std::int64_t step, int replica, std::int64_t* begin, std::int64_t* size) const {
  // The first n mod A replicas that work get one sample more than the others.
  const std::int64_t n = stepSamples(step), A = o_.replicas - o_.idle_replicas;
  const std::int64_t base = n / A, extra = n % A;
  const std::int64_t r = replica - o_.idle_replicas;  // its share's index among the working replicas
  if (r < 0) {
    *size = 0;
    *begin = step * o_.global_batch;
    return;
  }
  *size = base + (r < extra ? 1 : 0);
  *begin = step * o_.global_batch + r * base + std::min<std::int64_t>(r, extra);
}

int EpochSampler::microbatches(std::int64_t step, int replica) const {
  if (o_.round_robin) {
    const std::int64_t K = (stepSamples(step) + o_.microbatch_size - 1) / o_.microbatch_size;
    return K > replica ? static_cast<int>((K - replica - 1) / o_.replicas + 1) : 0;
  }
  std::int64_t begin = 0, size = 0;
  share(step, replica, &begin, &size);
  return static_cast<int>((size + o_.microbatch_size - 1) / o_.microbatch_size);
}

int EpochSampler::stepMicrobatches(std::int64_t step) const {
  int n = 0;
  for (int r = 0; r < o_.replicas; ++r) n += microbatches(step, r);
  return n;
}

std::int64_t EpochSampler::microbatchSize(std::int64_t step, int replica, int mb) const {
  if (o_.round_robin) {
    const std::int64_t k = static_cast<std::int64_t>(mb) * o_.replicas + replica;
    return std::clamp<std::int64_t>(stepSamples(step) - k * o_.microbatch_size, 0, o_.microbatch_size);
  }
  std::int64_t begin = 0, size = 0;
  share(step, replica, &begin, &size);
  return std::clamp<std::int64_t>(size - mb * o_.microbatch_size, 0, o_.microbatch_size);
}

std::vector<std::int64_t> EpochSampler::permutation(std::int64_t epoch) const {
  std::vector<std::int64_t> p(o_.dataset_size);
  std::iota(p.begin(), p.end(), 0);
  if (!o_.shuffle) return p;
  // Fisher-Yates with a generator of our own: the same on every machine and
  // libstdc++ (std::shuffle's use of the generator is unspecified).
  std::mt19937_64 rng(o_.seed * 1000003ULL + static_cast<std::uint64_t>(epoch) * 7919ULL + 1);
  for (std::int64_t i = o_.dataset_size - 1; i > 0; --i) {
    const auto j = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(i + 1));
    std::swap(p[i], p[j]);
  }
  return p;
}

std::vector<std::int64_t> EpochSampler::indices(std::int64_t epoch, std::int64_t step, int replica, int mb) const {
  if (microbatchSize(step, replica, mb) == 0) return {};
  return indicesIn(permutation(epoch), step, replica, mb);
}

std::vector<std::int64_t> EpochSampler::indicesIn(const std::vector<std::int64_t>& perm, std::int64_t step,
                                                  int replica, int mb) const {
  HZ_CHECK(static_cast<std::int64_t>(perm.size()) == o_.dataset_size);
  if (o_.round_robin) {
    const std::int64_t k = static_cast<std::int64_t>(mb) * o_.replicas + replica;
    const std::int64_t first = step * o_.global_batch + k * o_.microbatch_size;
    const std::int64_t n = microbatchSize(step, replica, mb);
    return std::vector<std::int64_t>(perm.begin() + first, perm.begin() + first + n);
  }
  std::int64_t begin = 0, size = 0;
  share(step, replica, &begin, &size);
  const std::int64_t n = microbatchSize(step, replica, mb);
  const std::int64_t first = begin + static_cast<std::int64_t>(mb) * o_.microbatch_size;
  return std::vector<std::int64_t>(perm.begin() + first, perm.begin() + first + n);
}

}  // namespace hydrozoa::data
