// The step executor: runs one training step of a stage as its schedule's
// actions say (runtime/schedule/schedule.h), whatever the schedule.
//
// It owns nothing of the stage: the layers of each chunk (StageExecutor), the
// gradient synchronisation of each chunk (GradientSync), the transfers
// (Channels, one inbound and one outbound queue per neighbour and payload),
// the data loader (on the stages that read inputs or labels) and the update
// (a callback: the worker applies it under its own lock, NOTE [The step
// before] in worker/worker_impl.h) are the worker's.
//
// Receives are posted ahead, as many per channel as the schedule says
// (Schedule::receiveWindow) in the order it takes them, so that transfers
// overlap computation without allocating every microbatch's buffer at the
// start of the step: a 1F1B stage then holds no more received activations
// than it stashes, as the planner counts them. GPipe, which holds every
// microbatch's anyway, posts them all at the step's start.
// $HYDROZOA_RECEIVE_WINDOW=N posts N ahead instead (0: all; for comparisons).
//
// Under an asynchronous schedule (NOTE [Asynchronous schedules] in
// schedule/schedule.h) a step begins the next one's microbatches, so what
// those passes stashed and received stays here between run()s, and whether
// the pipeline drains after a step must be one decision of every stage:
// NOTE [Draining an asynchronous pipeline] in step_executor.cc.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "data/loader.h"
#include "runtime/comm/transport.h"
#include "runtime/exec/channels.h"
#include "runtime/grad_sync.h"
#include "runtime/schedule/schedule.h"
#include "runtime/stage.h"
#include "runtime/trace.h"

namespace hydrozoa::model {
class TensorGroup;
}

namespace hydrozoa::runtime {

// A per-sample shape and element type, as exchanged between stages.
struct SampleShape {
  std::vector<std::int64_t> dims;
  torch::ScalarType dtype = torch::kFloat;
  torch::Device device = torch::kCPU;
  std::vector<std::int64_t> sizes(std::int64_t n) const;  // n samples': {n, dims...}
  torch::Tensor buffer(std::int64_t n) const;
  // One of `parts` equal parts of n samples' elements, flattened (NOTE
  // [Scatter/gather of stage boundaries] in step_executor.cc).
  torch::Tensor partBuffer(std::int64_t n, int parts) const;
};

// One model chunk of the stage (one, unless interleaved), in one weight
// version (one, unless the schedule keeps more).
struct ChunkParts {
  StageExecutor* layers = nullptr;
  // The version's gradient sync (one for all chunks; null: none), in which
  // this chunk's layer i is layer syncOffset + i.
  GradientSync* sync = nullptr;
  int syncOffset = 0;
  SampleShape in, out;  // per sample: what it receives and what it produces
};

// The edge between virtual stages e and e+1 travels under tag chunk e / stages.
inline int edgeChunk(int edge, int stages) { return edge / stages; }

struct StepInput {
  std::int64_t step = 0;                // global step
  std::vector<std::int64_t> sizes;      // this replica's microbatches
  double stepSamples = 1;               // all replicas' samples (the loss weights' N)
  // This replica's first microbatch's index within the step (seeds; round-
  // robin: 0, each microbatch's index is the one it is dealt).
  std::int64_t firstMicrobatch = 0;
  // Round-robin (NOTE [Round-robin over a stage's replicas]): the step's
  // microbatches over all of the stage's replicas, and the next step's.
  int stepMicrobatches = 0, nextStepMicrobatches = 0;
  // Asynchronous schedules: the next step's (empty: there is none to begin,
  // the pipeline drains), and whether this worker would have the pipeline
  // drain after this step anyway (a checkpoint or a stop is due; stage 0's
  // wish decides).
  std::vector<std::int64_t> nextSizes;
  double nextStepSamples = 1;
  bool drain = false;
  // An update per microbatch (pipedream): microbatch mb's samples over all
  // replicas (its loss weights' N), this step's and the next's, and the
  // updates the step has on every replica (the most microbatches any
  // replica has: one with fewer joins the rest's allreduces with nothing).
  // Round-robin, stages sum different microbatches into an update, so the
  // loss weights' N is the step's and update u is scaled by the step's
  // samples over microbatchSamples[u]: NOTE [Updates over unevenly
  // replicated stages] in step_executor.cc.
  std::vector<double> microbatchSamples, nextMicrobatchSamples;
  int updates = 0;
};

struct StepStats {
  double compute = 0, wait = 0, allreduce = 0;
  double lossSum = 0, samples = 0;  // the last virtual stage's
  int reassigned = 0;               // microbatches of other replicas computed here (FlexRR)
};

class StepExecutor {
 public:

