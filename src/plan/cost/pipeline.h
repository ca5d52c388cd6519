// The pipeline runtime model of Hydrozoa (Hydrozoa §3.3, appendix A.1;
// docs/plan.md): the time of one minibatch of M microbatches through shards
// p_1..p_k under the GPipe schedule (all forwards, then all backwards):
//
//   R = Σ_i (f_{p_i} + b_{p_i}) + 2 Σ_{i≥2} c_{p_i} + (M − 1)(t_k + r_1)
//   t_k = max(max_j f_{p_j}, max_{j≥2} c_{p_j})
//   r_1 = max(max_j b_{p_j}, max_{j≥2} c_{p_j})
//
// where c_{p_i} = a_{last(p_{i−1})} / D is the transfer into shard i.
//
// When the plan's workers share fewer cores than they have compute threads
// (HostShare), R comes from a simulation of the same schedule in which the
// stages computing at each moment share the cores (processor sharing): NOTE
// [A pipeline on a shared host], pipeline.cc.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/units.h"
#include "plan/cost/schedules.h"

namespace hydrozoa::plan {

// Per-layer costs of a chain at one microbatch size, in seconds.
struct ChainCosts {
  ChainCosts() = default;
  ChainCosts(std::vector<Seconds> f, std::vector<Seconds> b, std::vector<Seconds> c)
      : forward(std::move(f)), backward(std::move(b)), cut(std::move(c)) {}

  std::vector<Seconds> forward;   // f_i
  std::vector<Seconds> backward;  // b_i
  std::vector<Seconds> cut;       // cut[u]: transfer time if a boundary follows layer u (a_u / D); size L−1
  // The CPU time a message across a boundary after layer u takes from the
  // pass that sends it and from the pass that receives it (NOTE [What a
  // message costs the cores], profile/network.cc): size L−1, or empty for
  // none. Charged to a partition's passes (pipelineTime, simulation); the
  // partitioner chooses without them.
  std::vector<Seconds> send, receive;

  int numLayers() const { return static_cast<int>(forward.size()); }
};

// What the messages of a stage (or chunk) of layers [first, last] take from
// its own passes per microbatch: its forward pass sends its output (unless
// last) and received its input (unless first); its backward pass sends the
// input's gradient and received the output's.
struct MessagePasses {
  Seconds forward = 0, backward = 0;
};
MessagePasses stageMessages(const ChainCosts& costs, int first, int last);

// A partition of layers 0..L−1 into consecutive stages: stage s covers
// layers [first[s], first[s+1]) (the last one to the end).
struct Partition {
  std::vector<int> first;  // first[0] == 0, strictly ascending

  int numStages() const { return static_cast<int>(first.size()); }
  int lastLayer(int stage, int numLayers) const {
    return stage + 1 < numStages() ? first[stage + 1] - 1 : numLayers - 1;
  }
  std::string toString(int numLayers) const;  // "0-3,4-9,10-17"
  bool operator==(const Partition& o) const { return first == o.first; }
};

// The cores the plan's workers share: every stage runs on `replicas`
// workers at once (A data-parallel replicas, in step), each computing with
// `threads` threads. cores == 0: a core for every thread.
struct HostShare {
  int cores = 0;
  int replicas = 1;
  int threads = 1;
  // How much slower one compute thread runs while every core of the host
  // computes than alone (the profile's measured co-run slowdown, 1 when not
  // measured): NOTE [Compute beside busy cores], pipeline.cc.
  double slowdown = 1;

  // More threads than cores when every stage computes at once.
  bool oversubscribed(int stages) const;
  // Two or more threads compute at once on a host whose cores slow each
  // other down (slowdown > 1).
  bool contended(int stages) const;
  // The speed of each of `busy` threads computing at once, as a fraction of
  // one thread alone on a core: its share of the cores over the slowdown of
  // the cores in use (1 when cores == 0).
  double rate(double busy) const;
  // 1 / rate with every stage's threads busy: how much longer each compute
  // time takes then (processor sharing and contention).
  double scale(int stages) const;
};

// The terms of R for one partition.
struct PipelineTime {
  Seconds total = 0;         // R
  Seconds busy = 0;          // Σ over stages of the time each spends computing (M·Σ(f+b) on cores of their own)
  std::vector<Seconds> drain;  // per stage: from its last backward pass's end to R
  bool shared = false;       // R is the processor-sharing simulation's (HostShare::oversubscribed)
  // With StageTails (simulation only), per stage: when its update starts and
  // when its tail ends (its allreduce, then its update, after its last
  // backward pass at R − drain).
  std::vector<Seconds> update_start, end;
  Seconds compute = 0;       // Σ (f + b)
  Seconds communication = 0; // 2 Σ c
  Seconds t_k = 0;           // forward interval between microbatches at the last stage
  Seconds r_1 = 0;           // backward interval at the first stage
  Seconds max_forward = 0, max_backward = 0, max_cut = 0;
};

// R for `partition` with `microbatches` microbatches: the closed form above
// for GPipe on cores of its own, else the simulation of `schedule`'s order.
// REQUIRES: the partition is valid for `costs` and microbatches >= 1.
// With `chunks` > 1 (interleaved) the partition's pieces are the virtual
// stages, stage s running pieces s, s + k, ... of k = pieces / chunks.
PipelineTime pipelineTime(const ChainCosts& costs, const Partition& partition, std::int64_t microbatches,
                          const HostShare& host = {}, ScheduleKind schedule = ScheduleKind::kGPipe, int chunks = 1);

// What a stage computes on its compute thread after its last backward pass,
// in seconds on a core of its own: summing its gradients through shared
// memory, then its optimizer's update.
struct StageTail {
  Seconds allreduce = 0, update = 0;
};

// The simulation of NOTE [A pipeline on a shared host] whatever the host
// (pipelineTime calls it when host.oversubscribed); the other terms are the
// closed form's. With `tails` (one per stage), each stage computes its tail
// after its last backward pass, sharing the cores with the stages still
// draining (PipelineTime::update_start, end).
// Each stage runs its passes in `schedule`'s order (cost/schedules.h).
PipelineTime simulatedPipelineTime(const ChainCosts& costs, const Partition& partition, std::int64_t microbatches,
                                   const HostShare& host, const std::vector<StageTail>& tails = {},
                                   ScheduleKind schedule = ScheduleKind::kGPipe, int chunks = 1);

// Fraction of the k stages' time spent not computing: 1 − busy / (k·R).
double bubbleFraction(const PipelineTime& time, int stages);

}  // namespace hydrozoa::plan
