// The worker process's state, shared by the files of src/runtime/worker/
// (private to them; the public entry point is runtime/worker.h):
//   lifecycle.cc   join, run, the exit codes
//   control.cc     the control thread (NOTE [The control thread])
//   stage_setup.cc the stage's layers, data, transport and shapes
//   train_loop.cc  epochs, steps, evaluation
//   snapshot.cc    checkpoints: saving, shipping, fetching, the step before
// A step itself runs in the step executor (runtime/exec/step_executor.h).
#pragma once

#include <torch/torch.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "core/cpus.h"
#include "data/loader.h"
#include "data/sampler.h"
#include "model/tensor_parallel.h"
#include "plan/plan.h"
#include "runtime/checkpoint.h"
#include "runtime/comm/reassign.h"
#include "runtime/comm/transport.h"
#include "runtime/exec/reassigning_step.h"
#include "runtime/exec/step_executor.h"
#include "runtime/grad_sync.h"
#include "runtime/loss_scale.h"
#include "runtime/optimizer.h"
#include "runtime/schedule/schedule.h"
#include "runtime/stage.h"
#include "runtime/trace.h"
#include "runtime/worker.h"
#include "runtime/worker/role.h"
#include "wire/control.h"

namespace hydrozoa::runtime {

using Clock = std::chrono::steady_clock;

inline double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Thrown on the compute thread once the coordinator halts the generation
// (it lost a worker and is recovering).
struct Halted : std::runtime_error {
  Halted() : std::runtime_error("halted: the job lost a worker and is recovering") {}
};

// A fresh directory only this process writes, on this worker's host:
// under $TMPDIR or /tmp, named hydrozoa-w<id>-<what>-XXXXXX (mkdtemp, 0700).
Result<std::string> privateDir(int worker, const char* what);

class Worker {
 public:
  explicit Worker(const WorkerArgs& args) : args_(args) {}
  int run();

 private:
  Status join();
  Status build();
  // The sampler, loaders, transport, syncs, channels and executor of this
  // worker's place in its generation (stage_setup.cc).
  Status connect();
  void pinComputeThread();
  // NOTE [Regrouping at a step boundary] (cluster/regroup.cc): before
  // global step `global`, the group the coordinator's "regroup" named.
  void regroup(std::int64_t global);
  // NOTE [Agreeing on a step] (cluster/recovery.cc): says which step this
  // worker had begun when asked to stop or regroup at `step`.
  void ackStep(std::int64_t step);
  void maybeHearLate(const std::string& type);  // a test's fault (control.cc)
  // Waits at `step` until the coordinator confirms it (true) or moves
  // `proposal` off it (false: some worker had begun it).
  bool agreed(std::int64_t step, const std::atomic<std::int64_t>& proposal);
  // NOTE [State for joiners]: replica `from` sends its state before global
  // step `step` to every other replica; those with role_.state_from == from
  // load it.
  Status shareState(int from, std::int64_t step);
  Status exchangeShapes();
  void train();
  // One training step through the step executor, then its report.
  // `nextStep`: whether the step after it (in the same epoch) is to run;
  // `drain`: this worker wants the pipeline drained after it (asynchronous
  // schedules, NOTE [Draining an asynchronous pipeline]).
  void iteration(std::int64_t epoch, std::int64_t stepInEpoch, std::int64_t globalStep, bool nextStep, bool drain);
  // An update of global step `globalStep` (kOptimizerStep), under stateMu_:
  // with weight versions, the gradients of version `from`, the new weights
  // then copied into version `to` (NOTE [Weight versions]); `last`: the
  // step's last update (one per step, unless an update per microbatch).
  void applyUpdate(std::int64_t globalStep, int from, int to, bool last, double scale);
  // The epoch global step `globalStep` belongs to.
  std::int64_t epochOf(std::int64_t globalStep) const;
  void evaluate(std::int64_t epoch);
  void synchronizeBuffers();
  void checkpoint(std::int64_t globalStep);
  // False when told to stop there (NOTE [Holding at an epoch's end]).
  bool holdAtEpochEnd(std::int64_t global);
  // False once told to stop (at this step or now).
  bool pollControl();
  // NOTE [The control thread]
  // Once training starts, one thread owns the control socket: it sends what
  // the compute thread posts, the heartbeats, and answers the coordinator:
  // stop and checkpoint requests, "done_ack", and during a recovery "halt"
  // (stop before the next optimizer step and say how many steps are done)
  // and "save" (write this stage's state at that step from here, since the
  // compute thread may be blocked on a peer that is gone).
  void controlLoop();
  void onControl(const Json& m);
  void leaveWithoutCoordinator();  // NOTE [A worker without its coordinator] (control.cc)
  Status coordinatorGone() const;
  void post(Json message);
  void report(const std::string& kind, const std::string& message);
  // Where this worker writes a step's files: the shared checkpoint
  // directory's step-N.partial/, or (shipped) a fresh private directory on
  // its own host, gone once shipped.
  Result<std::string> checkpointDir(std::int64_t globalStep) const;
  bool shipsCheckpoints() const { return role_.checkpoint_root.empty(); }
  // A saved step's files to the coordinator (when `saved` is OK), then gone
  // from here either way (shipped mode).
  Status shipCheckpoint(std::int64_t globalStep, const std::string& dir, Status saved);
  // The assigned checkpoint's files of this stage, fetched from the
  // coordinator into a fresh private directory (the caller removes it).
  Result<std::string> fetchCheckpoint();

