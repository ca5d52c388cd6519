// Pipeline schedules (docs/schedules.md): the order in which one stage runs
// an iteration's forward and backward passes, its transfers with its
// neighbours, its gradient synchronisation and its optimizer step.
//
// A schedule says the order of a stage's forward and backward passes
// (computeOrder); lowerFlushed() turns that order into the actions the step
// executor runs (runtime/exec/step_executor.h): each pass is preceded by the
// receive of what it consumes and followed by the send of what it produces,
// to the neighbouring virtual stage, and the step ends with the wait for the
// gradient allreduce and one optimizer step (a flush). A schedule is one file
// here plus one line in registry.cc; its time and memory model is one file in
// src/plan/cost/.
//
// Virtual stages: with `chunks` v > 1 (interleaved), stage s holds model
// chunks s, s + p, ..., s + (v−1)p of the p·v consecutive pieces of the
// model; the piece after chunk c of stage p−1 is chunk c+1 of stage 0.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "plan/cost/schedules.h"

namespace hydrozoa::runtime {

enum class ActionKind {
  kForward,
  kBackward,
  kRecv,           // take what a neighbour sent (posted ahead by the executor)
  kSend,           // send what the previous pass produced to a neighbour
  kSyncWait,       // wait for the gradient allreduce across the stage's replicas
  kOptimizerStep,  // apply the step's gradients
};

// What a transfer carries (kControl: an asynchronous schedule's word on
// whether the pipeline drains after a step, StepExecutor).
enum class Payload { kActivation, kGradient, kControl };

struct Action {
  ActionKind kind = ActionKind::kForward;
  int microbatch = 0;
  int chunk = 0;
  // The step the action belongs to, relative to the one being run (0; an
  // asynchronous schedule may begin the next step's microbatches early).
  int step = 0;
  // kRecv/kSend: the neighbouring stage (0-based pipeline position) and what
  // travels; the peer's chunk follows from the virtual stage order.
  int peer = -1;
  Payload payload = Payload::kActivation;
  // kBackward: the last backward pass of its chunk before the update, during
  // which the chunk's gradients become final and their allreduce starts;
  // kOptimizerStep: the step's last update.
  bool final = false;

  bool operator==(const Action& o) const {
    return kind == o.kind && microbatch == o.microbatch && chunk == o.chunk && step == o.step && peer == o.peer &&
           payload == o.payload && final == o.final;
  }
};

// "F3", "B3c1" (chunk 1), "recv act mb3 c0 from 2", "sync", "step".
std::string toString(const Action& a);

// Which stage runs a schedule, and over what.
struct PipelineShape {
  int stage = 0, stages = 1;
  int chunks = 1;        // model chunks per stage (interleaved)
  int microbatches = 1;  // per replica and step
  // NOTE [Round-robin over a stage's replicas]
  // Stages replicated unevenly (1F1B-RR, plan.json per-stage "replicas"):
  // the step's K microbatches are dealt round-robin, microbatch k to replica
  // k mod r_s of stage s as its local microbatch k div r_s. Replica j of
  // stage s runs the passes of an unreplicated stage over all K
  // microbatches, keeping only those it is dealt: a subsequence of a
  // deadlock-free order, so itself deadlock-free. The order holds W_s =
  // r_s·(h_s − 1) + 1 of them at once (inFlight()), so that each copy holds
  // h_s = ⌈(r_s + Σ_{t>s} r_t) / r_s⌉ of its own, PipeDream's NOAM over the
  // workers of the stage and after it: for r_s = 1 1F1B's p − s, for every
  // stage replicated alike each copy's own 1F1B, and what the planner's
  // memory model holds (plan/cost/round_robin.h). With W_s = Σ_{t>s} r_t + 1
  // instead, 4 copies of a stage before a single one held one microbatch
  // each: every copy waited for its backward pass before its next forward,
  // and the single stage for that forward (the CNN's 4+1 on 16 cores ran at
  // 0.57× the even 4×1's samples/s). Each transfer goes to the replica the
  // microbatch is dealt to on the peer stage. Empty: every stage has the
  // same copies, replica j of each stage talking to replica j of the others.
  std::vector<int> stageReplicas;
  int replica = 0;
  int stepMicrobatches = 0;  // round-robin: K, the step's over all of the stage's replicas

  int virtualStage(int chunk) const { return chunk * stages + stage; }
  int virtualStages() const { return chunks * stages; }
  bool firstVirtual(int chunk) const { return virtualStage(chunk) == 0; }
  bool lastVirtual(int chunk) const { return virtualStage(chunk) == virtualStages() - 1; }

