#include "cluster/tiers.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace hydrozoa::cluster {

Status parseTierCounts(const std::string& text, const std::string& what, TierSpec* spec) {
  HZ_ASSIGN_OR_RETURN(auto counts, sim::parseTiers(text, what, /*minReliable=*/0));
  spec->reliable = counts.first;
  spec->transient = counts.second;
  return Status();
}

Result<TierSpec> readTiers(const Json& j, const std::string& where) {
  TierSpec t;
  ObjectReader r(j, where);
  t.reliable = static_cast<int>(r.count("reliable", {0, kWorkersRange.max}));
  t.transient = static_cast<int>(r.optCount("transient", {0, kWorkersRange.max}).value_or(0));
  t.spot_trace = r.optString("spot_trace").value_or("");
  t.market = r.optString("market").value_or("");
  if (r.has("bid")) t.bid = r.number("bid");
  t.bidder = r.optString("bidder").value_or("fixed");
  if (r.has("speed")) t.speed = r.number("speed");
  if (r.has("notice")) t.notice = r.seconds("notice");
  t.start = r.optString("start").value_or("");
  if (r.has("checkpoint_restart")) t.checkpoint_restart = r.boolean("checkpoint_restart");
  if (r.has("regroup")) t.regroup = r.boolean("regroup");
  if (r.has("reliable_idle_ratio")) t.reliable_idle_ratio = r.number("reliable_idle_ratio");
  r.rejectUnknownKeys();
  HZ_RETURN_IF_ERROR(r.status());
  HZ_RETURN_IF_ERROR(validateTiers(t, where));
  return t;
}

Json tiersToJson(const TierSpec& t) {
  Json j = {{"reliable", t.reliable}, {"transient", t.transient}, {"spot_trace", t.spot_trace},
            {"market", t.market},     {"bidder", t.bidder},       {"speed", t.speed},
            {"notice", t.notice},     {"start", t.start}};
  if (t.bid) j["bid"] = *t.bid;
  if (t.checkpoint_restart) j["checkpoint_restart"] = true;
  if (!t.regroup) j["regroup"] = false;
  if (t.reliable_idle_ratio != TierSpec{}.reliable_idle_ratio) j["reliable_idle_ratio"] = t.reliable_idle_ratio;
  return j;
}

Status validateTiers(const TierSpec& t, const std::string& what) {
  auto bad = [&](const std::string& m) { return invalidArgument(fmt::format("{}: {}", what, m)); };
  if (t.checkpoint_restart) {
    if (t.reliable != 0) {
      return bad("checkpoint_restart is for tiers that are all transient (the state in checkpoints): give reliable: "
                 "0, or drop checkpoint_restart to keep the state on the reliable workers");
    }
    if (t.transient < 1) return bad("checkpoint_restart needs transient workers: give transient: 1 or more");
    if (t.bidder != "fixed") return bad("BidBrain bids beside a reliable tier: use checkpoint_restart with bidder: fixed");
  } else if (t.reliable < 1) {
    return bad("leaves no reliable worker, and the training state lives on the reliable tier: give reliable: 1 or "
               "more, or checkpoint_restart: true (all transient: the run stops when evicted and restarts from its "
               "checkpoint)");
  }
  if (t.transient < 0) return bad("transient must not be negative");
  if (static_cast<std::int64_t>(t.reliable) + t.transient > kWorkersRange.max) {
    return bad(fmt::format("{} workers in all is more than {}", t.reliable + t.transient, kWorkersRange.max));
  }
  if (t.spot_trace.empty()) {
    return bad("needs the transient tier's prices: spot_trace: FILE (the cloud's spot price history, docs/formats.md) "
               "or --spot-trace FILE");
  }
  if (t.bid && !(*t.bid > 0 && *t.bid <= 1e5)) return bad("bid must be a price from 0 to 100000 USD per hour");
  if (t.bidder != "fixed" && t.bidder != "bidbrain") {
    return bad(fmt::format("bidder \"{}\" is not fixed (all transient workers at one bid) or bidbrain (BidBrain "
                           "chooses how many and at what bid)",
                           t.bidder));
  }
  if (t.bidder == "bidbrain" && t.bid) {
    return bad("bid is BidBrain's to choose under bidder: bidbrain: drop bid, or use bidder: fixed");
  }
  if (!(t.speed >= 1 && t.speed <= 1e7)) {
    return bad(fmt::format("speed {} must be from 1 to 10000000 trace seconds per wall second", t.speed));
  }
  if (!(t.notice >= 0 && t.notice <= 3600)) return bad("notice must be from 0 to 1h of wall time");
  if (!(t.reliable_idle_ratio >= 0 && t.reliable_idle_ratio <= kWorkersRange.max)) {
    return bad(fmt::format("reliable_idle_ratio {} must be a transient:reliable ratio from 0 (the reliable workers "
                           "always compute) to {}",
                           t.reliable_idle_ratio, kWorkersRange.max));
  }
  return Status();
}

