#include "sim/market.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <functional>
#include <queue>
#include <random>
#include <sstream>
#include <tuple>

#include "core/files.h"
#include "profile/field_checks.h"

namespace hydrozoa::sim {

namespace {

constexpr double kMaxSeconds = 1e10;  // about 300 years of a trace
constexpr double kMaxPrice = 1e6;     // USD per worker-hour

bool number(const std::string& text, double* out) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && end == text.data() + text.size() && std::isfinite(*out);
}

}  // namespace

Result<std::vector<SpotEvent>> parseSpotTrace(const std::string& text, const std::vector<sched::WorkerType>& types,
                                              const std::string& what) {
  std::vector<SpotEvent> events;
  std::stringstream in(text);
  int line = 0;
  for (std::string raw; std::getline(in, raw);) {
    ++line;
    const std::string content = raw.substr(0, raw.find('#'));
    std::stringstream fields(content);
    std::vector<std::string> f;
    for (std::string w; fields >> w;) f.push_back(w);
    if (f.empty()) continue;
    const std::string where = fmt::format("{}:{}", what, line);
    if (f.size() != 4) {
      return parseError(fmt::format("{}: {} fields; expected 4: SECONDS TYPE price USD_PER_HOUR, or SECONDS "
                                         "TYPE available WORKERS",
                                         where, f.size()));
    }
    SpotEvent e;
    if (!number(f[0], &e.time) || e.time < 0 || e.time > kMaxSeconds) {
      return parseError(fmt::format("{}: time \"{}\" is not seconds from 0 to {:g}", where,
                                         printable(f[0]), kMaxSeconds));
    }
    if (!events.empty() && e.time < events.back().time) {
      return parseError(fmt::format("{}: time {:g} s comes before the line above's {:g} s; write the events in "
                                         "time order",
                                         where, e.time, events.back().time));
    }
    const auto type = std::find_if(types.begin(), types.end(), [&](const auto& t) { return t.name == f[1]; });
    if (type == types.end()) {
      std::string known;
      for (const auto& t : types) known += (known.empty() ? "" : ", ") + t.name;
      return parseError(fmt::format("{}: \"{}\" is not a worker type of the cluster ({})", where,
                                         printable(f[1]), known));
    }
    e.type = static_cast<int>(type - types.begin());
    if (f[2] == "price") {
      e.kind = SpotEvent::kPrice;
      if (!number(f[3], &e.value) || !(e.value > 0) || e.value > kMaxPrice) {
        return parseError(fmt::format("{}: price \"{}\" is not USD per worker-hour above 0 and at most {:g}",
                                           where, printable(f[3]), kMaxPrice));
      }
    } else if (f[2] == "available") {
      e.kind = SpotEvent::kAvailable;
      if (!number(f[3], &e.value) || e.value < 0 || e.value > type->count || e.value != std::floor(e.value)) {
        return parseError(fmt::format("{}: available \"{}\" is not a count of workers from 0 to {}'s {} in the "
                                           "cluster",
                                           where, printable(f[3]), type->name, type->count));
      }
    } else {
      return parseError(fmt::format("{}: event \"{}\" is neither price nor available", where,
                                         printable(f[2])));
    }
    events.push_back(e);
  }
  return events;
}

Result<std::vector<SpotEvent>> loadSpotTrace(const std::string& path, const std::vector<sched::WorkerType>& types) {
  HZ_ASSIGN_OR_RETURN(const std::string text, readTextFile(path));
  return parseSpotTrace(text, types, path);
}

std::string formatSpotTrace(const std::vector<SpotEvent>& events, const std::vector<sched::WorkerType>& types) {
  std::string out = "# seconds\ttype\tevent\tvalue\n";
  for (const SpotEvent& e : events) {
    out += fmt::format("{:.3f}\t{}\t{}\t{:g}\n", e.time, types[static_cast<size_t>(e.type)].name,
                       e.kind == SpotEvent::kPrice ? "price" : "available", e.value);
  }
  return out;
}

