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

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/files.h"
#include "core/status.h"
#include "core/units.h"

namespace hydrozoa::sim {

// A spot market (an instance type in a zone) and its prices over time.
struct SpotMarket {
  std::string type, zone;
  std::vector<std::pair<Seconds, double>> prices;  // (Unix time, USD/h), time increasing
  double priceAt(Seconds t) const;                  // the last price at or before t (the first before it)
};

struct SpotHistory {
  std::vector<SpotMarket> markets;
  std::map<std::string, double> on_demand;  // USD/h per instance type
  Seconds begin = 0, end = 0;               // the records' span
};

// The cloud's export (`aws ec2 describe-spot-price-history`): {"SpotPriceHistory":
// [{"AvailabilityZone", "InstanceType", "ProductDescription", "SpotPrice", "Timestamp"}, ...]},
// in any order; an "OnDemandPrices": {TYPE: USD} object beside it (ours) gives
// the on-demand prices. Errors name the record and field.
Result<SpotHistory> parseSpotHistory(const Json& j, const std::string& what);
Result<SpotHistory> loadSpotHistory(const std::string& path);
Json spotHistoryToJson(const SpotHistory& h);
// "2016-03-14T00:03:21.000Z", "...+00:00" -> Unix seconds.
Result<Seconds> parseTimestamp(const std::string& text, const std::string& what);
std::string formatTimestamp(Seconds t);

// A synthetic history: per market, a price that reverts to `base` (the
// on-demand price times base_fraction) with noise every 5 minutes (a
// log-space Ornstein-Uhlenbeck walk), and spikes (on average one every
// `spike_every`, each to 1–10x the on-demand price for 5 minutes to 2 hours),
// over `days`. Deterministic in `seed`.
struct SpotGenOptions {
  std::vector<std::pair<std::string, double>> types = {{"c4.xlarge", 0.199}, {"c4.2xlarge", 0.398}};
  std::vector<std::string> zones = {"us-east-1a", "us-east-1b"};
  double days = 7;
  double base_fraction = 0.25;
  Seconds spike_every = 12 * 3600;
  Seconds start = 1457913600;  // 2016-03-14T00:00:00Z
  std::uint64_t seed = 1;
};
SpotHistory generateSpotHistory(const SpotGenOptions& o);

// β and τ of bidding `delta` above the market's price, for an hour, over
// starting points every 5 minutes of the history.
struct EvictionEstimate {
  double beta = 0;     // probability of eviction within the hour
  Seconds tau = 3600;  // mean time to eviction when evicted
};
EvictionEstimate estimateEviction(const SpotMarket& m, double delta);

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

// "reliable=1,transient=8" -> {1, 8}: the reliable tier needs at least one.
Result<std::pair<int, int>> parseTiers(const std::string& text, const std::string& what);

// All-on-demand, spot with checkpoint-restart, a fixed bid, BidBrain; in
// that order. Fails when the history lacks an on-demand price for a type it
// has records of, or the job's reliable type.
Result<std::vector<StrategyResult>> compareBidding(const SpotHistory& h, const BidBrainJob& job,
                                                   const BidBrainOptions& o);

}  // namespace hydrozoa::sim
