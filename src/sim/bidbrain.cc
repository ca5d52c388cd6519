#include "sim/bidbrain.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <functional>
#include <limits>
#include <optional>
#include <random>
#include <sstream>

namespace hydrozoa::sim {
namespace {

constexpr Seconds kHour = 3600;
constexpr Seconds kLongest = 365 * 86400.0;  // a job that has not ended by then is reported unfinished

// Instances bought together: k of one type, on demand or in one spot market
// at one bid, billed hour by hour from `hour`.
struct Allocation {
  int market = -1;  // -1: on demand
  std::string type;
  int k = 0;
  double bid = 0;
  bool reliable = false;
  Seconds hour = 0;        // the current billing hour's start
  double hour_cost = 0;    // charged for it (refunded if the cloud evicts it)
  Seconds ends = -1;       // under an eviction notice: removed then
  bool lapse = false;      // let go at the end of its hour
  Seconds working_from = 0;  // before: booting and restoring (checkpoint-restart)
};

enum class Strategy { kOnDemand, kCheckpoint, kFixedBid, kBidBrain };

class Replay {
 public:
  Replay(const SpotHistory& h, const BidBrainJob& job, const BidBrainOptions& o, Strategy s, std::string reliableType)
      : h_(h), job_(job), o_(o), s_(s), reliableType_(std::move(reliableType)) {}

  StrategyResult run(const std::string& name) {
    StrategyResult r;
    r.name = name;
    const Seconds start = o_.start >= 0 ? o_.start : h_.begin;
    Seconds t = start, nextDecision = start;
    double work = 0, checkpoint = 0;
    Seconds lastCheckpoint = start;
    bool decideNow = true;
    for (; t < start + kLongest; t += o_.tick) {
      now_ = t;
      // Notices and removals, then billing hours.
      for (Allocation& a : allocs_) {
        if (a.market >= 0 && a.ends < 0 && price(a) > a.bid) {
          a.ends = t + o_.notice;
          r.evictions += a.k;
          decideNow = true;
        }
      }
      bool rolledBack = false;
      for (auto it = allocs_.begin(); it != allocs_.end();) {
        if (it->ends >= 0 && t >= it->ends) {
          cost_ -= it->hour_cost;  // the cloud cut the hour short: not charged
          if (s_ == Strategy::kCheckpoint && !rolledBack) {
            r.lost_hours += work - checkpoint;
            work = checkpoint;
            rolledBack = true;
          }
          it = allocs_.erase(it);
          decideNow = true;
          continue;
        }
        if (t >= it->hour + kHour) {
          if (it->lapse) {
            it = allocs_.erase(it);
            continue;
          }
          it->hour += kHour;
          it->hour_cost = it->k * price(*it);
          cost_ += it->hour_cost;
        }
        ++it;
      }
      if (decideNow || t >= nextDecision) {
        decide(t);
        decideNow = false;
        nextDecision = t + o_.decision_interval;
      }
      // This tick's work (instances under notice still work).
      double working = 0;
      for (const Allocation& a : allocs_) {
        if (t >= a.working_from) working += a.k;
      }
      r.instance_hours += working * o_.tick / kHour;
      const double gained = working * o_.tick / kHour;
      if (work + gained >= job_.work_hours) {
        r.time = t - start + (job_.work_hours - work) / working * kHour;
        break;
      }
      work += gained;
      if (s_ == Strategy::kCheckpoint && t + o_.tick - lastCheckpoint >= o_.checkpoint_every) {
        checkpoint = work;
        lastCheckpoint = t + o_.tick;
      }
    }
    if (t >= start + kLongest) {
      r.finished = false;
      r.time = kLongest;
    }
    r.cost = cost_;  // what ran past the end of the job is paid for its whole hour
    return r;
  }

 private:
  double price(const Allocation& a) const {
    return a.market < 0 ? h_.on_demand.at(a.type) : h_.markets[static_cast<size_t>(a.market)].priceAt(now_);
  }
  double priceOf(int market) const { return h_.markets[static_cast<size_t>(market)].priceAt(now_); }

  void acquire(Allocation a, Seconds t) {
    a.hour = t;
    a.hour_cost = a.k * price(a);
    cost_ += a.hour_cost;
    allocs_.push_back(a);
  }

  int transientCount() const {
    int n = 0;
    for (const Allocation& a : allocs_) n += a.reliable || a.lapse ? 0 : a.k;
    return n;
  }

