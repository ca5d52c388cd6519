// The coordinator's Job (one training job, from launch to summary), shared by
// the files that implement it: coordinator.cc (setup, launching, the event
// loop), recovery.cc (lost workers, new generations from a restore point),
// scaling_driver.cc (generations at epoch boundaries) and run_metrics.cc
// (steps, predictions, the summary). Not an interface: include it only there.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "cluster/billing.h"
#include "cluster/channel.h"
#include "cluster/job_plan.h"
#include "cluster/launch/registry.h"
#include "cluster/progress.h"
#include "cluster/run_dir.h"
#include "cluster/scaling/epochs.h"
#include "cluster/scaling/policy.h"
#include "cluster/tiers.h"
#include "data/sampler.h"
#include "sim/bidbrain.h"
#include "wire/control.h"

namespace hydrozoa::cluster {
struct TrainOptions;  // cluster/coordinator.h
struct TrainResult;
}  // namespace hydrozoa::cluster

namespace hydrozoa::cluster::coordinator {

using Clock = std::chrono::steady_clock;

inline double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The control-plane identity of worker `id`.
inline std::string from(int id) { return fmt::format("w{}", id); }

// A worker of a generation: `rank` (replica · B + stage) is its place in the
// generation, `id` its launcher and control-plane identity (NOTE [Changing
// the replicas]: the next generation's workers run beside this one's).
struct WorkerState {
  int id = 0, rank = 0, replica = 0, stage = 0;
  int tensor_rank = 0, tensor_parallel = 1;  // its slice of the stage's layers (NOTE [Ranks of a 3D grid], plan/plan.h)
  bool registered = false, ready = false, done = false;
  bool assigned = false;  // a joiner sent its role ahead of the regroup (NOTE [Roles for joiners ahead])
  double launched_at = -1, registered_at = -1;  // now(); -1: not yet
  double started_at = -1;                        // launched_at + its start delay: its process begins
  Bytes peak_memory = 0;                         // resident, the most reported
  Bytes tensor_peak = 0;                         // tensors allocated at once in a step, the most reported
  Clock::time_point last_seen;
  std::string name() const {
    if (tensor_parallel > 1) {
      return fmt::format("worker {} (replica {}, stage {}, slice {} of {})", id, replica, stage, tensor_rank + 1,
                         tensor_parallel);
    }
    return fmt::format("worker {} (replica {}, stage {})", id, replica, stage);
  }
};

struct StepAccount {
  int reports = 0;
  double loss = 0, samples = 0;
  double compute_replica0 = 0;  // summed over replica 0's stages
  int reassigned = 0;           // microbatches computed by another replica than their own (FlexRR)
  bool skipped = false;         // fp16: no update (an inf or NaN gradient, NOTE [Loss scaling])
  double loss_scale = 0;        // fp16: the loss scale after the step
  double iteration = 0;         // the slowest worker's
  int epoch = 0;
  // Per stage, summed over its replicas: the passes' compute, and the wait
  // for the allreduce after them.
  std::vector<double> compute, allreduce;
};

struct EvalAccount {
  int reports = 0;
  double loss_sum = 0, correct = 0, count = 0;
};

// One training job, from launch to summary.

class Job {
 public:
  Job(const TrainOptions& o, RunDir run, JobSpec spec, plan::Plan plan, ModelInfo model, std::int64_t trainSize,
      std::int64_t testSize, Bytes dataBytes, std::int64_t startStep, std::string checkpoint, const Json& resumed);

  Result<TrainResult> run();

