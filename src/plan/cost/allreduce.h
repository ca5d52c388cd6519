// The allreduce of a stage's gradients as the runtime does it
// (runtime/grad_sync.h; docs/plan.md, "Allreduce"): the stage's layers are
// grouped into buckets from its last layer backwards, each bucket's ring
// allreduce starts as soon as the final microbatch's backward pass has made
// all of its gradients final, and the buckets reduce one after another. Only
// the part that outlasts the backward pass (and, for a stage after the
// first, the backward passes still draining through the stages before it)
// lengthens the iteration.
#pragma once

#include <vector>

#include "core/units.h"

namespace hydrozoa::plan {

// The bucket sizes the runtime uses, as PyTorch DDP does: the first bucket
// (the layers whose gradients are final first) closes at 1 MB, the rest at 25 MB.
inline constexpr Bytes kFirstBucketBytes = 1 * kMB;
inline constexpr Bytes kBucketBytes = 25 * kMB;

// Buckets of a stage's layers (stage-local indices), in the order their
// allreduces start; each lists its layers from last to first. Layers with no
// parameters (0 bytes) belong to none. The rule: walking from the last
// layer backwards, a bucket closes once it holds `firstBucketBytes` (the
// first) or `bucketBytes` (the others); the first layer with parameters,
// whose gradients are final last, goes alone when the bucket it would join
// already holds more bytes than it, so that only its smaller allreduce waits
// for the end of the backward pass.
std::vector<std::vector<int>> gradientBuckets(const std::vector<Bytes>& layerBytes, Bytes firstBucketBytes,
                                              Bytes bucketBytes);

// Ring allreduce of `bytes` over `replicas` (Hydrozoa §3.4 with the group
// size A; docs/plan.md): 2(A−1) rounds, each moving bytes/A over a link of
// `bandwidth`, plus the fitted α (s per byte per round beyond 1/D) and β (s per round).
Seconds ringAllreduceTime(Bytes bytes, int replicas, BytesPerSecond bandwidth, double alpha, Seconds beta);

struct AllreduceTime {
  Seconds total = 0;    // every bucket's allreduce, one after another
  Seconds after = 0;    // from the end of the stage's last backward pass to the end of its last bucket
  Seconds exposed = 0;  // how much of it the iteration waits for: after − drain, or 0
};

// The stage's allreduce against its final backward pass. `layerBytes` and
// `backward` (one microbatch's backward time per layer) are per stage-local
// layer; `drain` is how long the iteration goes on after this stage's last
// backward pass ends (the stages before it finishing theirs: 0 for the first).
AllreduceTime overlappedAllreduce(const std::vector<Bytes>& layerBytes, const std::vector<Seconds>& backward,
                                  Seconds drain, int replicas, BytesPerSecond bandwidth, double alpha, Seconds beta);

// The allreduce of replicas that share one host's memory (the local
// launcher's workers; runtime/comm/shared_memory.h, NOTE [Shared-memory
// allreduce]): no link and no helper thread, each worker's compute thread
// copies a bucket into shared memory as the backward pass finishes it, and
// sums its share and copies the others' back once that pass has ended. All
// of it is work on the compute thread, so none of it hides behind the
// backward pass; a stage after the first does it while the stages before it
// still drain theirs. Per bucket of n bytes over A replicas, a worker copies
// n in, sums (A−1)·n/A and copies (A−1)·n/A back: w(A) = 1 + 2(A−1)/A units
// of n, fitted by the network probe at `replicas` (profile/network.h).
struct SharedMemoryCost {
  double seconds_per_byte = 0;  // at the probe's group size
  Seconds seconds_per_allreduce = 0;
  int replicas = 2;  // the probe's group size
};

Seconds sharedMemoryAllreduceTime(Bytes bytes, int replicas, const SharedMemoryCost& cost);

// The stage's allreduce through shared memory: its buckets one after
// another, all after its final backward pass (`after` = `total`).
AllreduceTime sharedMemoryAllreduce(const std::vector<Bytes>& layerBytes, Seconds drain, int replicas,
                                    const SharedMemoryCost& cost);

}  // namespace hydrozoa::plan