  // The cheapest spot market now among those with an on-demand price
  // (whose price is at most `cap` times it); -1 if none.
  int cheapestMarket(double cap) const {
    int best = -1;
    for (size_t m = 0; m < h_.markets.size(); ++m) {
      const auto od = h_.on_demand.find(h_.markets[m].type);
      if (od == h_.on_demand.end() || priceOf(static_cast<int>(m)) > cap * od->second) continue;
      if (best < 0 || priceOf(static_cast<int>(m)) < priceOf(best)) best = static_cast<int>(m);
    }
    return best;
  }

  const EvictionEstimate& estimate(int market, double delta) {
    const auto key = std::make_pair(market, std::llround(delta * 1e4));
    auto it = estimates_.find(key);
    if (it == estimates_.end()) {
      it = estimates_.emplace(key, estimateEviction(h_.markets[static_cast<size_t>(market)], delta)).first;
    }
    return it->second;
  }

  // BidBrain's expected cost and work of an allocation over the next hour.
  std::pair<double, double> expected(const Allocation& a) {
    const double p = price(a);
    if (a.market < 0) return {a.k * p, a.k * 1.0};
    return expectedCostAndWork(a.k, p, estimate(a.market, std::max(0.0, a.bid - p)));
  }

  void decide(Seconds t) {
    now_ = t;
    switch (s_) {
      case Strategy::kOnDemand:
        if (allocs_.empty()) {
          acquire({-1, reliableType_, job_.reliable + job_.transient, 0, true}, t);
        }
        return;
      case Strategy::kCheckpoint: {
        // All spot, bid at the on-demand price; after an eviction, new
        // instances where the price is below it, restored before they work.
        if (!allocs_.empty()) return;
        const int m = cheapestMarket(1.0);
        if (m < 0) return;
        const std::string& type = h_.markets[static_cast<size_t>(m)].type;
        Allocation a{m, type, job_.reliable + job_.transient, h_.on_demand.at(type), false};
        a.working_from = started_ ? t + o_.restart : t;
        started_ = true;
        acquire(a, t);
        return;
      }
      case Strategy::kFixedBid: {
        if (allocs_.empty()) acquire({-1, reliableType_, job_.reliable, 0, true}, t);
        const int want = job_.transient - transientCount();
        if (want <= 0) return;
        const int m = cheapestMarket(1.0);
        if (m < 0) return;
        acquire({m, h_.markets[static_cast<size_t>(m)].type, want, priceOf(m) + o_.fixed_delta, false}, t);
        return;
      }
      case Strategy::kBidBrain:
        bidBrain(t);
        return;
    }
  }

  // E over the allocations that will be running (not lapsing, not evicted), plus `extra`.
  double costPerWork(const Allocation* extra, const Allocation* without) {
    double c = 0, w = 0;
    for (const Allocation& a : allocs_) {
      if (&a == without || a.lapse || a.ends >= 0) continue;
      const auto [ca, wa] = expected(a);
      c += ca;
      w += wa;
    }
    if (extra) {
      const auto [ca, wa] = expected(*extra);
      c += ca;
      w += wa;
    }
    return w > 0 ? c / w : std::numeric_limits<double>::infinity();
  }

  void bidBrain(Seconds t) {
    if (allocs_.empty()) acquire({-1, reliableType_, job_.reliable, 0, true}, t);
    // Lapse what no longer pays for itself, at its hour's end.
    for (Allocation& a : allocs_) {
      if (a.reliable || a.lapse || a.ends >= 0 || a.hour + kHour - t > o_.decision_interval) continue;
      if (costPerWork(nullptr, &a) < costPerWork(nullptr, nullptr)) a.lapse = true;
    }
    // Add the allocation that lowers E the most, while one does.
    for (;;) {
      const int room = job_.transient - transientCount();
      if (room <= 0) return;
      const double now = costPerWork(nullptr, nullptr);
      std::optional<Allocation> best;
      double bestE = now;
      for (size_t m = 0; m < h_.markets.size(); ++m) {
        if (!h_.on_demand.count(h_.markets[m].type)) continue;
        for (double d : o_.deltas) {
          for (int k = 1; k <= room; k *= 2) {
            Allocation a{static_cast<int>(m), h_.markets[m].type, k, priceOf(static_cast<int>(m)) + d, false};
            const double e = costPerWork(&a, nullptr);
            if (e < bestE - 1e-12) {
              bestE = e;
              best = a;
            }
          }
        }
      }
      if (!best) return;
      acquire(*best, t);
    }
  }