  bool roundRobin() const { return !stageReplicas.empty(); }
  int replicasOf(int s) const { return roundRobin() ? stageReplicas.at(static_cast<size_t>(s)) : 1; }
  // The step's index of this replica's microbatch `local`.
  int stepMicrobatch(int local) const { return roundRobin() ? local * replicasOf(stage) + replica : local; }
  // Where this replica's microbatch `local` is on stage `peer`: the replica
  // it is dealt to there, and its local index there.
  std::pair<int, int> onPeer(int peer, int local) const {
    if (!roundRobin()) return {replica, local};
    const int k = stepMicrobatch(local);
    return {k % replicasOf(peer), k / replicasOf(peer)};
  }
  // The workers of the stages after this one (round-robin; else one per
  // stage: p − s − 1).
  int downstreamWorkers() const;
  // The most microbatches of the order (orderMicrobatches()) a 1F1B stage
  // holds at once: p − s; round-robin, W_s (NOTE above).
  int inFlight() const;
  // How many of a step's first `microbatches` are dealt to this replica.
  int dealt(int microbatches) const;
  // The microbatches a schedule's order runs over: the step's over all of
  // the stage's replicas (round-robin), else this replica's.
  int orderMicrobatches() const { return roundRobin() ? stepMicrobatches : microbatches; }
  // This shape for a step of `microbatches` over the stage's replicas,
  // this replica's share of them its own.
  PipelineShape forStep(int microbatches) const;
};

class Schedule {
 public:
  virtual ~Schedule() = default;
  virtual const char* name() const = 0;
  // OK when the schedule can run `shape`; otherwise one line naming the
  // constraint and the fix.
  virtual Status check(const PipelineShape& shape) const;
  // The forward and backward passes of the shape's stage in one step, in
  // order (kForward/kBackward only). Every (microbatch, chunk) appears once
  // each way, forward first.
  virtual std::vector<Action> computeOrder(const PipelineShape& shape) const = 0;
  // Everything the stage does in one step.
  virtual std::vector<Action> actions(const PipelineShape& shape) const;
  // Receives the step executor posts ahead per channel; 0: every receive of
  // the step at its start (runtime/exec/step_executor.h).
  virtual int receiveWindow() const { return 2; }

  // NOTE [Asynchronous schedules]
  // An asynchronous schedule (2bw, pipedream) has no flush between steps: a step's
  // actions begin some of the next step's microbatches (Action::step = 1),
  // and the next step's actions skip what was begun (`carried` forward
  // passes). Where the pipeline must drain (an epoch's end, a checkpoint, a
  // stop) the step's actions run without those (`next` = 0). Every stage's
  // step ends with its own flush of the gradients (kSyncWait,
  // kOptimizerStep), so the actions of one step are lowerFlushed's as for
  // the others; the passes of global step t run on weight version
  // t % weightVersions(). Under updatePerMicrobatch() (pipedream) every
  // backward pass is followed by its own sync and update instead
  // (lowerPerMicrobatch), and a forward pass runs on the latest weights,
  // kept for its backward pass (weight stashing): NOTE [Weight versions].
  virtual bool asynchronous() const { return false; }
  virtual bool updatePerMicrobatch() const { return false; }
  // Vertical sync (pipedream-vs): every stage runs a microbatch's passes on
  // the weights of as many of its updates as stage 0 had applied when the
  // microbatch entered the pipeline, not its own latest: NOTE [Vertical
  // sync] in runtime/exec/step_executor.cc.
  virtual bool verticalSync() const { return false; }
  virtual int weightVersions(const PipelineShape& /*shape*/) const { return 1; }
  // One step of an asynchronous schedule (the others: actions(shape)).
  virtual std::vector<Action> actions(const PipelineShape& shape, int carried, int next) const;
  // The forwards that a step which begins `next` microbatches of the step
  // after runs of them (`carried` of the step after).
  virtual int carriedInto(const PipelineShape& shape, int next) const;
};

// The planner's order of passes (plan/cost/schedules.h, where each schedule's
// time is simulated from the same order) as forward and backward actions.
std::vector<Action> fromPasses(const std::vector<plan::Pass>& passes);
// The shape's passes of `global`, an order over orderMicrobatches() (and
// the next step's, Pass::step = 1): round-robin (NOTE above), those dealt
// to the shape's replica, by their local index; else all of them.
std::vector<Action> dealtPasses(const std::vector<plan::Pass>& global, const PipelineShape& shape);

// computeOrder with its transfers, the final backward of each chunk marked,
// and the flush at the end: kSyncWait, kOptimizerStep.
std::vector<Action> lowerFlushed(const std::vector<Action>& compute, const PipelineShape& shape);
// The same with an update per microbatch: every backward pass final, and
// after it (and the send of its gradient) kSyncWait, kOptimizerStep of its
// microbatch.
std::vector<Action> lowerPerMicrobatch(const std::vector<Action>& compute, const PipelineShape& shape);

// The registered schedules (registry.cc), by name.
Result<std::unique_ptr<Schedule>> makeSchedule(const std::string& name);
std::vector<std::string> scheduleNames();

// Runs every stage's actions against each other, as the workers would
// (whether or not check() accepts the shape: a short last step runs with
// the microbatches it has): a
// receive waits for its send, everything else proceeds. OK when every stage
// finishes; an error naming the stuck stages and actions when they deadlock,
// or when a stage's actions are not a valid step (a pass missing or twice, a
// backward before its forward, a send with nothing to send).
Status verifySchedule(const Schedule& schedule, int stages, int chunks, int microbatches);
// The same over consecutive steps of `microbatches[k]` microbatches each, an
// asynchronous schedule's each beginning the next (the last draining);
// with `stageReplicas` (one chunk), every replica of every stage, the
// steps' microbatches dealt round-robin.
Status verifySteps(const Schedule& schedule, int stages, int chunks, const std::vector<int>& microbatches,
                   const std::vector<int>& stageReplicas = {});

// The most microbatches whose activations a stage holds at once (forwards
// done, backwards not yet) over its actions, summed over chunks.
int peakStashed(const std::vector<Action>& actions);

}  // namespace hydrozoa::runtime
