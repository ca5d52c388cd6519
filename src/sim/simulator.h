// Gavel's policies and round-based mechanism in virtual time (seed 003
// §5.7; docs/simulate.md): jobs of a trace arrive, each round places them
// by the mechanism (sched/rounds.h) on the policy's allocation, recomputed
// when the set of jobs changed; a placed job advances at its throughput on
// its type for the round (and finishes inside it when it has fewer steps
// left). Reports each job's completion time and the average, the
// makespan, how busy the workers were, and each job's finish-time
// fairness. With a spot trace (sim/market.h) the types' prices and worker
// counts change as it says: the allocation is decided again at the first
// round boundary after a change, and a job whose worker is reclaimed in the
// middle of a round stops there, keeping its steps (the reclaim notice, two
// minutes on the clouds Gavel measured, is enough for a checkpoint) and
// paying the preemption cost when it resumes.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "core/units.h"
#include "sched/gavel_formats.h"
#include "sched/policy.h"
#include "sim/market.h"

namespace hydrozoa::sim {

struct SimOptions {
  Seconds round = 360;            // Gavel: 6 minutes
  Seconds max_time = 1e9;         // virtual seconds before giving up
  // What a job loses of a round it starts on another type than in the round
  // before (or after not running): restoring its checkpoint (Gavel's
  // mechanism preempts and resumes through checkpoints). Its workers are
  // busy, and billed, meanwhile.
  Seconds preemption = 0;
  // The jobs the average completion time is over, by trace index: all, or
  // [measure_first, measure_last) (steady state: Gavel measures jobs 4000
  // to 5000 of a longer trace).
  int measure_first = 0, measure_last = -1;
  std::vector<double> price;      // USD per worker-hour of each type (cost policies; the bill); empty: none
  std::vector<SpotEvent> spot;    // the market's changes (sim/market.h), in time order
  // Space sharing: pairs of jobs may share workers at the throughputs'
  // measured pair rates (sched::addSpaceSharing), if the policy weighs them.
  bool space_sharing = false;
  double budget = -1;             // USD for the whole trace (min_makespan_budget); < 0: none
  std::vector<sched::Problem::Entity> entities;  // hierarchical
  std::vector<int> entity_of;     // each trace job's entity (sched::parseEntities)
  // Decide the allocation again no sooner than this after the last time
  // (0: at the first round after any arrival or completion). Gavel's own
  // simulator waits 1920 s (its minimum time between allocation resets):
  // meanwhile an arrival waits and a finished job's share stays unused. A
  // change of the spot market is acted on at once either way.
  Seconds reallocate_after = 0;
  // Workers the allocation leaves free take jobs still waiting that run
  // there (sched::RoundMechanism::fillIdle): Gavel's Algorithm 2 goes down
  // the whole priority list, zero priorities included, while workers are
  // free.
  bool fill_idle = true;
};

struct SimJob {
  Seconds arrival = 0, finish = -1;  // finish < 0: not finished
  Seconds deadline = -1;             // its SLO's; < 0: none
  double rounds = 0;                 // rounds it ran
  // Finish-time fairness (Themis; Gavel §5.4.2): its completion time over
  // the time its steps would have taken on 1/n of the cluster, n the jobs
  // there were as each step ran (sched::isolatedThroughput). 1: as on an
  // equal share; above: slower than that. Only for finished jobs.
  double rho = 0;
  Seconds isolated = 0;              // the denominator, seconds
};

struct SimResult {
  std::vector<SimJob> jobs;       // in trace order
  Seconds average_jct = 0;        // over the measured jobs
  Seconds makespan = 0;           // last finish − first arrival
  double utilisation = 0;         // busy worker-seconds / worker-seconds there were (workers · makespan without spot)
  int rounds = 0, allocations = 0;
  double cost = 0;                // USD, the busy workers at their prices
  int slo_jobs = 0, slo_missed = 0;
  int reclaimed = 0;              // jobs stopped mid-round by a spot worker reclaimed
  Seconds solve_seconds = 0;      // wall time in the policy
  double rho_mean = 0, rho_max = 0;  // finish-time fairness of the measured jobs (SimJob::rho)
};

Result<SimResult> simulate(const std::vector<sched::TraceJob>& trace, const std::vector<sched::WorkerType>& types,
                           const sched::Throughputs& throughputs, const sched::Policy& policy,
                           const SimOptions& options = {});

}  // namespace hydrozoa::sim
