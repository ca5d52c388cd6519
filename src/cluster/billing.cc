#include "cluster/billing.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace hydrozoa::cluster {

Result<BillingUnit> parseBillingUnit(const std::string& text, const std::string& origin) {
  if (text == "per_second" || text.empty()) return BillingUnit::kSecond;
  if (text == "per_millisecond") return BillingUnit::kMillisecond;
  if (text == "per_hour") return BillingUnit::kHour;
  return invalidArgument(
      fmt::format("{}: billing \"{}\" is unknown; use per_second, per_millisecond or per_hour", origin, text));
}

const char* billingUnitName(BillingUnit unit) {
  switch (unit) {
    case BillingUnit::kSecond: return "per_second";
    case BillingUnit::kMillisecond: return "per_millisecond";
    case BillingUnit::kHour: return "per_hour";
  }
  return "?";
}

Seconds billedSeconds(Seconds running, BillingUnit unit) {
  running = std::max(0.0, running);
  switch (unit) {
    case BillingUnit::kSecond: return std::ceil(running);
    case BillingUnit::kMillisecond: return std::ceil(running * 1000) / 1000;
    case BillingUnit::kHour: return 3600 * std::max(1.0, std::ceil(running / 3600));
  }
  return running;
}

void Ledger::start(int id, Seconds t, UsdPerHour usd_per_hour) {
  if (running(id)) return;
  runs_.emplace(id, Run{t, -1, usd_per_hour});
}

void Ledger::stop(int id, Seconds t) {
  auto [b, e] = runs_.equal_range(id);
  for (auto it = b; it != e; ++it) {
    if (it->second.stop < 0) it->second.stop = std::max(t, it->second.start);
  }
}

bool Ledger::running(int id) const {
  auto [b, e] = runs_.equal_range(id);
  return std::any_of(b, e, [](const auto& kv) { return kv.second.stop < 0; });
}

Seconds Ledger::billed(const Run& r, Seconds t) const {
  const Seconds end = r.stop >= 0 ? r.stop : std::max(t, r.start);
  // A running worker is shown as billed so far; the rounding to the unit
  // applies to what it has run (an hour-billed VM owes its first hour at once).
  return billedSeconds(end - r.start, unit_);
}

Usd Ledger::cost(Seconds t) const {
  Usd total = 0;
  for (const auto& [id, r] : runs_) total += r.rate * billed(r, t) / 3600 + fee_;
  return total;
}

Usd Ledger::cost(int id, Seconds t) const {
  Usd total = 0;
  auto [b, e] = runs_.equal_range(id);
  for (auto it = b; it != e; ++it) total += it->second.rate * billed(it->second, t) / 3600 + fee_;
  return total;
}

Seconds Ledger::workerSeconds(Seconds t) const {
  Seconds total = 0;
  for (const auto& [id, r] : runs_) total += billed(r, t);
  return total;
}

int Ledger::useAccounted(const std::map<int, std::vector<Seconds>>& seconds, const std::string& source) {
  int corrected = 0;
  for (const auto& [id, each] : seconds) {
    auto [b, e] = runs_.equal_range(id);
    if (static_cast<std::size_t>(std::distance(b, e)) != each.size()) continue;
    std::size_t k = 0;
    for (auto it = b; it != e; ++it, ++k) {
      if (it->second.stop < 0 || !(each[k] >= 0)) continue;
      it->second.stop = it->second.start + each[k];
      ++corrected;
    }
  }
  if (corrected > 0) source_ = source;
  return corrected;
}

Json Ledger::toJson(Seconds t) const {
  Json workers = Json::array();
  for (const auto& [id, r] : runs_) {
    workers.push_back({{"id", id}, {"usd_per_hour", r.rate}, {"seconds", billed(r, t)},
                       {"usd", r.rate * billed(r, t) / 3600 + fee_}});
  }
  Json j = {{"unit", billingUnitName(unit_)}, {"usd", cost(t)}, {"worker_seconds", workerSeconds(t)},
            {"source", source_}, {"workers", workers}};
  if (fee_ > 0) {
    j["request_fee"] = fee_;
    j["requests"] = runs_.size();
  }
  return j;
}

}  // namespace hydrozoa::cluster
