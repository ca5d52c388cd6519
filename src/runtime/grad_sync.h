// Gradient synchronisation across the replicas of a stage: bucketed ring
// allreduce that starts as soon as a bucket is final (docs/train.md, "Performance").
//
// Buckets are formed as plan::gradientBuckets says (plan/cost/allreduce.h,
// where the planner costs them): from the stage's last layer backwards, the
// first closing at `firstBucketBytes` so that the allreduce of the layers
// whose gradients are final first (a classifier's large dense layers)
// overlaps the backward pass of the layers before them (PyTorch DDP does the
// same with a 1 MB first bucket), the others at `bucketBytes`, and the
// stage's first layer with parameters alone when that leaves it the smaller
// allreduce to wait for at the end of the backward pass. During the final
// microbatch's backward pass, layerReady(i) is called as each layer's
// gradients become final; a bucket whose layers are all ready is flattened
// and its allreduce started at once, while earlier layers still compute.
// finish() waits for every bucket and writes the sums back into .grad.
//
// Gradients are summed, not averaged: the loss of every microbatch is
// already weighted by its share of the step's samples (see stage.h), so the
// sum is the gradient of the mean loss over the global batch.
#pragma once

#include <torch/torch.h>

#include <vector>

#include "core/units.h"
#include "runtime/comm/transport.h"
#include "runtime/trace.h"

namespace hydrozoa::runtime {

class GradientSync {
 public:
  // `transport` may be null (one replica: nothing to do).
  GradientSync(Transport* transport, std::vector<std::vector<torch::Tensor>> layerParams, Bytes firstBucketBytes,
               Bytes bucketBytes, TraceRecorder& trace);

  bool active() const { return transport_ != nullptr; }
  int numBuckets() const { return static_cast<int>(buckets_.size()); }

  // Stage-local layer `layer` has its final gradients for this step.
  void layerReady(int layer);
  // Starts what is left, waits for everything, copies the sums into .grad.
  // Seconds blocked waiting go to *waited.
  void finish(double* waited = nullptr);

 private:
  struct Bucket {
    std::vector<int> layers;
    std::vector<torch::Tensor> params;
    Bytes bytes = 0;  // its gradients
    int remaining = 0;
    torch::Tensor flat;     // the gradients concatenated (unless in_place)
    bool in_place = false;  // summed in each .grad by the transport itself
    c10::intrusive_ptr<c10d::Work> work;
    std::int64_t started = 0;
  };
  void start(Bucket& b);

  Transport* transport_;
  std::vector<std::vector<torch::Tensor>> layerParams_;
  std::vector<int> bucketOf_;  // layer -> bucket
  std::vector<Bucket> buckets_;
  std::vector<bool> ready_;
  TraceRecorder& trace_;
};

}  // namespace hydrozoa::runtime
