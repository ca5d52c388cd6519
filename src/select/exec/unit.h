// One SHARP unit (docs/select.md, "Spilling"): a shard of one model loaded
// into a worker's memory budget from its spilled state, one pass through
// it, and what it changed spilled back.
//
// Per training step g of a model of n shards the units are
//   forward 0 … forward n−2, last (n−1's forward, loss and backward),
//   backward n−2 … backward 0,
// and once after its last step, evaluate 0 … evaluate n−1 over the test set.
// A forward keeps no graph: its input stays spilled, and the shard's
// backward runs the forward again with autograd first (the same per-layer
// seeds, so the same dropout masks; BatchNorm's statistics put back), then
// the backward, then the shard's optimizer step — exact, the optimizers
// being elementwise (runtime/optimizer.h). Each unit reads the files its
// spec names and writes new ones (a state is a new directory), so a unit
// run twice — its worker lost mid-unit — does the same thing twice.
//
// Thread-safety: load() and compute() of different units may run on two
// threads at once (double buffering); a DataCache belongs to load()'s.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cluster/job_spec.h"
#include "core/files.h"
#include "core/status.h"
#include "core/units.h"
#include "data/dataset.h"
#include "data/sampler.h"
#include "model/model.h"

namespace hydrozoa::select {

enum class UnitKind { kForward, kLast, kBackward, kEvaluate };
const char* unitKindName(UnitKind kind);

struct UnitSpec {
  std::int64_t id = 0;
  int task = 0;
  std::string job;                // the task's job spec (JSON)
  UnitKind kind = UnitKind::kForward;
  int shard = 0, shards = 1;      // this shard, of the model's
  int first = 0, last = 0;        // its layers
  std::int64_t step = 0;          // global step (training units)
  std::string state;              // directory: the shard's state to load
  std::string out_state;          // … the new one, when the unit changes it (backward, last; forward with buffers)
  std::string input;              // the shard's input (""; shard 0 reads the data)
  std::string grad;               // backward: the gradient of its output
  std::string output;             // forward: its output; last, backward: its input's gradient ("": none)
  std::string eval_dir;           // evaluate: where each batch's activations go in and out
  Bytes need = 0;                 // its peak, as the Pilot measured it (0: unknown)
  Bytes batch_bytes = 0;          // a minibatch's inputs and labels, read from the data
};

Json unitToJson(const UnitSpec& u);
Result<UnitSpec> unitFromJson(const Json& j);

struct UnitResult {
  std::int64_t id = 0;
  bool ok = true;
  std::string error;
  double loss = -1;                 // last: the step's mean loss
  double eval_loss = -1, eval_accuracy = -1;  // evaluate, the last shard: over the test set
  bool wrote_state = false;         // out_state holds the shard's state now
  double load_begin = 0, compute_begin = 0, end = 0;  // Unix seconds
  std::int64_t peak_bytes = 0;      // the worker's most counted bytes during it
};

Json resultToJson(const UnitResult& r);
Result<UnitResult> resultFromJson(const Json& j);

// The job specs, datasets and samplers of the tasks a worker has run units
// of, opened once each and held as host memory (outside the budget).
class DataCache {
 public:
  struct Task {
    cluster::JobSpec job;
    model::InputSpec input;
    model::TaskSpec task;
    std::shared_ptr<const data::Dataset> train, test;
    std::int64_t steps_per_epoch = 1, total_steps = 1;
  };
  Result<const Task*> task(const std::string& jobPath);

 private:
  std::map<std::string, std::unique_ptr<Task>> tasks_;
  // Opened once for all the tasks that read the same data.
  std::map<std::string, std::pair<std::shared_ptr<const data::Dataset>, std::shared_ptr<const data::Dataset>>> data_;
};

// The sampler of a task's minibatches: one microbatch of global_batch a step.
data::SamplerOptions minibatchSampler(const cluster::JobSpec& job, std::int64_t datasetSize);

// A task's steps: epochs × steps per epoch (one minibatch of global_batch
// a step), or max_steps when fewer.
std::int64_t stepsPerEpoch(const cluster::JobSpec& job, std::int64_t datasetSize);
std::int64_t totalSteps(const cluster::JobSpec& job, std::int64_t datasetSize);

// A unit with its shard and inputs in memory, ready to compute.
struct LoadedUnit {
  UnitSpec spec;
  const DataCache::Task* task = nullptr;
  std::optional<model::Model> shard;
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  torch::Tensor input, labels, grad;
  double load_begin = 0;
};

// The most that loading `u` takes of the budget: its state twice (read,
// then copied into the shard), its input files and its minibatch.
Bytes prefetchBytes(const UnitSpec& u);

Result<LoadedUnit> loadUnit(const UnitSpec& u, DataCache& cache);
UnitResult computeUnit(LoadedUnit& u);

// The result of a unit that failed: `why`, with the unit named.
UnitResult failedUnit(const UnitSpec& u, const Status& why);

// load then compute; a failure is the result's error.
UnitResult runUnit(const UnitSpec& u, DataCache& cache);

// Writes every layer of a model built whole, with a fresh optimizer, into
// one state directory per shard (shards[k] = {first, last}): the state
// before the first step.
Status writeInitialState(const cluster::JobSpec& job, const std::vector<std::pair<int, int>>& shards,
                         const std::vector<std::string>& dirs);

}  // namespace hydrozoa::select
