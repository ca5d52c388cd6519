// Proteus's reliable and transient tiers in a live run (seed 002 ch. 4;
// docs/spot.md, "Live tiers"): `cluster.tiers` in a job spec, `--tiers` and
// `--spot-trace` on the command line, and the transient tier's spot market
// replayed from a price history in wall time. Pure C++.
//
// A job of R reliable (on-demand) and T transient (spot) workers trains R + T
// data-parallel replicas of one stage; the reliable ones are replicas
// 0..R−1, so replica 0, which writes every checkpoint and every save at a
// step boundary, is always reliable (AgileML's state on the reliable tier).
// The transient workers hold a bid in one market of the trace. When the
// replayed price rises above the bid they get an eviction notice, are
// removed at the next step boundary and come back when the price falls to
// the bid again (NOTE [Evicting at a step boundary] in
// cluster/tier_driver.cc); with `bidder: bidbrain`, BidBrain chooses how
// many to hold and at what bid (NOTE [BidBrain in a live run]).
#pragma once

#include <optional>
#include <string>

#include "core/files.h"
#include "core/status.h"
#include "core/units.h"
#include "sim/spot_history.h"

namespace hydrozoa::cluster {

struct TierSpec {
  int reliable = 0, transient = 0;  // reliable 0: no tiers
  std::string spot_trace;           // the price history (the cloud's JSON export); required with tiers
  std::string market;               // "TYPE" or "TYPE/ZONE"; "": the cheapest on-demand type, its first zone
  std::optional<double> bid;        // USD/h; unset: the type's on-demand price (fixed bidder)
  std::string bidder = "fixed";     // "fixed": all T at `bid` | "bidbrain": BidBrain chooses count and bid
  double speed = 3600;              // trace seconds replayed per wall second
  Seconds notice = 5;               // wall seconds from the notice to the eviction; 0: evicted without one
  std::string start;                // a time in the trace (ISO 8601); "": its beginning (bidbrain: a day in)
  // All transient, the state in checkpoints (reliable 0): evicted, the run
  // stops at a step boundary and restarts from its checkpoint when the
  // price falls to the bid (NOTE [Checkpoint-restart]).
  bool checkpoint_restart = false;
  // Transient workers that leave (evicted with notice, or fewer held) or come
  // back leave the others running, regrouped at the step boundary; false:
  // every change restarts all workers (NOTE [Regrouping at a step boundary]).
  bool regroup = true;
  // From this transient:reliable ratio of the workers present on, the
  // reliable ones hold the state and compute nothing (AgileML's third
  // stage, NOTE [Reliable workers that compute nothing]); 0: they always
  // compute. The thesis switches beyond 15:1.
  double reliable_idle_ratio = 16;
  bool enabled() const { return reliable > 0 || checkpoint_restart; }
};

// "reliable=1,transient=3" (--tiers) into `spec` (reliable=0 is for
// checkpoint_restart: validateTiers says so).
Status parseTierCounts(const std::string& text, const std::string& what, TierSpec* spec);
// cluster.tiers: {reliable, transient, spot_trace, market, bid, bidder, speed, notice, start,
// checkpoint_restart, regroup, reliable_idle_ratio}.
Result<TierSpec> readTiers(const Json& j, const std::string& where);
Json tiersToJson(const TierSpec& t);
// The values, without reading the trace (`what` names the field).
Status validateTiers(const TierSpec& t, const std::string& what);

// The transient tier's market, replayed: trace time = start + wall × speed
// (wall: seconds since training began); past the trace's end its last
// price holds. And the tiers' bill in trace time, as the cloud of the
// thesis (and the simulator, sim/bidbrain.h) bills: each instance at the
// start of each of its hours (the reliable ones at the on-demand price, the
// transient ones at the market's price then), an hour the cloud cuts short
// by evicting it not charged; against all R + T on demand.
class TierMarket {
 public:
  // Reads the trace, finds the market, the on-demand price and the start.
  // Fails naming the file and what is missing (no records for the type, no
  // on-demand price, a start outside the trace).
  static Result<TierMarket> open(const TierSpec& spec);

  const sim::SpotMarket& market() const { return market_; }
  double onDemand() const { return onDemand_; }
  // The transient instances' bid (the spec's until an allocation sets one).
  double bid() const { return bid_; }
  Seconds traceTime(Seconds wall) const { return start_ + wall * speed_; }
  double price(Seconds wall) const { return market_.priceAt(traceTime(wall)); }
  bool outbid(Seconds wall) const { return price(wall) > bid_; }
  // Whether the price passed the bid at any moment in (from, to] of wall
  // time: the cloud evicts then, however late the coordinator looks.
  bool outbidBetween(Seconds from, Seconds to) const;

  // The bill. start(): the reliable instances' first hour begins (once);
  // acquire(): `count` transient instances bidding `bid` (a held allocation
  // is replaced: its hour was paid); evict(): the cloud takes them, their
  // hour is refunded; lapse(): they are let go at their hour's end;
  // advance(): the hours that begin up to `wall` are charged.
  void start(Seconds wall);
  bool started() const { return firstWall_ >= 0; }
  void acquire(Seconds wall, int count, double bid);
  void evict(Seconds wall);
  void lapse() { lapsing_ = true; }
  void advance(Seconds wall);
  int held() const { return held_; }  // transient instances held (lapsing ones included)
  bool lapsing() const { return lapsing_; }
  // Wall seconds to the end of the held instances' hour.
  Seconds hourLeft(Seconds wall) const { return (spotHour_ + 3600 - traceTime(wall)) / speed_; }
  // {"market", "on_demand_usd_per_hour", "bid_usd_per_hour", "speed", "trace_start", "trace_hours",
  //  "usd": {"reliable", "transient", "total"}, "all_on_demand_usd", "transient_hours"}
  Json summary(int reliable, int transient) const;

 private:
  sim::SpotMarket market_;
  double onDemand_ = 0, bid_ = 0, speed_ = 1;
  Seconds start_ = 0;
  Seconds firstWall_ = -1, lastWall_ = 0;  // wall
  int held_ = 0;
  bool lapsing_ = false;
  Seconds reliableHour_ = 0, spotHour_ = 0, heldSince_ = 0;  // trace time
  int reliableHours_ = 0;
  double spotHourUsd_ = 0, transientUsd_ = 0, transientHours_ = 0;
};

}  // namespace hydrozoa::cluster