Result<std::vector<SpotEvent>> generateSpotTrace(const std::vector<sched::WorkerType>& types,
                                                 const SpotTraceOptions& o) {
  if (!(o.uptime > 0) || !(o.downtime > 0) || o.uptime > kMaxSeconds || o.downtime > kMaxSeconds) {
    return invalidArgument("a spot worker's mean uptime and downtime must be above 0 s");
  }
  if (!(o.horizon > 0) || o.horizon > kMaxSeconds) {
    return invalidArgument(fmt::format("the spot trace must last from 0 to {:g} s", kMaxSeconds));
  }
  std::mt19937_64 rng(o.seed);
  std::exponential_distribution<double> up(1 / o.uptime), down(1 / o.downtime);
  // Every worker's next change, earliest first: (time, type, +1 back / -1 reclaimed).
  using Change = std::tuple<Seconds, int, int>;
  std::priority_queue<Change, std::vector<Change>, std::greater<>> next;
  std::vector<int> available;
  bool anySpot = false;
  for (size_t j = 0; j < types.size(); ++j) {
    available.push_back(types[j].count);
    if (!sched::isSpot(types[j].name)) continue;
    anySpot = true;
    for (int w = 0; w < types[j].count; ++w) next.emplace(up(rng), static_cast<int>(j), -1);
  }
  if (!anySpot) return invalidArgument("no spot worker types in the cluster (name one TYPE:spot, e.g. v100:spot=4)");
  std::vector<SpotEvent> events;
  while (!next.empty() && std::get<0>(next.top()) < o.horizon) {
    const auto [time, j, change] = next.top();
    next.pop();
    available[static_cast<size_t>(j)] += change;
    events.push_back({time, j, SpotEvent::kAvailable, static_cast<double>(available[static_cast<size_t>(j)])});
    next.emplace(time + (change < 0 ? down(rng) : up(rng)), j, -change);
  }
  return events;
}

Result<std::vector<double>> catalogPrices(const plan::Catalog& catalog, const std::vector<sched::WorkerType>& types) {
  if (catalog.kind != plan::PlatformKind::kVm) {
    return invalidArgument(fmt::format("catalog {} is not of VM instances; a cluster's prices come from one that is "
                                       "(gcp-vm, aws-vm, azure-vm) or as TYPE=USD_PER_HOUR,...",
                                       catalog.name));
  }
  std::vector<double> price;
  for (const sched::WorkerType& t : types) {
    const std::string accelerator = sched::baseType(t.name);
    const bool spot = sched::isSpot(t.name);
    double best = -1;
    for (const plan::VmInstance& vm : catalog.instances) {
      const double usd = spot ? vm.spot_per_hour : vm.per_hour;
      if (vm.accelerator != accelerator || vm.accelerators < 1 || !(usd > 0)) continue;
      const double each = usd / vm.accelerators;
      if (best < 0 || each < best) best = each;
    }
    if (best < 0) {
      return invalidArgument(fmt::format("catalog {} sells no {}{} instance (add one to the catalog, or give "
                                         "--prices TYPE=USD_PER_HOUR,...)",
                                         catalog.name, accelerator, spot ? " spot" : ""));
    }
    price.push_back(best);
  }
  return price;
}

Result<std::vector<double>> clusterPrices(const std::string& text, const std::vector<sched::WorkerType>& types,
                                          const std::string& what) {
  if (text.find('=') != std::string::npos) return sched::parsePrices(text, types, what);
  auto catalog = plan::loadCatalog(text);
  if (!catalog.ok()) {
    return invalidArgument(fmt::format("{} {}: {} (give a VM catalog, e.g. gcp-vm, or TYPE=USD_PER_HOUR,...)", what,
                                       text, catalog.status().message()));
  }
  auto price = catalogPrices(*catalog, types);
  if (!price.ok()) return invalidArgument(fmt::format("{} {}: {}", what, text, price.status().message()));
  return price;
}

PriceTrack::PriceTrack(const std::vector<double>& initial, const std::vector<SpotEvent>& events) {
  for (double p : initial) steps_.push_back({{-kMaxSeconds, p}});
  for (const SpotEvent& e : events) {
    if (e.kind != SpotEvent::kPrice || e.type < 0 || static_cast<size_t>(e.type) >= steps_.size()) continue;
    auto& s = steps_[static_cast<size_t>(e.type)];
    if (s.back().first == e.time) {
      s.back().second = e.value;
    } else {
      s.emplace_back(e.time, e.value);
    }
  }
}

double PriceTrack::dollars(int type, Seconds t0, Seconds t1) const {
  if (type < 0 || static_cast<size_t>(type) >= steps_.size() || !(t1 > t0)) return 0;
  const auto& s = steps_[static_cast<size_t>(type)];
  double usd = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const Seconds from = std::max(t0, s[i].first), to = std::min(t1, i + 1 < s.size() ? s[i + 1].first : t1);
    if (to > from) usd += (to - from) * s[i].second / 3600;
  }
  return usd;
}

}  // namespace hydrozoa::sim