 private:
  Status start();
  Status train();  // announces the generation, then watch()
  // The workers of a generation of A_ replicas, with ids not in use
  // (`stageReplicas`: each stage's, when they differ).
  std::vector<WorkerState> layout(int replicas, int stages, const std::vector<int>& stageReplicas = {}) const;
  // A_ = `replicas`, and W_ and stageReplicas_ for it and gen_.
  void setReplicas(int replicas);
  Status launch(WorkerState& w, const std::string& token, int generation, const plan::PlanStage& stage, Bytes memory);
  void makeSampler();   // sampler_ and perEpoch_ for A_ replicas
  void countSteps();    // totalSteps_ and stopStep_ from epochs_
  Status launchWorkers();
  // NOTE [Changing the replicas]
  Status scalingSchedule();
  // A plan made for `replicas` (scaling.replan), as a segment records it.
  Result<Json> replan(int replicas);
  // The plan of the segment `step` is in.
  Result<plan::Plan> planAt(std::int64_t step) const;
  // gen_, B_ and the stages' memory from the segment `step` is in.
  Status useGenerationPlan(std::int64_t step);
  std::int64_t generationStop() const;
  void maybePrestart();
  // Every worker holds at the epoch end `step` (a rule): go on, or end the
  // generation there for rescale().
  void onBoundary(std::int64_t step);
  ScalingDecision decideNow();
  Status rescale();
  // Stops `ws` (asks, then forces after `grace`) and bills them no more.
  void retire(std::vector<WorkerState>& ws, Seconds grace);
  // An exit of a worker that is not in this generation (a pre-started one).
  void onOtherExit(const WorkerExit& e);
  // This generation's workers that ended since the last call, billed no
  // more; other workers' exits go to onOtherExit().
  std::vector<std::pair<WorkerExit, WorkerState*>> endedWorkers();
  // `w` registered: running, billed from now at its stage of `plan`.
  void onRegistered(WorkerState& w, const plan::Plan& plan);
  WorkerState* current(int id);
  static UsdPerHour rateOf(const plan::Plan& plan, int stage);
  // Its role in this generation; stateFrom ≥ 0: joining the running group,
  // its state from that replica (NOTE [State for joiners]).
  void sendAssign(const WorkerState& w, int stateFrom = -1);
  // The "assign" message; with `next` (the regroup message to the running
  // workers), its role in the group they regroup into at regroupAt_.
  Json assignMessage(const WorkerState& w, int stateFrom, const Json* next = nullptr) const;
  // The joiners' roles, once the regroup's step is confirmed (NOTE [Roles
  // for joiners ahead], regroup.cc).
  void assignJoiners();
  void onFile(const WorkerState& w, const Json& m);
  Status fetchStoredFile(const Json& m, std::int64_t step, const std::function<bool(int)>& ownLayer);
  // Once the generation after a boundary has all registered: how long the
  // boundary waited for them, if it did.
  void noteReadyIfScaling();
  Status recover();
  // The job lost a worker (`worker`, or -1 when unknown): failure_ says how.
  Status lose(int worker, bool outOfMemory);
  // A step no worker has begun by the time they all hear of it.
  std::int64_t agreedStep() const;
  // NOTE [Agreeing on a step]: sends each worker its stop or regroup message
  // (by id) for `step`, confirmed once every one says it had not begun it;
  // else moved past the furthest begun, to the step `revise` returns for it
  // (its own state moved along; absent: that step).
  // `confirmed` runs once it is.
  void propose(std::int64_t step, std::map<int, Json> messages,
               std::function<std::int64_t(std::int64_t)> revise = {}, std::function<void()> confirmed = {});
  // propose() of a stop with a save at `step` to every worker.
  void proposeStop(std::int64_t step, std::function<std::int64_t(std::int64_t)> revise = {});
  void onStepAck(int id, const Json& m);
  bool confirmed(std::int64_t step) const { return agreement_.confirmed && agreement_.step == step; }
  bool agreeing() const { return agreement_.step >= 0 && !agreement_.confirmed; }  // a proposal awaits answers
  struct Agreement {
    std::int64_t step = -1;
    std::map<int, Json> messages;
    std::set<int> acked;
    std::function<std::int64_t(std::int64_t)> revise;
    std::function<void()> onConfirmed;
    bool confirmed = false;
    int moves = 0;
  } agreement_;
  Status waitFor(const char* what, const std::function<bool(const WorkerState&)>& reached);
  Status watch();
  void handle(int worker, const Json& m);
  // Waits up to `timeoutMs` for one control message and handles it; false
  // when none came.
  bool receiveOne(int timeoutMs);
  void onStepComplete(std::int64_t step, const StepAccount& a);
  // onStepComplete() for the steps whose every report is in, in order; from
  // a regroup's step on only once it has happened (maybeRegroup()).
  void completeSteps();
  // A line of metrics.jsonl, also passed on as an event (NOTE [A job's
  // events], cluster/job_handle.h); emit(): an event alone.
  void report(Json line);
  void emit(Json event) const;
  // Tiers (NOTE [Evicting at a step boundary], tier_driver.cc): the
  // transient tier's market at this moment, acted on; the change at a new
  // generation (rescale(), recover()); the summary's record.
  Status openTiers();
  void pollTiers();
  void bidBrain(Seconds t);
  sim::BidChoice chooseTierBid(Seconds wall) const;
  void issueTierStop();
  // NOTE [Regrouping at a step boundary]: whether the change can keep the
  // survivors running, the step it then happens at (*at, moved off an
  // epoch's start), and the change itself once that step's predecessor is
  // complete.
  bool canRegroup(std::int64_t* at) const;  // at null: whether it could
  // The reliable replicas that compute nothing beside `transient` ones: all
  // R from reliable_idle_ratio on, where the transient ones can share the
  // step's microbatches; else 0.
  int idleBeside(int transient) const;
  void noteIdle();  // on the console: the reliable replicas compute nothing, or compute again
  // The step's microbatches over every replica of this generation.
  std::int64_t stepMicrobatches() const { return static_cast<std::int64_t>(gen_.num_microbatches) * (A_ - idle_); }
  bool joinersReady();
  void dropJoiners();  // retired, released
  void maybeRegroup();
  // A change of the transient workers made (rescale(), maybeRegroup()): its
  // stall measured to the next step, its event (with `extra`) and line.
  void tierChanged(int before, bool regrouped, const Json& extra = Json::object());
  void evictTransients(const std::string& why);
  // `active`: the transient replicas of the new generation (-1: those held).
  Status tiersAtNewGeneration(int active = -1);
  bool interruptAsked() const;  // Ctrl-C, or the handle's stop or preemption
  Status waitForTransients();
  void buyTransients(Seconds t);  // all T at the fixed bid, back at the next generation
  Json tierEvent(const char* name) const;
  Json tiersSummary() const;
  // The global batch: the segment's replicas' (the tiers keep it while the
  // transient replicas are gone).
  std::int64_t globalBatch() const { return static_cast<std::int64_t>(segmentReplicas_) * epochs_.perReplicaBatch(); }
  // Requests from the job's handle, taken in watch(): a resize (NOTE
  // [Resizing from the handle]) and a preemption.
  void takeRequests();
  void issueResize();
  // Dollars so far: each worker is billed while it runs (ledger_).
  double cost() const { return priorCost_ + ledger_.cost(now()); }
  double now() const { return launched_ == Clock::time_point{} ? 0 : since(launched_); }
  Status makeLauncher();
  Status failure(const std::string& message);
  void stopWorkers(Seconds grace);
  void billFromAccounting();
  void finish(const std::string& status, const std::string& reason);
  int workerOf(const std::string& identity) const;
  // Its cores, and whether the workers share them, in a generation of
  // `workers` (−1: this one's W_).
  Json cpusOf(const WorkerState& w, int workers = -1) const;
  bool coresShared(int workers = -1) const;

