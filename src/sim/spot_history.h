// Spot price histories (docs/spot.md, docs/formats.md "Spot price
// history"): the cloud's own export, a synthetic generator, and how often a
// bid above the market's price is evicted. Read by BidBrain in the simulator
// (sim/bidbrain.h) and by the live tiers' replay of a trace
// (cluster/tiers.h). Pure C++.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <utility>
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
// starting points every 5 minutes of the history; with `until`, of the
// history before it alone (an hour of it at least, else β 0: nothing seen).
struct EvictionEstimate {
  double beta = 0;     // probability of eviction within the hour (or ω)
  Seconds tau = 3600;  // mean time to eviction when evicted
};
EvictionEstimate estimateEviction(const SpotMarket& m, double delta,
                                  Seconds until = std::numeric_limits<Seconds>::infinity());

// NOTE [Evictions learnt as time passes]
// The same estimate kept up to date as a replay's clock moves, so that a
// decision at t sees only the prices before t, as a live bidder would
// (the thesis learnt β from the three months before its evaluation's). A
// window is a start every 5 minutes from the market's first record and
// the hour after it; it counts once that hour has passed (and lies within
// the records), with the time to its first price above the start's price
// plus `delta`, if any. Each window is looked at once, however often the
// estimate is asked for. within(ω) answers for a shorter horizon, the rest
// of a billing hour: evicted within ω of a start, to the minute.
// advance(until) then within(1 h) equals estimateEviction(m, delta, until).
class EvictionLearner {
 public:
  EvictionLearner(const SpotMarket& m, double delta);
  void advance(Seconds now);
  EvictionEstimate within(Seconds omega) const;
  int samples() const { return samples_; }

 private:
  const SpotMarket* m_;
  double delta_;
  Seconds next_ = 0;  // the next window's start
  int samples_ = 0;
  int evicted_[61] = {};     // windows evicted in their minute 1..60
  double waited_[61] = {};   // and their times to eviction, summed
};

// "reliable=1,transient=8" -> {1, 8}: the reliable tier needs at least
// `minReliable` (the state lives there).
Result<std::pair<int, int>> parseTiers(const std::string& text, const std::string& what, int minReliable = 1);

}  // namespace hydrozoa::sim