  // Holding the state and computing nothing (NOTE [Reliable workers that
  // compute nothing], cluster/tier_driver.cc); the replicas that compute.
  bool idle() const { return role_.replica < role_.idle_replicas; }
  int working() const { return role_.replicas - role_.idle_replicas; }
  void logIdle() const;
  bool firstStage() const { return role_.stage == 0; }
  bool lastStage() const { return role_.stage == role_.stages - 1; }
  // The rank of replica `replica` of `stage` (ranks are replica-major,
  // plan::workerRank).
  // With tensor parallelism, the worker of the same slice there (NOTE
  // [Ranks of a 3D grid], runtime/comm/transport.h).
  int rankOf(int stage, int replica) const {
    if (role_.stage_replicas.empty()) return (replica * role_.stages + stage) * role_.tensor_parallel + role_.tensor_rank;
    return plan::workerRank(role_.stage_replicas, stage, replica);
  }
  // Of a tensor-parallel group, one worker reports the loss, evaluation and
  // checkpoints (all hold the same values; the checkpoint's slices joined).
  bool speaksForSlices() const { return role_.tensor_rank == 0; }
  int numChunks() const { return static_cast<int>(role_.layer_ranges.size()); }
  PipelineShape pipelineShape() const {
    PipelineShape shape;
    shape.stage = role_.stage;
    shape.stages = role_.stages;
    shape.chunks = numChunks();
    shape.microbatches = static_cast<int>(role_.microbatches);
    shape.stageReplicas = role_.stage_replicas;
    shape.replica = role_.replica;
    shape.stepMicrobatches = static_cast<int>(role_.microbatches) * working();
    return shape;
  }
  // Every chunk's parameters, in order; saving and loading all chunks.
  std::vector<torch::Tensor> stageParameters() const;
  // The same of weight version `version`'s working copy (NOTE [Weight versions]).
  std::vector<torch::Tensor> versionParameters(size_t version) const;
  // NOTE [Weight versions]: the working copies, from chunks_ (and the
  // checkpoint's previous weights, when loading one).
  Status buildWeightVersions(int versions);
  // The working copy whose weights global step `step` runs on under a
  // version per step (2bw; null otherwise: all copies start as chunks_).
  const std::vector<std::unique_ptr<StageExecutor>>* versionFor(std::int64_t step) const {
    if (copies_.empty() || schedule_->updatePerMicrobatch()) return nullptr;
    return &copies_[static_cast<size_t>(step % static_cast<std::int64_t>(copies_.size()))];
  }
  Status saveState(const std::string& dir);
  Status loadState(const std::string& dir);
  std::vector<std::int64_t> microbatchSizes(const data::EpochSampler& sampler, std::int64_t step) const;
  // Per microbatch index, its samples over all replicas; *rounds: how many
  // microbatches the replica with the most has.
  std::vector<double> microbatchSamples(const data::EpochSampler& sampler, std::int64_t step, int* rounds) const;