  // `versions[v]`: the chunks of weight version v (one version unless the
  // schedule keeps more; global step t's passes run on version t % V, or
  // under an update per microbatch, NOTE [Weight versions]). `loader` is
  // null on stages that read no data; `update` applies the gradients of
  // global step `step` (kOptimizerStep), found in version `from`, then
  // copies the new weights into version `to` (`last`: the step's last
  // update), the gradients first multiplied by `scale`. `agree(drain)`:
  // on stage 0 of a replicated pipeline, the replicas' common decision
  // (drain if any of them would).
  using Update = std::function<void(std::int64_t step, int from, int to, bool last, double scale)>;
  StepExecutor(const Schedule& schedule, PipelineShape shape, std::vector<std::vector<ChunkParts>> versions,
               Channels& channels, data::PrefetchLoader* loader, torch::Device device, TraceRecorder& trace,
               Update update, std::function<bool(bool)> agree = nullptr);

  StepStats run(const StepInput& in);
  // Opens every channel a full step uses, so that their threads start now:
  // before the worker pins its compute thread, whose core they would
  // otherwise inherit (NOTE [Cores for compute threads], worker/stage_setup.cc).
  void openChannels();
  // Under tensor parallelism: stage boundaries travel as slices, each of the
  // group's t workers sending 1/t and the receivers all-gathering over
  // `group` (NOTE [Scatter/gather of stage boundaries] in step_executor.cc).
  void scatterBoundaries(model::TensorGroup* group) { scatter_ = group; }
  // Called after each forward and backward pass with its seconds (an
  // injected "sleep" straggler, cluster.stragglers).
  void afterPass(std::function<void(double)> f) { afterPass_ = std::move(f); }
  // False while the last step began the next (an asynchronous schedule
  // that did not drain): the next step must run before the worker stops,
  // evaluates or saves.
  bool drained() const { return drained_; }

 private:
  struct Pending;  // the step's receives, per channel
  using PassKey = std::tuple<std::int64_t, int, int>;  // (global step, chunk, microbatch)
  // The weight version a pass of global step `step` runs on; a forward pass
  // under an update per microbatch takes the latest and keeps it for the
  // rest of its microbatch's actions (under `key`).
  int versionOf(const Action& a, std::int64_t step, const PassKey& key);
  const Schedule& schedule_;
  PipelineShape shape_;
  std::vector<std::vector<ChunkParts>> versions_;
  Channels& channels_;
  data::PrefetchLoader* loader_;
  torch::Device device_;
  TraceRecorder& trace_;
  Update update_;
  std::function<bool(bool)> agree_;
  std::map<std::tuple<int, int, int, int>, std::vector<Action>> actions_;  // by (microbatches, step's, carried, next)
  int window_ = 0;                                                     // receives posted ahead per channel (0: all)
  model::TensorGroup* scatter_ = nullptr;                              // null: boundaries travel whole
  std::function<void(double)> afterPass_;
  // Between steps (asynchronous schedules): forwards of the coming step
  // already run, what they produced and received, their data.
  int carried_ = 0;
  bool drained_ = true;
  std::int64_t updates_ = 0;          // applied since the start (an update per microbatch)
  // Vertical sync: updates_ when the pipeline last drained, the microbatches
  // of the steps run since, and this step's.
  std::int64_t segmentStart_ = 0, segmentMicrobatches_ = 0, stepMicrobatches_ = 0;
  std::map<PassKey, int> versionOf_;  // a microbatch's stashed version, from its forward pass to its update
  std::map<PassKey, torch::Tensor> inputs_, gradOutputs_, outputs_, gradInputs_;
  std::map<std::int64_t, std::vector<data::Batch>> batches_;  // by global step
};

}  // namespace hydrozoa::runtime