Result<TierMarket> TierMarket::open(const TierSpec& spec) {
  HZ_ASSIGN_OR_RETURN(sim::SpotHistory h, sim::loadSpotHistory(spec.spot_trace));
  const std::string what = fmt::format("cluster.tiers: {}", spec.spot_trace);
  std::string type = spec.market, zone;
  if (const auto slash = type.find('/'); slash != std::string::npos) {
    zone = type.substr(slash + 1);
    type = type.substr(0, slash);
  }
  if (type.empty()) {  // the cheapest on-demand type with records
    for (const sim::SpotMarket& m : h.markets) {
      const auto od = h.on_demand.find(m.type);
      if (od == h.on_demand.end()) continue;
      if (type.empty() || od->second < h.on_demand[type]) type = m.type;
    }
    if (type.empty()) {
      return invalidArgument(what + ": OnDemandPrices gives no price for any instance type of the records; the "
                                    "reliable tier is billed at it");
    }
  }
  const sim::SpotMarket* chosen = nullptr;
  std::vector<std::string> markets;
  for (const sim::SpotMarket& m : h.markets) {
    markets.push_back(m.type + "/" + m.zone);
    if (m.type != type || (!zone.empty() && m.zone != zone)) continue;
    if (!chosen || m.zone < chosen->zone) chosen = &m;
  }
  if (!chosen) {
    return invalidArgument(fmt::format("{}: no price records for {}{} (the trace has {}): name one of them as "
                                       "cluster.tiers.market",
                                       what, type, zone.empty() ? "" : " in " + zone, fmt::join(markets, ", ")));
  }
  const auto od = h.on_demand.find(type);
  if (od == h.on_demand.end()) {
    return invalidArgument(fmt::format("{}: OnDemandPrices has no price for {}: add \"{}\": USD per hour", what, type,
                                       type));
  }
  TierMarket t;
  t.market_ = *chosen;
  t.onDemand_ = od->second;
  t.bid_ = spec.bid.value_or(od->second);
  t.speed_ = spec.speed;
  // BidBrain estimates evictions from the history before the run: it starts
  // a day into the trace (half of a shorter one) unless told where.
  t.start_ = spec.bidder == "bidbrain" ? h.begin + std::min<Seconds>(86400, (h.end - h.begin) / 2) : h.begin;
  if (!spec.start.empty()) {
    HZ_ASSIGN_OR_RETURN(t.start_, sim::parseTimestamp(spec.start, "cluster.tiers.start"));
    if (t.start_ < h.begin || t.start_ > h.end) {
      return invalidArgument(fmt::format("cluster.tiers.start: {} is outside the trace ({} to {})", spec.start,
                                         sim::formatTimestamp(h.begin), sim::formatTimestamp(h.end)));
    }
  }
  return t;
}

void TierMarket::start(Seconds wall) {
  if (firstWall_ >= 0) return;
  firstWall_ = lastWall_ = wall;
  reliableHour_ = traceTime(wall);
  reliableHours_ = 1;
}

bool TierMarket::outbidBetween(Seconds from, Seconds to) const {
  if (outbid(to)) return true;
  const Seconds a = traceTime(from), b = traceTime(to);
  return std::any_of(market_.prices.begin(), market_.prices.end(),
                     [&](const auto& p) { return p.first > a && p.first <= b && p.second > bid_; });
}

void TierMarket::advance(Seconds wall) {
  if (firstWall_ < 0 || wall <= lastWall_) return;
  lastWall_ = wall;
  const Seconds now = traceTime(wall);
  for (; now >= reliableHour_ + 3600; reliableHour_ += 3600) ++reliableHours_;
  while (held_ > 0 && now >= spotHour_ + 3600) {
    spotHour_ += 3600;
    if (lapsing_) {  // let go at its hour's end
      transientHours_ += held_ * (spotHour_ - heldSince_) / 3600;
      held_ = 0;
      lapsing_ = false;
      break;
    }
    spotHourUsd_ = held_ * market_.priceAt(spotHour_);
    transientUsd_ += spotHourUsd_;
  }
}

void TierMarket::acquire(Seconds wall, int count, double bid) {
  advance(wall);
  const Seconds now = traceTime(wall);
  if (held_ > 0) transientHours_ += held_ * (now - heldSince_) / 3600;  // replaced: its hour was paid
  held_ = count;
  bid_ = bid;
  lapsing_ = false;
  spotHour_ = heldSince_ = now;
  spotHourUsd_ = count * market_.priceAt(now);
  transientUsd_ += spotHourUsd_;
}

void TierMarket::evict(Seconds wall) {
  advance(wall);
  if (held_ == 0) return;
  transientUsd_ -= spotHourUsd_;  // the cloud cut the hour short: not charged
  transientHours_ += held_ * (traceTime(wall) - heldSince_) / 3600;
  held_ = 0;
  lapsing_ = false;
}

Json TierMarket::summary(int reliable, int transient) const {
  const double hours = (firstWall_ < 0 ? 0 : lastWall_ - firstWall_) * speed_ / 3600;
  const double reliableUsd = reliable * onDemand_ * reliableHours_;
  const double held = held_ * (traceTime(lastWall_) - heldSince_) / 3600;
  return {{"market", market_.type + "/" + market_.zone},
          {"on_demand_usd_per_hour", onDemand_},
          {"bid_usd_per_hour", bid_},
          {"speed", speed_},
          {"trace_start", sim::formatTimestamp(start_)},
          {"trace_hours", hours},
          {"billed_hours", reliableHours_},
          {"transient_hours", transientHours_ + held},
          {"usd", {{"reliable", reliableUsd}, {"transient", transientUsd_}, {"total", reliableUsd + transientUsd_}}},
          {"all_on_demand_usd", (reliable + transient) * onDemand_ * reliableHours_}};
}

}  // namespace hydrozoa::cluster
