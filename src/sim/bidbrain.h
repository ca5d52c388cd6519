// BidBrain (Proteus, seed 002 §4.3; docs/spot.md): bidding for transient
// cloud capacity by the expected cost per unit of work, replayed on a spot
// price history in virtual time, against buying everything on demand,
// spot instances with checkpoint-restart, and a fixed bid. Pure C++.
//
// A job needs `work_hours` instance-hours. It keeps `reliable` on-demand
// instances for its state (AgileML's reliable tier) and may add up to
// `transient` spot instances. Billing is AWS's of the thesis: an instance
// is charged at the start of each of its hours (spot: the market price
// then); an hour the cloud cuts short by evicting it is not charged. An
// evicted instance gets `notice` (2 minutes) and is removed at the end of
// it; under AgileML its work up to then is kept (the job's replicas drop
// it at a step boundary), under checkpoint-restart the work since the
// last checkpoint is lost.
//
// BidBrain's model (§4.3.1): for an allocation A of k instances at price p
// with bid delta d (the bid above the market price), β = the probability
// that it is evicted within the hour and τ its mean time to eviction when
// it is, both estimated from the price history; its expected cost over the
// next hour C_A = (1 − β)·k·p (an evicted hour is free) and expected work
// W_A = k·((1 − β)·1h + β·τ); a footprint's expected cost per work is
// E = Σ C_A / Σ W_A. At each decision point (every 2 minutes, right after
// an eviction notice, and before an allocation's billing hour ends) it adds
// the candidate allocation (market, bid delta, count) that lowers E the
// most while any does, and lets an allocation lapse at its hour's end when
// E is lower without it.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "core/units.h"
#include "sim/spot_history.h"

namespace hydrozoa::sim {

struct BidBrainJob {
  double work_hours = 1;  // instance-hours
  int reliable = 1;       // on-demand instances for the state
  int transient = 8;      // spot instances at most
  std::string reliable_type;  // "" : the cheapest on-demand type of the history
};

struct BidBrainOptions {
  Seconds start = -1;            // Unix time the job starts (< 0: the history's beginning)
  Seconds decision_interval = 120;
  Seconds notice = 120;          // an eviction's warning
  Seconds checkpoint_every = 1800;  // checkpoint-restart
  Seconds restart = 600;         // checkpoint-restart: new instances and a restore after an eviction
  double fixed_delta = 0.05;     // the fixed bid: this far above the price when acquired (USD/h)
  std::vector<double> deltas = {0.0001, 0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.4};  // BidBrain's choices
  Seconds tick = 60;
};

struct StrategyResult {
  std::string name;
  double cost = 0;          // USD
  Seconds time = 0;         // to the job's end
  int evictions = 0;        // instances evicted
  double lost_hours = 0;    // instance-hours of work redone (checkpoint-restart)
  double instance_hours = 0;
  bool finished = true;     // false: the history ended first (its last prices held)
};

// BidBrain's expected cost (USD) and work (instance-hours) over the next
// hour of k instances at `price` an hour that are evicted within it with
// probability e.beta, after e.tau on average (§4.3.1; an evicted hour is
// not charged): {(1 − β)·k·p, k·((1 − β) + β·τ/1h)}.
std::pair<double, double> expectedCostAndWork(int k, double price, const EvictionEstimate& e);

// BidBrain in one market, for the live tiers (cluster/tiers.h): beside
// `reliable` instances on demand at `onDemand`, the allocation of `counts`
// spot instances at `deltas` above the market's price at `now` with the
// lowest expected cost per work E, if it is lower than the reliable ones'
// alone; count 0 if none is. β and τ come from the history before `now`
// alone: a live run does not know the prices to come. `stallHours`: how
// long an eviction stalls every instance of the job (in the live runtime,
// two changes: the evicted leave, the survivors regrouping, and new ones
// join, every worker starting again); an allocation's expected work loses
// β·(reliable + k)·stallHours. The simulator's AgileML loses none. Beside
// the counts in `idleCounts` the reliable instances compute nothing
// (AgileML's third stage): their work counts only after an eviction.
struct BidChoice {
  int count = 0;
  double bid = 0;            // USD/h
  double cost_per_work = 0;  // E with it (without: the on-demand price)
};
BidChoice chooseBid(const SpotMarket& m, double onDemand, int reliable, const std::vector<int>& counts,
                    const std::vector<double>& deltas, Seconds now, double stallHours = 0,
                    const std::vector<int>& idleCounts = {});
// E of `reliable` on demand and `count` spot instances bidding `bid`, at `now`.
double costPerWork(const SpotMarket& m, double onDemand, int reliable, int count, double bid, Seconds now,
                   double stallHours = 0, bool reliableIdle = false);

// All-on-demand, spot with checkpoint-restart, a fixed bid, BidBrain; in
// that order. Fails when the history lacks an on-demand price for a type it
// has records of, or the job's reliable type.
Result<std::vector<StrategyResult>> compareBidding(const SpotHistory& h, const BidBrainJob& job,
                                                   const BidBrainOptions& o);

}  // namespace hydrozoa::sim