  const SpotHistory& h_;
  const BidBrainJob& job_;
  const BidBrainOptions& o_;
  Strategy s_;
  std::string reliableType_;
  std::vector<Allocation> allocs_;
  std::map<std::pair<int, long long>, EvictionEstimate> estimates_;
  double cost_ = 0;
  Seconds now_ = 0;
  bool started_ = false;
};

}  // namespace

std::pair<double, double> expectedCostAndWork(int k, double price, const EvictionEstimate& e) {
  return {(1 - e.beta) * k * price, k * ((1 - e.beta) + e.beta * e.tau / kHour)};
}

namespace {

// E of the reliable instances and k spot ones at price p, evicted as `e`
// says, each eviction stalling all of them for `stallHours`. Reliable ones
// that compute nothing beside the k (`idle`) work only once those are
// evicted: for the hour's rest after τ, with probability β.
double liveCostPerWork(double onDemand, int reliable, int k, double p, const EvictionEstimate& e, double stallHours,
                       bool idle) {
  const auto [c, w] = expectedCostAndWork(k, p, e);
  const double reliableWork = idle ? reliable * e.beta * (1 - e.tau / kHour) : reliable;
  const double work = reliableWork + w - e.beta * (reliable + k) * stallHours;
  return work > 0 ? (reliable * onDemand + c) / work : std::numeric_limits<double>::infinity();
}

}  // namespace

double costPerWork(const SpotMarket& m, double onDemand, int reliable, int count, double bid, Seconds now,
                   double stallHours, bool reliableIdle) {
  if (count <= 0) return onDemand;  // the reliable instances alone
  const double p = m.priceAt(now);
  return liveCostPerWork(onDemand, reliable, count, p, estimateEviction(m, std::max(0.0, bid - p), now), stallHours,
                         reliableIdle);
}

BidChoice chooseBid(const SpotMarket& m, double onDemand, int reliable, const std::vector<int>& counts,
                    const std::vector<double>& deltas, Seconds now, double stallHours,
                    const std::vector<int>& idleCounts) {
  BidChoice best;
  best.cost_per_work = onDemand;
  const double p = m.priceAt(now);
  for (double d : deltas) {
    const EvictionEstimate e = estimateEviction(m, d, now);
    for (int k : counts) {
      if (k <= 0) continue;
      const bool idle = std::find(idleCounts.begin(), idleCounts.end(), k) != idleCounts.end();
      const double cpw = liveCostPerWork(onDemand, reliable, k, p, e, stallHours, idle);
      if (cpw < best.cost_per_work - 1e-12) best = {k, p + d, cpw};
    }
  }
  return best;
}

Result<std::vector<StrategyResult>> compareBidding(const SpotHistory& h, const BidBrainJob& job,
                                                   const BidBrainOptions& o) {
  if (!(job.work_hours > 0 && job.work_hours <= 1e7)) {
    return invalidArgument("the job's work must be from 0 to 10,000,000 instance-hours");
  }
  if (job.reliable < 1 || job.transient < 0 || job.reliable + job.transient > 100000) {
    return invalidArgument(fmt::format("tiers reliable={} transient={}: the state lives on the reliable tier, which "
                                       "needs at least one instance (and transient at least 0)",
                                       job.reliable, job.transient));
  }
  for (const SpotMarket& m : h.markets) {
    if (!h.on_demand.count(m.type)) {
      return invalidArgument(fmt::format("the spot history has records for {} but no on-demand price for it: add "
                                         "\"OnDemandPrices\": {{\"{}\": USD}} beside them, or --on-demand {}=USD",
                                         m.type, m.type, m.type));
    }
  }
  std::string reliable = job.reliable_type;
  if (reliable.empty()) {
    for (const auto& [type, p] : h.on_demand) {
      if (reliable.empty() || p < h.on_demand.at(reliable)) reliable = type;
    }
  }
  if (!h.on_demand.count(reliable)) {
    return invalidArgument(fmt::format("no on-demand price for the reliable tier's type {}", reliable));
  }
  std::vector<StrategyResult> out;
  out.push_back(Replay(h, job, o, Strategy::kOnDemand, reliable).run("on-demand"));
  out.push_back(Replay(h, job, o, Strategy::kCheckpoint, reliable).run("spot+checkpoint"));
  out.push_back(Replay(h, job, o, Strategy::kFixedBid, reliable).run("fixed bid"));
  out.push_back(Replay(h, job, o, Strategy::kBidBrain, reliable).run("bidbrain"));
  return out;
}

}  // namespace hydrozoa::sim