  const TrainOptions& o_;  // coordinator.cc's alone (the public options: cluster/coordinator.h)
  std::optional<std::int64_t> stopAfter_;  // o_.stop_after
  RunDir run_;
  JobSpec spec_;
  plan::Plan plan_;
  ModelInfo model_;
  std::int64_t trainSize_, testSize_;
  Bytes dataBytes_;  // the datasets in memory (planning)
  std::int64_t startStep_;
  std::string checkpoint_;
  Progress progress_;

  int A_ = 1, B_ = 1, W_ = 1;
  int T_ = 1;  // tensor parallelism: workers per (replica, stage)
  // gen_'s stages replicated unevenly (NOTE [Unevenly replicated stages],
  // plan/plan.cc): each stage's replicas (A_ is stage 0's); else empty.
  std::vector<int> stageReplicas_;
  std::int64_t perEpoch_ = 1, totalSteps_ = 0, stopStep_ = 0;
  std::optional<data::EpochSampler> sampler_;
  std::string token_;
  std::unique_ptr<wire::ControlServer> control_;
  // The workers' c10d Store, served over control_ (wire/store.h): each
  // generation's process groups meet there under "gen<N>/".
  wire::StoreService store_;
  std::unique_ptr<Launcher> launcher_;
  // The Redis channel, when the workers exchange tensors through one (cluster.channel).
  std::unique_ptr<JobChannel> channel_;
  Ledger ledger_;
  std::vector<WorkerState> workers_;
  std::map<std::int64_t, StepAccount> steps_;
  std::map<std::int64_t, EvalAccount> evals_;
  std::map<std::int64_t, std::set<int>> checkpoints_;
  std::map<std::int64_t, std::string> spoiled_;  // steps with a refused checkpoint file, and why
  std::int64_t stepsDone_ = 0, maxStarted_ = 0;
  // FlexRR: microbatches computed by another replica than their own, and
  // the microbatches of the steps done.
  std::int64_t reassigned_ = 0, microbatchesDone_ = 0;
  std::int64_t skippedSteps_ = 0;  // fp16: this run's (NOTE [Loss scaling])
  double lossScale_ = 0;           // fp16: after the last step
  double samples_ = 0, lastLoss_ = 0, rateEma_ = 0;
  std::vector<double> stepSeconds_, bubbles_;
  void checkPrediction(double stepSeconds);
  int predictionGeneration_ = -1;
  void recordStageTimes(const StepAccount& a);
  Json stageTimesJson() const;
  struct StageSteps {
    std::vector<double> compute, allreduce;
  };
  std::vector<StageSteps> stageSteps_;  // this generation's, per stage
  int stageGeneration_ = -1;
  std::vector<double> predictionSteps_;  // this generation's first step times
  Clock::time_point launched_, trainingStart_, lastStepAt_;
  std::int64_t originUs_ = 0;
  double finalAccuracy_ = -1, finalTestLoss_ = -1;
  double priorSeconds_ = 0, priorCost_ = 0, priorSamples_ = 0;
  double stepTime_ = 0;  // wall time spent in this run's steps (evaluations and checkpoints excluded)
  bool stopping_ = false, interrupted_ = false, preempted_ = false;
  int resizeTo_ = 0;            // replicas asked for by the handle, from the next epoch boundary; 0: none
  bool resizeIssued_ = false;   // this generation's workers were told where to stop for it
  // The functions near their time limit save and end at a step; the next
  // generation continues it (NOTE [Functions' time limit]).
  bool reinvoking_ = false;
  Json reinvocations_ = Json::array();
  void maybeReinvoke();
  std::string failure_;