  WorkerArgs args_;
  Role role_;
  std::unique_ptr<wire::ControlClient> control_;
  std::unique_ptr<Transport> transport_;
  std::shared_ptr<model::TensorGroup> tensor_;  // null without tensor parallelism
  // Training steps run, the tensor group's collectives' payload and the
  // activations and gradients sent to other stages in them (not the shape
  // probe, evaluation or checkpoints): bench/tensor_parallel_bench.sh.
  std::int64_t stepsRun_ = 0, tensorBytes_ = 0, pipelineBytes_ = 0;
  std::vector<std::unique_ptr<StageExecutor>> chunks_;  // the stage's model chunks (one unless interleaved)
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  // NOTE [Weight versions]
  // Under a schedule with more than one weight version (2bw), the passes
  // of global step t run on copies_[t % V], working copies of chunks_;
  // chunks_ hold the latest weights, the optimizer's (updated in place,
  // never in an autograd graph: the next step's forward passes, begun
  // before this step's update, hold their version's weights in theirs).
  // At step t's update the gradients move from copies_[t % V] to chunks_,
  // the optimizer steps, and copies_[t % V] takes the new weights for step
  // t + V. BatchNorm's statistics are one set, shared by all. A checkpoint
  // saves copies_[t % V] of the step t it resumes at as the previous
  // weights. One copy more than the thesis's two versions: the optimizer's
  // state stays with one set of tensors.
  // With an update per microbatch (pipedream), V = p − s: a forward pass
  // runs on copies_[u % V] after u updates (the latest), and its backward
  // pass on the same; update u+1 (its gradients from that microbatch's
  // copy) goes into copies_[(u+1) % V], whose weights only the microbatch
  // just finished (or, after a drain, the warm-up group it ended) ran on.
  // Mid-step, or with the next step begun, the state is no step's: a halted
  // worker then offers none to save (recovery uses the last checkpoint).
  std::vector<std::vector<std::unique_ptr<StageExecutor>>> copies_;
  std::vector<std::unique_ptr<GradientSync>> syncs_;  // per weight version
  std::unique_ptr<Schedule> schedule_;
  std::optional<data::EpochSampler> trainSampler_, testSampler_;
  // NOTE [Recording sample ids]
  // With $HYDROZOA_RECORD_SAMPLES set, stage 0 appends "global_step epoch
  // replica id id ..." per step to <trace_path>.samples: tests check with it
  // that every sample is used once per epoch, across changes of replicas.
  std::unique_ptr<std::ofstream> sampleLog_;
  std::int64_t sampleEpoch_ = -1;
  std::vector<std::int64_t> samplePermutation_;
  void recordSamples(std::int64_t epoch, std::int64_t stepInEpoch, std::int64_t globalStep);
  std::unique_ptr<data::PrefetchLoader> trainLoader_, testLoader_;
  std::shared_ptr<const data::Dataset> trainData_, testData_;
  // FlexRR (docs/stragglers.md): with flexrr on and replicas to help, steps
  // run through reassigning_ instead of executor_; a helper reads another
  // replica's microbatch from trainData_ through the epoch's permutation.
  std::unique_ptr<Reassigner> reassigner_;
  std::unique_ptr<ReassigningStep> reassigning_;
  std::int64_t helpEpoch_ = -1;
  std::vector<std::int64_t> helpPermutation_;
  std::int64_t tookMicrobatches_ = 0, gaveMicrobatches_ = 0;
  Status buildReassignment();
  StepStats reassignedIteration(const StepInput& in, std::int64_t epoch, std::int64_t stepInEpoch);
  // A "sleep" straggler (cluster.stragglers): after each pass of `seconds`,
  // sleeps (slowdown − 1) times as long while the pattern is on.
  void straggle(double seconds);
  const cluster::StragglerSpec* sleeper_ = nullptr;
  Clock::time_point trainStart_ = Clock::now();
  std::unique_ptr<Channels> channels_;
  std::unique_ptr<StepExecutor> executor_;
  std::vector<SampleShape> inShapes_, outShapes_;  // per chunk
  torch::Device device_ = torch::kCPU;
  std::optional<at::ScalarType> precision_;  // NOTE [Mixed precision]: the passes' 16-bit type; nullopt: fp32
  // fp16's (NOTE [Loss scaling]); the same on every worker. The chunks'
  // backward passes take its value (scaleLosses()).
  std::optional<LossScale> lossScale_;
  bool skippedStep_ = false;  // the last update was skipped (an inf or NaN gradient somewhere)
  void scaleLosses();
  TraceRecorder trace_{true};
  std::atomic<std::int64_t> currentStep_{0};
  std::thread controlThread_;
  std::vector<int> helperCpus_ = usableCpus();  // the process's cores, for threads started after pinning
  std::atomic<bool> controlRunning_{false}, stopControl_{false}, doneAcked_{false};
  bool orphaned_ = false;  // the control thread's: its coordinator is gone
  std::mutex outMu_;
  std::deque<Json> outbox_;  // posted by the compute thread, sent by the control thread
  // The optimizer step vs. a save from the control thread: under stateMu_,
  // completedStep_ counts the global steps whose update is applied, and
  // once halted_ no further update is.
  std::mutex stateMu_;
  std::int64_t completedStep_ = 0;
  bool halted_ = false;
  bool midStep_ = false;  // an update per microbatch: some of a step's updates applied, or the next step begun
  // NOTE [The step before]
  // Replicas of a stage update in lockstep, but stages do not: when a worker
  // is lost, a stage whose allreduce did not involve it may complete one
  // step more than the lost worker's stage. So that the survivors still
  // share a step, each worker of a replicated pipeline keeps its stage's
  // state from before its last update (a copy per step of the parameters,
  // optimizer state and buffers; memory for one more copy of them).
  struct Snapshot {
    std::int64_t step = -1;
    std::vector<torch::Tensor> params, buffers;
    std::vector<ParamState> optim;
    std::optional<LossScale> lossScale;
  };
  Snapshot before_;
  bool keepSnapshots_ = false;
  void snapshot();             // under stateMu_, before an update
  std::vector<torch::Tensor> stageBuffers() const;
  Status saveSnapshot(const std::string& dir);  // under stateMu_, halted
  std::atomic<bool> haltSeen_{false};
  std::atomic<std::int64_t> checkpointAt_{-1};  // on-request checkpoint after this global step
  std::atomic<std::int64_t> stopAt_{-1};        // stop before this global step (all workers alike)
  std::atomic<std::int64_t> continueAt_{-1};    // go on past the epoch end at this global step
  std::atomic<bool> stopCheckpoint_{false};     // and checkpoint there first
  std::atomic<std::int64_t> regroupAt_{-1};     // regroup_ before this global step
  std::atomic<std::int64_t> confirmedAt_{-1};   // the coordinator's confirmation of a stop or regroup step
  Regroup regroup_;                             // under stateMu_
  std::chrono::microseconds helperSlice_{0};    // NOTE [Helper threads wake at once]
  std::int64_t savedStep_ = -1;                 // the last step checkpoint() saved (compute thread)
  bool stopRequested_ = false;
};

}  // namespace hydrozoa::runtime
