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
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "data/loader.h"
#include "runtime/comm/pipe.h"
#include "runtime/comm/transport.h"
#include "runtime/grad_sync.h"
#include "runtime/schedule/schedule.h"
#include "runtime/stage.h"
#include "runtime/trace.h"

namespace hydrozoa::runtime {

// A per-sample shape and element type, as exchanged between stages.
struct SampleShape {
  std::vector<std::int64_t> dims;
  torch::ScalarType dtype = torch::kFloat;
  torch::Device device = torch::kCPU;
  torch::Tensor buffer(std::int64_t n) const;
};

// The point-to-point queues of a stage: one inbound and one outbound per
// (neighbouring stage, payload), made on first use.
class Channels {
 public:
  // `rankOf(stage)`: the rank of this replica's worker of `stage`.
  Channels(Transport& transport, TraceRecorder& trace, std::function<int(int)> rankOf);
  Inbound& in(int peerStage, Payload payload);
  Outbound& out(int peerStage, Payload payload);
  // Waits until everything sent so far has left.
  void flush();

 private:
  Transport& transport_;
  TraceRecorder& trace_;
  std::function<int(int)> rankOf_;
  std::map<std::pair<int, Payload>, std::unique_ptr<Inbound>> in_;
  std::map<std::pair<int, Payload>, std::unique_ptr<Outbound>> out_;
};

// One model chunk of the stage (one, unless interleaved).
struct ChunkParts {
  StageExecutor* layers = nullptr;
  // The stage's gradient sync (one for all chunks; null: none), in which
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
  std::int64_t firstMicrobatch = 0;     // this replica's first microbatch's index within the step (seeds)
};

struct StepStats {
  double compute = 0, wait = 0, allreduce = 0;
  double lossSum = 0, samples = 0;  // the last virtual stage's
};

class StepExecutor {
 public:

  // `loader` is null on stages that read no data; `update(step)` applies
  // the gradients of global step `step` (kOptimizerStep).
  StepExecutor(const Schedule& schedule, PipelineShape shape, std::vector<ChunkParts> chunks, Channels& channels,
               data::PrefetchLoader* loader, torch::Device device, TraceRecorder& trace,
               std::function<void(std::int64_t)> update);

  StepStats run(const StepInput& in);

 private:
  struct Pending;  // the step's receives, per channel
  const Schedule& schedule_;
  PipelineShape shape_;
  std::vector<ChunkParts> chunks_;
  Channels& channels_;
  data::PrefetchLoader* loader_;
  torch::Device device_;
  TraceRecorder& trace_;
  std::function<void(std::int64_t)> update_;
  std::map<int, std::vector<Action>> actions_;  // by microbatches per step
  int window_ = 0;                               // receives posted ahead per channel (0: all)
};

}  // namespace hydrozoa::runtime
