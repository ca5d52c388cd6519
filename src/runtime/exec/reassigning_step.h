// A data-parallel step with FlexRR's rapid reassignment (runtime/comm/
// reassign.h; docs/stragglers.md): the replica runs its own microbatches in
// order, skipping those a helper claimed, then the microbatches other
// replicas offered it, then sums the gradients over the replicas and
// updates. One stage, one chunk, a flushing schedule: at one stage every
// flushing schedule runs each microbatch's forward and backward passes, and
// their order does not change the sum.
//
// NOTE [Reassigned microbatches]
// A microbatch computed by a helper is the owner's, bit for bit: the helper
// reads the same samples from the dataset (the sampler says which), seeds
// its layers with the owner's index of it in the step (dropout's masks,
// NOTE [Equivalence with one process] in runtime/stage.h), and weighs its
// loss by the same n / N. Its gradient lands in the helper's accumulator
// instead of the owner's, and the allreduce adds both, so the step's
// gradient is the same sum in another order (float rounding differs). Its
// loss goes into the helper's report. BatchNorm's running statistics are
// the exception: the helper's are updated by it instead of the owner's
// (they are averaged over the replicas at an epoch's end).
#pragma once

#include <torch/torch.h>

#include <functional>
#include <vector>

#include "data/dataset.h"
#include "data/loader.h"
#include "runtime/comm/reassign.h"
#include "runtime/exec/step_executor.h"

namespace hydrozoa::runtime {

class ReassigningStep {
 public:
  // Microbatch `mb` of replica `replica` in this step: its samples, read
  // from the dataset.
  using Load = std::function<data::Batch(int replica, int mb)>;
  ReassigningStep(StageExecutor& layers, GradientSync& sync, data::PrefetchLoader& loader, Reassigner& reassigner,
                  torch::Device device, TraceRecorder& trace, StepExecutor::Update update);

  // Called after each microbatch's passes with their seconds (an injected
  // "sleep" straggler, cluster.stragglers).
  void afterPass(std::function<void(double)> f) { afterPass_ = std::move(f); }

  // `replica`: this one; `perReplica[r]`: replica r's microbatches this step, `stride`: the
  // microbatches a replica has in a full step (replica r's microbatch k
  // is microbatch r·stride + k of the step, for its seeds); `sizeOf(r, k)`
  // its samples.
  StepStats run(const StepInput& in, int replica, const std::vector<int>& perReplica, int stride,
                const std::function<std::int64_t(int, int)>& sizeOf, const Load& load, Reassigner::Counts* counts);

 private:
  StageExecutor& layers_;
  GradientSync& sync_;
  data::PrefetchLoader& loader_;
  Reassigner& reassigner_;
  torch::Device device_;
  TraceRecorder& trace_;
  StepExecutor::Update update_;
  std::function<void(double)> afterPass_;
};

}  // namespace hydrozoa::runtime
