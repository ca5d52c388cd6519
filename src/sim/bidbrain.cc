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

// Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm).
std::int64_t daysFromCivil(std::int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

}  // namespace

double SpotMarket::priceAt(Seconds t) const {
  if (prices.empty()) return 0;
  auto it = std::upper_bound(prices.begin(), prices.end(), t,
                             [](Seconds x, const std::pair<Seconds, double>& p) { return x < p.first; });
  return it == prices.begin() ? prices.front().second : std::prev(it)->second;
}

Result<Seconds> parseTimestamp(const std::string& text, const std::string& what) {
  int y = 0, mo = 0, d = 0, h = 0, mi = 0;
  double s = 0;
  char tail[16] = {0};
  const int n = std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%lf%15s", &y, &mo, &d, &h, &mi, &s, tail);
  const std::string zone = n >= 7 ? tail : "";
  auto bad = [&] {
    return invalidArgument(fmt::format("{}: \"{}\" is not a timestamp like 2016-03-14T00:03:21.000Z", what, text));
  };
  if (n < 6 || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || !(s >= 0 && s < 61)) return bad();
  Seconds offset = 0;
  if (zone.empty() || zone == "Z") {
    offset = 0;
  } else if ((zone[0] == '+' || zone[0] == '-') && zone.size() == 6 && zone[3] == ':') {
    const int zh = std::atoi(zone.substr(1, 2).c_str()), zm = std::atoi(zone.substr(4, 2).c_str());
    offset = (zone[0] == '+' ? 1 : -1) * (zh * 3600.0 + zm * 60.0);
  } else {
    return bad();
  }
  const auto days = daysFromCivil(y, static_cast<unsigned>(mo), static_cast<unsigned>(d));
  return static_cast<Seconds>(days) * 86400.0 + h * 3600.0 + mi * 60.0 + s - offset;
}

std::string formatTimestamp(Seconds t) {
  const auto secs = static_cast<std::time_t>(std::floor(t));
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
  return fmt::format("{}.000Z", buf);
}

