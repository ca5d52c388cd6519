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
    const double need = job_.work_hours * rate(reliableType_);  // in units of ν·hours
    const Seconds start = o_.start >= 0 ? o_.start : h_.begin;
    start_ = start;
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
            r.lost_hours += (work - checkpoint) / rate(reliableType_);
            work = checkpoint;
            rolledBack = true;
          }
          if (agileML()) stall(t, o_.eviction_overhead);  // λ: the survivors regroup
          it = allocs_.erase(it);
          decideNow = true;
          continue;
        }
        if (t >= it->hour + kHour) {
          if (it->lapse) {
            if (agileML()) stall(t, o_.change_overhead);  // σ
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
        decide(t, &r);
        decideNow = false;
        nextDecision = t + o_.decision_interval;
      }
      // This tick's work (instances under notice still work), none while
      // the job stalls.
      double instances = 0, working = 0;
      for (const Allocation& a : allocs_) {
        if (t >= a.working_from) {
          instances += a.k;
          working += a.k * rate(a.type) * o_.scaling *
                     (s_ == Strategy::kCheckpoint ? 1 - o_.checkpoint_overhead : 1.0);
        }
      }
      r.instance_hours += instances * o_.tick / kHour;
      const Seconds busy = std::clamp<Seconds>(t + o_.tick - std::max(t, stallUntil_), 0, o_.tick);
      const double gained = working * busy / kHour;
      if (gained > 0 && work + gained >= need) {
        r.time = t - start + (o_.tick - busy) + (need - work) / working * kHour;
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
    // The thesis's accounting (§4.5.2): the rest of each allocation's last
    // billing hour goes to the next job of a sequence and is not charged to
    // this one. The same for every strategy.
    const Seconds end = start + r.time;
    if (r.finished) {
      for (const Allocation& a : allocs_) {
        cost_ -= a.hour_cost * std::clamp<Seconds>(a.hour + kHour - end, 0, kHour) / kHour;
      }
    }
    r.cost = cost_;
    return r;
  }

 private:
  double price(const Allocation& a) const {
    return a.market < 0 ? h_.on_demand.at(a.type) : h_.markets[static_cast<size_t>(a.market)].priceAt(now_);
  }
  double priceOf(int market) const { return h_.markets[static_cast<size_t>(market)].priceAt(now_); }
  // The strategies that run on AgileML's tiers (an eviction or a change
  // stalls the job, nothing is redone).
  bool agileML() const { return s_ == Strategy::kFixedBid || s_ == Strategy::kBidBrain; }
  // ν of a type.
  double rate(const std::string& type) const {
    const auto it = job_.work_rate.find(type);
    return it == job_.work_rate.end() ? 1.0 : it->second;
  }
  // The job computes nothing for `overhead` more; the footprint it starts
  // with costs nothing.
  void stall(Seconds t, Seconds overhead) {
    if (t > start_) stallUntil_ = std::max(stallUntil_, t) + overhead;
  }

  void acquire(Allocation a, Seconds t, StrategyResult* r) {
    a.hour = t;
    a.hour_cost = a.k * price(a);
    cost_ += a.hour_cost;
    if (a.market >= 0 && agileML()) stall(t, o_.change_overhead);
    if (s_ == Strategy::kBidBrain && a.market >= 0) r->decisions.push_back({t, marketName(a.market), a.k, a.bid, false});
    allocs_.push_back(a);
  }
  std::string marketName(int m) const {
    const SpotMarket& sm = h_.markets[static_cast<size_t>(m)];
    return sm.type + "/" + sm.zone;
  }

  int transientCount() const {
    int n = 0;
    for (const Allocation& a : allocs_) n += a.reliable || a.lapse ? 0 : a.k;
    return n;
  }

  // The spot market cheapest per work now (its price over ν) among those
  // with an on-demand price (whose price is at most `cap` times it); -1 if
  // none.
  int cheapestMarket(double cap) const {
    int best = -1;
    auto perWork = [&](int m) { return priceOf(m) / rate(h_.markets[static_cast<size_t>(m)].type); };
    for (size_t m = 0; m < h_.markets.size(); ++m) {
      const auto od = h_.on_demand.find(h_.markets[m].type);
      if (od == h_.on_demand.end() || priceOf(static_cast<int>(m)) > cap * od->second) continue;
      if (best < 0 || perWork(static_cast<int>(m)) < perWork(best)) best = static_cast<int>(m);
    }
    return best;
  }

  // BidBrain's β and τ for `market` at `delta` above its price within ω,
  // from the prices before now. A delta off BidBrain's grid (an
  // allocation's bid once the price has moved) is rounded down to it.
  EvictionEstimate estimate(int market, double delta, Seconds omega) {
    size_t d = 0;
    while (d + 1 < o_.deltas.size() && o_.deltas[d + 1] <= delta + 1e-12) ++d;
    const auto key = std::make_pair(market, d);
    auto it = learners_.find(key);
    if (it == learners_.end()) {
      it = learners_.emplace(key, EvictionLearner(h_.markets[static_cast<size_t>(market)], o_.deltas[d])).first;
    }
    it->second.advance(now_);
    return it->second.within(omega);
  }

  void decide(Seconds t, StrategyResult* r) {
    now_ = t;
    switch (s_) {
      case Strategy::kOnDemand:
        if (allocs_.empty()) {
          acquire({-1, reliableType_, job_.reliable + job_.transient, 0, true}, t, r);
        }
        break;
      case Strategy::kCheckpoint: {
        // All spot, bid at the on-demand price; after an eviction, new
        // instances where the price is below it, restored before they work.
        if (!allocs_.empty()) break;
        const int m = cheapestMarket(1.0);
        if (m < 0) break;
        const std::string& type = h_.markets[static_cast<size_t>(m)].type;
        Allocation a{m, type, job_.reliable + job_.transient, h_.on_demand.at(type), false};
        a.working_from = started_ ? t + o_.restart : t;
        started_ = true;
        acquire(a, t, r);
        break;
      }
      case Strategy::kFixedBid: {
        if (allocs_.empty()) acquire({-1, reliableType_, job_.reliable, 0, true}, t, r);
        const int want = job_.transient - transientCount();
        if (want <= 0) break;
        const int m = cheapestMarket(1.0);
        if (m < 0) break;
        acquire({m, h_.markets[static_cast<size_t>(m)].type, want, priceOf(m) + o_.fixed_delta, false}, t, r);
        break;
      }
      case Strategy::kBidBrain:
        bidBrain(t, r);
        break;
    }
  }

  // One allocation's part of E (NOTE [BidBrain's model]): its expected
  // cost, its expected useful time before λ and σ, its β.
  struct Expected {
    double cost = 0, time = 0, beta = 0, rate = 0;
  };
  Expected expected(const Allocation& a) {
    const Seconds omega = std::max<Seconds>(0, a.hour + kHour - now_);
    const double p = a.hour_cost / a.k;  // the hour's price
    if (a.market < 0) return {a.k * p * omega / kHour, omega, 0, a.k * rate(a.type)};
    const EvictionEstimate e = estimate(a.market, std::max(0.0, a.bid - priceOf(a.market)), omega);
    return {(1 - e.beta) * a.k * p * omega / kHour, (1 - e.beta) * omega + e.beta * e.tau, e.beta,
            a.k * rate(a.type)};
  }

  // The parts of E of the allocations that will be running (not lapsing,
  // not evicted) but `without`.
  std::vector<Expected> running(const Allocation* without) {
    std::vector<Expected> parts;
    for (const Allocation& a : allocs_) {
      if (&a == without || a.lapse || a.ends >= 0) continue;
      parts.push_back(expected(a));
    }
    return parts;
  }

  // E of `parts` and `extra`; `change`: the footprint changes (σ).
  double costPerWork(const std::vector<Expected>& parts, const Expected* extra, bool change) const {
    double kept = 1;  // Π (1 − β_j)
    for (const Expected& x : parts) kept *= 1 - x.beta;
    if (extra) kept *= 1 - extra->beta;
    const Seconds lost = (1 - kept) * o_.eviction_overhead + (change ? o_.change_overhead : 0);
    double c = 0, w = 0;
    const auto add = [&](const Expected& x) {
      c += x.cost;
      w += x.rate * std::max<Seconds>(0, x.time - lost) / kHour;
    };
    for (const Expected& x : parts) add(x);
    if (extra) add(*extra);
    w *= o_.scaling;
    return w > 0 ? c / w : std::numeric_limits<double>::infinity();
  }

  // A spot allocation of k at bid delta d in market m, bought now.
  Allocation candidate(int m, int k, double bid, Seconds t) const {
    Allocation a{m, h_.markets[static_cast<size_t>(m)].type, k, bid, false};
    a.hour = t;
    a.hour_cost = k * priceOf(m);
    return a;
  }

  void bidBrain(Seconds t, StrategyResult* r) {
    if (allocs_.empty()) acquire({-1, reliableType_, job_.reliable, 0, true}, t, r);
    // Before an allocation's billing hour ends: renewed (an hour at the
    // price now, no change) or let go (a change)?
    for (Allocation& a : allocs_) {
      if (a.reliable || a.lapse || a.ends >= 0 || a.hour + kHour - t > o_.decision_interval) continue;
      const std::vector<Expected> others = running(&a);
      const Expected renewed = expected(candidate(a.market, a.k, a.bid, t));
      if (costPerWork(others, nullptr, true) < costPerWork(others, &renewed, false)) {
        a.lapse = true;
        r->decisions.push_back({t, marketName(a.market), a.k, a.bid, true});
      }
    }
    // Add the allocation that lowers E the most, while one does.
    for (;;) {
      const int room = job_.transient - transientCount();
      if (room <= 0) return;
      const std::vector<Expected> held = running(nullptr);
      const double now = costPerWork(held, nullptr, false);
      std::optional<Allocation> best;
      double bestE = now;
      for (size_t m = 0; m < h_.markets.size(); ++m) {
        if (!h_.on_demand.count(h_.markets[m].type)) continue;
        for (double d : o_.deltas) {
          for (int k = 1; k <= room; k *= 2) {
            const Allocation a = candidate(static_cast<int>(m), k, priceOf(static_cast<int>(m)) + d, t);
            const Expected x = expected(a);
            const double e = costPerWork(held, &x, true);
            if (e < bestE - 1e-12) {
              bestE = e;
              best = a;
            }
          }
        }
      }
      if (!best) return;
      acquire(*best, t, r);
    }
  }

  const SpotHistory& h_;
  const BidBrainJob& job_;
  const BidBrainOptions& o_;
  Strategy s_;
  std::string reliableType_;
  std::vector<Allocation> allocs_;
  std::map<std::pair<int, size_t>, EvictionLearner> learners_;
  double cost_ = 0;
  Seconds now_ = 0;
  Seconds start_ = 0, stallUntil_ = 0;
  bool started_ = false;  // checkpoint-restart: a later start restores first
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
  for (const auto& [type, nu] : job.work_rate) {
    if (!(nu > 0 && nu <= 1e6)) {
      return invalidArgument(fmt::format("the work rate (ν) of {} must be a positive number (its vCPUs, or its "
                                         "measured samples/s), not {}",
                                         type, nu));
    }
  }
  if (o.deltas.empty() || !std::is_sorted(o.deltas.begin(), o.deltas.end()) || o.deltas.front() < 0) {
    return invalidArgument("BidBrain's bid deltas must be a non-empty, increasing list of prices from 0");
  }
  if (!(o.checkpoint_overhead >= 0 && o.checkpoint_overhead < 1)) {
    return invalidArgument(fmt::format("the checkpoint overhead is a share of the time, from 0 to below 1 (the "
                                       "thesis measured 0.17), not {}",
                                       o.checkpoint_overhead));
  }
  if (!(o.scaling > 0 && o.scaling <= 1)) {
    return invalidArgument(fmt::format("the scaling factor φ must be in (0, 1], not {}", o.scaling));
  }
  if (!(o.change_overhead >= 0 && o.change_overhead <= 86400 && o.eviction_overhead >= 0 &&
        o.eviction_overhead <= 86400)) {
    return invalidArgument("the overheads of a change (σ) and of an eviction (λ) must be from 0 to a day");
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