  // Recovery (NOTE [Recovering from a lost worker]).
  struct Loss {
    int worker = -1;
    bool recoverable = false, out_of_memory = false;
    bool evicted = false;  // taken by the spot market (cluster.tiers): not counted in max_recoveries
  };
  Loss loss_;
  bool fatal_ = false;            // a worker failed on its own (its error would recur)
  bool training_ = false;         // this generation was told to go
  int generation_ = 0, recoveries_ = 0;
  std::int64_t resumeStep_ = 0;   // where the current generation starts
  std::int64_t reached_ = 0;      // global steps completed
  std::int64_t finalized_ = -1;   // the last checkpoint completed
  std::map<std::int64_t, double> stepSamples_;  // samples of the steps since the last checkpoint
  std::map<int, std::vector<std::int64_t>> halted_;  // survivor's rank -> the steps it can save, its completed first
  std::set<int> saveFailed_;  // ranks
  std::vector<Bytes> stageMemory_;              // per stage, raised after an out-of-memory loss
  Json events_ = Json::array();
  double recoveringSince_ = -1;   // now() at the loss, until training again
  bool halting_ = false;          // recover() halts the survivors and saves them: no regroup switches then
  std::vector<std::pair<std::string, std::string>> exits_;  // worker name -> how it ended
  std::map<int, std::string> everyWorker_;  // id -> name, over all generations (traces)

