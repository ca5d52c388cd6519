#include "sim/spot_history.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <limits>
#include <random>
#include <sstream>

namespace hydrozoa::sim {
namespace {

constexpr Seconds kHour = 3600;

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

EvictionLearner::EvictionLearner(const SpotMarket& m, double delta)
    : m_(&m), delta_(delta), next_(m.prices.empty() ? 0 : m.prices.front().first) {}

void EvictionLearner::advance(Seconds now) {
  if (m_->prices.size() < 2) return;
  const auto& prices = m_->prices;
  const Seconds last = std::min(prices.back().first, now);
  for (; next_ + kHour <= last; next_ += 300) {
    ++samples_;
    const double bid = m_->priceAt(next_) + delta_;
    auto it = std::upper_bound(prices.begin(), prices.end(), next_,
                               [](Seconds x, const std::pair<Seconds, double>& p) { return x < p.first; });
    for (; it != prices.end() && it->first <= next_ + kHour; ++it) {
      if (it->second > bid) {
        const Seconds waited = it->first - next_;
        const int minute = std::clamp(static_cast<int>(std::ceil(waited / 60)), 1, 60);
        ++evicted_[minute];
        waited_[minute] += waited;
        break;
      }
    }
  }
}

EvictionEstimate EvictionLearner::within(Seconds omega) const {
  EvictionEstimate e;
  e.tau = std::clamp<Seconds>(omega, 0, kHour);
  if (samples_ == 0) return e;
  const int minutes = std::clamp(static_cast<int>(std::floor(omega / 60 + 1e-9)), 0, 60);
  int evicted = 0;
  double waited = 0;
  for (int m = 1; m <= minutes; ++m) {
    evicted += evicted_[m];
    waited += waited_[m];
  }
  e.beta = static_cast<double>(evicted) / samples_;
  if (evicted > 0) e.tau = waited / evicted;
  return e;
}

EvictionEstimate estimateEviction(const SpotMarket& m, double delta, Seconds until) {
  EvictionLearner learner(m, delta);
  learner.advance(until);
  return learner.within(kHour);
}

Result<std::pair<int, int>> parseTiers(const std::string& text, const std::string& what, int minReliable) {
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
  if (reliable < minReliable || reliable < 0) {
    return invalidArgument(fmt::format("{}: \"{}\" leaves no reliable worker, and the training state lives on the "
                                       "reliable tier: give reliable=1 or more",
                                       what, text));
  }
  return std::make_pair(reliable, std::max(0, transient));
}

}  // namespace hydrozoa::sim