Result<SpotHistory> parseSpotHistory(const Json& j, const std::string& what) {
  if (!j.is_object() || !j.contains("SpotPriceHistory") || !j["SpotPriceHistory"].is_array()) {
    return invalidArgument(fmt::format("{}: expected the cloud's spot price history: {{\"SpotPriceHistory\": [...]}} "
                                       "(aws ec2 describe-spot-price-history)",
                                       what));
  }
  SpotHistory h;
  std::map<std::pair<std::string, std::string>, size_t> index;
  const Json& records = j["SpotPriceHistory"];
  for (size_t i = 0; i < records.size(); ++i) {
    const std::string at = fmt::format("{}: SpotPriceHistory[{}]", what, i);
    const Json& r = records[i];
    auto field = [&](const char* k) -> Result<std::string> {
      if (!r.is_object() || !r.contains(k) || !r[k].is_string() || r[k].get<std::string>().empty()) {
        return invalidArgument(fmt::format("{}.{}: missing (a string)", at, k));
      }
      return r[k].get<std::string>();
    };
    HZ_ASSIGN_OR_RETURN(std::string type, field("InstanceType"));
    HZ_ASSIGN_OR_RETURN(std::string zone, field("AvailabilityZone"));
    HZ_ASSIGN_OR_RETURN(std::string priceText, field("SpotPrice"));
    HZ_ASSIGN_OR_RETURN(std::string stamp, field("Timestamp"));
    char* end = nullptr;
    const double price = std::strtod(priceText.c_str(), &end);
    if (!end || *end != '\0' || !std::isfinite(price) || price < 0 || price > 1e5) {
      return invalidArgument(fmt::format("{}.SpotPrice: \"{}\" is not a price in USD per hour", at, priceText));
    }
    HZ_ASSIGN_OR_RETURN(Seconds t, parseTimestamp(stamp, at + ".Timestamp"));
    auto [it, added] = index.emplace(std::make_pair(type, zone), h.markets.size());
    if (added) h.markets.push_back({type, zone, {}});
    h.markets[it->second].prices.emplace_back(t, price);
  }
  if (h.markets.empty()) return invalidArgument(what + ": SpotPriceHistory has no records");
  if (j.contains("OnDemandPrices")) {
    const Json& od = j["OnDemandPrices"];
    if (!od.is_object()) return invalidArgument(what + ": OnDemandPrices: expected {TYPE: USD per hour}");
    for (const auto& [type, v] : od.items()) {
      if (!v.is_number() || !(v.get<double>() > 0) || v.get<double>() > 1e5) {
        return invalidArgument(fmt::format("{}: OnDemandPrices.{}: expected a positive price in USD per hour", what,
                                           type));
      }
      h.on_demand[type] = v.get<double>();
    }
  }
  h.begin = std::numeric_limits<double>::max();
  h.end = std::numeric_limits<double>::lowest();
  for (SpotMarket& m : h.markets) {
    std::stable_sort(m.prices.begin(), m.prices.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    h.begin = std::min(h.begin, m.prices.front().first);
    h.end = std::max(h.end, m.prices.back().first);
  }
  return h;
}

Result<SpotHistory> loadSpotHistory(const std::string& path) {
  HZ_ASSIGN_OR_RETURN(Json j, readJsonFile(path));
  return parseSpotHistory(j, path);
}

Json spotHistoryToJson(const SpotHistory& h) {
  Json records = Json::array();
  for (const SpotMarket& m : h.markets) {
    for (const auto& [t, p] : m.prices) {
      records.push_back({{"AvailabilityZone", m.zone},
                         {"InstanceType", m.type},
                         {"ProductDescription", "Linux/UNIX"},
                         {"SpotPrice", fmt::format("{:.6f}", p)},
                         {"Timestamp", formatTimestamp(t)}});
    }
  }
  Json out = {{"SpotPriceHistory", records}};
  if (!h.on_demand.empty()) out["OnDemandPrices"] = h.on_demand;
  return out;
}

SpotHistory generateSpotHistory(const SpotGenOptions& o) {
  SpotHistory h;
  std::mt19937_64 rng(o.seed);
  std::normal_distribution<double> noise(0, 1);
  std::uniform_real_distribution<double> unit(0, 1);
  const Seconds step = 300, span = o.days * 86400;
  for (const auto& [type, onDemand] : o.types) {
    h.on_demand[type] = onDemand;
    for (const std::string& zone : o.zones) {
      SpotMarket m{type, zone, {}};
      const double base = std::log(onDemand * o.base_fraction);
      double x = base + 0.1 * noise(rng);
      Seconds spikeUntil = -1;
      double spike = 0;
      for (Seconds t = 0; t <= span; t += step) {
        // Log price reverting to the base (half-life about 6 hours), 5% noise a step.
        x += 0.01 * (base - x) + 0.05 * noise(rng);
        if (spikeUntil < t && unit(rng) < step / o.spike_every) {
          spikeUntil = t + 300 + unit(rng) * 6900;
          spike = onDemand * (1 + 9 * unit(rng));
        }
        const double price = std::round((t <= spikeUntil ? spike : std::exp(x)) * 1e4) / 1e4;
        if (m.prices.empty() || m.prices.back().second != price) m.prices.emplace_back(o.start + t, price);
      }
      h.markets.push_back(std::move(m));
    }
  }
  h.begin = o.start;
  h.end = o.start + span;
  return h;
}

EvictionEstimate estimateEviction(const SpotMarket& m, double delta) {
  EvictionEstimate e;
  if (m.prices.size() < 2) return e;
  const Seconds first = m.prices.front().first, last = m.prices.back().first;
  int samples = 0, evicted = 0;
  double waited = 0;
  for (Seconds t0 = first; t0 + kHour <= last; t0 += 300) {
    ++samples;
    const double bid = m.priceAt(t0) + delta;
    auto it = std::upper_bound(m.prices.begin(), m.prices.end(), t0,
                               [](Seconds x, const std::pair<Seconds, double>& p) { return x < p.first; });
    for (; it != m.prices.end() && it->first <= t0 + kHour; ++it) {
      if (it->second > bid) {
        ++evicted;
        waited += it->first - t0;
        break;
      }
    }
  }
  if (samples == 0) return e;
  e.beta = static_cast<double>(evicted) / samples;
  e.tau = evicted > 0 ? waited / evicted : kHour;
  return e;
}

namespace {

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
    const EvictionEstimate& e = estimate(a.market, std::max(0.0, a.bid - p));
    return {(1 - e.beta) * a.k * p, a.k * ((1 - e.beta) + e.beta * e.tau / kHour)};
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

Result<std::pair<int, int>> parseTiers(const std::string& text, const std::string& what) {
  int reliable = -1, transient = -1;
  std::istringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    const auto eq = item.find('=');
    const std::string key = item.substr(0, eq);
    if (eq == std::string::npos || (key != "reliable" && key != "transient")) {
      return invalidArgument(fmt::format("{}: \"{}\" is not reliable=N or transient=N", what, item));
    }
    HZ_ASSIGN_OR_RETURN(std::int64_t n, parseCount(item.substr(eq + 1), what + ": " + key, {0, 100000}));
    (key == "reliable" ? reliable : transient) = static_cast<int>(n);
  }
  if (reliable < 1) {
    return invalidArgument(fmt::format("{}: \"{}\" leaves no reliable worker, and the training state lives on the "
                                       "reliable tier: give reliable=1 or more",
                                       what, text));
  }
  return std::make_pair(reliable, std::max(0, transient));
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