  // Tiers (NOTE [Evicting at a step boundary], [BidBrain in a live run]).
  std::optional<TierMarket> tierMarket_;
  int tierActive_ = 0;             // transient replicas in this generation
  int idle_ = 0;                   // replicas 0..idle_−1 compute nothing (NOTE [Reliable workers that compute nothing])
  int idleBefore_ = 0;             // idle_ at the last change of the transient workers (or the start)
  int tierTarget_ = 0;             // in the next one (the instances held)
  double tierBid_ = 0;             // the fixed bidder's bid (BidBrain's first allocation's)
  bool tierStopIssued_ = false;    // this generation was told where to stop for the change
  double noticeDeadline_ = -1;     // training seconds at which the noticed workers are taken
  double tierPolled_ = 0;          // the market's seconds (tierWall()) at the last look at it
  Seconds tierClockFrom_ = -1;     // training seconds when the market's clock started (-1: not yet)
  double tierDecideAt_ = 0;        // BidBrain's next decision, training seconds
  int tierNotices_ = 0, tierTaken_ = 0, tierReturns_ = 0, tierDecisions_ = 0;
  double tierWaited_ = 0;          // wall seconds without a worker (checkpoint-restart)
  // Wall seconds each change stalled the job, last step to first step: [0]
  // transient workers leaving, [1] coming back.
  std::array<std::vector<double>, 2> tierStalls_;
  Clock::time_point tierChangeFrom_{};  // a change's last step before it, until the first after it
  bool tierChangeLeft_ = false;         // and whether it is a leave
  int tierRegroups_ = 0;                // changes that regrouped the running workers
  Clock::time_point lastStepEnd_{};     // the last step's report (lastStepAt_ also moves at saves)
  Seconds tierEvictionStall() const;
  Seconds tierWall() const;
  std::set<int> evictedIds_;       // workers the market took (their loss is no failure)
  std::int64_t regroupAt_ = -1;    // the survivors regroup before this step (-1: none asked)
  int regroupWorkers_ = 0;         // and are these many
  std::vector<WorkerState> leaving_;  // left at a regroup: answered until they exit
  std::vector<WorkerState> joining_;  // started to join at a regroup, waiting for their role
  Json regroupRole_;                  // the regroup message of the running workers that stay
  bool tierJoinFailed_ = false;       // a joiner could not start: returns restart every worker
  int segmentReplicas_ = 1;        // the segment's replicas (A_ unless the transient ones are gone)

  // Scaling (NOTE [Changing the replicas]).
  std::unique_ptr<ScalingPolicy> policy_;
  EpochSchedule epochs_;
  plan::Plan gen_;                     // this generation's plan: plan_, or a re-plan for its replicas
  plan::Plan nextPlan_;                // the pre-started generation's
  Json resumedScaling_;                // the checkpoint's record, when resuming
  std::int64_t genStop_ = 0;           // where this generation stops
  std::vector<WorkerState> next_;      // the next generation's, pre-started
  std::string nextToken_;
  double prestartedAt_ = -1, predictedBoundary_ = -1;
  std::vector<double> startDelays_;    // measured: launch to register
  double lastEvalSeconds_ = 0;         // the last epoch end's evaluation
  double epochStartedAt_ = 0, lastEpochSeconds_ = 0;
  Json scalingEvents_ = Json::array();
  double scalingSince_ = -1;           // now() at the boundary, until training again
  std::map<std::int64_t, int> boundaries_;       // epoch-end step -> workers holding there
  std::optional<ScalingDecision> decided_;       // a rule's decision, taken at the boundary
};

}  // namespace hydrozoa::cluster::coordinator
