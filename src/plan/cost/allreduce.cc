#include "plan/cost/allreduce.h"

#include <algorithm>

namespace hydrozoa::plan {

std::vector<std::vector<int>> gradientBuckets(const std::vector<Bytes>& layerBytes, Bytes firstBucketBytes,
                                              Bytes bucketBytes) {
  std::vector<std::vector<int>> buckets;
  const int L = static_cast<int>(layerBytes.size());
  int firstLayer = 0;
  while (firstLayer < L && layerBytes[firstLayer] <= 0) ++firstLayer;
  Bytes filled = 0;
  for (int i = L - 1; i >= 0; --i) {
    if (layerBytes[i] <= 0) continue;
    const bool alone = i == firstLayer && !buckets.empty() && filled > layerBytes[i];
    if (buckets.empty() || alone || filled >= (buckets.size() == 1 ? firstBucketBytes : bucketBytes)) {
      buckets.emplace_back();
      filled = 0;
    }
    buckets.back().push_back(i);
    filled += layerBytes[i];
  }
  return buckets;
}

Seconds ringAllreduceTime(Bytes bytes, int replicas, BytesPerSecond bandwidth, double alpha, Seconds beta) {
  if (replicas <= 1 || bytes <= 0) return 0;
  const double A = replicas, p = static_cast<double>(bytes);
  return 2.0 * (A - 1) * (p / (A * bandwidth) + alpha * p / A + beta);
}

AllreduceTime overlappedAllreduce(const std::vector<Bytes>& layerBytes, const std::vector<Seconds>& backward,
                                  Seconds drain, int replicas, BytesPerSecond bandwidth, double alpha, Seconds beta) {
  AllreduceTime t;
  if (replicas <= 1) return t;
  const int L = static_cast<int>(layerBytes.size());
  // final[i]: when layer i's gradients are final, from the start of the
  // stage's last backward pass (which runs from its last layer to its first).
  std::vector<Seconds> finalAt(L, 0);
  Seconds clock = 0;
  for (int i = L - 1; i >= 0; --i) {
    clock += i < static_cast<int>(backward.size()) ? backward[i] : 0;
    finalAt[i] = clock;
  }
  const Seconds backwardEnd = clock;
  Seconds end = 0;
  for (const auto& bucket : gradientBuckets(layerBytes, kFirstBucketBytes, kBucketBytes)) {
    Bytes bytes = 0;
    for (int i : bucket) bytes += layerBytes[i];
    const Seconds took = ringAllreduceTime(bytes, replicas, bandwidth, alpha, beta);
    end = std::max(end, finalAt[bucket.back()]) + took;
    t.total += took;
  }
  t.after = std::max<Seconds>(0, end - backwardEnd);
  t.exposed = std::max<Seconds>(0, t.after - drain);
  return t;
}

Seconds sharedMemoryAllreduceTime(Bytes bytes, int replicas, const SharedMemoryCost& cost) {
  if (replicas <= 1 || bytes <= 0) return 0;
  auto units = [](double A) { return 1 + 2 * (A - 1) / A; };
  const double measuredAt = std::max(2, cost.replicas);
  return cost.seconds_per_byte * static_cast<double>(bytes) * units(replicas) / units(measuredAt) +
         cost.seconds_per_allreduce;
}

AllreduceTime sharedMemoryAllreduce(const std::vector<Bytes>& layerBytes, Seconds drain, int replicas,
                                    const SharedMemoryCost& cost) {
  AllreduceTime t;
  if (replicas <= 1) return t;
  for (const auto& bucket : gradientBuckets(layerBytes, kFirstBucketBytes, kBucketBytes)) {
    Bytes bytes = 0;
    for (int i : bucket) bytes += layerBytes[i];
    t.total += sharedMemoryAllreduceTime(bytes, replicas, cost);
  }
  t.after = t.total;
  t.exposed = std::max<Seconds>(0, t.after - drain);
  return t;
}

}  // namespace hydrozoa::plan
