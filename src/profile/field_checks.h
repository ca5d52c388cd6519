// Range checks for the fractional numbers of the project's files (times,
// prices, rates), beside the whole-number ones of ObjectReader::count and
// ObjectReader::integer (core/files.h) and the sizes of ObjectReader::bytes.
//
// Every number a file gives is finite and inside an explicit range; one
// outside it (NaN and infinities included) is one error line naming the
// field, the value and the range:
//   "p.json.measurements[0].layers[2].forward_ms: 1e+30 is out of range;
//    expected milliseconds from 0 to 1e+12"
//
// Header-only and pure; used by the profile, device, plan and catalog readers.
#pragma once

#include <fmt/format.h>

#include <optional>
#include <string>

#include "core/files.h"
#include "core/limits.h"
#include "core/units.h"

namespace hydrozoa::profile {

struct NumberRange {
  double min, max;
  const char* what;            // for messages: "milliseconds", "$ per hour"
  bool exclusive_min = false;  // (min, max] instead of [min, max]
};

// Times per layer and microbatch: at most 1e9 s, as core/units.h's durations.
inline constexpr NumberRange kMillisecondsRange{0, 1e12, "milliseconds"};
// Prices of one worker, instance or accelerator.
inline constexpr NumberRange kUsdPerHourRange{0, 1e9, "dollars per hour"};
// Durations in the JSON files, as core/units.h's (at most 1e9 s).
inline constexpr NumberRange kSecondsRange{0, 1e9, "seconds"};
// Bandwidths in the JSON files, as core/units.h's (at most kMaxBytes per second).
inline constexpr NumberRange kBandwidthRange{0, static_cast<double>(kMaxBytes), "bytes per second",
                                             /*exclusive_min=*/true};
// A fitted cost per byte (the shared-memory allreduce's): a second per byte
// is beyond any machine.
inline constexpr NumberRange kSecondsPerByteRange{0, 1, "seconds per byte"};
// The sizes of the network probe's messages (NetworkProfile::messages):
// 1 byte to kMaxBytes, a few dozen of them at most.
inline constexpr Range kMessageBytesRange{1, kMaxBytes};
inline constexpr size_t kMaxMessageSizes = 64;
// vCPUs of one worker or instance.
inline constexpr NumberRange kVcpusRange{0, 65536, "vCPUs", /*exclusive_min=*/true};
// A compute thread's time with every core of its host busy over its time
// alone (Profile::corun, SearchOptions::busy_slowdown).
inline constexpr NumberRange kBusySlowdownRange{1, 100, "a factor"};

// "milliseconds from 0 to 1,000,000,000,000" (the bounds are whole numbers).
inline std::string describeNumberRange(const NumberRange& r) {
  return fmt::format("{} {} {} to {}", r.what, r.exclusive_min ? "above" : "from", formatCount(r.min),
                     formatCount(r.max));
}

inline bool inNumberRange(double v, const NumberRange& r) {
  return (r.exclusive_min ? v > r.min : v >= r.min) && v <= r.max;  // false for NaN
}

// The finite number at `key` within `range`; otherwise records the error
// (missing, not a number, or out of range) in `r` and returns 0.
inline double numberIn(ObjectReader& r, const char* key, const NumberRange& range) {
  const double v = r.number(key);
  if (!r.ok()) return 0;
  if (!inNumberRange(v, range)) {
    r.fail(key, fmt::format("{} is out of range; expected {}", v, describeNumberRange(range)));
    return 0;
  }
  return v;
}

// As numberIn; std::nullopt when `key` is absent or null.
inline std::optional<double> optNumberIn(ObjectReader& r, const char* key, const NumberRange& range) {
  if (!r.raw(key)) return std::nullopt;  // raw() marks the key as read
  return numberIn(r, key, range);
}

// A size in bytes at `key`: a whole number from `min` to kMaxBytes.
inline std::int64_t bytesIn(ObjectReader& r, const char* key, std::int64_t min = 0) {
  return r.integer(key, min, kMaxBytes);
}
inline std::optional<std::int64_t> optBytesIn(ObjectReader& r, const char* key, std::int64_t min = 0) {
  return r.optInteger(key, min, kMaxBytes);
}

}  // namespace hydrozoa::profile
