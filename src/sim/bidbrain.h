// BidBrain (Proteus, seed 002 §4.3; docs/spot.md): bidding for transient
// cloud capacity by the expected cost per unit of work, replayed on a spot
// price history in virtual time, against buying everything on demand,
// spot instances with checkpoint-restart, and a fixed bid. Pure C++.
//
// A job needs `work_hours` hours of work of one instance of its reliable
// type (instances of a type with twice its ν do it in half the time;
// NOTE [BidBrain's model]). It keeps `reliable` on-demand
// instances for its state (AgileML's reliable tier) and may add up to
// `transient` spot instances. Billing is AWS's of the thesis: an instance
// is charged at the start of each of its hours (spot: the market price
// then); an hour the cloud cuts short by evicting it is not charged; the
// rest of the job's last hour is not charged to it either (the thesis's
// accounting, §4.5.2: the next job of a sequence uses it). An
// evicted instance gets `notice` (2 minutes) and is removed at the end of
// it; under AgileML its work up to then is kept (the job's replicas drop
// it at a step boundary), under checkpoint-restart the work since the
// last checkpoint is lost.
//
// NOTE [BidBrain's model]
// Seed 002 §4.3.1, Table 4.2. An allocation i: k_i instances of one type,
// on demand or in one spot market at one bid, billed by the hour. At a
// decision at t, for each allocation:
//   ω_i  the rest of its billing hour (an allocation being added or
//        renewed: the hour it is about to pay for);
//   β_i  the probability that it is evicted within ω_i, and τ_i its mean
//        time to eviction when it is, at its bid's delta above the market
//        price, learnt from the prices before t alone (NOTE [Evictions
//        learnt as time passes]); an on-demand allocation: 0;
//   C_i = (1 − β_i)·k_i·P_i·ω_i/1h (Eq. 4.1: an evicted hour is refunded;
//        P_i the hour's price);
//   Δt_i = (1 − β_i)·ω_i + β_i·τ_i − (1 − Π_j(1 − β_j))·λ − σ·[a change]
//        (Eq. 4.2: the useful time, less λ if any allocation is evicted,
//        less σ when the decision adds or removes an allocation);
//   W_A = φ·Σ k_i·ν_i·Δt_i (Eq. 4.3: ν_i the work of an hour of the
//        type, its vCPUs by default, as in the thesis);  E = ΣC_i / W_A.
// At each decision point (every 2 minutes, right after an eviction notice,
// and within the last 2 minutes of an allocation's billing hour) BidBrain
// adds the candidate (market, bid delta, count) that lowers E the most,
// while any does, and lets an allocation lapse at its hour's end when E
// without it (a change) is lower than E with it renewed. The reliable
// on-demand instances are never let go (AgileML's state lives there).
// The replay charges what the model assumes: after each change of the
// footprint the job computes nothing for σ, after each eviction for λ
// (AgileML's strategies: the fixed bid and BidBrain), and its instances
// work at φ·Σ k·ν (every strategy). φ scales every allocation's work
// alike, so it changes E but never which allocation lowers it.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "core/units.h"
#include "sim/spot_history.h"

namespace hydrozoa::sim {

struct BidBrainJob {
  double work_hours = 1;  // hours of one instance of the reliable type
  int reliable = 1;       // on-demand instances for the state
  int transient = 8;      // spot instances at most
  std::string reliable_type;  // "" : the cheapest on-demand type of the history
  std::map<std::string, double> work_rate;  // ν: work of an hour of each type (vCPUs); absent: 1
};

struct BidBrainOptions {
  Seconds start = -1;            // Unix time the job starts (< 0: the history's beginning)
  Seconds decision_interval = 120;
  Seconds notice = 120;          // an eviction's warning
  Seconds checkpoint_every = 1800;  // checkpoint-restart
  Seconds restart = 600;         // checkpoint-restart: new instances and a restore after an eviction
  double checkpoint_overhead = 0;  // checkpoint-restart: the share of its time spent writing them (the thesis: 0.17)
  double fixed_delta = 0.05;     // the fixed bid: this far above the price when acquired (USD/h)
  std::vector<double> deltas = {0.0001, 0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.4};  // BidBrain's choices
  Seconds change_overhead = 60;    // σ: no progress after the footprint changes (AgileML)
  Seconds eviction_overhead = 60;  // λ: no progress after an eviction (AgileML)
  double scaling = 1;              // φ: the job's work is φ·Σ k·ν
  Seconds tick = 60;
};

// What BidBrain bought or let go, and when.
struct BidDecision {
  Seconds at = 0;
  std::string market;  // "type/zone"
  int count = 0;
  double bid = 0;       // USD/h
  bool lapse = false;   // let go at its hour's end (else: acquired)
  bool operator==(const BidDecision& o) const {
    return at == o.at && market == o.market && count == o.count && bid == o.bid && lapse == o.lapse;
  }
};

struct StrategyResult {
  std::string name;
  double cost = 0;          // USD
  Seconds time = 0;         // to the job's end
  int evictions = 0;        // instances evicted
  double lost_hours = 0;    // instance-hours of work redone (checkpoint-restart)
  double instance_hours = 0;
  bool finished = true;     // false: the history ended first (its last prices held)
  std::vector<BidDecision> decisions;  // BidBrain's
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
// that order. The spot baselines take the market cheapest per work now
// (the price over ν). Fails when the history lacks an on-demand price for
// a type it has records of, or the job's reliable type, or on a bad ν, σ,
// λ or φ.
Result<std::vector<StrategyResult>> compareBidding(const SpotHistory& h, const BidBrainJob& job,
                                                   const BidBrainOptions& o);

}  // namespace hydrozoa::sim
