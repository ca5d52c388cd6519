// Which samples each replica's microbatches hold, step by step: pure C++,
// deterministic, identical in every worker and in the single-process
// reference trainer.
//
// An epoch is a permutation of the dataset (seeded by seed and epoch; the
// identity when shuffle is off). Step k covers permutation positions
// [k·G, min((k+1)·G, N)) with G the global batch. Within a step the samples
// are split among the A replicas as evenly as possible (the first N mod A
// get one more), each replica's share in order into microbatches of at most
// m samples. So every sample is used exactly once per epoch, replicas hold
// disjoint shards, and a short last step has fewer or smaller microbatches
// (never more than M). With drop_last the short last step is skipped.
//
// Idle replicas (AgileML's third stage, NOTE [Reliable workers that compute
// nothing] in cluster/tier_driver.cc): the first I replicas get no share;
// the step's samples are split as above among the A − I others, replica r
// taking share r − I. They still join every allreduce.
//
// Round-robin (stages replicated unevenly, NOTE [Unevenly replicated stages]
// in plan/plan.cc): the step's samples are cut in order into microbatches of
// m (a short step's last one smaller) and microbatch k goes to replica
// k mod A, as its microbatch k div A. Each stage of such a pipeline has
// its own A, and microbatch k holds the same samples on all of them.
//
// Thread-safety: immutable after construction.
#pragma once

#include <cstdint>
#include <vector>

namespace hydrozoa::data {

struct SamplerOptions {
  std::int64_t dataset_size = 0;
  std::int64_t global_batch = 1;     // G = (A − I) · m · M
  int replicas = 1;                  // A
  std::int64_t microbatch_size = 1;  // m
  std::uint64_t seed = 0;
  bool shuffle = true;
  bool drop_last = false;
  bool round_robin = false;
  int idle_replicas = 0;  // I: replicas 0..I−1 get no samples (not with round_robin)
};

class EpochSampler {
 public:
  // REQUIRES: dataset_size >= 1, global_batch >= 1, replicas >= 1,
  // 0 <= idle_replicas < replicas (0 with round_robin), microbatch_size >= 1,
  // and global_batch == (replicas − idle_replicas) · microbatch_size · M for
  // some whole M >= 1.
  explicit EpochSampler(const SamplerOptions& options);

  std::int64_t stepsPerEpoch() const;
  std::int64_t microbatchesPerStep() const;  // M, of a replica that is not idle

  // Samples in step `step` (of any epoch), over all replicas: the loss of
  // every microbatch is weighted by its size over this number. A replica may
  // get none in a short last step; it still joins the step's allreduce.
  std::int64_t stepSamples(std::int64_t step) const;

  // Number of non-empty microbatches replica `replica` has at `step` (<= M).
  int microbatches(std::int64_t step, int replica) const;
  // ... and all replicas together.
  int stepMicrobatches(std::int64_t step) const;

  // Samples in microbatch `mb` of `replica` at `step` (0 when it does not
  // exist); cheap, no permutation (for stages that read no data).
  std::int64_t microbatchSize(std::int64_t step, int replica, int mb) const;

  // Dataset indices of microbatch `mb` of `replica` at `step` of `epoch`
  // (empty when that microbatch does not exist in a short last step).
  std::vector<std::int64_t> indices(std::int64_t epoch, std::int64_t step, int replica, int mb) const;

  // The epoch's whole permutation (positions -> dataset indices), and the
  // microbatch's indices taken from it (what indices() does; callers that
  // walk a whole epoch compute the permutation once).
  std::vector<std::int64_t> permutation(std::int64_t epoch) const;
  std::vector<std::int64_t> indicesIn(const std::vector<std::int64_t>& permutation, std::int64_t step, int replica,
                                      int mb) const;

 private:
  // First permutation position and size of (step, replica)'s share.
  void share(std::int64_t step, int replica, std::int64_t* begin, std::int64_t* size) const;

  SamplerOptions o_;
  std::int64_t microbatches_ = 1;
};

}  // namespace hydrozoa::data
